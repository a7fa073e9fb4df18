"""Everything specsweep prints, worded in one place: result rows as a rich table, CSV or JSON (tables.py), one-line
sentences and summaries (lines.py), a running command's consoles and progress (progress.py). No computation."""

from .lines import (
                    TRAIN_INTERRUPTED,
                    capacity_lines,
                    capacity_text,
                    crossover_lines,
                    db_revision_line,
                    nightly_line,
                    recommendation_lines,
                    run_summary_line,
                    sweep_state_line,
                    train_summary_line,
                    validate_line,
)
from .progress import SweepConsole, TrainProgress, console, err_console
from .results_table import format_cell, named_columns, results_table, table_columns
from .tables import compare_table, print_records, print_results, print_table, query_table

__all__ = ["SweepConsole", "TRAIN_INTERRUPTED", "TrainProgress", "capacity_lines", "capacity_text", "compare_table",
           "console", "crossover_lines", "db_revision_line", "err_console", "format_cell", "named_columns", "nightly_line",
           "print_records", "print_results", "print_table", "query_table", "recommendation_lines", "results_table",
           "run_summary_line", "sweep_state_line", "table_columns", "train_summary_line", "validate_line"]
