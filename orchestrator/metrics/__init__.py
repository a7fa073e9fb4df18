"""Pure metric math: percentiles, throughput, latency and acceptance summaries. No I/O."""

from .summary import METRIC_COLUMNS, acceptance_metrics, median_over_repeats, percentile, summarize_window

__all__ = ["METRIC_COLUMNS", "acceptance_metrics", "median_over_repeats", "percentile", "summarize_window"]
