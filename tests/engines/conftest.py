"""Session fixtures: the two embedded models, converted once into a test cache and loaded once.

The conversion cache is ``$AUDITLANG_CACHE`` when set, else /tmp/auditlang-test-cache (cold:
~2 min on 2 cores for both models; warm: seconds).

torch runs single-threaded here (``AUDITLANG_TEST_THREADS`` overrides): on a shared 2-core
machine, OpenMP threads spin-waiting for a descheduled sibling made forward passes 10-25x
slower than one thread; on an idle machine one thread costs well under 2x.

The engines are shared by the whole session, but each test gets them with the batch sizes they
loaded with: a test that runs one out of memory halves its batches, and the hf engine keeps a
halved size for the rest of its run (engines/hf_batch.py), which made later forward-count tests
split their batches (the xfails of session 14).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

TEST_CACHE = Path(os.environ.get("AUDITLANG_CACHE") or "/tmp/auditlang-test-cache")


@pytest.fixture(scope="session")
def _torch_threads() -> Iterator[None]:
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")

    old = torch.get_num_threads()
    torch.set_num_threads(int(os.environ.get("AUDITLANG_TEST_THREADS", "1")))
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="session")
def cache_dir() -> Iterator[Path]:
    old = os.environ.get("AUDITLANG_CACHE")
    os.environ["AUDITLANG_CACHE"] = str(TEST_CACHE)
    yield TEST_CACHE
    if old is None:
        os.environ.pop("AUDITLANG_CACHE", None)
    else:
        os.environ["AUDITLANG_CACHE"] = old


@pytest.fixture(scope="session")
def smol(cache_dir: Path, _torch_threads: None):
    """SmolLM2-135M-Instruct (chat template inside), float32, loaded through the registry."""
    from auditlang.core.engine import ModelConfig
    from auditlang.engines.registry import load_engine

    engine = load_engine(ModelConfig(name="smol", engine="hf", path="smollm2-135m-instruct", dtype="float32", device="cpu", batch_size=4))
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def gemma(cache_dir: Path, _torch_threads: None):
    """Gemma 3 270M base (no chat template: chat messages are refused), float32."""
    from auditlang.core.engine import ModelConfig
    from auditlang.engines.hf import HFEngine

    engine = HFEngine(ModelConfig(name="gemma", engine="hf", path="gemma3-270m", dtype="float32", device="cpu", batch_size=4))
    yield engine
    engine.close()


@pytest.fixture(autouse=True)
def _loaded_batch_sizes(request: pytest.FixtureRequest) -> Iterator[None]:
    """Restores each session engine's batch sizer (its per-shape sizes and halvings) after a test."""
    engines = [request.getfixturevalue(n) for n in ("smol", "gemma", "engine") if n in request.fixturenames]
    saved = [(e, copy.deepcopy(e.sizer)) for e in engines if hasattr(e, "sizer")]
    yield
    for e, sizer in saved:
        e.sizer = sizer


@pytest.fixture(scope="session", params=["smol", "gemma"])
def engine(request: pytest.FixtureRequest):
    return request.getfixturevalue(request.param)
