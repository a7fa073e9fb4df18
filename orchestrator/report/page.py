"""report.html: one self-contained page (plotly.js inlined once, compressed; no network) in this order — verdict,
environment banner, results table, heat maps and plots, context block. Everything shown comes from
ReportData (content.py); this module only lays it out. Element ids the browser test reads: verdict,
env-banner, results, context."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Iterable

from ..render import format_cell, table_columns
from ..render.results_table import LEFT
from ..states import TrialState
from ..validity.flags import INFORMATIONAL_FLAGS
from .content import ReportContext, ReportData
from .figures import Figure

if TYPE_CHECKING:
    from ..compare import ComparedPoint

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{margin-bottom:4px} .sub{color:#555;margin-top:0}
.verdict{font-size:1.1em;background:#f3f7ff;border-left:4px solid #3366cc;padding:8px 16px}
.verdict li{margin:6px 0}
.banner{background:#fff3cd;border:1px solid #e0b000;padding:8px 12px;margin:12px 0}
.banner.fake{background:#fde2e1;border-color:#c00}
table.results{border-collapse:collapse;font-size:13px}
table.results th,table.results td{border:1px solid #ccc;padding:3px 6px;text-align:right;white-space:nowrap}
table.results th{background:#eee;cursor:pointer;position:sticky;top:0}
table.results td.l{text-align:left} tr.flagged td{background:#fff7d6} tr.failed td{background:#fde2e1}
.plots>div.plot{margin-bottom:12px;border-top:1px solid #eee;width:100%}
dl.ctx{display:grid;grid-template-columns:max-content auto;gap:2px 14px;font-size:13px}
dl.ctx dt{font-weight:600} dl.ctx dd{margin:0;word-break:break-all}
.cols{display:flex;gap:24px;flex-wrap:wrap} .cols>section{flex:1 1 520px}
"""

# Click a header to sort by it (numbers by value, a second click reverses); each cell carries its raw value.
SORT_JS = """
document.querySelectorAll('table.results').forEach(function(t){
  t.querySelectorAll('th').forEach(function(th,i){
    th.addEventListener('click',function(){
      var body=t.tBodies[0], rows=Array.prototype.slice.call(body.rows), asc=th.dataset.asc!=='1';
      t.querySelectorAll('th').forEach(function(h){h.dataset.asc='';});
      th.dataset.asc=asc?'1':'0';
      rows.sort(function(a,b){
        var x=a.cells[i].dataset.v, y=b.cells[i].dataset.v, nx=parseFloat(x), ny=parseFloat(y);
        var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:(x||'').localeCompare(y||'');
        return asc?c:-c;});
      rows.forEach(function(r){body.appendChild(r);});
    });
  });
});
"""


def _e(v) -> str:
    return html.escape(str(v))


def verdict_html(data: ReportData, element_id: str = "verdict") -> str:
    items = []
    for v in data.verdicts:
        parts = v.phrases()
        spans = "; ".join(
            f"<span class='clause' data-kind='{c[0].kind}' data-concurrency='{' '.join(str(x.concurrency) for x in c)}' "
            f"data-trials='{' '.join(str(x.trial) for x in c)}'>{_e(text)}</span>" for text, c in parts)
        items.append(f"<li data-dataset='{_e(v.dataset)}'>{_e(v.dataset)}: "
                     + (spans + "." if parts else _e(v.sentence()[len(v.dataset) + 2:]))
                     + "</li>")
    return (f"<div id='{element_id}' class='verdict' data-sweep='{_e(data.sweep)}'><strong>Verdict</strong> (from each row's speedup "
            f"and its {_e(_confidence(data))} interval against the paired no-speculation baseline)<ul>{''.join(items)}</ul></div>")


def _confidence(data: ReportData) -> str:
    conf = dict(data.context.measurement).get("confidence", "0.95")
    try:
        return f"{float(conf) * 100:.0f} %"
    except ValueError:
        return conf


def banners_html(ctx: ReportContext) -> str:
    out = ""
    if ctx.simulated:
        out += ("<div class='banner fake' id='fake-banner'><strong>backend=fake:</strong> simulated rows, "
                "not a measurement.</div>")
    if ctx.environment_differences:
        diffs = "".join(f"<li><code>{_e(d)}</code></li>" for d in ctx.environment_differences)
        out += (f"<div class='banner' id='env-banner'><strong>Rows from {len(ctx.environments)} different "
                f"environments are on this page.</strong> Their fingerprints differ in:<ul>{diffs}</ul>"
                f"Speedups are only computed against a baseline of the same environment.</div>")
    return out


def results_html(data: ReportData, table_id: str = "results") -> str:
    columns = table_columns(data.rows)
    head = "".join(f"<th title='{_e(col)}'>{_e(h)}</th>" for col, h, _ in columns)
    body = []
    for r in data.rows:
        suspect = any(f not in INFORMATIONAL_FLAGS for f in (r.flags or "").split(",") if f)
        cls = "failed" if r.state == TrialState.FAIL else ("flagged" if suspect else "")
        cells = []
        for col, _, fmt in columns:
            raw = r.column(col)
            text = format_cell(raw, fmt, r)
            if col == "flags" and raw:
                text = "⚑ " + text.replace(",", ", ")
            sort_value = r.speedup if fmt == "speedup" else ("1e308" if fmt == "rate" and raw == float("inf") else raw)
            cells.append(f"<td class='{'l' if col in LEFT else ''}' data-col='{col}' "
                         f"data-v='{_e('' if sort_value is None else sort_value)}'>{_e(text)}</td>")
        body.append(f"<tr class='{cls}' data-trial='{r.trial}'>{''.join(cells)}</tr>")
    return (f"<table class='results' id='{table_id}'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>"
            f"<p class='sub'>Click a header to sort. ⚑ flagged rows are suspect (specsweep docs: concepts/measurement, Flags); "
            f"speedup [CI] is against the paired baseline at the same load point.</p>")


def _dl(pairs: Iterable[tuple[str, str]]) -> str:
    return "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in pairs)


def context_html(ctx: ReportContext, element_id: str = "context") -> str:
    envs = ""
    for i, env in enumerate(ctx.environments, 1):
        title = "Environment" if len(ctx.environments) == 1 else f"Environment {i} of {len(ctx.environments)}"
        envs += (f"<h3>{title}</h3><dl class='ctx' data-environment-ids='{','.join(map(str, env.environment_ids))}'>"
                 f"{_dl(env.fields)}</dl>")
    run = [("sweep", ctx.sweep), ("store", ctx.store), ("spec file", ctx.spec_path or "-"),
           ("spec hash", ctx.spec_hash or "-"), ("specsweep commit", ", ".join(ctx.commits) or "-"),
           ("backend", ", ".join(ctx.backends))]
    return (f"<div id='{element_id}'><h2>Context</h2><div class='cols'>"
            f"<section><h3>Run</h3><dl class='ctx'>{_dl(run)}</dl>"
            f"<h3>Workload</h3><dl class='ctx' id='{element_id}-workload'>{_dl(ctx.workload)}</dl>"
            f"<h3>Measurement</h3><dl class='ctx' id='{element_id}-measurement'>{_dl(ctx.measurement)}</dl></section>"
            f"<section>{envs}</section></div></div>")


# plotly.js (4.8 MB) travels gzip-compressed and base64-encoded (about 1.9 MB) and is unpacked by the browser
# (DecompressionStream: Chromium 80+, Firefox 113+, Safari 16.4+), which keeps a report small enough to e-mail.
# Then every figure is drawn from its JSON; <body data-plots="ready"> marks the end (the browser test waits
# for it), and a browser that cannot unpack it says so on the page instead of showing empty boxes.
LOADER_JS = """
(async function(){
  var raw = atob(document.getElementById('plotly-gz').textContent.trim());
  var bytes = new Uint8Array(raw.length);
  for (var i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  var code = await new Response(stream).text();
  var s = document.createElement('script'); s.textContent = code; document.head.appendChild(s);
  var plots = document.querySelectorAll('div.plot');
  for (var j = 0; j < plots.length; j++) {
    var f = JSON.parse(document.getElementById(plots[j].dataset.fig).textContent);
    await Plotly.newPlot(plots[j], f.data, f.layout, {displaylogo: false, responsive: true});
  }
  document.body.dataset.plots = 'ready';
})().catch(function(e){
  document.body.dataset.plots = 'failed';
  var p = document.getElementById('plots-failed');
  if (p) p.textContent = 'The interactive figures could not be drawn in this browser (' + e + '); ' +
    'the PNG files beside this page show the same figures.';
  console.error(e);
});
"""

_PLOTLY_GZ: str | None = None


def _plotly_gz() -> str:
    global _PLOTLY_GZ
    if _PLOTLY_GZ is None:
        import base64
        import gzip

        from plotly.offline import get_plotlyjs

        _PLOTLY_GZ = base64.b64encode(gzip.compress(get_plotlyjs().encode(), compresslevel=9, mtime=0)).decode()
    return _PLOTLY_GZ


def figures_html(figures: list[Figure], prefix: str = "") -> str:
    out = []
    for f in figures:
        fid = f"{prefix}fig-{f.name}"
        data = f.plotly_json.replace("</", "<\\/")  # no '</script>' inside the script element
        out.append(f"<div class='plot' id='{_e(fid)}' data-fig='{_e(fid)}-json'></div>"
                   f"<script type='application/json' id='{_e(fid)}-json'>{data}</script>")
    return "".join(out)


def _page(title: str, body: str) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(title)}</title><style>{CSS}</style>"
            f"</head><body data-plots='loading'>{body}<p id='plots-failed' class='sub'></p>"
            f"<script type='application/octet-stream' id='plotly-gz'>{_plotly_gz()}</script>"
            f"<script>{SORT_JS}</script><script>{LOADER_JS}</script></body></html>")


def capacity_html(data: ReportData) -> str:
    """search.sampler capacity: one line per configuration (the same words as `specsweep results`)."""
    if not data.capacity:
        return ""
    from ..render import capacity_lines

    items = "".join(f"<li data-capacity-id='{c.capacity_id}'>{_e(line)}</li>"
                    for c, line in zip(data.capacity, capacity_lines(data.capacity)))
    return f"<h2>Capacity within the SLO</h2><ul id='capacity'>{items}</ul>"


def sweep_page(data: ReportData, figures: list[Figure]) -> str:
    n_done, n_all = len(data.completed), len(data.rows)
    body = (f"<h1>Sweep {_e(data.sweep)}</h1><p class='sub'>{n_done} of {n_all} trials completed · "
            f"store {_e(data.context.store)}</p>"
            + verdict_html(data) + capacity_html(data) + banners_html(data.context)
            + "<h2>Results</h2>" + results_html(data)
            + "<h2>Figures</h2><div class='plots'>" + figures_html(figures) + "</div>"
            + context_html(data.context)
            + "<p class='sub'>Flags are explained in the specsweep docs (concepts/measurement, Flags). Written by specsweep report.</p>")
    return _page(f"specsweep {data.sweep}", body)


def compare_page(a: ReportData, b: ReportData, figs_a: list[Figure], figs_b: list[Figure],
                 compared: list[ComparedPoint], metrics: tuple[str, ...]) -> str:
    def side(d: ReportData, figs: list[Figure], tag: str) -> str:
        keep = [f for f in figs if f.name == "speedup" or f.name.startswith("heatmap")]
        return (f"<section id='side-{tag}'><h2>{_e(d.sweep)}</h2>" + verdict_html(d, f"verdict-{tag}")
                + banners_html(d.context)
                + "<div class='plots'>" + figures_html(keep, f"{tag}-") + "</div></section>")

    head = "".join(f"<th>{_e(h)}</th>" for h in ("method", "K", "dataset", "conc")) + "".join(
        f"<th>{_e(m)} A</th><th>{_e(m)} B</th><th>B/A</th>" for m in metrics)
    rows = []
    for r in compared:
        cells = [r.label, "-" if r.k is None else r.k, r.dataset, r.concurrency]
        tds = "".join(f"<td class='l' data-v='{_e(c)}'>{_e(c)}</td>" for c in cells)
        for m in metrics:
            for v in (r.metrics[m].a, r.metrics[m].b, r.metrics[m].ratio):
                tds += f"<td data-v='{'' if v is None else v}'>{'-' if v is None else f'{v:.2f}'}</td>"
        rows.append(f"<tr>{tds}</tr>")
    body = (f"<h1>{_e(a.sweep)} (A) vs {_e(b.sweep)} (B)</h1>"
            f"<p class='sub'>The same points measured in both sweeps; B/A &gt; 1 means B is higher.</p>"
            f"<div class='cols'>{side(a, figs_a, 'a')}{side(b, figs_b, 'b')}</div>"
            f"<h2>Side by side</h2><table class='results' id='compare'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>"
            f"<h2>Results A</h2>{results_html(a, 'results-a')}<h2>Results B</h2>{results_html(b, 'results-b')}"
            f"<div class='cols'><section>{context_html(a.context, 'context-a')}</section>"
            f"<section>{context_html(b.context, 'context-b')}</section></div>")
    return _page(f"specsweep {a.sweep} vs {b.sweep}", body)
