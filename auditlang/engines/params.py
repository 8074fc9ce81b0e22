"""Request-parameter checks and error results shared by every engine (hf, vllm, openai)."""

from __future__ import annotations

from typing import Any

from auditlang.core.engine import EngineError
from auditlang.core.requests import Request, Result


def error_result(req: Request, message: str) -> Result:
    return Result(request_id=req.id, kind=req.kind, error=message)


def int_param(p: dict[str, Any], key: str, default: int | None, lo: int | None = None) -> int:
    v = p.get(key, default)
    if v is None:
        raise ValueError(f"missing required parameter {key!r}")
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"parameter {key!r} must be an integer (got {v!r})")
    if lo is not None and v < lo:
        raise ValueError(f"parameter {key!r} must be >= {lo} (got {v})")
    return v


def float_param(p: dict[str, Any], key: str, default: float, lo: float | None = None) -> float:
    v = p.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ValueError(f"parameter {key!r} must be a number (got {v!r})")
    if lo is not None and v < lo:
        raise ValueError(f"parameter {key!r} must be >= {lo} (got {v})")
    return float(v)


def str_param(p: dict[str, Any], key: str) -> str:
    v = p.get(key)
    if not isinstance(v, str):
        raise ValueError(f"parameter {key!r} must be a string (got {v!r})")
    return v


def str_list_param(p: dict[str, Any], key: str) -> list[str]:
    v = p.get(key)
    if not isinstance(v, list | tuple) or not v or not all(isinstance(x, str) for x in v):
        raise ValueError(f"parameter {key!r} must be a non-empty list of strings (got {v!r})")
    if len(set(v)) != len(v):
        raise ValueError(f"parameter {key!r} has duplicate entries: {list(v)!r}")
    return list(v)


def sampling_top_k(p: dict[str, Any]) -> int:
    """The ``generate`` request's sampling ``top_k`` (vLLM semantics), 0 when off.

    Absent, ``None``, ``0`` and ``-1`` mean off (vLLM accepts both 0 and -1); k >= 1 keeps the
    k most probable tokens (after temperature, before top_p). Not the logprob window
    (``top_logprobs``)."""
    v = p.get("top_k")
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"generate: parameter 'top_k' (sampling top-k) must be an integer (got {v!r})")
    if v < -1:
        raise ValueError(f"generate: parameter 'top_k' (sampling top-k) must be >= 1, or 0 / -1 for off (got {v})")
    return max(v, 0)


CHAT_TEMPLATE_KWARGS = "chat_template_kwargs"


def chat_template_kwargs(options: dict[str, Any], model: str) -> dict[str, Any]:
    """``options["chat_template_kwargs"]``: extra variables for the model's chat template
    (e.g. Qwen3 ``enable_thinking``, GPT-OSS ``reasoning_effort``), checked; ``{}`` when unset.

    Keys must be identifiers other than the arguments the engines set themselves; values
    JSON scalars. Raises ValueError naming the model."""
    v = options.get(CHAT_TEMPLATE_KWARGS)
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise ValueError(f"model {model!r}: option {CHAT_TEMPLATE_KWARGS!r} must be a mapping (got {v!r})")
    reserved = {"conversation", "messages", "tokenize", "add_generation_prompt", "continue_final_message",
                "chat_template", "tools", "documents", "return_dict"}
    for k, x in v.items():
        if not isinstance(k, str) or not k.isidentifier():
            raise ValueError(f"model {model!r}: chat template argument names must be identifiers (got {k!r})")
        if k in reserved:
            raise ValueError(f"model {model!r}: chat template argument {k!r} is set by the engine itself")
        if x is not None and not isinstance(x, str | int | float | bool):
            raise ValueError(f"model {model!r}: chat template argument {k!r} must be a string, number or boolean (got {x!r})")
    return dict(sorted(v.items()))


def chat_template_of(tokenizer) -> str | None:
    """The tokenizer's chat template, or None (a base model's tokenizer has none)."""
    t = getattr(tokenizer, "chat_template", None)
    return t if isinstance(t, str) and t else None


def apply_chat(tokenizer, messages: list[dict[str, str]], continue_final: bool, template_kwargs: dict[str, Any]) -> str:
    """The chat template applied to ``messages``: with the generation prompt, or continuing the
    final assistant message (``continue_final``); ``template_kwargs``: the model's chat-template
    variables (enable_thinking, ...), as ``LLM.chat(chat_template_kwargs=...)`` passes them. The one
    rendering every engine and `auditc show` use."""
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=not continue_final,
                                         continue_final_message=continue_final, **template_kwargs)


def render_chat_prompt(tokenizer, config, prompt, template_kwargs: dict[str, Any]) -> str:
    """The text a local model sees for ``prompt`` (before tokenization): a text prompt as it is,
    chat messages through the tokenizer's chat template; EngineError when the model takes no chat
    (``chat`` off, or a tokenizer without a chat template). Shared by the hf and vllm engines."""
    if prompt.text is not None:
        return prompt.text
    if not config.chat or chat_template_of(tokenizer) is None:
        why = "chat is off for it" if not config.chat else "its tokenizer has no chat template (a base model)"
        raise EngineError(
            f"model {config.name!r} got chat messages but {why}",
            hint="give this model raw-text prompts (chat: off in the spec), or use an instruct model with a chat template",
        )
    msgs = [{"role": m.role, "content": m.content} for m in prompt.messages or ()]
    return apply_chat(tokenizer, msgs, prompt.continue_final, template_kwargs)
