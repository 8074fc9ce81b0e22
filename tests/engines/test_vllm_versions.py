"""The vLLM releases the engine supports (issue 22, item 4): the `vllm` extra and the engine's
check agree, and a release outside them is refused with the install hint, not a late AttributeError.
Runs without vLLM (a stand-in module carries the version)."""

from __future__ import annotations

import sys
import tomllib
import types
from pathlib import Path

import pytest

from auditlang.core.engine import EngineError
from auditlang.engines.vllm_engine import SUPPORTED_VLLM, _release, import_vllm

REPO = Path(__file__).resolve().parents[2]


def test_the_extra_admits_exactly_the_supported_releases() -> None:
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["vllm"]
    (lo_major, lo_minor), (hi_major, hi_minor) = SUPPORTED_VLLM
    assert extra == [f"vllm>={lo_major}.{lo_minor},<{hi_major}.{hi_minor + 1}"]
    assert SUPPORTED_VLLM[0] <= (0, 26) and SUPPORTED_VLLM[1] >= (0, 33)  # torch-2.11 images up to 0.33


@pytest.mark.parametrize("version, ok", [("0.26.0", True), ("0.32.0+cpu", True), ("0.33.1", True),
                                         ("0.25.2", False), ("0.34.0", False), ("1.0.0", False)])
def test_import_vllm_checks_the_release(version: str, ok: bool, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(__version__=version))
    if ok:
        assert import_vllm().__version__ == version
    else:
        with pytest.raises(EngineError, match=f"vLLM {version} is installed; the vllm engine supports 0.26 to 0.33") as e:
            import_vllm()
        assert "auditlang[vllm]" in (e.value.hint or "")


def test_release_parsing() -> None:
    assert _release("0.26.0") == (0, 26)
    assert _release("0.32.0+cpu") == (0, 32)
    assert _release("dev") is None  # a source build is not refused
