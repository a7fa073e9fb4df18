"""The report's figures, each drawn twice from the same prepared data: a PNG (matplotlib) and an interactive
plotly figure for report.html.

  pareto                  output tok/s vs p99 TPOT, every completed trial, the Pareto front per method
  speedup                 speedup vs concurrency (log axis, ticks at the measured values), CI bars where an
                          interval exists and a visible "1 repeat: no interval" note where none does,
                          the crossover (first speedup < 1) circled
  heatmap (HTML only)     method/K x concurrency per dataset, cells coloured by speedup, CI in the hover,
                          the crossover cell outlined
  acceptance_by_position  acceptance rate at each draft position (median over load points)
  acceptance_length       acceptance length per dataset and method configuration
  time_per_token          where the time goes: target forward (verify), drafter and the rest of the engine step,
                          per generated token, stacked, per method configuration and concurrency, the baseline
                          beside (rows measured with the engine's step timing only)
  request_al              histogram of per-request acceptance length per method configuration (the pooled AL
                          weights long answers more; this shows the typical request)
  al_by_output_position   acceptance length by position in the answer (16-token buckets, median over load
                          points): does acceptance decay as answers grow?
  load (open loop only)   output tok/s and SLO attainment vs offered request rate, per method configuration
  capacity (capacity search only)  each configuration's highest request rate within the SLO, the bar's whisker
                          reaching the lowest failing rate (the capacity lies between), baseline first

Speedup, heat map and verdict are about closed-loop load points (concurrency); open-loop rows have their own
figure.
"""

from __future__ import annotations

from pathlib import Path

from .content import ReportData, config_label
from .figures_acceptance import (
    _acceptance_by_position,
    _acceptance_length,
    _al_by_output_position,
    _request_al,
    _time_per_token,
)
from .plotting import (
    NO_INTERVAL_NOTE,
    Figure,
    _colours,
    _div,
    _front,
    _groups,
    _json,
    _save,
    _second,
    _title_suffix,
)


def build_figures(data: ReportData, out: Path | None) -> list[Figure]:
    """Every figure of one sweep; PNGs are written to `out` (None: HTML only)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = _groups(data)
    colours = _colours(groups)
    figs = _heatmaps(data, groups)
    figs += [_speedup(data, groups, colours, plt, out), _pareto(data, groups, colours, plt, out)]
    figs += [_acceptance_by_position(data, groups, colours, plt, out),
             _acceptance_length(data, groups, colours, plt, out)]
    if any(r.verify_ms_per_step is not None for r in data.completed):
        figs.append(_time_per_token(data, plt, out))
    if data.requests:
        figs.append(_request_al(data, groups, colours, plt, out))
    if any(_json(r.al_by_position) for r in data.completed):
        figs.append(_al_by_output_position(data, groups, colours, plt, out))
    if any(r.request_rate is not None for r in data.completed):
        figs.append(_load(data, groups, colours, plt, out))
    if data.capacity:
        figs.append(_capacity(data, plt, out))
    return figs


def _rate_axis(rates: set[float]) -> tuple[list[float], list[str]]:
    """Offered rates on a categorical axis (inf last): positions and labels."""
    ordered = sorted(rates)
    return ordered, ["all at once" if r == float("inf") else f"{r:g}" for r in ordered]


def _load(data, groups, colours, plt, out) -> Figure:
    """Open loop: what each configuration delivered, and the share of requests within the SLO, per offered rate."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    open_rows = {n: [r for r in rs if r.request_rate is not None] for n, rs in groups.items()}
    rates, labels = _rate_axis({r.request_rate for rs in open_rows.values() for r in rs})
    # the axis names the offered load: a nominal rate whose windows offered another (a raw schedule, send lag, a
    # max_concurrency cap) says what they offered (issue 51)
    for i, rate in enumerate(rates):
        offered = sorted(r.offered_rate for rs in open_rows.values() for r in rs
                         if r.request_rate == rate and r.offered_rate is not None)
        if offered and rate != float("inf") and abs(offered[len(offered) // 2] / rate - 1) > 0.005:
            labels[i] += f" (offered {offered[len(offered) // 2]:.3g})"
    pos = {r: i for i, r in enumerate(rates)}
    datasets = sorted({r.dataset for rs in open_rows.values() for r in rs})
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    pfig = make_subplots(rows=1, cols=2, subplot_titles=("output tok/s", "SLO attainment (share of requests)"))
    for name, rs in open_rows.items():
        for ds in datasets:
            d = sorted((r for r in rs if r.dataset == ds), key=lambda r: r.request_rate)
            if not d:
                continue
            tag = name if len(datasets) == 1 else f"{name} / {ds}"
            x = [pos[r.request_rate] for r in d]
            c = colours[name]
            ax1.plot(x, [r.output_tok_s for r in d], marker="o", color=c, label=tag)
            hover = [f"trial {r.trial}" + (f", flags: {r.flags}" if r.flags else "") for r in d]
            pfig.add_trace(go.Scatter(x=[labels[i] for i in x], y=[r.output_tok_s for r in d], mode="lines+markers",
                                      name=tag, line={"color": c}, text=hover, legendgroup=tag), row=1, col=1)
            att = [r.slo_attainment for r in d]
            if any(a is not None for a in att):
                ax2.plot(x, att, marker="o", color=c, label=tag)
                pfig.add_trace(go.Scatter(x=[labels[i] for i in x], y=att, mode="lines+markers", name=tag,
                                          line={"color": c}, text=hover, legendgroup=tag, showlegend=False),
                               row=1, col=2)
    for ax, title in ((ax1, "output tok/s"), (ax2, "SLO attainment")):
        ax.set_xticks(range(len(rates)), labels)
        ax.set_xlabel("offered request rate (req/s)")
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
    ax2.set_ylim(-0.02, 1.02)
    ax1.legend(fontsize=8)
    fig.suptitle(f"{data.sweep}: open-loop load{_title_suffix(data)}", fontsize=9)
    pfig.update_xaxes(title_text="offered request rate (req/s)", type="category",
                      categoryarray=labels, categoryorder="array")
    pfig.update_yaxes(range=[-0.02, 1.02], row=1, col=2)
    pfig.update_layout(title="Open-loop load: throughput and SLO attainment vs offered rate")
    return Figure("load", _save(fig, out, "load.png"), _div(pfig))


def _capacity(data, plt, out) -> Figure:
    """Capacity bars: highest rate within the SLO, whisker to the lowest failing rate."""
    import plotly.graph_objects as go

    caps = data.capacity
    names = [config_label(c) + ("" if len({x.dataset for x in caps}) == 1 else f" / {c.dataset}") for c in caps]
    passing = [c.max_rate_within_slo or 0.0 for c in caps]
    upper = [(c.first_failing_rate - (c.max_rate_within_slo or 0.0)) if c.first_failing_rate else 0.0
             for c in caps]
    slo = caps[0].slo if caps else {}
    what = ", ".join(f"{k} <= {v:g}" for k, v in (slo or {}).items())
    target = caps[0].target_attainment if caps else 0
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.5 * len(caps)))
    ax.barh(range(len(caps)), passing, xerr=[[0] * len(caps), upper], capsize=4,
            color=["#7f7f7f" if c.method == "baseline" else "#1f77b4" for c in caps])
    ax.set_yticks(range(len(caps)), names)
    ax.invert_yaxis()
    ax.set_xlabel(f"request rate (req/s) with >= {target:.0%} of requests meeting {what}")
    ax.set_title(f"{data.sweep}: capacity within the SLO (whisker: up to the first failing rate){_title_suffix(data)}",
                 fontsize=9)
    ax.grid(alpha=0.3, axis="x")
    hover = []
    for c in caps:
        ratio = f", {c.capacity_ratio:.2f}× the baseline" if c.capacity_ratio is not None else ""
        fail = f"; fails at {c.first_failing_rate:g}" if c.first_failing_rate else ""
        hover.append(f"{c.status}: {c.max_rate_within_slo or 0:g} req/s{fail}{ratio}; {len(c.probes)} probes")
    pfig = go.Figure(go.Bar(x=passing, y=names, orientation="h", text=hover, hovertemplate="%{y}<br>%{text}<extra></extra>",
                            error_x={"type": "data", "symmetric": False, "array": upper, "arrayminus": [0] * len(caps)},
                            marker={"color": ["#7f7f7f" if c.method == "baseline" else "#1f77b4" for c in caps]}))
    pfig.update_layout(title=f"Capacity: highest rate with >= {target:.0%} of requests meeting {what} "
                             f"(whisker: up to the first failing rate)",
                       xaxis_title="request rate (req/s)", yaxis={"autorange": "reversed"},
                       height=max(260, 80 + 40 * len(caps)))
    return Figure("capacity", _save(fig, out, "capacity.png"), _div(pfig))


def _pareto(data, groups, colours, plt, out) -> Figure:
    import plotly.graph_objects as go

    fig, ax = plt.subplots(figsize=(8, 5))
    pfig = go.Figure()
    for name, rs in groups.items():
        pts = [(r.tpot_ms_p99, r.output_tok_s, r) for r in rs
               if r.tpot_ms_p99 is not None and r.output_tok_s is not None]
        if not pts:
            continue
        c = colours[name]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], label=name, alpha=0.8, color=c)
        front = _front([(p[0], p[1]) for p in pts])
        ax.plot([p[0] for p in front], [p[1] for p in front], color=c, linewidth=1)
        pfig.add_trace(go.Scatter(
            x=[p[0] for p in pts], y=[p[1] for p in pts], mode="markers", name=name, legendgroup=name,
            marker={"color": c, "size": 9},
            text=[f"trial {p[2].trial}, concurrency {p[2].concurrency}, {p[2].dataset}" for p in pts],
            hovertemplate="%{text}<br>p99 TPOT %{x:.1f} ms<br>%{y:.1f} tok/s<extra>" + name + "</extra>"))
        pfig.add_trace(go.Scatter(x=[p[0] for p in front], y=[p[1] for p in front], mode="lines",
                                  name=f"{name} front", legendgroup=name, showlegend=False,
                                  line={"color": c, "width": 1.5}, hoverinfo="skip"))
    ax.set_xlabel("p99 TPOT (ms)  — lower is better")
    ax.set_ylabel("output tokens/s  — higher is better")
    ax.set_title(f"{data.sweep}: throughput vs p99 TPOT (lines: Pareto front per method)"
                 f"{_second(_title_suffix(data))}", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    pfig.update_layout(title="Throughput vs p99 TPOT (lines: Pareto front per method)",
                       xaxis_title="p99 TPOT (ms), lower is better", yaxis_title="output tok/s, higher is better")
    return Figure("pareto", _save(fig, out, "pareto.png"), _div(pfig))


def _speedup_axes(ax, data: ReportData, ticks: list[int], no_interval: bool, any_line: bool) -> None:
    """The PNG's axes: log concurrency with the measured values as ticks, the 1.0 line, the notes."""
    from matplotlib.ticker import FixedLocator, NullLocator

    ax.plot([], [], marker="o", markersize=12, markerfacecolor="none", markeredgecolor="grey", linestyle="none",
            label="crossover (first speedup < 1)")
    ax.axhline(1.0, color="black", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(t) for t in ticks])
    ax.set_xlabel("concurrency (requests in flight)")
    ax.set_ylabel("speedup vs paired baseline (95% CI)")
    ax.set_title(f"{data.sweep}: speedup vs concurrency, 95% CI bars{_second(_title_suffix(data))}", fontsize=9)
    if no_interval:
        ax.text(0.01, 0.98, f"{NO_INTERVAL_NOTE} where a point has no bar", transform=ax.transAxes,
                fontsize=9, va="top", color="#b00")
    if any_line:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)


def _speedup(data, groups, colours, plt, out) -> Figure:
    import plotly.graph_objects as go

    datasets = sorted({r.dataset for r in data.completed})
    fig, ax = plt.subplots(figsize=(8, 5))
    pfig = go.Figure()
    concs: set[int] = set()
    no_interval = False
    any_line = False
    for name, rs in groups.items():
        rated = sorted((r for r in rs if r.speedup is not None and r.request_rate is None),
                       key=lambda r: r.concurrency)
        for ds in datasets:
            d = [r for r in rated if r.dataset == ds]
            if not d:
                continue
            any_line = True
            x = [r.concurrency for r in d]
            y = [r.speedup for r in d]
            concs.update(x)
            has = [r.speedup_ci_low is not None and r.speedup_ci_high is not None for r in d]
            no_interval |= not all(has)
            # (a zero-width interval can sit a rounding error beyond its median: matplotlib refuses negative bars)
            lo = [max(0.0, r.speedup - r.speedup_ci_low) if h else 0 for r, h in zip(d, has)]
            hi = [max(0.0, r.speedup_ci_high - r.speedup) if h else 0 for r, h in zip(d, has)]
            tag = name if len(datasets) == 1 else f"{name} / {ds}"
            c = colours[name]
            ax.errorbar(x, y, yerr=[lo, hi] if any(has) else None, marker="o", capsize=3, label=tag, color=c)
            below = next((i for i, v in enumerate(y) if v < 1.0), None)
            if below is not None:  # the crossover: the first measured concurrency with speedup < 1
                ax.plot([x[below]], [y[below]], marker="o", markersize=14, markerfacecolor="none",
                        markeredgecolor=c, markeredgewidth=2)
            hover = [f"{r.speedup:.2f}× [{r.speedup_ci_low:.2f}–{r.speedup_ci_high:.2f}]" if h
                     else f"{r.speedup:.2f}× ({NO_INTERVAL_NOTE})" for r, h in zip(d, has)]
            pfig.add_trace(go.Scatter(
                x=x, y=y, mode="lines+markers", name=tag, line={"color": c}, text=hover,
                hovertemplate="concurrency %{x}<br>%{text}<extra>" + tag + "</extra>",
                error_y={"type": "data", "symmetric": False, "array": hi, "arrayminus": lo, "visible": any(has)}))
            if below is not None:
                pfig.add_trace(go.Scatter(x=[x[below]], y=[y[below]], mode="markers", showlegend=False,
                                          marker={"size": 20, "color": "rgba(0,0,0,0)", "line": {"color": c, "width": 2}},
                                          hoverinfo="skip"))
    ticks = sorted(concs)
    _speedup_axes(ax, data, ticks, no_interval, any_line)
    pfig.add_hline(y=1.0, line={"color": "black", "width": 1})
    pfig.update_layout(title="Speedup vs concurrency (95% CI bars; circled: crossover)",
                       yaxis_title="speedup vs paired baseline",
                       xaxis={"title": "concurrency (requests in flight)", "type": "log", "tickmode": "array",
                              "tickvals": ticks, "ticktext": [str(t) for t in ticks]})
    if no_interval:
        pfig.add_annotation(text=f"{NO_INTERVAL_NOTE} where a point has no bar", xref="paper", yref="paper",
                            x=0, y=1.08, showarrow=False, font={"color": "#b00"}, name="no-interval-note")
    return Figure("speedup", _save(fig, out, "speedup.png"), _div(pfig))


def _heatmaps(data, groups) -> list[Figure]:
    import plotly.graph_objects as go

    out = []
    crossover = {}
    for c in data.crossover:
        if c.crossover_concurrency is not None:
            crossover[(config_label(c, data.batch_varies), c.dataset)] = c.crossover_concurrency
    for ds in sorted({r.dataset for r in data.completed}):
        rated = {name: {r.concurrency: r for r in rs if r.dataset == ds and r.speedup is not None
                        and r.request_rate is None} for name, rs in groups.items()}
        rated = {n: v for n, v in rated.items() if v}
        if not rated:
            continue
        concs = sorted({c for v in rated.values() for c in v})
        names = list(rated)
        z, text, hover = [], [], []
        for n in names:
            zr: list[float | None] = []
            tr: list[str] = []
            hr: list[str] = []
            for c in concs:
                r = rated[n].get(c)
                if r is None:
                    zr.append(None)
                    tr.append("")
                    hr.append("not measured")
                    continue
                lo, hi = r.speedup_ci_low, r.speedup_ci_high
                ci = f"[{lo:.2f}–{hi:.2f}]" if lo is not None and hi is not None else f"({NO_INTERVAL_NOTE})"
                zr.append(r.speedup)
                tr.append(f"{r.speedup:.2f}")
                hr.append(f"concurrency {c}, trial {r.trial}: {r.speedup:.2f}× {ci}" + (f"<br>flags: {r.flags}" if r.flags else ""))
            z.append(zr)
            text.append(tr)
            hover.append(hr)
        pfig = go.Figure(go.Heatmap(
            z=z, x=list(range(len(concs))), y=names, text=text, customdata=hover, texttemplate="%{text}",
            hovertemplate="%{y}<br>%{customdata}<extra></extra>", colorscale="RdBu", zmid=1.0,
            colorbar={"title": "speedup"}))
        for i, n in enumerate(names):
            cc = crossover.get((n, ds))
            if cc in concs:
                j = concs.index(cc)
                pfig.add_shape(type="rect", x0=j - 0.5, x1=j + 0.5, y0=i - 0.5, y1=i + 0.5,
                               line={"color": "black", "width": 3}, name="crossover")
        pfig.update_layout(
            title=f"Speedup heat map — {ds} (outlined: crossover, the first concurrency with speedup < 1)",
            xaxis={"title": "concurrency", "tickmode": "array", "tickvals": list(range(len(concs))),
                   "ticktext": [str(c) for c in concs]},
            yaxis={"title": "method / K", "autorange": "reversed"}, height=max(260, 60 + 40 * len(names)))
        out.append(Figure(f"heatmap-{ds}", None, _div(pfig)))
    return out
