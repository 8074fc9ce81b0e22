"""The vLLM engine's tokenizer and config, off the engine start's critical path (issue 36).

A warm vLLM start on an H200 spent 3.6 s in transformers' tokenizer and config before ``LLM()``
(7.38 B shape, session 15). With the engine core in its own process, ``LLM()`` mostly waits for
that process (weights, KV-cache profile, warm-up), so the tokenizer loads on a thread meanwhile
(:class:`TokenizerLoad`); the config the engine needs before ``LLM()`` (dtype, layer and head
counts) is read from ``config.json`` itself (:func:`read_config`), falling back to transformers'
``AutoConfig`` when the file lacks those fields (a config completed by its class's defaults).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

# fields the engine reads before LLM() (VLLMEngine._pick_dtype, _full_context_kv_bytes)
NEEDED = ("num_hidden_layers", "num_attention_heads")


class TokenizerLoad:
    """``load()``'s value, computed on a daemon thread (``beside=True``) or at once; :meth:`get`
    returns it, or raises what ``load`` raised, in the caller's thread."""

    def __init__(self, load: Callable[[], Any], beside: bool) -> None:
        self._load = load
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        if beside:
            self._thread = threading.Thread(target=self._run, name="auditlang-vllm-tokenizer", daemon=True)
            self._thread.start()
        else:
            self._run()

    @property
    def beside(self) -> bool:
        return self._thread is not None

    def _run(self) -> None:
        try:
            self._value = self._load()
        except BaseException as e:  # noqa: BLE001 - re-raised by get() in the caller's thread
            self._error = e

    def get(self) -> Any:
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


def _namespace(value: Any) -> Any:
    if isinstance(value, dict):
        return SimpleNamespace(**{k: _namespace(v) for k, v in value.items() if isinstance(k, str) and k.isidentifier()})
    return value


def _has_needed(cfg: dict[str, Any]) -> bool:
    text = cfg.get("text_config")
    return all(k in cfg for k in NEEDED) or isinstance(text, dict) and all(k in text for k in NEEDED)


def read_config(d: Path, fallback: Callable[[], Any]) -> Any:
    """The checkpoint's ``config.json`` as attributes (nested dicts too: ``text_config``), or
    ``fallback()`` (transformers' ``AutoConfig``) when the file is missing, unreadable or lacks the
    layer and head counts."""
    try:
        cfg = json.loads((Path(d) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return fallback()
    if not isinstance(cfg, dict) or not _has_needed(cfg):
        return fallback()
    return _namespace(cfg)
