"""The sweep commands: validate, run, results, recommend, compare, report, nightly, submit."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_REGRESSION, EXIT_TRIALS_FAILED
from ..spec import LoadedSpec, load_spec
from .common import (
    UsageError,
    call,
    check_format,
    console,
    engine_output,
    err_console,
    open_store,
    open_sweep_store,
    warn_if_privileged,
)


@dataclass(frozen=True)
class ValidateArgs:
    spec: str


def validate(a: ValidateArgs) -> int:
    """Check a spec, and the drafters and target where their files are local, without starting anything."""
    from ..controller.plan import plan_summary
    from ..methods.checks import check_methods
    from ..models import ModelError, resolve_model
    from ..render import validate_line

    loaded = load_spec(a.spec)
    local = loaded.spec.engine.backend == "vllm"
    model = loaded.spec.target.model
    try:
        model = resolve_model(model) if local else model  # the demo alias is prepared: its config is needed
        notes = check_methods(loaded, model if local else None)
    except ModelError as e:
        raise UsageError(f"{a.spec}: target.model: {e}") from None
    for note in notes:
        console.print(f"note: {note}")
    search = loaded.spec.search
    console.print(validate_line(a.spec, loaded.spec.name, search.sampler, plan_summary(loaded, model), search.n_trials,
                                search.capacity.max_probes))
    return EXIT_OK


@dataclass(frozen=True)
class RunArgs:
    spec: str
    store: str | None = None
    ray_address: str | None = None
    retry_failed: bool = False
    new_name: str | None = None
    break_lease: bool = False
    verbose: bool = False


def run(a: RunArgs) -> int:
    """Run a sweep (or resume it) and print its results; 0 only when every trial of the sweep is COMPLETE."""
    from ..controller.runner import run_sweep
    from ..models import ModelError
    from ..render import SweepConsole, print_results, run_summary_line, sweep_state_line

    engine_output(a.verbose)
    loaded = load_spec(a.spec)
    st = open_store(a.store)
    try:
        with SweepConsole(console, err_console) as show:
            outcome = run_sweep(loaded, st, ray_address=a.ray_address, emit=show, retry_failed=a.retry_failed,
                                new_name=a.new_name, break_lease=a.break_lease)
    except ModelError as e:
        raise UsageError(f"{a.spec}: target.model: {e}") from None
    print_results(st.trial_results(outcome.sweep), "table", console, title=f"sweep {outcome.sweep}",
                  crossover=st.crossover(outcome.sweep), capacity=st.capacity_results(outcome.sweep))
    console.print(run_summary_line(outcome, st.display_url))
    console.print(sweep_state_line(outcome), highlight=False)
    if outcome.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_OK if outcome.all_complete else EXIT_TRIALS_FAILED


@dataclass(frozen=True)
class ResultsArgs:
    sweep: str
    store: str | None = None
    fmt: str = "table"
    wide: bool = False
    columns: str | None = None  # comma-separated trial_results columns


def results(a: ResultsArgs) -> int:
    """Print a sweep's results (one row per trial and load point, from the trial_results view)."""
    from ..render import named_columns, print_results

    check_format(a.fmt)
    names = [n.strip() for n in a.columns.split(",") if n.strip()] if a.columns is not None else None
    if names is not None:
        try:
            named_columns(names)
        except ValueError as e:
            raise UsageError(str(e)) from None
    st = open_sweep_store(a.store, a.sweep)
    print_results(st.trial_results(a.sweep), a.fmt, console, title=f"sweep {a.sweep}",
                  crossover=st.crossover(a.sweep), capacity=st.capacity_results(a.sweep),
                  view="wide" if a.wide else "compact", names=names)
    return EXIT_OK


@dataclass(frozen=True)
class RecommendArgs:
    sweep: str
    method: str | None = None
    store: str | None = None
    verify: bool = False
    repeats: int | None = None


def recommend(a: RecommendArgs) -> int:
    """A draft-length schedule per method and dataset from a sweep's speedups, stored; with `verify`, a follow-up
    sweep of the schedule against the best fixed K and the baseline (the first failing run's code is returned)."""
    from ..recommend import recommend as derive
    from ..recommend import verify_spec
    from ..render import recommendation_lines

    if a.repeats is not None and not a.verify:
        raise UsageError("--repeats sets the windows of the follow-up sweep: it needs --verify")
    st = open_sweep_store(a.store, a.sweep)
    try:
        recs = derive(st, a.sweep, a.method)
    except ValueError as e:
        raise UsageError(str(e)) from None
    sweep_row = st.get_sweep(a.sweep)
    assert sweep_row is not None  # checked by open_sweep_store
    for rec in recs:
        st.save_recommendation(sweep_row.id, rec.record())
        for line in recommendation_lines(rec):
            console.print(line, highlight=False, soft_wrap=True)
    console.print(f"stored in {st.display_url} (table sweep_recommendations)")
    if not a.verify:
        return EXIT_OK
    import yaml

    from ..paths import specsweep_home

    codes = []
    for rec in recs:
        if rec.speculative_config is None:
            console.print(f"{rec.label} on {rec.dataset}: nothing to verify (no speculation recommended)")
            continue
        name = f"{a.sweep}-verify-{rec.label}-{rec.dataset}"
        path = specsweep_home() / "recommend" / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(verify_spec(sweep_row.spec, rec, name, a.repeats), sort_keys=False))
        console.print(f"verifying: specsweep run {path} --store {st.display_url}")
        codes.append(call(run, RunArgs(spec=str(path), store=a.store)))
        if codes[-1] == EXIT_INTERRUPTED:
            break
    return next((c for c in codes if c != EXIT_OK), EXIT_OK)


@dataclass(frozen=True)
class CompareArgs:
    sweep_a: str
    sweep_b: str
    store: str | None = None
    allow_mismatch: list[str] = field(default_factory=list)
    fmt: str = "table"


def compare(a: CompareArgs) -> int:
    """The points two sweeps share, side by side (B / A); FingerprintMismatch when their environments differ."""
    from ..compare import COMPARED_METRICS, compare_sweeps
    from ..render import compare_table, print_records, print_table

    check_format(a.fmt)
    st = open_sweep_store(a.store, a.sweep_a, a.sweep_b)
    rows = compare_sweeps(st, a.sweep_a, a.sweep_b, a.allow_mismatch)
    if not rows:
        err_console.print(f"[yellow]no point completed in both {a.sweep_a!r} and {a.sweep_b!r}[/]")
    elif a.fmt != "table":
        print_records(rows, a.fmt, console)
    else:
        print_table(console, compare_table(rows, COMPARED_METRICS, title=f"{a.sweep_b} / {a.sweep_a}"))
    return EXIT_OK


@dataclass(frozen=True)
class ReportArgs:
    sweep: str
    out: str
    store: str | None = None
    compare: str | None = None
    allow_mismatch: list[str] = field(default_factory=list)
    screenshot: bool = False


def report(a: ReportArgs) -> int:
    """report.html and PNG figures of a sweep (or two side by side); 1 when the page raised JavaScript errors."""
    from rich.markup import escape

    from ..report.browser import BrowserError

    st = open_sweep_store(a.store, *([a.sweep, a.compare] if a.compare else [a.sweep]))
    warn_if_privileged(st.url)
    try:
        from ..report import build_report

        res = build_report(st, a.sweep, Path(a.out), compare=a.compare, allow=a.allow_mismatch,
                           screenshot=a.screenshot)
    except ImportError as e:
        raise UsageError(f"the report needs matplotlib and plotly: pip install -e '.[report]' ({e})") from None
    except BrowserError as e:
        raise UsageError(f"screenshot: {e}") from None
    except ValueError as e:
        raise UsageError(str(e)) from None
    for f in res.files + ([res.screenshot] if res.screenshot else []):
        console.print(str(f))
    console.print(f"report.html: {res.page_bytes / 1e6:.1f} MB (plotly.js inlined: opens offline)")
    for err in res.page_errors:
        err_console.print(f"[red]page error:[/] {escape(err)}", highlight=False)
    return EXIT_TRIALS_FAILED if res.page_errors else EXIT_OK


@dataclass(frozen=True)
class NightlyArgs:
    suite_file: str
    store: str | None = None
    ray_address: str | None = None
    report_dir: str = "nightly-reports"
    break_lease: bool = False
    verbose: bool = False


def nightly(a: NightlyArgs) -> int:
    """A suite of sweeps against the previous nights: 3 when anything regressed, 1 when trials failed, else 0."""
    from ..nightly import load_suite, run_nightly
    from ..render import SweepConsole, nightly_line

    engine_output(a.verbose)
    suite, files = load_suite(a.suite_file)
    st = open_store(a.store)
    out = run_nightly(suite, files, st, ray_address=a.ray_address, report_dir=Path(a.report_dir),
                      break_lease=a.break_lease, emit=SweepConsole(console, err_console))
    console.print(nightly_line(suite.suite, out), highlight=False)
    if out.regressions:
        return EXIT_REGRESSION
    return EXIT_TRIALS_FAILED if out.failed_trials else EXIT_OK


@dataclass(frozen=True)
class SubmitArgs:
    spec: str
    address: str | None = None
    working_dir: str = "."
    store: str | None = None
    store_file: str | None = None
    no_store: bool = False
    wait: bool = False


def submit(a: SubmitArgs) -> int:
    """Run a sweep as a Ray job (JobSubmissionClient): submission id = sweep name + UTC time."""
    from ..store.urls import resolve_store_url
    from ..submit import SubmitError, job_request
    from ..submit import submit as do_submit

    loaded: LoadedSpec = load_spec(a.spec)
    url = None if (a.no_store or a.store_file) else resolve_store_url(a.store)
    try:
        req = job_request(Path(a.spec), loaded.spec.name, Path(a.working_dir), url, a.store_file)
    except SubmitError as e:
        raise UsageError(str(e)) from None
    try:
        status = do_submit(a.address, req, a.wait, echo=lambda m: console.print(m, highlight=False, markup=False))
    except Exception as e:
        raise UsageError(f"submitting to {a.address or '$RAY_ADDRESS'} failed: {type(e).__name__}: {e}") from None
    console.print(f"job {req['submission_id']}: {status}")
    return EXIT_TRIALS_FAILED if a.wait and status != "SUCCEEDED" else EXIT_OK


__all__ = ["CompareArgs", "NightlyArgs", "RecommendArgs", "ReportArgs", "ResultsArgs", "RunArgs",
           "SubmitArgs", "ValidateArgs", "compare", "nightly", "recommend", "report", "results", "run", "submit",
           "validate"]
