"""Request-parameter checks and error results shared by every engine (hf, vllm, openai)."""

from __future__ import annotations

from typing import Any

from auditlang.plan.requests import Request, Result


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
