"""The comparison functions stay small (issue 37, item 4): every function in
auditlang/report/comparisons/ is at most 60 lines and nests at most 4 blocks deep, because the walk
over an audit's cells is one helper (``common.cell_groups``), not a loop nest per comparison."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from auditlang.report.comparisons.common import cell_groups
from auditlang.report.rundata import DEFAULT_EVALUATOR, RunData

COMPARISONS = Path(__file__).resolve().parents[2] / "auditlang" / "report" / "comparisons"
MAX_LINES, MAX_DEPTH = 60, 4
EXCEPTIONS: dict[str, str] = {}  # "module.py:function" -> why it may be longer or deeper (none now)
BLOCKS = (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try, ast.Match)


def depth(fn: ast.AST) -> int:
    """How deeply blocks (for, while, if, with, try, match) nest in a function's own body; an
    ``elif`` is as deep as its ``if``, and nested functions are measured on their own."""
    def walk(node: ast.AST, d: int) -> int:
        best = d
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(ch, BLOCKS):
                elif_ = isinstance(ch, ast.If) and isinstance(node, ast.If) and node.orelse == [ch]
                best = max(best, walk(ch, d if elif_ else d + 1))
            else:
                best = max(best, walk(ch, d))
        return best
    return walk(fn, 0)


def measures() -> dict[str, tuple[int, int]]:
    out = {}
    for path in sorted(COMPARISONS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out[f"{path.name}:{node.name}"] = (node.end_lineno - node.lineno + 1, depth(node))
    return out


def test_no_comparison_function_is_long_or_deeply_nested() -> None:
    got = measures()
    assert "verbal.py:ece_gap" in got and "aligned.py:aligned" in got  # the walk sees the package
    over = {k: v for k, v in got.items() if (v[0] > MAX_LINES or v[1] > MAX_DEPTH) and k not in EXCEPTIONS}
    assert not over, f"(lines, depth) over ({MAX_LINES}, {MAX_DEPTH}): {over}"


def test_depth_counts_loops_and_ifs_but_not_elif() -> None:
    fn = ast.parse("def f(xs):\n    for x in xs:\n        if x:\n            pass\n        elif not x:\n"
                   "            while x:\n                pass\n    try:\n        pass\n    except ValueError:\n"
                   "        pass\n").body[0]
    assert depth(fn) == 3  # for > if/elif > while


class _Run(RunData):
    def audit(self, aid: str):
        return SimpleNamespace(models=["m1", "m2"], datasets=["d1", "d2"], variants=["v1", "v2"],
                               protocols=["p1", "p2"], evaluators=[])


def _run() -> _Run:
    rows = [("a", m, d, v, p, DEFAULT_EVALUATOR, f"{m}{d}{v}{p}") for m in ("m1", "m2") for d in ("d1", "d2")
            for v in ("v1", "v2") for p in ("p1", "p2") if m == "m1" or (v, p) == ("v1", "p1")]
    records = pd.DataFrame(rows, columns=["audit", "model", "dataset", "variant", "protocol", "evaluator", "item_id"])
    return _Run(spec=None, plan=None, run_dir=Path("."), records=records, cells=pd.DataFrame())  # type: ignore[arg-type]


def test_cell_groups_walks_the_grid_in_order_with_each_cells_rows() -> None:
    rd = _run()
    groups = list(cell_groups(rd, "a", by=("model", "variant"), over={"protocol": ("p1", "p2")}))
    assert [g.key for g in groups] == [("m1", "v1"), ("m1", "v2"), ("m2", "v1"), ("m2", "v2")]
    assert groups[0].where == "m1 / v1" and list(groups[0].rows) == ["p1", "p2"]
    # an axis named nowhere (dataset, evaluator) is not filtered: both datasets' records come pooled
    assert sorted(groups[0].rows["p2"]["item_id"]) == ["m1d1v1p2", "m1d2v1p2"]
    assert groups[2].rows["p2"].empty and groups[3].rows["p1"].empty
    kept = list(cell_groups(rd, "a", by=("model", "variant"), over={"protocol": ("p1", "p2")}, skip_empty=True))
    assert [g.key for g in kept] == [("m1", "v1"), ("m1", "v2"), ("m2", "v1")]


def test_cell_groups_levels_fixed_and_several_over_axes() -> None:
    rd = _run()
    groups = list(cell_groups(rd, "a", by=("model", "dataset", "evaluator"), levels={"dataset": ["d2"]},
                              over={"protocol": ("p1", "p2"), "variant": ("v1", "v2")}))
    assert [g.key for g in groups] == [("m1", "d2", DEFAULT_EVALUATOR), ("m2", "d2", DEFAULT_EVALUATOR)]
    assert list(groups[0].rows) == [("p1", "v1"), ("p1", "v2"), ("p2", "v1"), ("p2", "v2")]
    assert list(groups[0].rows[("p2", "v1")]["item_id"]) == ["m1d2v1p2"]
    fixed = list(cell_groups(rd, "a", by=("model",), over={"dataset": ("d1",)}, fixed={"variant": "v2", "protocol": "p1"}))
    assert [list(g.rows["d1"]["item_id"]) for g in fixed] == [["m1d1v2p1"], []]
