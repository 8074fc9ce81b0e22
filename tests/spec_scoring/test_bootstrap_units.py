"""``bootstrap(unit=cell|paired|macro)`` through real specs and ``auditc run`` (issue 10 item 2;
study 000 App. E.2 resampling units, study 001 §3.2 macro bootstrap and the A-D grid intervals)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from auditlang.cli import main
from auditlang.metrics import ece
from auditlang.plan.requests import Result, Sample, TokenLogprob
from scripted_engine import generation, prompt_text, use_scripted_engine

B = 200


def _u(text: str, salt: str = "") -> float:
    return int(hashlib.sha256((salt + text).encode()).hexdigest()[:8], 16) / 2**32


def script(req):
    """Answers A-D from the prompt hash; a verbal follow-up parses for 2 in 3 prompts."""
    text = prompt_text(req)
    if req.kind == "generate" and req.p.get("max_tokens") == 8:  # the verbal follow-up
        u = _u(text, "v")
        return generation(req, f"{0.5 + 0.5 * u:.2f}" if u < 0.66 else "not sure")
    if req.kind == "generate":
        letter = "ABCD"[int(_u(text) * 4)]
        p = 0.3 + 0.7 * _u(text, "p")
        tok = TokenLogprob(token=letter, token_id=1, logprob=float(np.log(p)),
                           top={letter: float(np.log(p)), "Z": float(np.log(1 - p + 1e-9))})
        return Result(request_id=req.id, kind=req.kind, samples=[Sample(text=letter, tokens=[tok])])
    return None


def spec_text(unit: str, extra: str = "") -> str:
    return f"""
import "stdlib/s000"
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=30, seed=42)
model chat = hf("org/scripted", dtype=float32)
audit a {{
  models = [chat]
  datasets = [arc]
  variants = [s000.surface_paraphrase, s000.instruction_reorder]
  protocols = [s000.token_norm, s000.verbal_decimal]
  evaluators = [s000.first_char]
  metrics = [accuracy, s000.ece10]
  bootstrap = bootstrap(resamples={B}, seed=42, unit={unit})
}}
{extra}
"""


def _run(tmp: Path, shared_data: Path, text: str, capsys, name: str) -> Path:
    spec = tmp / f"{name}.audit"
    spec.write_text(text, encoding="utf-8")
    out = tmp / name
    rc = main(["run", str(spec), "--data-root", str(shared_data), "--out", str(out), "--no-progress"])
    assert rc == 0, capsys.readouterr()
    return out


def _hand_paired_interval(records: pd.DataFrame, cell_id: str, metric, uses_conf: bool = True) -> tuple[float, float]:
    """Independent computation: resample the unit's items (sorted by dataset index), drop the
    cell's rows without a confidence inside each resample, percentile interval."""
    unit = records[records.cell_id.str.startswith(cell_id.rsplit("/", 3)[0] + "/")]
    items = unit.drop_duplicates("item_id").sort_values("item_index")["item_id"].tolist()
    cell = records[records.cell_id == cell_id].set_index("item_id").reindex(items)
    conf, corr = cell.confidence.to_numpy(float), cell.correct.to_numpy(float)
    idx = np.random.default_rng(42).integers(0, len(items), size=(B, len(items)))
    reps = []
    for row in idx:
        keep = row[~np.isnan(conf[row])] if uses_conf else row
        reps.append(metric(conf[keep], corr[keep]) if keep.size else np.nan)
    reps = np.array(reps)
    return tuple(np.quantile(reps[~np.isnan(reps)], [0.025, 0.975]))


def test_paired_unit_resamples_items_shared_by_the_cells(tmp_path, shared_data, monkeypatch, capsys):
    use_scripted_engine(monkeypatch, script)
    paired = _run(tmp_path, shared_data, spec_text("paired"), capsys, "paired")
    cell = _run(tmp_path, shared_data, spec_text("cell"), capsys, "cell")
    auto = _run(tmp_path, shared_data, spec_text("auto"), capsys, "auto")
    rec = pd.read_parquet(paired / "records.parquet")
    tp = pd.read_csv(paired / "metrics" / "cells.csv").set_index("cell_id")
    tc = pd.read_csv(cell / "metrics" / "cells.csv").set_index("cell_id")
    ta = pd.read_csv(auto / "metrics" / "cells.csv").set_index("cell_id")
    pd.testing.assert_frame_equal(tc, ta)  # auto = the per-cell unit of 000 App. E.2
    verbal = [c for c in tp.index if c.endswith("/s000.verbal_decimal/s000.first_char")]
    assert verbal and (tp.loc[verbal, "n_conf_missing"] > 0).all()
    lab = "ece(binning=equal_width, bins=10)"
    for cid in tp.index:
        lo, hi = _hand_paired_interval(rec, cid, lambda c, y: ece(c, y, bins=10))
        assert tp.loc[cid, f"{lab} lo"] == pytest.approx(lo, abs=1e-12)
        assert tp.loc[cid, f"{lab} hi"] == pytest.approx(hi, abs=1e-12)
        lo, hi = _hand_paired_interval(rec, cid, lambda c, y: float(np.mean(y)), uses_conf=False)
        assert tp.loc[cid, "accuracy lo"] == pytest.approx(lo, abs=1e-12)
    # points agree; the verbal cells' intervals differ (items with no confidence are drawn, then dropped)
    pd.testing.assert_series_equal(tp[lab], tc[lab])
    assert not np.allclose(tp.loc[verbal, f"{lab} lo"], tc.loc[verbal, f"{lab} lo"])
