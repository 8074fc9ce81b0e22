"""Importing torch and transformers for the hf engine and the embedded-model conversion."""

from __future__ import annotations

import importlib
import sys
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
    generation_without_sklearn(transformers)
    return torch, transformers


def generation_without_sklearn(transformers: ModuleType) -> None:
    """Import transformers' ``generation.candidate_generator`` without scikit-learn. It imports
    ``sklearn.metrics`` (seconds of start-up) only for assisted generation's confidence threshold,
    which auditlang never uses (it decodes with its own loop); every model class pulls the module
    in through ``GenerationMixin`` (and so does ``AutoTokenizer``, for the vllm engine: vLLM's own
    tokenizer imports it). Told that sklearn is absent while it is imported, it skips it."""
    name = "transformers.generation.candidate_generator"
    if name in sys.modules or "sklearn" in sys.modules:
        return
    try:
        import transformers.utils as tu  # lazy: transformers only when a model runs
    except ImportError:
        return
    available = getattr(tu, "is_sklearn_available", None)
    if available is None:
        return
    tu.is_sklearn_available = lambda: False
    try:
        importlib.import_module("transformers.generation.candidate_generator")  # lazy: transformers only when a model runs
    except ImportError:
        pass  # another transformers layout: nothing to skip
    finally:
        tu.is_sklearn_available = available
