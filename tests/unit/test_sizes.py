"""Keep it small and visible: no module of the package over 400 lines, no function over 60, the CLI (which only
parses arguments and dispatches) at most 250 (issue 47's limits, read from the source)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "orchestrator"
MODULE_LINES, FUNCTION_LINES, CLI_LINES = 400, 60, 250


def oversized(root: Path = PACKAGE) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        name = str(path.relative_to(root.parent))
        limit = CLI_LINES if path == root / "cli.py" else MODULE_LINES
        if len(text.splitlines()) > limit:
            out.append(f"{name}: {len(text.splitlines())} lines (at most {limit})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > FUNCTION_LINES:
                    out.append(f"{name}:{node.lineno} {node.name}: {length} lines (at most {FUNCTION_LINES})")
    return out


def test_modules_and_functions_stay_within_their_limits():
    assert oversized() == []


def test_the_check_sees_a_long_module_and_function(tmp_path):
    pkg = tmp_path / "orchestrator"
    pkg.mkdir()
    (pkg / "cli.py").write_text("x = 1\n" * 251)
    (pkg / "long.py").write_text("def f():\n" + "    x = 1\n" * 60)
    assert oversized(pkg) == ["orchestrator/cli.py: 251 lines (at most 250)",
                              "orchestrator/long.py:1 f: 61 lines (at most 60)"]
