"""The report's acceptance and time figures: acceptance by draft position, acceptance length, where the time goes
per token, per-request acceptance, acceptance by output position (figures.py lists them all)."""

from __future__ import annotations

from .content import ReportData, config_label
from .plotting import (
    Figure,
    _div,
    _json,
    _median,
    _median_by_index,
    _save,
    _second,
    _title_suffix,
)


def _acceptance_by_position(data, groups, colours, plt, out) -> Figure:
    import plotly.graph_objects as go

    fig, ax = plt.subplots(figsize=(8, 4.5))
    pfig = go.Figure()
    for name, rs in groups.items():
        per = [p for p in (_json(r.acceptance_per_pos) for r in rs) if p]
        if not per:
            continue
        med = _median_by_index(per)
        n = len(med)
        ax.plot(range(1, n + 1), med, marker="o", label=name, color=colours[name])
        pfig.add_trace(go.Scatter(x=list(range(1, n + 1)), y=med, mode="lines+markers", name=name,
                                  line={"color": colours[name]}))
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("draft position")
    ax.set_ylabel("accepted / drafts")
    ax.set_ylim(0, 1)
    ax.set_title(f"{data.sweep}: acceptance by draft position (median over load points)"
                 f"{_second(_title_suffix(data))}", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    pfig.update_layout(title="Acceptance by draft position (median over load points)",
                       xaxis={"title": "draft position", "dtick": 1}, yaxis={"title": "accepted / drafts",
                                                                              "range": [0, 1]})
    return Figure("acceptance_by_position", _save(fig, out, "acceptance_by_position.png"), _div(pfig))


def _acceptance_length(data, groups, colours, plt, out) -> Figure:
    import plotly.graph_objects as go

    datasets = sorted({r.dataset for r in data.completed})
    names = [n for n, rs in groups.items() if any(r.acceptance_length is not None for r in rs)]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    pfig = go.Figure()
    width = 0.8 / max(1, len(names))
    for j, name in enumerate(names):
        vals = []
        for ds in datasets:
            v = [r.acceptance_length for r in groups[name] if r.dataset == ds and r.acceptance_length is not None]
            vals.append(_median(v) if v else 0)
        ax.bar([i + j * width for i in range(len(datasets))], vals, width=width, label=name, color=colours[name])
        pfig.add_trace(go.Bar(x=datasets, y=vals, name=name, marker={"color": colours[name]}))
    ax.set_xticks([i + width * (len(names) - 1) / 2 for i in range(len(datasets))], datasets)
    ax.set_ylabel("acceptance length (1 + accepted / drafts)")
    ax.set_ylim(bottom=1.0)
    ax.set_title(f"{data.sweep}: acceptance length per dataset (median over load points)"
                 f"{_second(_title_suffix(data))}", fontsize=9)
    if names:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    pfig.update_layout(title="Acceptance length per dataset (median over load points; counts the bonus token)",
                       barmode="group", yaxis={"title": "acceptance length", "rangemode": "tozero"})
    return Figure("acceptance_length", _save(fig, out, "acceptance_length.png"), _div(pfig))


STEP_PARTS = (("verify_ms_per_step", "target forward (verify)", "#1f77b4"),
              ("drafter_ms_per_step", "drafter", "#ff7f0e"), ("other_ms_per_step", "rest of the step", "#7f7f7f"))


def time_per_token_bars(data: ReportData) -> list[tuple[str, dict[str, float]]]:
    """(bar label, {part: ms per generated token}) per closed-loop row with step timing, by concurrency then
    method configuration (the baseline first at each concurrency)."""
    rows = [r for r in data.completed if r.request_rate is None and r.verify_ms_per_step is not None
            and r.tokens_per_engine_step]
    rows.sort(key=lambda r: (r.concurrency, r.dataset, r.method != "baseline", config_label(r, data.batch_varies)))
    datasets = {r.dataset for r in rows}
    bars = []
    for r in rows:
        name = config_label(r, data.batch_varies) + ("" if len(datasets) < 2 else f" {r.dataset}")
        bars.append((f"c={r.concurrency} {name}",
                     {c: (r.metric(c) or 0.0) / (r.tokens_per_engine_step or 1.0) for c, _, _ in STEP_PARTS}))
    return bars


def _time_per_token(data, plt, out) -> Figure:
    import plotly.graph_objects as go

    bars = time_per_token_bars(data)
    labels = [b[0] for b in bars]
    fig, ax = plt.subplots(figsize=(max(8, 0.6 * len(bars) + 2), 4.8))
    pfig = go.Figure()
    bottom = [0.0] * len(bars)
    for col, name, colour in STEP_PARTS:
        vals = [b[1][col] for b in bars]
        ax.bar(range(len(bars)), vals, bottom=bottom, label=name, color=colour)
        pfig.add_trace(go.Bar(x=labels, y=vals, name=name, marker={"color": colour}))
        bottom = [a + b for a, b in zip(bottom, vals)]
    ax.set_xticks(range(len(bars)), labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("ms per generated token")
    ax.set_title(f"{data.sweep}: where the time goes (engine step split per generated token)"
                 f"{_second(_title_suffix(data))}", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    pfig.update_layout(title="Where the time goes: target forward, drafter and the rest, per generated token",
                       barmode="stack", yaxis={"title": "ms per generated token"}, xaxis={"tickangle": -60})
    return Figure("time_per_token", _save(fig, out, "time_per_token.png"), _div(pfig))


def _request_al(data, groups, colours, plt, out) -> Figure:
    import plotly.graph_objects as go

    by_trial = {r.trial_id: config_label(r, data.batch_varies) for r in data.completed}
    values: dict[str, list[float]] = {}
    for q in data.requests:
        if q.request_al is not None and q.trial_id in by_trial:
            values.setdefault(by_trial[q.trial_id], []).append(float(q.request_al))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    pfig = go.Figure()
    top = max((max(v) for v in values.values()), default=2.0)
    edges = [1.0 + 0.125 * i for i in range(int((top - 1.0) / 0.125) + 2)]
    for name, vals in values.items():
        ax.hist(vals, bins=edges, alpha=0.5, label=f"{name} (n={len(vals)})", color=colours.get(name))
        pfig.add_trace(go.Histogram(x=vals, name=f"{name} (n={len(vals)})", opacity=0.6,
                                    xbins={"start": 1.0, "end": edges[-1], "size": 0.125},
                                    marker={"color": colours.get(name)}))
    ax.set_xlabel("acceptance length of one request (1 + accepted / verify steps)")
    ax.set_ylabel("requests")
    ax.set_title(f"{data.sweep}: per-request acceptance length (every window and load point)"
                 f"{_second(_title_suffix(data))}", fontsize=9)
    if values:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    pfig.update_layout(title="Per-request acceptance length (every window and load point)", barmode="overlay",
                       xaxis={"title": "acceptance length of one request"}, yaxis={"title": "requests"})
    return Figure("request_al", _save(fig, out, "request_al.png"), _div(pfig))


def _al_by_output_position(data, groups, colours, plt, out) -> Figure:
    import plotly.graph_objects as go

    from ..metrics.decomposition import POSITION_BUCKET

    fig, ax = plt.subplots(figsize=(8, 4.5))
    pfig = go.Figure()
    for name, rs in groups.items():
        per = [p for p in (_json(r.al_by_position) for r in rs) if p]
        if not per:
            continue
        med = _median_by_index(per)
        xs = [i * POSITION_BUCKET for i in range(len(med))]
        ax.plot(xs, [float("nan") if m is None else m for m in med], marker="o", label=name, color=colours[name])
        pfig.add_trace(go.Scatter(x=xs, y=med, mode="lines+markers", name=name, line={"color": colours[name]}))
    ax.set_xlabel(f"position in the answer (output tokens; {POSITION_BUCKET}-token buckets, start shown)")
    ax.set_ylabel("acceptance length")
    ax.set_title(f"{data.sweep}: acceptance length by position in the answer (median over load points)"
                 f"{_second(_title_suffix(data))}", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    pfig.update_layout(title="Acceptance length by position in the answer (median over load points)",
                       xaxis={"title": "output position (bucket start)"}, yaxis={"title": "acceptance length"})
    return Figure("al_by_output_position", _save(fig, out, "al_by_output_position.png"), _div(pfig))
