"""`specsweep report`: the figures of one sweep as PNGs and one self-contained report.html (verdict, results
table, heat maps, plots, context), or two sweeps side by side (`--compare`).

  pareto.png, speedup.png, acceptance_by_position.png, acceptance_length.png   (figures.py)
  time_per_token.png, request_al.png, al_by_output_position.png   (where the rows have step timing /
                                                                   per-request acceptance)
  report.html    page.py; plotly.js inlined, so it opens offline and can be e-mailed (about 5 MB)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from ..compare import COMPARED_METRICS, compare_sweeps
from ..store import Store
from .content import report_data
from .figures import build_figures
from .page import compare_page, sweep_page


@dataclass
class ReportOutput:
    files: list[Path]  # the PNGs, then report.html
    page: Path
    page_bytes: int
    screenshot: Path | None = None
    page_errors: list[str] = field(default_factory=list)  # JavaScript errors Chromium saw (with a screenshot)


def build_report(store: Store, sweep: str, out: Path, compare: str | None = None,
                 allow: Iterable[str] = (), screenshot: bool = False) -> ReportOutput:
    """Write the report of `sweep` (and, with `compare`, the page that puts it beside that sweep) into `out`;
    with `screenshot`, render it in headless Chromium to report.png and collect the page's errors.
    Raises ValueError when a sweep has no completed trial, FingerprintMismatch when the compared sweeps'
    environments differ in a field that is not allowed, BrowserError when no browser can render it."""
    data = report_data(store, sweep)
    other = report_data(store, compare) if compare else None
    compared = compare_sweeps(store, sweep, compare, allow) if compare else []
    out.mkdir(parents=True, exist_ok=True)
    figures = build_figures(data, out)
    written = [f.png for f in figures if f.png is not None]
    if other is None:
        page = sweep_page(data, figures)
    else:
        page = compare_page(data, other, figures, build_figures(other, None), compared, COMPARED_METRICS)
    path = out / "report.html"
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(path)
    written.append(path)
    result = ReportOutput(files=written, page=path, page_bytes=path.stat().st_size)
    if screenshot:
        from .browser import open_page

        seen = open_page(path, screenshot=out / "report.png")
        result.screenshot, result.page_errors = seen.screenshot, seen.errors
    return result
