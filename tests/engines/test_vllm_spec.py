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
