"""Engine registry: load an engine by name (its module is imported only now).

Input: a ModelConfig (``engine`` names the backend). Output: a loaded Engine. The static tables
(names, capabilities, install hints) live in :mod:`auditlang.core.capabilities`.
"""

from __future__ import annotations

import importlib

from auditlang.core.capabilities import (  # noqa: F401  (re-exported for callers of the registry)
    ALL_KINDS, ENGINE_CAPABILITIES, ENGINE_CLASSES, INSTALL_HINTS, _check_name, capabilities_for, engine_names,
    unsupported_kinds)
from auditlang.core.engine import Engine, EngineError, ModelConfig
from auditlang.core.registry import REGISTRY
from auditlang.engines import vllm_release


def load_engine(config: ModelConfig) -> Engine:
    """Import the engine's module (only now) and load the model."""
    _check_name(config.engine)
    try:
        cls = REGISTRY.get("engine", config.engine).load()
    except ImportError as e:
        missing = getattr(e, "name", None) or str(e)
        raise EngineError(
            f"engine {config.engine!r} for model {config.name!r} could not be imported (missing: {missing})",
            hint=INSTALL_HINTS[config.engine] or None,
        ) from e
    vllm_release.reap()  # a vLLM engine closed before this load frees its GPU memory first
    return cls(config)


def check_config(config: ModelConfig) -> None:
    """Validate a configuration against the engine's own option parser without loading a model
    (the engine module is imported; torch, vLLM and HTTP clients are not)."""
    _check_name(config.engine)
    module = importlib.import_module(ENGINE_CLASSES[config.engine][0])  # lazy: only the engine this model names
    module.check_config(config)
