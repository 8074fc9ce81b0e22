"""JSON encoding of what the store persists: requests, results and engine fingerprints.

Input: :class:`~auditlang.core.requests.Request`, :class:`~auditlang.core.requests.Result`,
fingerprint dicts. Output: compact JSON text (and back).

The JSON is Python's dialect: a logprob of ``-inf`` is written ``-Infinity`` and read back
exactly. Text is ASCII-escaped so that any Python string (even a lone surrogate produced by a
byte-level tokenizer) survives the round trip through SQLite's UTF-8 storage.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import fields
from pathlib import PurePath
from typing import Any

from auditlang.core.requests import Request, Result, TokenLogprob

__all__ = [
    "dumps",
    "fingerprint_hash",
    "json_default",
    "request_from_json",
    "request_to_json",
    "result_from_json",
    "result_dict",
    "result_json_texts",
    "result_payload_equal",
    "result_to_json",
]


def json_default(obj: Any) -> Any:
    """Make numpy scalars/arrays, paths, sets and tuples JSON-serialisable; reject the rest."""
    if hasattr(obj, "tolist") and callable(obj.tolist):  # numpy scalar or array
        return obj.tolist()
    if isinstance(obj, PurePath):
        return str(obj)
    if isinstance(obj, set | frozenset):
        return sorted(obj, key=repr)
    if isinstance(obj, tuple):
        return list(obj)
    raise TypeError(
        f"cannot store a value of type {type(obj).__name__} ({obj!r:.80}) as JSON; "
        "engines must put only str/int/float/bool/None/list/dict in results and fingerprints"
    )


def dumps(obj: Any, *, sort_keys: bool = False) -> str:
    """Compact, ASCII-safe JSON (see module docstring)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True, sort_keys=sort_keys, default=json_default)


def fingerprint_hash(fingerprint: dict[str, Any]) -> str:
    """Stable hash of an engine fingerprint: ``"f"`` + 16 hex digits of sha256 over canonical JSON.

    Key order does not matter; any value change (engine version, model revision, dtype...)
    gives a different hash, so the store never serves a result computed by another engine.
    """
    if not isinstance(fingerprint, dict):
        raise TypeError(f"an engine fingerprint must be a dict, got {type(fingerprint).__name__}")
    text = dumps(fingerprint, sort_keys=True)
    return "f" + hashlib.sha256(text.encode("ascii")).hexdigest()[:16]


def request_to_json(request: Request) -> str:
    return dumps(request.to_dict())


def request_from_json(text: str) -> Request:
    return Request.from_dict(json.loads(text))


def _token_dict(t: TokenLogprob) -> dict[str, Any]:
    return {"token": t.token, "token_id": t.token_id, "logprob": t.logprob, "top": t.top}


_RESULT_FIELDS = tuple(f.name for f in fields(Result))


def result_dict(result: Result) -> dict[str, Any]:
    """``Result.to_dict()`` without ``dataclasses.asdict``'s deep copy (about 3x faster for
    generations with per-token top-k windows, which dominate the store's overhead)."""
    d: dict[str, Any] = {name: getattr(result, name) for name in _RESULT_FIELDS}
    if result.samples is not None:
        d["samples"] = [
            {"text": s.text, "tokens": [_token_dict(t) for t in s.tokens], "finish_reason": s.finish_reason}
            for s in result.samples
        ]
    if result.continuation is not None:
        d["continuation"] = [_token_dict(t) for t in result.continuation]
    return d


def result_to_json(result: Result) -> str:
    return dumps(result_dict(result))


def result_from_json(text: str) -> Result:
    """A stored result: ``Result.from_dict`` of the decoded JSON, which this result owns (its
    token windows are not copied again)."""
    return Result.from_dict(json.loads(text), owned=True)


_TOKENS, _TOKENS_END = ',"tokens":[', '],"finish_reason":'


def result_json_texts(text: str) -> dict[str, Any]:
    """A stored result's JSON decoded with each sample's ``tokens`` list left empty: for a reader
    that shows the sampled texts only (the sample browser), as the per-token windows are most of a
    generation's JSON and of its decoding time. The cut follows :func:`result_dict`'s compact layout
    (a sample is ``{"text":..,"tokens":[..],"finish_reason":..}``; no token holds a list, and
    ``,"tokens":[`` cannot occur inside a JSON string); text of any other shape is decoded whole."""
    if _TOKENS not in text:
        return json.loads(text)
    parts, pos = [], 0
    while (i := text.find(_TOKENS, pos)) >= 0:
        j = text.find(_TOKENS_END, i)
        cut = text[i + len(_TOKENS):j]
        if j < 0 or _TOKENS in cut or '"meta":{' in cut:  # not a sample's tokens as result_dict writes them
            return json.loads(text)
        parts.append(text[pos:i + len(_TOKENS)])
        pos = j
    parts.append(text[pos:])
    try:
        return json.loads("".join(parts))
    except ValueError:
        return json.loads(text)


def _same(a: Any, b: Any) -> bool:
    """Structural equality where NaN equals NaN (a NaN logprob is a legitimate stored value)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def result_payload_equal(json_a: str, json_b: str) -> bool:
    """True when two stored results agree on everything but ``meta`` (timings, batch ids...)."""
    if json_a == json_b:
        return True
    a, b = json.loads(json_a), json.loads(json_b)
    a.pop("meta", None)
    b.pop("meta", None)
    return _same(a, b)
