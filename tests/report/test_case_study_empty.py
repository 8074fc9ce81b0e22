"""002 Tables 10 and 3 (case_study by=samples): a sampled answer whose evaluated text is empty is
printed as "(empty answer)", as a cell of the 'answer' row and as the summary's column name, never
as a blank (s002's committed report, session 21: a column named "gemma3 / popqa: ")."""

from __future__ import annotations

import math

from auditlang.report.comparisons.case_study import EMPTY, Case, Row, _samples_tables


def test_an_empty_sampled_answer_is_named():
    row = Row("Prob.", "rob", [0.2, 0.4, math.nan, 0.6], groups=["a", "a", "b", "c"], answers=["x", "x", "", "y"])
    case = Case("m", "d", "first", item="i1", question="q?", gold="x", rows=[row])
    t, s = _samples_tables("cs", [case])
    answers = t.rows[0]
    assert answers[5] == "answer" and list(answers[6:10]) == ["x", "x", EMPTY, "y"]
    assert s.columns == ["CE", "m / d: x [Y^max]", f"m / d: {EMPTY} [Y^min]", "m / d: y", "m / d A-STB", "m / d A-SST"]
    summary = dict(zip(s.columns, s.rows[0]))
    assert math.isnan(summary[f"m / d: {EMPTY} [Y^min]"])  # its one sample has no confidence
    assert abs(summary["m / d: x [Y^max]"] - 0.3) < 1e-12  # the mean of its two samples' 0.2 and 0.4
    assert any(EMPTY in n for n in t.notes)  # the note says what the marker means
