"""The package's import graph has no cycles: every module-to-module import (module level or inside a
function; `if TYPE_CHECKING:` blocks excepted) read from the source with ast."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "orchestrator"


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Import nodes, skipping `if TYPE_CHECKING:` bodies."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            for sub in node.orelse:
                yield from _imports(sub)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _imports(node)


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    files = {_module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                # `from pkg import submodule` imports the submodule; `from mod import name` the module
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for t in targets:
                while t and t not in files:  # `import a.b.c` where a.b.c is not a file: nearest module
                    t = t.rsplit(".", 1)[0] if "." in t else ""
                if t and t != mod:
                    graph[mod].add(t)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_no_import_cycles():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_walker_sees_a_cycle(tmp_path):
    pkg = tmp_path / "orchestrator"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .. import c\n"
                                      "from ..c import x\n")
    (pkg / "c.py").write_text("import orchestrator.a\n")
    assert find_cycle(import_graph(pkg)) == ["orchestrator.a", "orchestrator.sub.b", "orchestrator.c", "orchestrator.a"]
    (pkg / "c.py").write_text("x = 1\n")
    assert find_cycle(import_graph(pkg)) is None


def test_trained_alias_resolves_from_the_index_without_the_trainer(tmp_path):
    """`trained:eagle3` reads the index the trainer writes; planning never imports the training pipeline."""
    import os
    import subprocess
    import sys

    code = """
import sys
from pathlib import Path
from orchestrator.drafters.trained import record_trained
from orchestrator.models import ModelError, resolve_model
try:
    resolve_model("trained:eagle3")
    raise SystemExit("resolved before anything was trained")
except ModelError as e:
    assert "specsweep drafters train --method eagle3" in str(e), e
folder = Path(sys.argv[1])
folder.mkdir()
(folder / "manifest.json").write_text("{}")
record_trained("eagle3", folder)
assert resolve_model("trained:eagle3") == str(folder)
assert not any(m == "orchestrator.drafters.train" or m.startswith("orchestrator.drafters.train.") for m in sys.modules), sorted(sys.modules)
print("ok")
"""
    env = dict(os.environ, SPECSWEEP_CACHE=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "drafter")], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


# The training pipeline and its diagnostics (drafters/train/: the `train` extra) are imported only by themselves
# and by the command-line layer that starts a training run (lazily); the core (spec, controller, engines, load,
# metrics, validity, store, report and everything else) never imports them, not even inside a function.
TRAINING = "orchestrator.drafters.train"
NOT_CORE = ("orchestrator.drafters.train", "orchestrator.cli", "orchestrator.commands.drafters")


def training_imports(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """Core module -> the training modules it imports."""
    def is_training(m: str) -> bool:
        return m == TRAINING or m.startswith(TRAINING + ".")

    return {m: sorted(t for t in targets if is_training(t)) for m, targets in sorted(graph.items())
            if not any(m == n or m.startswith(n + ".") for n in NOT_CORE) and any(is_training(t) for t in targets)}


def test_the_core_never_imports_the_training_pipeline():
    assert training_imports(import_graph()) == {}


def test_the_training_check_sees_a_lazy_import(tmp_path):
    """As datasets/demo_heldout.py once did: a function-level relative import of the pipeline is seen."""
    pkg = tmp_path / "orchestrator"
    for d in ("drafters/train", "datasets"):
        (pkg / d).mkdir(parents=True)
    for f in ("__init__.py", "drafters/__init__.py", "drafters/train/__init__.py", "datasets/__init__.py",
              "drafters/train/run.py"):
        (pkg / f).write_text("")
    (pkg / "datasets" / "demo_heldout.py").write_text("def f():\n    from ..drafters.train.run import x\n")
    assert training_imports(import_graph(pkg)) == {"orchestrator.datasets.demo_heldout": [
        "orchestrator.drafters.train.run"]}
    (pkg / "datasets" / "demo_heldout.py").write_text("x = 1\n")
    assert training_imports(import_graph(pkg)) == {}
