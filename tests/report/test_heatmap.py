"""The report's annotated heatmaps (report/heatmap.py): a cell without a value prints "n/a", never an
unmarked blank, and a probe's diagonal is 1 only where it has a value. Session 37 found the
consistency comparisons' own heatmaps (``consistency_<compare>_<model>_<dataset>``, drawn for every
consistency comparison) still blank in such cells with the diagonal at 1.00, as the 004 per-type
figures were until session 36; the three heatmap kinds now share one drawing."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from auditlang.report import figures  # noqa: E402
from auditlang.report.comparisons.common import Comparison  # noqa: E402
from auditlang.report.heatmap import NA, annotated, pair_matrix  # noqa: E402

plt = figures.plt


def test_pair_matrix_is_symmetric_and_its_diagonal_needs_a_value() -> None:
    vals = {("a", "b"): 0.5, ("c", "b"): 0.25}  # c-b given one way round only; a and c have no pair value
    mat = pair_matrix(["a", "b", "c", "d"], vals.get)
    assert mat[0, 1] == mat[1, 0] == 0.5 and mat[1, 2] == mat[2, 1] == 0.25
    assert mat[0, 0] == mat[1, 1] == mat[2, 2] == 1.0
    assert math.isnan(mat[0, 2]) and math.isnan(mat[2, 0])
    assert all(math.isnan(x) for x in mat[3]) and all(math.isnan(x) for x in mat[:, 3])  # d: no value, no 1.00
    assert pair_matrix([], vals.get).shape == (0, 0)


def test_annotated_prints_every_cell_and_n_a_in_grey() -> None:
    fig, (ax, bx) = plt.subplots(1, 2)
    try:
        annotated(ax, pair_matrix(["a", "b", "c"], {("a", "b"): 0.25}.get), ["a", "b", "c"], ["a", "b", "c"], "t")
        got = {(round(t.get_position()[1]), round(t.get_position()[0])): (t.get_text(), t.get_color()) for t in ax.texts}
        assert len(got) == 9
        assert got[(0, 1)] == ("0.25", "white") and got[(0, 0)] == ("1.00", "black")  # viridis: dark below 0.6
        assert got[(2, 2)] == (NA, "dimgray") and got[(0, 2)] == (NA, "dimgray")
        assert ax.get_title() == "t"
        annotated(bx, np.array([[-0.5, math.nan]]), ["r"], ["x", "y"], "u", vmin=-1.0, cmap="coolwarm")
        assert [(t.get_text(), t.get_color()) for t in bx.texts] == [("-0.50", "black"), (NA, "dimgray")]
    finally:
        plt.close(fig)


def _consistency(hm: dict[str, Any]) -> Comparison:
    return Comparison("cmp", "consistency", "main", shape="consistency",
                      data={"heat": {("m", "d", "e"): hm}, "reference": "v.orig"})


def test_consistency_heatmaps_mark_missing_cells_and_say_why(monkeypatch) -> None:
    """A probe (p.c) without abstain decisions under variant v.typo has no intra value there, and one
    (p.d) without decisions under the reference has no value at all: n/a, its diagonal too."""
    saved: list[tuple[Any, str, str]] = []
    monkeypatch.setattr(figures, "_save", lambda fig, name, title: saved.append((fig, name, title)) or fig)
    probes = ["p.a", "p.b", "p.c", "p.d"]
    hm = {"probes": probes, "variants": ["v.space", "v.typo"],
          "intra": {("p.a", "v.space"): 0.9, ("p.a", "v.typo"): 0.8, ("p.b", "v.space"): 0.7, ("p.b", "v.typo"): 0.6,
                    ("p.c", "v.space"): 0.5},
          "cross": {("p.a", "p.b"): 0.75, ("p.a", "p.c"): 0.5, ("p.b", "p.c"): 0.25}}
    try:
        figures.consistency_figures([_consistency(hm)])
        assert len(saved) == 1
        fig, name, caption = saved[0]
        assert name == "consistency_cmp_m_d"
        assert caption == "Consistency heatmaps, m / d (cmp, evaluator e); " + figures.CONSISTENCY_NA_NOTE
        intra_ax, cross_ax = fig.axes[:2]
        intra = [t.get_text() for t in intra_ax.texts]
        assert intra == ["0.90", "0.80", "0.70", "0.60", "0.50", NA, NA, NA]
        cross = [t.get_text() for t in cross_ax.texts]
        assert cross == ["1.00", "0.75", "0.50", NA,
                         "0.75", "1.00", "0.25", NA,
                         "0.50", "0.25", "1.00", NA,
                         NA, NA, NA, NA]  # before session 37: blanks, and p.d's diagonal 1.00
        plt.close(fig)
        saved.clear()
        full = {**hm, "probes": probes[:2], "intra": {k: v for k, v in hm["intra"].items() if k[0] in probes[:2]},
                "cross": {("p.a", "p.b"): 0.75}}
        figures.consistency_figures([_consistency(full)])
        fig, _, caption = saved[0]
        assert caption == "Consistency heatmaps, m / d (cmp, evaluator e)"  # the note only where a cell is n/a
        assert NA not in [t.get_text() for ax in fig.axes for t in ax.texts]
    finally:
        for f, _, _ in saved:
            plt.close(f)


SPEC = """import "stdlib/s004"
dataset nums = jsonl("nums.jsonl", task=multiple_choice, sample=6, seed=1, dev_sample=6)
model m = hf("org/m", dtype=float32, max_tokens=8)
audit a {
  models = [m]
  datasets = [nums]
  variants = [s004.original, s004.options_4]
  protocols = [s004.nota, s004.askcal, s004.moreinfo]
  evaluators = [s004.letter]
  metrics = [accuracy]
}
compare cons = consistency(a, probes=[s004.nota, s004.askcal, s004.moreinfo], variants=[s004.original, s004.options_4])
report cells, comparisons, figures, html
"""


def test_auditc_run_marks_a_probe_without_decisions_na(tmp_path: Path, monkeypatch) -> None:
    """Through `auditc run`: AskCal's replies do not parse under the option-shuffle variant, so it
    has no abstain decisions there. Its intra cell and, in the per-type figure's option_shuffle
    panel, its pair cells and diagonal are n/a, and both captions in report.html say what n/a
    means; the reference variant's cells keep their values."""
    from scripted_engine import generation, number_items, prompt_text, use_scripted_engine

    from auditlang.cli import main

    def script(req):
        if req.kind != "generate":
            return None
        text = prompt_text(req)
        if "more information" in text:
            return generation(req, "No")
        if "robab" in text:  # under the option shuffle the gold option N is never option A
            shuffled = re.search(r"Which number is (\d+)\?.*?A: (\d+)", text, re.S)
            return generation(req, "unsure" if shuffled and shuffled[1] != shuffled[2] else "0.7")
        return generation(req, "A")

    drawn: list[tuple[Any, str, str]] = []
    save = figures._save

    def keep(fig, name, title):
        if name.startswith("consistency"):
            drawn.append(([[t.get_text() for t in ax.texts] for ax in fig.axes], name, title))
        return save(fig, name, title)

    monkeypatch.setattr(figures, "_save", keep)
    monkeypatch.setenv("AUDITLANG_FIGURE_WORKERS", "1")
    use_scripted_engine(monkeypatch, script)
    (tmp_path / "nums.jsonl").write_text(number_items(14), encoding="utf-8")
    (tmp_path / "s.audit").write_text(SPEC, encoding="utf-8")
    rc = main(["run", str(tmp_path / "s.audit"), "--data-root", str(tmp_path), "--out", str(tmp_path / "run"),
               "--no-progress"])
    assert rc == 0
    by_name = {name: (texts, title) for texts, name, title in drawn}
    texts, title = by_name["consistency_cons_m_nums"]
    intra, cross = texts[0], texts[2]  # panels, then their colour bars
    assert intra[1] == NA and NA not in (intra[0], intra[2])  # probe rows: nota, askcal, moreinfo; one variant
    assert NA not in cross  # on the reference variant every probe decided
    assert title.endswith("; " + figures.CONSISTENCY_NA_NOTE)
    per_type, _ = by_name["consistency_by_type_cons_DecCons_m_nums"]
    original, shuffle = per_type[0], per_type[1]
    assert NA not in original
    assert [shuffle[k] == NA for k in range(9)] == [False, True, False, True, True, True, False, True, False]
    html = (tmp_path / "run" / "report" / "report.html").read_text(encoding="utf-8")
    assert figures.CONSISTENCY_NA_NOTE in html and "n/a: no value, for want of abstain decisions under the variants of the type" in html
