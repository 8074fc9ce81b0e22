"""grid_rows' mistakes (001 Tables 3, 5, 16, 20: one table from named protocol_grid comparisons) are
E157 diagnostics at the offending argument, each with its caret and a hint (resolve/grid_rows.py);
a correct declaration next to them raises nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditlang.cli import main

HEAD = """import "stdlib/s001"
import "stdlib/metrics"

dataset sciq = jsonl("sciq.jsonl", task=open_qa, sample=4, seed=42)
model smollm2 = embedded("smollm2-135m-instruct", max_tokens=24)
model gemma3 = embedded("gemma3-270m", max_tokens=24)

audit main {
  models = [smollm2, gemma3]
  datasets = [sciq]
  variants = [s001.bare]
  protocols = [s001.verbal_self, s001.tok_bare, s001.tok_prefix]
  evaluators = [s001.lenient]
  metrics = [accuracy, metrics.ece10, metrics.binfree]
}

compare grid = protocol_grid(main, verbal=s001.verbal_self, configs=[s001.tok_bare, s001.tok_prefix],
  estimators=[metrics.ece10, metrics.binfree], group_by=[instruct])
compare flat = protocol_grid(main, verbal=s001.verbal_self, configs=[s001.tok_bare, s001.tok_prefix],
  estimators=[metrics.ece10, metrics.binfree])
compare drift = context_shift(main, verbal=s001.verbal_self, items=2)
"""
OK = 'compare ok = grid_rows([grid, flat], groups=["Instruct"], labels=["a", "b"], columns=[g_A, rho_cells])\n'
LINE = HEAD.count("\n") + 1  # the line of the one compare a case appends


def _check(tmp_path: Path, capsys, extra: str) -> tuple[int, str]:
    spec = tmp_path / "rows.audit"
    spec.write_text(HEAD + extra, encoding="utf-8")
    rc = main(["check", str(spec)])
    return rc, capsys.readouterr().err


def test_a_correct_grid_rows_raises_nothing(tmp_path: Path, capsys) -> None:
    rc, err = _check(tmp_path, capsys, OK)
    assert rc == 0 and "E157" not in err, err


CASES = {
    "not_a_grid": ('compare bad = grid_rows([grid, drift], columns=[g_A])\n', 25,
                   "compare 'bad': 'drift' is a context_shift comparison; grid_rows reads protocol_grid summaries",
                   "^^^^^^^^^^^^^", "name protocol_grid comparisons in grids="),
    "no_grid": ('compare bad = grid_rows([], columns=[g_A])\n', 25, "compare 'bad': grids= names no comparison",
                "^^", "name the protocol_grid comparisons whose summaries it shows, e.g. grid_rows([grid], ...)"),
    "evaluator": ('compare bad = grid_rows([grid], evaluator=s001.exact, columns=[g_A])\n', 33,
                  "compare 'bad': evaluator 's001.exact' is not in the audit of grid 'grid'", "^^^^^^^^^",
                  "that audit has: s001.lenient"),
    "group": ('compare bad = grid_rows([grid], groups=["Instruct", "72B"], columns=[g_A])\n', 33,
              "compare 'bad': no grid of grids= has the group '72B'", "^^^^^^", "the grids' groups: Instruct, base"),
    "ungrouped_group": ('compare bad = grid_rows([flat], groups=["Instruct"], columns=[g_A])\n', 33,
                        "compare 'bad': no grid of grids= has the group 'Instruct'", "^^^^^^",
                        "the grids' groups: none"),
    "gaps": ('compare bad = grid_rows([grid], gaps=["gen"], columns=[g_A])\n', 33,
             "compare 'bad': gaps= names 1 distinct gap(s); it names the first and the second", "^^^^",
             'two subscripts, e.g. gaps=["gen", "gold"]'),
    "labels": ('compare bad = grid_rows([grid, flat], labels=["x", "y"], columns=[g_A])\n', 39,
               "compare 'bad': labels= names 2 row(s), the table has 3", "^^^^^^",
               "one label per row: each grid's kept groups (and variants), in order"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_grid_rows_mistake_is_an_e157_at_its_argument(case: str, tmp_path: Path, capsys) -> None:
    extra, col, message, caret, hint = CASES[case]
    rc, err = _check(tmp_path, capsys, OK + extra)
    line = LINE + 1
    assert rc == 1
    assert f"rows.audit:{line}:{col}: error[E157]: {message}" in err, err
    lines = err.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith(f"  {line} | compare bad"))
    src = lines[at].split(" | ", 1)[1]
    mark = lines[at + 1]
    start = mark.index("^") - (len(lines[at]) - len(src))
    assert mark.strip() == caret and start == col - 1, (src, mark)
    assert lines[at + 2] == f"  hint: {hint}"
    assert err.count("error[") == 1 and "compare 'ok'" not in err  # the correct one raises nothing


def test_rows_follow_the_order_groups_names() -> None:
    """labels= name the rows in groups= order, whatever order the grid's models give its groups: 001's
    main audit lists a base model first, Table 5 puts Instruct first."""
    from auditlang.resolve import compile_spec
    from auditlang.resolve.grid_rows import grid_rows

    spec = compile_spec(Path(__file__).resolve().parents[2] / "specs" / "s001_protocol_sensitivity.audit")
    got = [(r.grid, r.group, r.label) for r in grid_rows(spec, spec.get("table5").value)]
    assert got == [("scored", "Instruct", "Instruct (n=12)"), ("scored", "base", "Base (n=12)"),
                   ("scored_larger", "14B", "Qwen2.5-14B (n=4)")]
    got = [(r.grid, r.group, r.label) for r in grid_rows(spec, spec.get("table3").value)]
    assert got == [("grid", "Instruct", "7-8B Instr."), ("grid_larger", "14B", "Qwen2.5-14B"),
                   ("grid_larger", "32B", "Qwen2.5-32B"), ("grid_72b", "", "Qwen2.5-72B")]
