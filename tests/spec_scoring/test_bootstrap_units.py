"""``bootstrap(unit=cell|paired|macro)`` through real specs and ``auditc run`` (issue 10 item 2;
study 000 App. E.2 resampling units, study 001 §3.2 macro bootstrap and the A-D grid intervals)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from auditlang.cli import main
from auditlang.metrics import ece
from auditlang.resolve import compile_spec
from auditlang.resolve.bootstrap_units import audit_unit
from auditlang.core.requests import Result, Sample, TokenLogprob
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


def grid_script(req):
    """script() plus teacher-forced answer log-probabilities from the prompt and the answer."""
    if req.kind == "continuation_logprobs":
        u = _u(prompt_text(req) + "|" + req.p["continuation"], "t")
        return Result(request_id=req.id, kind=req.kind,
                      continuation=[TokenLogprob(token=req.p["continuation"], token_id=1, logprob=float(np.log(0.2 + 0.8 * u)))])
    return script(req)


GRID = """
import "stdlib/s000"
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=25, seed=42)
model m1 = hf("org/scripted-1", dtype=float32)
model m2 = hf("org/scripted-2", dtype=float32)
protocol tok_bare = token_prob(readout=T1, scored=generated, context=bare)
protocol tok_prefix = tok_bare with (context=verbal_prefix)
metric ece10 = ece(bins=10, binning=equal_width)
metric binfree = binfree_ece()
audit a {
  models = [m1, m2]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.verbal_decimal, tok_bare, tok_prefix]
  evaluators = [s000.first_char]
  metrics = [accuracy, ece10]
  bootstrap = bootstrap(resamples=200, seed=7, unit=UNIT)
}
compare grid = protocol_grid(a, verbal=s000.verbal_decimal, configs=[tok_bare, tok_prefix], estimators=[ece10, binfree])
compare grid_diag = protocol_grid(a, verbal=s000.verbal_decimal, configs=[tok_bare, tok_prefix], estimators=[ece10, binfree], resamples=20)
"""


def _setting_arrays(rec: pd.DataFrame, model: str):
    cells = {p: rec[(rec.model == model) & (rec.protocol == p)] for p in ("s000.verbal_decimal", "tok_bare", "tok_prefix")}
    items = rec[rec.model == model].drop_duplicates("item_id").sort_values("item_index")["item_id"].tolist()
    out = {}
    for p, df in cells.items():
        d = df[~df.correct.isna() & ~df.confidence.isna()]
        if p == "s000.verbal_decimal":
            d = d[d.confidence_parsed.astype(bool)]
        d = d.set_index("item_id").reindex(items)
        out[p] = (d.confidence.to_numpy(float), d.correct.to_numpy(float))
    return out


def _gap_reps(arrs, idx, config):
    reps = []
    for row in idx:
        vals = []
        for p in ("s000.verbal_decimal", config):
            c, y = arrs[p]
            keep = row[~np.isnan(c[row])]
            vals.append(ece(c[keep], y[keep], bins=10))
        reps.append(vals[0] - vals[1])
    return np.array(reps)


@pytest.mark.parametrize("unit", ["auto", "macro", "paired"])
def test_protocol_grid_intervals(tmp_path, shared_data, monkeypatch, capsys, unit):
    use_scripted_engine(monkeypatch, grid_script)
    out = _run(tmp_path, shared_data, GRID.replace("UNIT", unit), capsys, "grid")
    comp = out / "report" / "comparisons"
    ps = pd.read_csv(comp / "grid_setting_ci.csv")
    mc = pd.read_csv(comp / "grid_macro_ci.csv")
    rec = pd.read_parquet(out / "records.parquet")
    # hand computation (001 §3.2): one generator seeded 7, settings m1 then m2, items resampled per setting
    rng = np.random.default_rng(7)
    arrs = {m: _setting_arrays(rec, m) for m in ("m1", "m2")}
    idx = {m: rng.integers(0, len(arrs[m]["tok_bare"][0]), size=(200, len(arrs[m]["tok_bare"][0]))) for m in ("m1", "m2")}
    qa = "tok_bare|ece(binning=equal_width, bins=10)"
    qb = "tok_prefix|ece(binning=equal_width, bins=10)"
    reps = {}
    for m in ("m1", "m2"):
        ra, rb = _gap_reps(arrs[m], idx[m], "tok_bare"), _gap_reps(arrs[m], idx[m], "tok_prefix")
        reps[m] = (ra, ra - rb)
        row = ps[(ps.model == m) & (ps.quantity == qa)].iloc[0]
        assert (row["value lo"], row["value hi"]) == pytest.approx(tuple(np.quantile(ra, [0.025, 0.975])), abs=1e-12)
        row = ps[(ps.model == m) & (ps.quantity == "g_A - g_B")].iloc[0]
        assert (row["value lo"], row["value hi"]) == pytest.approx(tuple(np.quantile(ra - rb, [0.025, 0.975])), abs=1e-12)
    macro = (reps["m1"][0] + reps["m2"][0]) / 2
    row = mc[mc.quantity == qa].iloc[0]
    assert row["n_settings"] == 2
    assert (row["macro lo"], row["macro hi"]) == pytest.approx(tuple(np.quantile(macro, [0.025, 0.975])), abs=1e-12)
    assert row["bootstrap mean"] == pytest.approx(macro.mean(), abs=1e-12)
    assert qb in set(mc.quantity)
    # the kernel estimator has no batch form: no interval unless the comparison sets resamples=
    binfree_q = "tok_bare|binfree_ece"
    assert ps[ps.quantity == binfree_q]["value lo"].isna().all()
    diag = pd.read_csv(comp / "grid_diag_macro_ci.csv")
    assert diag[diag.quantity == binfree_q]["macro lo"].notna().all()  # resamples=20 (001 appendix diagnostics: 200)
    assert "resamples=N" in (comp / "grid_setting_ci.md").read_text()


@pytest.mark.parametrize(("unit", "compare", "where", "needle"), [
    ("cell", 'compare g = protocol_grid(a, verbal=s000.verbal_decimal, configs=[tok_bare, tok_prefix])', "compare g",
     "compare 'g' (protocol_grid) cannot use bootstrap unit=cell"),
    ("paired", 'compare ns = norm_shift(a, raw=tok_bare, norm=tok_prefix)', "compare ns",
     "compare 'ns' (norm_shift) cannot use bootstrap unit=paired"),
    ("cell", 'compare sp = spread(a, variants=[s000.surface_paraphrase])', "compare sp",
     "compare 'sp' (spread) cannot use bootstrap unit=cell"),
])
def test_a_unit_a_comparison_cannot_use_is_a_diagnostic(tmp_path, capsys, unit, compare, where, needle):
    text = GRID.split("compare grid")[0].replace("UNIT", unit) + compare + "\n"
    spec = tmp_path / "units.audit"
    spec.write_text(text, encoding="utf-8")
    assert main(["check", str(spec)]) == 1
    err = capsys.readouterr().err
    lines = text.splitlines()
    line = next(i for i, s in enumerate(lines, 1) if where in s)
    col = lines[line - 1].index(where) + 1
    assert f"units.audit:{line}:{col}: error[E159]" in err, err
    assert needle in err and "hint:" in err


def test_macro_with_nothing_to_average_is_a_warning(tmp_path, capsys):
    text = GRID.split("compare grid")[0].replace("UNIT", "macro")
    spec = tmp_path / "units.audit"
    spec.write_text(text, encoding="utf-8")
    assert main(["check", str(spec)]) == 0
    err = capsys.readouterr().err
    line = next(i for i, s in enumerate(text.splitlines(), 1) if "unit=macro" in s)
    assert f"units.audit:{line}:" in err and "warning[W159]" in err and "no comparison of audit 'a' averages" in err


def test_ece_gap_takes_the_cell_unit_of_000_e2(tmp_path, capsys):
    # 000 App. E.2: "Per-cell ECE_gap: example-level resampling within each cell"
    text = GRID.split("compare grid")[0].replace("UNIT", "cell") + \
        "compare gap = ece_gap(a, verbal=s000.verbal_decimal, token=tok_bare)\n"
    spec = tmp_path / "units.audit"
    spec.write_text(text, encoding="utf-8")
    assert main(["check", str(spec)]) == 0
    err = capsys.readouterr().err
    assert "E159" not in err and "W159" not in err  # the cell unit is accepted for ece_gap, silently
    assert audit_unit(compile_spec(spec), "a") == "cell"
    # ... and it is a real choice: a unit ece_gap cannot use is refused at the comparison
    spec.write_text(text.replace("unit=cell", "unit=macro"), encoding="utf-8")
    assert main(["check", str(spec)]) == 1
    assert "compare 'gap' (ece_gap) cannot use bootstrap unit=macro" in capsys.readouterr().err
