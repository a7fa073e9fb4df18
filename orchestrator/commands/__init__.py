"""What each `specsweep` subcommand does, one function per command taking its typed arguments and returning an
exit code. cli.py only parses arguments into these records, calls the function and maps errors to exit codes:

  validate, run, results, recommend, compare, report, nightly, submit   commands/sweeps.py
  query, db upgrade, db current                                       commands/store.py
  prepare-model, drafters train                                       commands/drafters.py
"""

from .common import Interrupted, UsageError

__all__ = ["Interrupted", "UsageError"]
