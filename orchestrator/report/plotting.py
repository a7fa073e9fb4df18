"""What the report's figures share: the Figure record, colours, medians, saving a PNG."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from ..store import TrialResult
from .content import ReportData, config_label

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94"]
NO_INTERVAL_NOTE = "1 repeat: no interval"


@dataclass(frozen=True)
class Figure:
    name: str
    png: Path | None
    plotly_json: str  # the plotly figure (data + layout) as JSON; the page draws it (page.py)


def _front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Non-dominated points for (minimise x, maximise y), sorted by x."""
    out, best = [], float("-inf")
    for x, y in sorted(points, key=lambda p: (p[0], -p[1])):
        if y > best:
            out.append((x, y))
            best = y
    return out


def _json(v):
    if isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError:
            return None
    return v


def _median(values: list[float]) -> float:
    """The median (the mean of the middle two for an even count, as everywhere else in specsweep)."""
    return statistics.median(values)


def _median_by_index(lists: list[list]) -> list[float | None]:
    """Per index, the median over the lists that have a value there (None where none has)."""
    out = []
    for i in range(max(len(p) for p in lists)):
        v = [p[i] for p in lists if i < len(p) and p[i] is not None]
        out.append(_median(v) if v else None)
    return out


def _groups(data: ReportData) -> dict[str, list[TrialResult]]:
    groups: dict[str, list[TrialResult]] = {}
    for r in data.completed:
        groups.setdefault(config_label(r, data.batch_varies), []).append(r)
    return groups


def _colours(names) -> dict[str, str]:
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}


def _div(fig) -> str:
    """The figure as JSON, drawn by the page at its full width."""
    fig.update_layout(autosize=True, margin={"t": 60, "r": 20}, height=fig.layout.height or 440)
    return fig.to_json()


def _title_suffix(data: ReportData) -> str:
    return "  (backend=fake: simulated, not a measurement)" if data.context.simulated else ""


def _save(fig, out: Path | None, name: str) -> Path | None:
    import matplotlib.pyplot as plt

    if out is None:
        plt.close(fig)
        return None
    path = out / name
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _second(suffix: str) -> str:
    return "\n" + suffix.strip() if suffix else ""
