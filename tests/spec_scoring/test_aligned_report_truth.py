"""What the report says about a study-003-like run is what the run did (issue 39 items 2-4, issue
34's ECE mismatch), through a real spec with an MMLU-Pro subject filter and ``auditc run`` on a
scripted engine:

* which items were used: the filter, the file's row count, the rows kept, the positions drawn
  among them and each item's row in the file are stated (checklist, methods), and the file rows
  named are the rows whose subject the filter keeps;
* resampling: the methods text says the aligned comparison's raw differences resample the shared
  items, paired, and its aligned views have no intervals (the intervals its table prints), never
  that "each comparison resamples the unit its study defines";
* the aligned comparison's raw ECE / Brier are the per-cell table's own numbers where the case holds
  every item of both cells, and a note gives the n used where one model's confidence is missing.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pandas as pd

from auditlang.cli import main
from scripted_engine import generation, prompt_text, use_scripted_engine

SUBJECTS = ["computer science", "chemistry", "physics"]
SPEC = """
import "stdlib/s003"
import "stdlib/metrics"
dataset mmlu_pro = jsonl("mmlu_pro.jsonl", task=multiple_choice, sample=12, seed=42, filter_field="subject",
                         filter_in=["computer science", "chemistry", "physics"])
model a = hf("org/a", dtype=float32)
model b = hf("org/b", dtype=float32)
protocol verbal = s003.verbal with (max_tokens=32)
audit mcq {
  models = [a, b]
  datasets = [mmlu_pro]
  variants = [s003.answer]
  protocols = [verbal, s003.p_true]
  evaluators = [s003.letter]
  metrics = [accuracy, metrics.ece10, metrics.brier_score]
}
compare aligned_mcq = aligned(mcq, pairs=[[a, b]], views=[instance, distribution])
"""


def script(req):
    text = prompt_text(req)
    h = sum(map(ord, text)) % 7
    if req.kind == "generate" and "Proposed Answer" in text:  # the verbal follow-up
        if req.model == "b" and h < 2:
            return generation(req, "I cannot say")  # b's confidence missing on some items
        return generation(req, f"\\boxed{{{40 + 8 * h}}}")
    if req.kind == "generate":
        return generation(req, "\\boxed{" + "ABCD"[h % 4] + "}")
    return None


def test_s003_like_report_states_items_resampling_and_raw_values(tmp_path: Path, shared_data: Path,
                                                                 monkeypatch, capsys) -> None:
    use_scripted_engine(monkeypatch, script)
    spec = tmp_path / "s003.audit"
    spec.write_text(SPEC, encoding="utf-8")
    out = tmp_path / "run"
    rc = main(["run", str(spec), "--data-root", str(shared_data), "--out", str(out), "--no-progress"])
    assert rc == 0, capsys.readouterr().out
    rows = [json.loads(line) for line in (shared_data / "mmlu_pro.jsonl").read_text(encoding="utf-8").splitlines()]
    kept = [i for i, r in enumerate(rows) if r["subject"] in SUBJECTS]
    rec = pd.read_parquet(out / "records.parquet")
    used = list(dict.fromkeys(rec.sort_values("item_index")["item_id"]))

    # -- item 2: the filter and the rows, in the checklist and the methods text
    checklist = (out / "report" / "checklist.md").read_text(encoding="utf-8")
    assert (f"{len(rows)} rows in the file, {len(kept)} kept by filter subject in [computer science, chemistry, "
            "physics]") in checklist
    assert f"over the positions of the {len(kept)} filtered rows" in checklist
    m = re.search(r"file rows of the sample \(0-based, of the (\d+) rows in the file\): ([0-9, ]+)", checklist)
    assert m and int(m.group(1)) == len(rows)
    file_rows = [int(x) for x in m.group(2).split(", ")]
    assert all(rows[i]["subject"] in SUBJECTS for i in file_rows)  # the rows named are the rows used
    assert sorted(str(rows[i]["id"]) for i in file_rows) == sorted(used)
    pos = re.search(r"sample indices \(positions among the (\d+) filtered rows\): ([0-9, ]+)", checklist)
    assert pos and [kept[int(x)] for x in pos.group(2).split(", ")] == file_rows
    digest = re.search(r"filtered rows; dev items 0; indices sha256\[:16\] ([0-9a-f]{16}) \(of the JSON list of the "
                       r"sample indices below\)", checklist)
    positions = [int(x) for x in pos.group(2).split(", ")]
    assert digest and digest.group(1) == hashlib.sha256(json.dumps(positions).encode()).hexdigest()[:16]
    methods = (out / "report" / "methods.tex").read_text(encoding="utf-8")
    assert f"of the file's {len(rows)} rows with subject in computer science, chemistry, physics" in methods

    # -- item 3: what each comparison resampled: the raw rows' intervals are paired over the shared
    # items (they are in the comparison's table); the accuracy-controlled views have none
    assert "each comparison resamples the unit its study defines" not in methods
    assert "aligned\\_mcq} comparison has no intervals" not in methods
    assert ("The \\auditid{aligned\\_mcq} comparison resamples the items both models answered with a confidence, "
            "the same resample on both sides") in methods
    assert "for the raw ECE and Brier differences only; the accuracy-controlled views (IA, DA, CA) have no " \
           "intervals." in methods

    # -- item 4 / issue 34: raw values are the cells table's where the items are the same; a note elsewhere
    cells = pd.read_csv(out / "metrics" / "cells.csv").set_index(["model", "protocol"])
    long = pd.read_csv(out / "report" / "comparisons" / "aligned_mcq.csv")
    raw = long[long["view"] == "raw"].set_index(["protocol", "metric"])
    assert raw["diff (1-2) lo"].notna().all() and raw["diff (1-2) hi"].notna().all()  # what item 3's sentence says
    assert long[long["view"] != "raw"]["diff (1-2) lo"].isna().all()
    col = "ece(binning=equal_width, bins=10)"  # metrics.ece10's label in cells.csv
    pt = raw.loc[("s003.p_true", "ECE")]
    assert pt["value_1"] == cells.loc[("a", "s003.p_true"), col]
    assert pt["value_2"] == cells.loc[("b", "s003.p_true"), col]
    assert raw.loc[("s003.p_true", "Brier"), "value_1"] == cells.loc[("a", "s003.p_true"), "brier"]
    n_b = int(cells.loc[("b", "verbal"), "n_conf"])
    n_a = int(cells.loc[("a", "verbal"), "n_conf"])
    assert n_b < n_a
    md = (out / "report" / "comparisons" / "aligned_mcq.md").read_text(encoding="utf-8")
    assert (f"a vs b / mmlu_pro / s003.answer / verbal / s003.letter: raw, IA, DA and CA use the n={n_b} items "
            f"both models answered with a confidence (a's cell has {n_a}, b's {n_b})") in md
