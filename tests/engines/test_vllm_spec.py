"""A `vllm(...)` model written in a spec runs end to end on vLLM (issue 16, item 1).

Round one's lesson: every test built vLLM models through ``embedded(..., engine=vllm)``, a path no
GPU user takes, while every ``vllm(...)`` model written in a spec failed to load. Here the spec
names the converted embedded checkpoint by path, exactly as a user names a local checkpoint, and
``auditc run`` executes it. Runs in the vLLM venv of CI (scripts/setup_vllm_cpu.sh); skipped elsewhere.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pandas as pd
import pytest

from auditlang.cli import main
from auditlang.engines.vllm_engine import _Options
from auditlang.resolve import compile_spec
from auditlang.resolve.models import model_config

HAS_VLLM = importlib.util.find_spec("vllm") is not None
pytestmark = [pytest.mark.vllm,
              pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installed here; run in the vLLM venv (scripts/setup_vllm_cpu.sh)")]
REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"


def test_spec_vllm_options_are_engine_args_fields(tmp_path: Path) -> None:
    """Every option the resolver sends for the study specs' vLLM models is a field of vLLM's own
    ``EngineArgs`` (constructed, not loaded). ``model`` is an existing local folder: with
    HF_HUB_OFFLINE=1 (CI) ``EngineArgs`` resolves a Hub id to its cached snapshot at construction,
    and these models are not cached here; the options, not the weights, are under test."""
    from vllm import EngineArgs

    fields = {f.name for f in dataclasses.fields(EngineArgs)}
    seen = 0
    for path in sorted((REPO / "specs").glob("*.audit")) + sorted((REPO / "examples").glob("*.audit")):
        spec = compile_spec(path)
        for mid in spec.of_kind("model"):
            cfg = model_config(spec, mid, kinds={"generate"})  # as `auditc run` builds it: prefix_caching resolved
            if cfg.engine != "vllm":
                continue
            seen += 1
            opts = _Options.parse(cfg)
            assert cfg.path and "/" in cfg.path, (mid, cfg.path)  # a Hub id, as the spec wrote it
            args = EngineArgs(model=str(tmp_path), tensor_parallel_size=opts.tensor_parallel_size,
                              max_logprobs=opts.max_logprobs, enforce_eager=bool(opts.enforce_eager),
                              enable_prefix_caching=opts.enable_prefix_caching,
                              **({"gpu_memory_utilization": opts.gpu_memory_utilization} if opts.gpu_memory_utilization else {}))
            assert args.tensor_parallel_size == opts.tensor_parallel_size
            assert args.enable_prefix_caching is cfg.options["enable_prefix_caching"]
            mapped = {k for k in cfg.options if k != "chat_template_kwargs"}
            assert mapped <= fields, (mid, mapped - fields)
    assert seen >= 10


def test_spec_declared_vllm_model_runs_end_to_end(cache_dir: Path, tmp_path: Path) -> None:
    if not (SHARED_DATA / "arc_challenge.jsonl").exists():
        pytest.skip("../shared/data is not available")
    from auditlang.engines.embedded import resolve_embedded

    ckpt = resolve_embedded("smollm2-135m-instruct")
    spec = tmp_path / "gpu_user.audit"
    spec.write_text(f'''import "stdlib/s000"
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=3, seed=42)
model smol = vllm("{ckpt}", dtype=float32, max_tokens=6, enforce_eager=true)
audit a {{
  models = [smol]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm, s000.verbal_decimal]
  evaluators = [s000.first_char]
  metrics = [accuracy, brier]
}}
report cells
''', encoding="utf-8")
    out = tmp_path / "run"
    rc = main(["run", str(spec), "--data-root", str(SHARED_DATA), "--out", str(out), "--no-progress"])
    assert rc == 0
    df = pd.read_parquet(out / "records.parquet")
    assert len(df) == 6 and df["generation"].str.len().gt(0).all()
    tok = df[df["protocol"] == "s000.token_norm"]
    assert tok["confidence"].notna().all()
    # prefix_caching=auto (not written): no prompt-logprob requests in this plan, so vLLM ran with
    # its prefix cache on, as the journal's engine fingerprint records
    from auditlang.store.journal import Journal

    with Journal(out) as journal:
        fps = [r.fingerprint for r in journal.fingerprints().values() if r.model == "smol"]
    assert fps and all(fp["prefix_caching"] is True for fp in fps)


def test_requests_vllm_cannot_serve_are_missing_not_wrong(cache_dir: Path, tmp_path: Path, capsys) -> None:
    """Issue 22 item 3 on vLLM: audit b asks a top-200 first-token window of a model declared with
    max_logprobs=20 (an impossible parameter: every answer request of its variant fails; audit a
    uses another variant, so its answers are other requests), audit a's third item is
    longer than the model's context (that item's answer fails). `auditc run` exits 4; the failed
    items are missing from the metrics (n_error), never scored as wrong answers."""
    import json
    import math

    from auditlang.engines.embedded import resolve_embedded

    ckpt = resolve_embedded("smollm2-135m-instruct")
    rows = [{"id": f"q{i}", "question": q, "choices": ["Paris", "Rome", "Berlin", "Madrid"], "answer": "Paris"}
            for i, q in enumerate(["What is the capital of France?", "Which city is the capital of France?",
                                   "word " * 9000 + "What is the capital of France?"])]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "caps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    spec = tmp_path / "errors.audit"
    spec.write_text(f'''import "stdlib/s000"
dataset caps = jsonl("caps.jsonl", task=multiple_choice)
model smol = vllm("{ckpt}", dtype=float32, max_tokens=6, enforce_eager=true, max_logprobs=20)
audit a {{
  models = [smol]
  datasets = [caps]
  variants = [s000.surface_paraphrase]
  protocols = [s000.verbal_decimal]
  evaluators = [s000.first_char]
  metrics = [accuracy]
}}
audit b {{
  models = [smol]
  datasets = [caps]
  variants = [s000.instruction_reorder]
  protocols = [s000.token_norm]
  evaluators = [s000.first_char]
  metrics = [accuracy]
}}
report cells, checklist
''', encoding="utf-8")
    out = tmp_path / "run"
    rc = main(["run", str(spec), "--data-root", str(tmp_path / "data"), "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 4, err
    assert "4 requests failed in the engine" in err, err[-2000:]  # 3 answers of b, the long answer of a
    cells = {r["cell_id"].split("/")[0]: r for r in pd.read_csv(out / "metrics" / "cells.csv").to_dict("records")}
    assert (cells["a"]["n"], cells["a"]["n_error"]) == (2, 1)
    assert (cells["b"]["n"], cells["b"]["n_error"]) == (0, 3)
    assert math.isnan(cells["b"]["accuracy"])  # no answered item: no accuracy, never 0.000
    df = pd.read_parquet(out / "records.parquet")
    bad = df[df["status"] == "error"]
    assert len(bad) == 4 and bad["correct"].isna().all()
    why = {(c.split("/")[0], i): e for c, i, e in zip(bad["cell_id"], bad["item_id"], bad["error"])}
    assert sorted(why) == [("a", "q2"), ("b", "q0"), ("b", "q1"), ("b", "q2")]
    assert "max_logprobs" in why[("b", "q0")] and "max_logprobs" in why[("b", "q1")]
    assert "max_model_len" in why[("a", "q2")] and "max_model_len" in why[("b", "q2")]
    checklist = (out / "report" / "checklist.md").read_text(encoding="utf-8")
    assert "### Request errors (items missing from the metrics)" in checklist and "n_error 3, n answered 0" in checklist
