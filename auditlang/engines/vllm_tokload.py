"""The vLLM engine's tokenizer and config, off the engine start's critical path (issue 36).

A warm vLLM start on an H200 spent 3.6 s in transformers' tokenizer and config before ``LLM()``
(7.38 B shape, session 15). With the engine core in its own process, ``LLM()`` mostly waits for
that process (weights, KV-cache profile, warm-up), so the tokenizer loads on a thread meanwhile
(:class:`TokenizerLoad`); the config the engine needs before ``LLM()`` (dtype, layer and head
counts) is read from ``config.json`` itself (:func:`read_config`), falling back to transformers'
``AutoConfig`` when the file lacks those fields (a config completed by its class's defaults).

When vLLM forks its engine core (``at_fork``), the thread starts only once that fork has happened
(``os.register_at_fork(after_in_parent=...)``): before the fork, ``LLM()`` is CPU-bound Python
(vLLM's entrypoint import, its config and its own tokenizer), and a thread loading ours then
shares the GIL with it and delays the fork by its own CPU time (0.8-1.1 s on an H200, session
21); after the fork, ``LLM()`` only waits for the core's handshake, with the GIL released. The
forked child can inherit nothing of the thread: the thread does not exist yet when it forks.
If no fork comes (vLLM spawned after all, or ``LLM()`` failed first), :meth:`TokenizerLoad.get`
loads in the caller's thread.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

# fields the engine reads before LLM() (VLLMEngine._pick_dtype, _full_context_kv_bytes)
NEEDED = ("num_hidden_layers", "num_attention_heads")


class TokenizerLoad:
    """``load()``'s value (the vLLM engine's tokenizer), computed on a
    daemon thread named ``name`` or at once; :meth:`get` returns it, or
    raises what ``load`` raised, in the caller's thread.

    ``mode``: ``"now"`` (or ``beside=True``) starts the thread at once; ``"at_fork"`` starts it
    when this process next forks (:func:`_after_fork_in_parent`), or loads in :meth:`get` if no
    fork came; ``"sync"`` (or ``beside=False``) loads here, at once."""

    def __init__(self, load: Callable[[], Any], beside: bool | None = None, mode: str | None = None,
                 name: str = "auditlang-vllm-tokenizer") -> None:
        if mode is None:
            mode = "now" if beside else "sync"
        if mode not in MODES:
            raise ValueError(f"TokenizerLoad mode {mode!r}: one of {', '.join(MODES)}")
        self._load = load
        self._name = name
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._done = False
        self.mode = mode
        if mode == "now":
            self._start()
        elif mode == "at_fork":
            _hook_fork()
            with _PENDING_LOCK:
                _PENDING.append(self)
        else:
            self._run()

    @property
    def beside(self) -> bool:
        """Whether the load runs (or ran) on its own thread."""
        return self._thread is not None

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._load()
        except BaseException as e:  # noqa: BLE001 - re-raised by get() in the caller's thread
            self._error = e
        finally:
            self._done = True

    def cancel(self) -> None:
        """Drop a load that has not started (``LLM()`` failed: no tokenizer is needed)."""
        with _PENDING_LOCK:
            if self in _PENDING:
                _PENDING.remove(self)

    def get(self) -> Any:
        with _PENDING_LOCK:
            pending = self in _PENDING
            if pending:
                _PENDING.remove(self)
        if pending:  # no fork came: load here
            self._run()
        elif self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


MODES = ("now", "at_fork", "sync")
_PENDING: list[TokenizerLoad] = []  # at_fork loads waiting for this process's next fork
_PENDING_LOCK = threading.Lock()
_HOOKED: list[bool] = []


def _after_fork_in_parent() -> None:
    """Start every pending ``at_fork`` load, on its own thread (runs in the parent after a fork)."""
    with _PENDING_LOCK:
        loads = list(_PENDING)
        _PENDING.clear()
    for load in loads:
        load._start()


def _after_fork_in_child() -> None:
    """The child runs no load of the parent's (the engine core needs none)."""
    global _PENDING_LOCK
    _PENDING_LOCK = threading.Lock()  # a fresh lock: the parent's may have been held at the fork
    _PENDING.clear()


def _hook_fork() -> None:
    """Register the fork hooks once per process (``os.register_at_fork`` cannot unregister)."""
    if not _HOOKED:
        _HOOKED.append(True)
        os.register_at_fork(after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child)


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
