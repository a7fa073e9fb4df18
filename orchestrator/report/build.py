"""Figures of one sweep, from the trial_results and speedup_crossover views only:
  pareto.png              output tok/s vs p99 TPOT, every completed trial, Pareto front per method drawn
  speedup.png             speedup vs concurrency per method configuration, 95 % CI bars, crossover marked
  acceptance_by_position.png   acceptance rate at each draft position (median over repeats)
  acceptance_length.png   acceptance length per dataset and method configuration
  report.html             the same figures (interactive, plotly inlined: no network needed) and the flag table
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from ..store import Store


def _label(r: dict) -> str:
    k = r.get("num_speculative_tokens")
    return r["label"] + ("" if k is None else f" K={k}")


def _front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Non-dominated points for (minimise x, maximise y), sorted by x."""
    out, best = [], float("-inf")
    for x, y in sorted(points, key=lambda p: (p[0], -p[1])):
        if y > best:
            out.append((x, y))
            best = y
    return out


def build_report(store: Store, sweep: str, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from cycler import cycler

    plt.rcParams["axes.prop_cycle"] = cycler(color=plt.get_cmap("tab20").colors)
    import plotly.graph_objects as go

    rows = [r for r in store.trial_results(sweep) if r["state"] == "COMPLETE"]
    if not rows:
        raise ValueError(f"sweep {sweep!r} has no completed trial to report")
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    figs_html: list[str] = []
    fake = any(r["backend"] == "fake" for r in rows)
    suffix = "  (backend=fake: simulated, not a measurement)" if fake else ""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(_label(r), []).append(r)

    # 1. throughput vs p99 TPOT
    fig, ax = plt.subplots(figsize=(8, 5))
    pfig = go.Figure()
    for name, rs in groups.items():
        pts = [(r["tpot_ms_p99"], r["output_tok_s"]) for r in rs if r["tpot_ms_p99"] is not None]
        if not pts:
            continue
        sc = ax.scatter([p[0] for p in pts], [p[1] for p in pts], label=name, alpha=0.8)
        front = _front(pts)
        ax.plot([p[0] for p in front], [p[1] for p in front], color=sc.get_facecolor()[0], linewidth=1)
        pfig.add_trace(go.Scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="markers", name=name,
                                  text=[f"conc {r['concurrency']}, {r['dataset']}" for r in rs if r["tpot_ms_p99"] is not None]))
    ax.set_xlabel("p99 TPOT (ms)  — lower is better")
    ax.set_ylabel("output tokens/s  — higher is better")
    ax.set_title(f"{sweep}: throughput vs p99 TPOT (lines: Pareto front per method){_second(suffix)}", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    written.append(_save(fig, out / "pareto.png"))
    pfig.update_layout(title="Throughput vs p99 TPOT", xaxis_title="p99 TPOT (ms)", yaxis_title="output tok/s")
    figs_html.append(pfig.to_html(full_html=False, include_plotlyjs=False))

    # 2. speedup vs concurrency
    spec_groups = {k: [r for r in v if r.get("speedup") is not None] for k, v in groups.items()}
    spec_groups = {k: sorted(v, key=lambda r: r["concurrency"]) for k, v in spec_groups.items() if v}
    fig, ax = plt.subplots(figsize=(8, 5))
    pfig = go.Figure()
    for name, rs in spec_groups.items():
        for ds in sorted({r["dataset"] for r in rs}):
            d = [r for r in rs if r["dataset"] == ds]
            x = [r["concurrency"] for r in d]
            y = [r["speedup"] for r in d]
            lo = [r["speedup"] - r["speedup_ci_low"] if r["speedup_ci_low"] is not None else 0 for r in d]
            hi = [r["speedup_ci_high"] - r["speedup"] if r["speedup_ci_high"] is not None else 0 for r in d]
            tag = name if len(groups) and len({r["dataset"] for r in rows}) == 1 else f"{name} / {ds}"
            line = ax.errorbar(x, y, yerr=[lo, hi], marker="o", capsize=3, label=tag)
            below = next((i for i, v in enumerate(y) if v < 1.0), None)
            if below is not None:  # the crossover: the first measured concurrency with speedup < 1
                ax.plot([x[below]], [y[below]], marker="o", markersize=14, markerfacecolor="none",
                        markeredgecolor=line[0].get_color(), markeredgewidth=2)
            pfig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name=tag,
                                      error_y={"type": "data", "symmetric": False, "array": hi, "arrayminus": lo}))
    ax.plot([], [], marker="o", markersize=12, markerfacecolor="none", markeredgecolor="grey", linestyle="none",
            label="crossover (first speedup < 1)")
    ax.axhline(1.0, color="black", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrency (requests in flight)")
    ax.set_ylabel("speedup vs paired baseline (95% CI)")
    ax.set_title(f"{sweep}: speedup vs concurrency, 95% CI bars{_second(suffix)}", fontsize=9)
    if spec_groups:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    written.append(_save(fig, out / "speedup.png"))
    pfig.add_hline(y=1.0)
    pfig.update_layout(title="Speedup vs concurrency", xaxis_title="concurrency", yaxis_title="speedup", xaxis_type="log")
    figs_html.append(pfig.to_html(full_html=False, include_plotlyjs=False))

    # 3. acceptance by draft position (median over the configuration's load points)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    pfig = go.Figure()
    for name, rs in groups.items():
        per = [_json(r["acceptance_per_pos"]) for r in rs if _json(r["acceptance_per_pos"])]
        if not per:
            continue
        n = max(len(p) for p in per)
        med = [sorted(p[i] for p in per if i < len(p))[len([p for p in per if i < len(p)]) // 2] for i in range(n)]
        ax.plot(range(1, n + 1), med, marker="o", label=name)
        pfig.add_trace(go.Scatter(x=list(range(1, n + 1)), y=med, mode="lines+markers", name=name))
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("draft position")
    ax.set_ylabel("accepted / drafts")
    ax.set_ylim(0, 1)
    ax.set_title(f"{sweep}: acceptance by draft position (median over load points){_second(suffix)}", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    written.append(_save(fig, out / "acceptance_by_position.png"))
    pfig.update_layout(title="Acceptance by draft position", xaxis_title="position", yaxis_title="accepted / drafts")
    figs_html.append(pfig.to_html(full_html=False, include_plotlyjs=False))

    # 4. acceptance length per dataset
    datasets = sorted({r["dataset"] for r in rows})
    names = [n for n, rs in groups.items() if any(r["acceptance_length"] is not None for r in rs)]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    pfig = go.Figure()
    width = 0.8 / max(1, len(names))
    for j, name in enumerate(names):
        vals = []
        for ds in datasets:
            v = [r["acceptance_length"] for r in groups[name] if r["dataset"] == ds and r["acceptance_length"] is not None]
            vals.append(sorted(v)[len(v) // 2] if v else 0)
        ax.bar([i + j * width for i in range(len(datasets))], vals, width=width, label=name)
        pfig.add_trace(go.Bar(x=datasets, y=vals, name=name))
    ax.set_xticks([i + width * (len(names) - 1) / 2 for i in range(len(datasets))], datasets)
    ax.set_ylabel("acceptance length (1 + accepted / drafts)")
    ax.set_ylim(bottom=1.0)
    ax.set_title(f"{sweep}: acceptance length per dataset (median over load points){_second(suffix)}", fontsize=9)
    if names:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    written.append(_save(fig, out / "acceptance_length.png"))
    pfig.update_layout(title="Acceptance length per dataset", barmode="group")
    figs_html.append(pfig.to_html(full_html=False, include_plotlyjs=False))

    # 5. HTML page: figures + flags table
    flagged = [r for r in store.trial_results(sweep) if r.get("flags")]
    table = "".join(f"<tr><td>{r['trial']}</td><td>{html.escape(_label(r))}</td><td>{html.escape(r['dataset'])}</td>"
                    f"<td>{r['concurrency']}</td><td>{html.escape(r['flags'])}</td></tr>" for r in flagged)
    from plotly.offline import get_plotlyjs

    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>specsweep {html.escape(sweep)}</title>"
            f"<script>{get_plotlyjs()}</script></head><body style='font-family:sans-serif'>"
            f"<h1>Sweep {html.escape(sweep)}</h1><p>{len(rows)} completed trials, store "
            f"{html.escape(store.display_url)}.{html.escape(suffix)}</p>"
            + "".join(figs_html)
            + "<h2>Flags</h2>" + (f"<table border=1 cellpadding=4><tr><th>trial</th><th>method</th><th>dataset</th>"
                                  f"<th>concurrency</th><th>flags</th></tr>{table}</table>" if flagged else "<p>none</p>")
            + "<p>Flags are explained in README.md (Flags).</p></body></html>")
    (out / "report.html").write_text(page, encoding="utf-8")
    written.append(out / "report.html")
    return written


def _second(suffix: str) -> str:
    return "\n" + suffix.strip() if suffix else ""


def _json(v):
    if isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError:
            return None
    return v


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path
