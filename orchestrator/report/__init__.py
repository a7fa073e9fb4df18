"""`specsweep report SWEEP --out DIR`: one self-contained HTML page (plotly) and PNGs (matplotlib)."""

from .build import build_report

__all__ = ["build_report"]
