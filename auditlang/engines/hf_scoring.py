"""Right-padded, mask-free scoring forward of the hf engine (``compile=true`` on CUDA).

A scoring pass (choice, continuation, hidden-state requests) needs the model's outputs only at
each row's real positions. With the rows padded on the RIGHT, a real token attends only to
earlier tokens, which are all real, so plain causal attention is exact for every real position
and no padding mask is needed. SDPA then takes its causal flash path with native grouped-query
attention; with a mask it takes the memory-efficient kernel and repeats K/V per head. Under
torch.compile transformers materialises a mask whenever one could matter, so the decoder runs
with an attention implementation registered here whose mask function returns none. The output
head is applied to the gathered positions only.

Only for architectures whose causal-LM head is a plain ``lm_head`` over the final hidden state
and whose attention is full (no sliding window): :func:`ineligible` says why not otherwise, and
the engine then keeps its left-padded path. On an H100 (8B shape, batch 64, 510-token prompts)
compiled + this path reached 0.607 MFU against 0.566 compiled with left padding and a mask
(benchmarks/README.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

CAUSAL_SDPA = "auditlang_sdpa_causal"
# model types whose XForCausalLM.forward is `lm_head(hidden_states[:, slice])` and nothing more
PLAIN_HEAD_TYPES = frozenset({"llama", "mistral", "qwen2", "qwen3", "olmo2", "phi3"})


def ineligible(model: Any) -> str | None:
    """Why ``model`` cannot use the right-padded path (None: it can)."""
    cfg = model.config
    if cfg.model_type not in PLAIN_HEAD_TYPES:
        return f"model type {cfg.model_type!r} is not one of {sorted(PLAIN_HEAD_TYPES)}"
    if getattr(cfg, "_attn_implementation", None) != "sdpa":
        return f"attention implementation {getattr(cfg, '_attn_implementation', None)!r} is not sdpa"
    if getattr(cfg, "sliding_window", None) and getattr(cfg, "use_sliding_window", True):
        return "the model uses sliding-window attention"
    for attr in ("final_logit_softcapping", "logit_scale", "logits_scaling"):
        if getattr(cfg, attr, None) not in (None, 1, 1.0):
            return f"the model's head applies {attr}"
    return None


def register(transformers: Any) -> None:
    """Register the mask-free SDPA attention under :data:`CAUSAL_SDPA` (idempotent)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward  # lazy: transformers only when a model runs
    from transformers.masking_utils import AttentionMaskInterface  # lazy: as above

    transformers.AttentionInterface.register(CAUSAL_SDPA, sdpa_attention_forward)
    AttentionMaskInterface.register(CAUSAL_SDPA, lambda *args, **kwargs: None)


@contextlib.contextmanager
def causal_attention(model: Any) -> Iterator[None]:
    """Run ``model`` with :data:`CAUSAL_SDPA` for the duration (generation keeps ``sdpa``)."""
    cfg = model.config
    before = cfg._attn_implementation
    cfg._attn_implementation = CAUSAL_SDPA
    try:
        yield
    finally:
        cfg._attn_implementation = before


def forward_right(torch: Any, model: Any, decoder: Any, rows: list[list[int]], keep: int, pad_id: int,
                  device: str, hidden: bool) -> tuple[Any, Any]:
    """Float32 log-softmax of the last ``keep`` positions of each row (``[rows, keep, vocab]``,
    as the left-padded forward returns them: position ``-1`` is each row's last token; positions
    before a row's start are clamped to its first and never read), and with ``hidden`` the
    hidden states of every layer at each row's last position (``[rows, 1, hidden]`` per layer).
    ``decoder``: ``model.get_decoder()`` or its compiled wrapper."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    lens = torch.tensor([len(r) for r in rows])
    where = (lens[:, None] - keep + torch.arange(keep)[None, :]).clamp(min=0).to(device)  # [rows, keep]
    rows_at = torch.arange(len(rows), device=device)[:, None]
    with torch.inference_mode(), causal_attention(model):
        out = decoder(input_ids=ids.to(device), use_cache=False, output_hidden_states=hidden)
        last = out.last_hidden_state[rows_at, where]
        lps = torch.log_softmax(model.get_output_embeddings()(last).float(), dim=-1)
        states = tuple(h[rows_at, where[:, -1:]] for h in out.hidden_states) if hidden else None
    return lps, states
