"""`auditc plan --gpu`: engine start, GPU time and wall per model before any GPU is used (issue 36).

The estimate comes from the shipped throughput table (auditlang/plan/throughput.json, seeded by
benchmarks/seed_throughput.py from this session's H200 runs) and the plan's token counts. It is
checked against measured walls: the seed runs, and issue 36's own rows (another session's code
and machine), each within +-30 %."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from auditlang.cli import main as auditc
from auditlang.plan import gputime

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
S000 = ROOT / "benchmarks" / "gpu_task" / "s000_smollm2_vllm.audit.in"

# issue 36's table (one H200, vLLM 0.26.0, the s000 design through `auditc run`, random-init bf16)
ISSUE_ROWS = [("vllm", 1.07, 200, 106.2), ("hf", 1.07, 200, 167.5), ("vllm", 7.38, 100, 119.8),
              ("hf", 7.38, 100, 289.2), ("vllm", 7.38, 200, 174.7)]
# session 15 (benchmarks/results/issue36/session15): vllm started eager by the rule, engine core
# forked, as `auditc run` does; (engine, size, items, measured wall, the start: fresh machine or warm)
SESSION15_ROWS = [("vllm", 7.38, 200, 166.3, "fresh"), ("vllm", 7.38, 200, 128.2, "warm"), ("vllm", 1.07, 200, 86.3, "warm"),
                  ("vllm", 1.07, 200, 75.9, "warm"), ("hf", 7.38, 200, 423.5, "fresh"), ("hf", 1.07, 200, 160.3, "fresh")]
# session 22 (benchmarks/results/issue36/session22/machine2): bytecode cached, main at 977debb, second machine
SESSION22_ROWS = [("vllm", 7.38, 200, 118.8, "warm"), ("vllm", 1.07, 200, 74.3, "warm"), ("vllm", 1.07, 200, 69.8, "warm"),
                  ("hf", 1.07, 200, 162.2, "fresh")]


def _tokens(table: dict, items: int) -> dict:
    """The plan's token counts of the s000 design at ``items`` per dataset, as recorded with the seeds."""
    m = next(r["measured"] for r in table["rows"] if r["measured"]["items_per_dataset"] == items)
    return {"prompt_tokens": m["prompt_tokens"], "generated_tokens_max": m["generated_tokens_max"], "requests": m["requests"]}


def test_the_estimate_is_within_30_percent_of_the_measured_walls():
    table = gputime.load_table()
    assert table["provenance"]["card"].startswith("NVIDIA H200") and table["provenance"]["versions"]["vllm"]
    for row in table["rows"]:  # the runs the table was seeded from (vLLM compiled: before the eager rule)
        m = row["measured"]
        est = gputime.estimate_model(table, "m", row["engine"], row["size_b"], "bfloat16", _tokens(table, m["items_per_dataset"]),
                                     eager=False)
        assert est.wall_s == pytest.approx(m["wall_s"], rel=0.05)
    for engine, size, items, wall in ISSUE_ROWS:  # other runs: issue 36's rows (compiled)
        est = gputime.estimate_model(table, "m", engine, size, "bfloat16", _tokens(table, items), eager=False)
        assert abs(est.wall_s / wall - 1) <= 0.30, (engine, size, items, est.wall_s, wall)
    for engine, size, items, wall, start in SESSION15_ROWS + SESSION22_ROWS:  # eager by the rule, as `auditc run` does
        est = gputime.estimate_model(table, "m", engine, size, "bfloat16", _tokens(table, items))
        assert est.enforce_eager is (True if engine == "vllm" else None)
        got = est.wall_s if start == "fresh" else est.start_warm_s + est.gpu_s + est.overhead_s
        assert abs(got / wall - 1) <= 0.30, (engine, size, items, got, wall)


def test_an_eager_vllm_model_is_estimated_with_the_eager_start():
    table = gputime.load_table()
    tok = _tokens(table, 100)
    compiled = gputime.estimate_model(table, "m", "vllm", 7.38, "bfloat16", tok, eager=False)
    ruled = gputime.estimate_model(table, "m", "vllm", 7.38, "bfloat16", tok)  # unset: the rule (small work: eager)
    row = next(r for r in table["rows"] if r["engine"] == "vllm" and r["size_b"] == 7.38)
    assert compiled.start_s == row["start_s"] and compiled.enforce_eager is False
    assert ruled.enforce_eager is True and ruled.start_s == row["start_eager_s"] and ruled.start_warm_s == row["start_eager_warm_s"]
    assert ruled.gpu_s == pytest.approx(compiled.gpu_s * row["engine_eager_s"] / row["measured"]["engine_s"])
    assert "enforce_eager" in ruled.basis and "enforce_eager" not in compiled.basis


def test_sizes_between_and_beyond_the_rows_and_other_gpus():
    table = gputime.load_table()
    tok = _tokens(table, 100)
    small, mid, big = (gputime.estimate_model(table, "m", "hf", s, "bfloat16", tok).gpu_s for s in (1.07, 3.0, 70.0))
    assert small < mid < big  # more parameters, more GPU time
    other = gputime.estimate_model(table, "m", "hf", 7.38, "bfloat16", tok, gpu="a100")
    assert "no a100 row: h200 figures" in other.basis
    assert gputime.estimate_model(table, "m", "openai", None, None, tok) is None
    assert "size not declared" in gputime.estimate_model(table, "m", "vllm", None, "bfloat16", tok).basis


def test_ray_packs_longest_first_onto_the_gpus():
    est = [gputime.ModelEstimate(n, "vllm", 1.0, 10.0, 5.0, g, 0.0, "") for n, g in (("a", 90.0), ("b", 50.0), ("c", 40.0))]
    s = gputime.schedule(est, 2, "ray")
    assert s["wall_s"] == 110.0 and s["per_gpu"] == [["a"], ["b", "c"]]
    assert gputime.schedule(est, 2, "local")["wall_s"] == 210.0  # auditc run: models in turn


def test_auditc_plan_prints_gpu_time_and_refreshes_from_a_pilot(tmp_path, capsys):
    spec = tmp_path / "two.audit"
    spec.write_text(
        'import "stdlib/s000"\n'
        'dataset capitals = jsonl("demo_capitals.jsonl", task=multiple_choice, sample=20, seed=42)\n'
        'model big = vllm("org/big", dtype=bfloat16, size=7.38)\n'
        'model small = hf("org/small", dtype=bfloat16, size=1.07)\n'
        'audit a { models = [big, small]  datasets = [capitals]  variants = [s000.surface_paraphrase]\n'
        '  protocols = [s000.token_norm]  evaluators = [s000.first_char]  metrics = [accuracy] }\n', encoding="utf-8")
    data = ["--data-root", str(ROOT / "examples" / "data")]
    assert auditc(["plan", str(spec), *data, "--gpu", "h200", "--gpus", "2", "--executor", "ray"]) == 0
    out = capsys.readouterr().out
    assert "GPU time on h200" in out and "schedule on 2 GPUs (--executor ray, longest first)" in out
    out_json = tmp_path / "plan.json"
    assert auditc(["plan", str(spec), *data, "--gpu", "h200", "--format", "json", "--no-requests", "-o", str(out_json)]) == 0
    g = json.loads(out_json.read_text())["gpu_time"]
    by = {m["model"]: m for m in g["models"]}
    assert set(by) == {"big", "small"} and by["big"]["engine"] == "vllm" and by["small"]["engine"] == "hf"
    assert g["schedule"]["wall_s"] == pytest.approx(by["big"]["wall_s"] + by["small"]["wall_s"], abs=0.2)

    pilot = tmp_path / "pilot"  # a run of `small` on an H200 that took 100 s of engine time and started in 30 s
    pilot.mkdir()
    tokens = {"prompt_tokens": 40_000, "generated_tokens_max": 20_000, "requests": 40}
    (pilot / "run.json").write_text(json.dumps({"timing": {"small": {
        "engine": "hf", "device": "cuda:NVIDIA H200", "dtype": "bfloat16", "size_b": 1.07, "start_s": 30.0,
        "engine_s": 100.0, "tokens": tokens}}}), encoding="utf-8")
    table, changed = gputime.refresh(gputime.load_table(), json.loads((pilot / "run.json").read_text()), str(pilot))
    assert changed and "small: hf on h200 at 1.07 B" in changed[0]
    est = gputime.estimate_model(table, "small", "hf", 1.07, "bfloat16", tokens)
    assert est.start_s == 30.0 and est.gpu_s == pytest.approx(100.0, rel=1e-6)  # the pilot's own run reproduced
    assert auditc(["plan", str(spec), *data, "--gpu", "h200", "--throughput-from", str(pilot)]) == 0
    assert "small: hf on h200 at 1.07 B: start 30.0 s" in capsys.readouterr().out
    assert auditc(["plan", str(spec), *data, "--gpu", "h200", "--throughput-from", str(tmp_path / "nope")]) != 0


@pytest.mark.skipif(not (DATA / "sst2.jsonl").is_file(), reason="needs ../shared/data beside the checkout")
def test_the_recorded_token_counts_are_the_plans(tmp_path):
    """The seeds' token counts are what `auditc plan` counts for the s000 design at 100 items."""
    spec = tmp_path / "s000.audit"
    spec.write_text(S000.read_text().replace("@CKPT@", str(tmp_path / "ckpt")).replace("@DTYPE@", "bfloat16")
                    .replace("size=0.135", "size=7.38"), encoding="utf-8")
    out = tmp_path / "plan.json"
    assert auditc(["plan", str(spec), "--data-root", str(DATA), "--limit", "100", "--gpu", "h200",
                   "--format", "json", "--no-requests", "-o", str(out)]) == 0
    d = json.loads(out.read_text())
    rec = _tokens(gputime.load_table(), 100)
    assert d["token_estimate"]["prompt_tokens"] + d["token_estimate_followups"]["prompt_tokens"] == rec["prompt_tokens"]
    assert d["token_estimate"]["generated_tokens_max"] + d["token_estimate_followups"]["generated_tokens_max"] == rec["generated_tokens_max"]
    (m,) = d["gpu_time"]["models"]
    assert abs(m["wall_s"] / 119.8 - 1) <= 0.30  # issue 36's vLLM 7.38 B row at 100 items


def test_vllm_starts_eager_when_the_planned_work_is_small(tmp_path):
    """`auditc run`'s engine config: enforce_eager=true for a vllm model whose estimated GPU time is
    under EAGER_BELOW_S (compiling would cost more start than it saves); written values stay."""
    from auditlang.execute.runner import engine_config
    from auditlang.plan.planner import build_plan
    from auditlang.resolve import compile_spec

    text = ('import "stdlib/s000"\n'
            'dataset capitals = jsonl("demo_capitals.jsonl", task=multiple_choice, sample=20, seed=42)\n'
            'model big = vllm("org/big", dtype=bfloat16, size=7.38)\n'
            'model fixed = vllm("org/fixed", dtype=bfloat16, size=7.38, enforce_eager=false)\n'
            'audit a { models = [big, fixed]  datasets = [capitals]  variants = [s000.surface_paraphrase]\n'
            '  protocols = [s000.token_norm]  evaluators = [s000.first_char]  metrics = [accuracy] }\n')
    spec_file = tmp_path / "v.audit"
    spec_file.write_text(text, encoding="utf-8")
    spec = compile_spec(spec_file)
    plan = build_plan(spec, data_root=str(ROOT / "examples" / "data"), lean=True)
    assert engine_config(spec, plan, "big").options["enforce_eager"] is True
    assert engine_config(spec, plan, "fixed").options["enforce_eager"] is False
    big = {"prompt_tokens": 200_000_000, "generated_tokens_max": 20_000_000, "requests": 1_000_000}
    eager, gpu_s = gputime.eager_for("vllm", 7.38, "bf16", big)
    assert not eager and gpu_s > gputime.EAGER_BELOW_S
    assert gputime.eager_for("hf", 7.38, "bf16", big) is None
