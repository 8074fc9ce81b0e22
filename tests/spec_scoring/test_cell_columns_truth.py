"""What metrics/cells.csv states is what the spec asked for (issue 34 item 3, item 4 and its VPR
column bug): through a real spec and ``auditc check`` / ``auditc run`` with a scripted engine.

* a metric computed at another level than a cell (``ia_retention``: a pair of models) is
  rejected by ``auditc check`` where an audit lists it, with the level and the comparison that
  computes it, never accepted and then dropped;
* VPR is n/a (empty in cells.csv, NaN from ``Run.metrics``) for token-probability and P(True)
  cells, in ``auditc rescore`` tables too;
* under ``scale=percent_0_100`` a reply "0.01" is no 0.01 %: a non-parse with reason
  ``scale_mismatch``, whose rate is a cells.csv column and a column of the report's cells table.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from auditlang import open_run
from auditlang.cli import main
from scripted_engine import generation, prompt_text, use_scripted_engine

HEAD = """
import "stdlib/s000"
import "stdlib/s002"
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=6, seed=42)
model chat = hf("org/scripted", dtype=float32)
"""

REJECTED = HEAD + """audit a {
  models = [chat]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm]
  metrics = [accuracy, ia_retention, vpr]
}
"""

RUN = HEAD + """audit a {
  models = [chat]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm, s000.verbal_percent, s002.p_true]
  evaluators = [s000.first_char]
  metrics = [accuracy, brier, vpr]
}
"""


def test_check_rejects_a_pair_level_metric_in_an_audit(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "levels.audit"
    spec.write_text(REJECTED, encoding="utf-8")
    rc = main(["check", str(spec)])
    out = capsys.readouterr()
    text = out.out + out.err
    assert rc == 1, text
    line = next(i for i, s in enumerate(REJECTED.splitlines(), 1) if "ia_retention" in s)
    col = REJECTED.splitlines()[line - 1].index("ia_retention") + 1
    assert f"levels.audit:{line}:{col}: error[E134]" in text
    assert "computed per pair of models, not per cell" in text
    assert "aligned(AUDIT" in text  # the hint names the comparison that computes it
    assert "^" * len("ia_retention") in text
    assert "vpr" not in text.split("error[E134]")[1].split("\n")[0]  # vpr is a cell metric: accepted


def test_check_rejects_a_pair_level_metric_in_a_contrast_and_a_spread(tmp_path: Path, capsys) -> None:
    """A comparison computes its ``metric``/``metrics`` on each cell it compares: a pair-level
    metric there would be accepted and then dropped, so ``auditc check`` rejects it too."""
    text = HEAD + """model base = hf("org/scripted-base", dtype=float32)
audit a {
  models = [chat, base]
  datasets = [arc]
  variants = [s000.surface_paraphrase, s000.format_change]
  protocols = [s000.token_norm]
  metrics = [accuracy, brier]
}
compare c = contrast(a, models=[chat, base], metrics=[accuracy, ia_retention])
compare s = spread(a, metric=ia_retention)
"""
    spec = tmp_path / "cmp.audit"
    spec.write_text(text, encoding="utf-8")
    assert main(["check", str(spec)]) == 1
    err = capsys.readouterr().err
    lines = text.splitlines()
    for needle in ("metrics=[accuracy, ia_retention]", "metric=ia_retention"):
        line = next(i for i, s in enumerate(lines, 1) if needle in s)
        col = lines[line - 1].index("ia_retention") + 1
        assert f"cmp.audit:{line}:{col}: error[E134]" in err, err
    assert "contrast() computes its metrics on each cell it compares" in err
    assert "use a per-cell metric here" in err and err.count("error[E134]") == 2
    spec.write_text(text.replace("ia_retention", "brier"), encoding="utf-8")
    assert main(["check", str(spec)]) == 0, capsys.readouterr().err


def _script(req):
    text = prompt_text(req)
    if req.kind == "generate" and req.p.get("max_tokens") == 8:  # the percent follow-up
        return generation(req, "0.01" if "0" in text[-400:] else "85%")
    if req.kind == "generate":
        return generation(req, "A")
    return None


def test_vpr_na_and_scale_mismatch_through_auditc_run(tmp_path: Path, shared_data: Path, monkeypatch,
                                                      capsys) -> None:
    replies = {"n": 0}

    def script(req):
        if req.kind == "generate" and req.p.get("max_tokens") == 8:
            replies["n"] += 1
            # every other follow-up answers on the 0-1 scale although the phrasing asks a percentage
            return generation(req, "0.01" if replies["n"] % 2 else "85%")
        return _script(req)

    use_scripted_engine(monkeypatch, script)
    spec = tmp_path / "cols.audit"
    spec.write_text(RUN, encoding="utf-8")
    out = tmp_path / "run"
    rc = main(["run", str(spec), "--data-root", str(shared_data), "--out", str(out), "--no-progress"])
    assert rc == 0, capsys.readouterr().out
    raw = (out / "metrics" / "cells.csv").read_text(encoding="utf-8").splitlines()
    header = raw[0].split(",")
    cells = pd.read_csv(out / "metrics" / "cells.csv")
    by = cells.set_index("protocol")
    # VPR: empty in the CSV, NaN in the API, for the cells with no verbal parse
    for pid in ("s000.token_norm", "s002.p_true"):
        line = next(r.split(",") for r in raw[1:] if f",{pid}," in r)
        assert line[header.index("vpr")] == "" and line[header.index("scale_mismatch_rate")] == ""
        assert math.isnan(by.loc[pid, "vpr"]) and math.isnan(by.loc[pid, "scale_mismatch_rate"])
    api = open_run(out).metrics.set_index("protocol")
    assert math.isnan(api.loc["s000.token_norm", "vpr"]) and math.isnan(api.loc["s002.p_true", "vpr"])
    # the verbal cell: "0.01" is a scale mismatch, not 0.01 %; "85%" reads 0.85
    rec = pd.read_parquet(out / "records.parquet")
    verbal = rec[rec.protocol == "s000.verbal_percent"]
    mism = verbal["extras"].str.contains('"rule": "scale_mismatch"')
    n_mism = int(mism.sum())
    assert 0 < n_mism < len(verbal)
    assert verbal.loc[mism, "confidence"].isna().all() and not verbal.loc[mism, "confidence_parsed"].any()
    assert (verbal.loc[~mism, "confidence"] == 0.85).all()
    row = by.loc["s000.verbal_percent"]
    assert abs(row["vpr"] - (1 - n_mism / len(verbal))) < 1e-12
    assert abs(row["scale_mismatch_rate"] - n_mism / len(verbal)) < 1e-12
    assert row["mean_confidence"] == 0.85  # no 0.0001 pulled in
    # the report's cells table shows the column; n/a (not "–") for the non-verbal cells
    md = (out / "report" / "cells.md").read_text(encoding="utf-8")
    assert "scale_mismatch_rate" in md
    # the checklist states the rule the parser applied
    checklist = " ".join((out / "report" / "checklist.md").read_text(encoding="utf-8").split())
    assert ("protocol s000.verbal_percent reads: scale percent_0_100, parser strict: Verbal confidence, percent_0_100"
            in checklist
            and "a bare number with a decimal point at most 1 (e.g. 0.01: a decimal probability) is a non-parse "
                "(scale_mismatch" in checklist)
    # rescore tables: the same n/a
    rc = main(["rescore", str(out), "--evaluator", "first_char"])
    assert rc == 0, capsys.readouterr().out
    again = pd.read_csv(out / "rescore" / "first_char" / "cells.csv").set_index("protocol")
    assert math.isnan(again.loc["s000.token_norm", "vpr"]) and math.isnan(again.loc["s002.p_true", "vpr"])
