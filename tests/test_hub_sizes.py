"""The two hubs of issue 37 stay split into named steps: every function of the executor
(execute/executor.py) and the planner (plan/planner.py) is at most 60 lines, nested functions
measured on their own (the old ``execute`` was 161 lines with its closures inside)."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "auditlang"
HUBS = ("execute/executor.py", "plan/planner.py")
MAX_LINES = 60


def long_functions(source: str) -> dict[str, int]:
    """Function name -> its own line count (a nested function's lines count once, for itself)."""
    out = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            nested = sum(ch.end_lineno - ch.lineno + 1 for ch in ast.walk(node)
                         if ch is not node and isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                         and not any(ch in ast.walk(o) for o in ast.walk(node) if o is not node and o is not ch
                                     and isinstance(o, (ast.FunctionDef, ast.AsyncFunctionDef))))
            n = node.end_lineno - node.lineno + 1 - nested
            if n > MAX_LINES:
                out[node.name] = n
    return out


def test_the_measure_sees_a_long_function_and_not_its_closure() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    assert long_functions(f"def f():\n{body}\n") == {"f": 62}
    inner = "\n".join(f"        y{i} = {i}" for i in range(40))
    assert long_functions(f"def g():\n    def h():\n{inner}\n    return h\n") == {}


def test_executor_and_planner_functions_are_at_most_60_lines() -> None:
    over = {hub: long_functions((PKG / hub).read_text(encoding="utf-8")) for hub in HUBS}
    assert not any(over.values()), over
