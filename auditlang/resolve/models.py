"""The one rule that turns a spec's model declaration into an engine configuration.

Every consumer (the runner, evaluators that call a judge, the checklist) goes through
:func:`model_config`, so the engine sees exactly what the spec declared.
"""

from __future__ import annotations

import os
from typing import Any

from auditlang.core.engine import ModelConfig
from auditlang.resolve.schema import EMBEDDED_MODELS
from auditlang.resolve.spec import Spec

CHAT_TEMPLATE_PARAMS = ("enable_thinking", "reasoning_effort")  # model params passed to the chat template
OPENAI_BASE_URL_ENV = "OPENAI_BASE_URL"  # honoured by openai(...) models that name no base_url
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def model_config(spec: Spec, mid: str, engine_override: str | None = None) -> ModelConfig:
    """``openai(...)`` without ``base_url`` takes ``$OPENAI_BASE_URL`` when it is set (else the
    schema default, a local server); the engine fingerprint records the URL used."""
    o = spec.get(mid)
    v = o.value
    if o.ctor == "embedded":
        engine, path = v.engine, v.name
        explicit = dict(o.param_spans)
        chat = v.chat if "chat" in explicit else EMBEDDED_MODELS[v.name]["chat"]
    else:
        engine, path, chat = o.ctor, v.path, v.chat
    if engine_override:
        engine = engine_override
    options: dict[str, Any] = {}
    for k in ("max_logprobs", "enforce_eager", "tensor_parallel", "gpu_memory_utilization", "base_url", "endpoint", "api_key_env", "server"):
        if hasattr(v, k) and getattr(v, k) is not None:
            options[k] = getattr(v, k)
    if o.ctor == "openai" and "base_url" not in dict(o.param_spans) and os.environ.get(OPENAI_BASE_URL_ENV):
        options["base_url"] = os.environ[OPENAI_BASE_URL_ENV]  # the spec names no server: the environment's
    template_kwargs = {k: getattr(v, k) for k in CHAT_TEMPLATE_PARAMS if getattr(v, k, None) is not None}
    if template_kwargs:  # absent when unset, so plain models keep their options (and fingerprints)
        options["chat_template_kwargs"] = template_kwargs
    return ModelConfig(
        name=mid, engine=engine, path=path, dtype=DTYPES.get(v.dtype, v.dtype), chat=chat,
        device=getattr(v, "device", "auto"), batch_size=v.batch_size, revision=v.revision, options=options,
    )
