"""The one rule that turns a spec's model declaration into an engine configuration.

Every consumer (the runner, evaluators that call a judge, the checklist) goes through
:func:`model_config`, so the engine sees exactly what the spec declared.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict
from typing import Any

from auditlang.core.engine import ModelConfig
from auditlang.core.engine_options import EngineOptions, openai_base_url
from auditlang.core.registry import REGISTRY
from auditlang.resolve.schema import EMBEDDED_MODELS
from auditlang.resolve.spec import Spec

CHAT_TEMPLATE_PARAMS = ("enable_thinking", "reasoning_effort")  # model params passed to the chat template
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}

# Spec parameter -> the engine's own option name, per engine: read from each engine's option model
# (core/engine_options.py, the options declared with spec=...), the engine entry's schema. Only
# parameters the spec writes are sent: a default the user did not write is the engine's (recorded
# in its fingerprint), so the language never overrides an engine default it does not know (e.g.
# vLLM's eager mode on CPU).
ENGINE_OPTIONS: Mapping[str, dict[str, str]] = REGISTRY.view(
    "engine", lambda e: e.schema.spec_params() if isinstance(e.schema, type) and issubclass(e.schema, EngineOptions) else {})


def declared_model(spec: Spec, mid: str) -> tuple[str, str, bool]:
    """(engine, model path or name, chat) as spec model ``mid`` declares them: an embedded model
    names its engine in ``engine=`` and takes its chat flag from the shipped model unless the
    spec writes ``chat``. The planner, the checklist and :func:`model_config` all read this."""
    o = spec.get(mid)
    v = o.value
    if o.ctor == "embedded":
        return v.engine, v.name, v.chat if "chat" in dict(o.param_spans) else EMBEDDED_MODELS[v.name]["chat"]
    return o.ctor, v.path, v.chat


def model_config(spec: Spec, mid: str, engine_override: str | None = None,
                 kinds: Collection[str] | None = None) -> ModelConfig:
    """The engine configuration of spec model ``mid``. ``engine_override`` (``auditc run --engine``)
    replaces the declared engine; the declared engine's options are then not sent. A model on the
    openai engine (``openai(...)`` without ``base_url``, or any model under ``--engine openai``)
    takes ``$OPENAI_BASE_URL`` when it is set (recorded in the fingerprint).

    ``kinds``: the request kinds the run sends this model (``Plan.model_kinds``); given (a run), a
    vllm model's ``prefix_caching=auto`` (the default) is resolved into an explicit
    ``enable_prefix_caching`` (:func:`prefix_caching_for`); without them ``auto`` is not sent
    (the engine's default, off, applies)."""
    o = spec.get(mid)
    v = o.value
    engine, path, chat = declared_model(spec, mid)
    declared = engine
    if engine_override:
        engine = engine_override
    written = dict(o.param_spans)
    options: dict[str, Any] = {}
    if engine == declared:
        for param, option in ENGINE_OPTIONS.get(engine, {}).items():
            if param in written and getattr(v, param, None) is not None:
                options[option] = getattr(v, param)
    if engine == "openai" and openai_base_url(options)[1] == "environment":
        # the spec names no server (or --engine openai overrides another engine): the environment's,
        # recorded here (the fingerprint, the consent check and the engine read this one value)
        options["base_url"] = openai_base_url(options)[0]
    if options.get("enable_prefix_caching") == "auto":
        del options["enable_prefix_caching"]  # not an engine value: resolved below from the run's kinds
    if engine == "vllm" and kinds is not None:
        written_pc = getattr(v, "prefix_caching", "auto") if engine == declared else "auto"
        options["enable_prefix_caching"] = prefix_caching_for(written_pc)
    template_kwargs = {k: getattr(v, k) for k in CHAT_TEMPLATE_PARAMS if getattr(v, k, None) is not None}
    if template_kwargs:  # absent when unset, so plain models keep their options (and fingerprints)
        options["chat_template_kwargs"] = template_kwargs
    return ModelConfig(
        name=mid, engine=engine, path=path, dtype=DTYPES.get(v.dtype, v.dtype), chat=chat,
        device=getattr(v, "device", "auto"), batch_size=v.batch_size, revision=v.revision, options=options,
    )


def prefix_caching_for(declared: bool | str) -> bool:
    """vLLM prefix caching for a model declared ``prefix_caching=declared``: ``on``/``off`` as
    written; ``auto`` = on. Requests scored with prompt logprobs (``continuation_logprobs``) are
    safe with it on: vLLM reads no cached block for them, and the engine checks that per request
    (a cached read would leave the rows of those positions uninitialised, vLLM bug #42019)."""
    return bool(declared) if declared in (True, False) else True


def declaration_key(spec: Spec, mid: str) -> str:
    """What the engine and the requests of model ``mid`` depend on, without its name: the engine
    configuration (:func:`model_config`) and the request defaults (max_tokens, seed). Two names
    with one key are one model."""
    cfg = asdict(model_config(spec, mid))
    cfg.pop("name")
    v = spec.get(mid).value
    cfg["max_tokens"] = v.max_tokens
    cfg["seed"] = spec.seed(v.seed)
    return json.dumps(cfg, sort_keys=True, default=str)


def shared_declarations(spec: Spec, mids: Iterable[str]) -> dict[str, str]:
    """model -> the earlier model (in ``mids`` order) with the same declaration, for every model
    declared again under another name (or swapped to an identical one with ``--swap-model``):
    its requests are the earlier model's, so they run once."""
    first: dict[str, str] = {}
    out: dict[str, str] = {}
    for mid in dict.fromkeys(mids):
        key = declaration_key(spec, mid)
        if key in first:
            out[mid] = first[key]
        else:
            first[key] = mid
    return out


GROUP_KEYS = ("instruct", "family", "size", "size_class", "model")  # a comparison's group_by= attributes


def model_attribute(spec: Spec, mid: str, key: str) -> Any:
    """Model ``mid``'s declared ``key`` (``instruct``, ``family``, ``size``, ``size_class``; ``model``
    is its name); an embedded model takes ``instruct``, ``family`` and ``size`` from the shipped
    model unless the spec writes them. None when not declared."""
    if key == "model":
        return mid
    o = spec.get(mid)
    v = getattr(o.value, key, None)
    if v is None and o.ctor == "embedded" and key != "size_class":
        v = EMBEDDED_MODELS[o.value.name].get(key)
    return v


def group_label(spec: Spec, mid: str, keys: Iterable[str]) -> str:
    """The group model ``mid`` falls in under ``group_by=keys``: ``Instruct``/``base`` for
    ``instruct``, ``7.6B`` for ``size``, the declared text otherwise; joined by `` / ``. "" without keys."""
    parts = []
    for k in keys:
        v = model_attribute(spec, mid, k)
        if k == "instruct":
            parts.append("unspecified" if v is None else ("Instruct" if v else "base"))
        elif k == "size":
            parts.append("unspecified" if v is None else f"{v:g}B")
        else:
            parts.append("unspecified" if v is None else str(v))
    return " / ".join(parts)
