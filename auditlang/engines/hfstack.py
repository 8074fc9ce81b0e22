"""Importing torch and transformers for the hf engine and the embedded-model conversion."""

from __future__ import annotations

from types import ModuleType

from auditlang.core.engine import EngineError

HF_EXTRA_HINT = "pip install 'auditlang[hf]'"


def import_hf_stack() -> tuple[ModuleType, ModuleType]:
    """``(torch, transformers)``, or EngineError naming the extra to install."""
    try:
        import torch  # lazy: torch only when a model runs
        import transformers  # lazy: transformers only when a model runs
    except ImportError as e:
        raise EngineError(f"the 'hf' engine needs torch and transformers, which are not installed ({e})", hint=HF_EXTRA_HINT) from e
    return torch, transformers
