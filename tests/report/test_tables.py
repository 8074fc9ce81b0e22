"""Table rendering: CSV keeps full precision, text renderings merge bootstrap bounds, notes group reasons."""

from __future__ import annotations

import math

from auditlang.report.tables import Table, fmt, not_computable


def make() -> Table:
    t = Table("t", "Title | x", ["model", "acc", "acc lo", "acc hi", "flag"])
    t.add("m|1", 0.123456789, 0.1, 0.2, True)
    t.add("m2", math.nan, math.nan, math.nan, None)
    return t


def test_csv_full_precision_and_blank_nan():
    lines = make().to_csv().splitlines()
    assert lines[0] == "model,acc,acc lo,acc hi,flag"
    assert lines[1] == "m|1,0.123456789,0.1,0.2,True"
    assert lines[2] == "m2,,,,"


def test_markdown_merges_interval_and_escapes_pipes():
    md = make().to_markdown()
    assert "| model | acc | flag |" in md
    assert "| m\\|1 | 0.123 [0.100, 0.200] | yes |" in md
    assert "| m2 | – | – |" in md


def test_not_computable_reasons_are_grouped():
    t = Table("t", "T", ["a"])
    for k in range(6):
        t.nc("no records", f"cell {k}")
    t.nc("other reason", "cell x")
    notes = t.all_notes()
    assert notes[0] == not_computable("no records (6x: cell 0; cell 1; cell 2; cell 3; and 2 more)")
    assert notes[1] == "not computable: other reason (1x: cell x)"
    assert "not computable: no records" in t.to_html() and 'class="nc"' in t.to_html()


def test_latex_table_is_booktabs():
    from auditlang.report.latex import unmark

    tex = unmark(make().to_latex(label="tab:x"))
    assert "\\toprule" in tex and "\\midrule" in tex and "\\bottomrule" in tex
    assert "Title $|$ x" in tex and "0.123 [0.100, 0.200]" in tex
    assert unmark(make().to_latex(label="tab:x")).count("{[}") == 0 and prose_starts_safe()


def test_fmt():
    assert fmt(0.5) == "0.500" and fmt(float("nan")) == "–" and fmt(None) == "–" and fmt(False) == "no" and fmt(3) == "3"


def prose_starts_safe() -> bool:
    """A cell or line that starts with "[" cannot open an optional argument (\\\\ [x], \\item [x])."""
    from auditlang.report.latex import prose

    return prose("[0.1, 0.2] s000.first_char").startswith("{[}")


def test_values_that_round_to_zero_have_no_sign() -> None:
    """A macro gap of -0.0000 is shown as 0.000 (a reviewer reads "-0.000" as a sign error)."""
    from auditlang.report.tables import fixed, fmt
    from auditlang.report.textables import value_cell

    assert fixed(-0.0) == fixed(-0.0004) == fmt(-1e-12) == "0.000"
    assert fixed(-0.0006) == "-0.001" and fmt(0.25) == "0.250"
    assert value_cell(-0.0, -0.0002, 0.0) == ("0.000", "[0.000, 0.000]")
