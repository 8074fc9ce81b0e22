"""End-to-end fixtures: a tiny real audit on the embedded SmolLM2 (HF engine, CPU)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

TINY = """
import "stdlib/s000"
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=4, seed=42)
model smol = embedded("smollm2-135m-instruct", dtype=float32, batch_size=1, max_tokens=12)
audit tiny {
  models = [smol]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm, s000.verbal_decimal]
  evaluators = [s000.first_char, s000.regex_reparse, s000.constrained]
  metrics = [accuracy, s000.ece10, brier]
  bootstrap = bootstrap(resamples=200, seed=42)
}
report cells, checklist, disclosure(format=markdown)
"""


@pytest.fixture(scope="session", autouse=True)
def _model_cache(tmp_path_factory) -> None:
    if not os.environ.get("AUDITLANG_CACHE"):
        os.environ["AUDITLANG_CACHE"] = str(REPO / ".cache" / "auditlang")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture
def tiny_spec(tmp_path: Path) -> Path:
    p = tmp_path / "tiny.audit"
    p.write_text(TINY, encoding="utf-8")
    return p
