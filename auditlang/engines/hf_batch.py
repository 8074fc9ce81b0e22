"""The hf engine's batch size per work shape: sized from the longest row, halved when the GPU runs
out of memory, never at the cost of a request.

A *shape* is the path a batch takes (``generate``: the decoding loop with its KV cache;
``score``: one forward without a cache) and the power-of-two bucket of the longest row of the
call (prompt + ``max_tokens``, or prompt + continuation). Its batch starts at:

- ``batch_size=N``: N for every shape;
- ``batch_size=auto`` on a CPU: 16;
- ``batch_size=auto`` on CUDA: the largest grid value (``hf.AUTO_BATCH_GRID``) whose rows of the
  bucket's length fit in 80 % of the free memory measured once at load (the probe's bytes per
  row-token times the bucket, plus each row's float32 logits). At 1,024 tokens this is the
  ``batch_size_auto`` of the fingerprint.

When a batch runs out of GPU memory (``torch.OutOfMemoryError``, or a RuntimeError saying so),
the failed batch's tensors are released (its exception's frames cleared, ``gc``,
``torch.cuda.empty_cache()``), the batch is halved and the same rows run again (accelerate's
``find_executable_batch_size``), down to one row; only a single row that still does not fit is
a request error. The halved size is kept for that shape: later batches of it start there.
``summary()`` (run.json ``batch_sizing``) lists each shape's start, its current size and the
halvings.
"""

from __future__ import annotations

import gc
import traceback
from dataclasses import dataclass, field
from typing import Any

MIN_BUCKET = 64


def is_oom(e: BaseException) -> bool:
    """Whether ``e`` is the device running out of memory."""
    return type(e).__name__ == "OutOfMemoryError" or (isinstance(e, RuntimeError) and "out of memory" in str(e).lower())


def drop_frames(e: BaseException) -> None:
    """Let the tensors the failed call held go: an exception's traceback keeps every frame it
    passed through alive, and with them the batch's KV cache and activations."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if e.__traceback__ is not None:
            traceback.clear_frames(e.__traceback__)
            e.__traceback__ = None
        e = e.__cause__ or e.__context__  # type: ignore[assignment]


def release(e: BaseException, torch: Any, device: str) -> None:
    """Free what a batch that ran out of memory held before the next try."""
    drop_frames(e)
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def bucket(tokens: int) -> int:
    """The smallest power of two >= ``tokens`` (at least MIN_BUCKET)."""
    b = MIN_BUCKET
    while b < tokens:
        b *= 2
    return b


@dataclass
class BatchSizer:
    """Batch sizes per shape (module docstring). ``fixed``: the batch for every shape when no
    memory measurement sizes it (a number, or auto on a CPU); else ``grid_rows(free, bytes)``
    sizes each shape from ``free`` bytes and ``per_token`` / ``per_row`` bytes."""

    fixed: int | None
    free: float = 0.0
    per_token: float = 0.0
    per_row: float = 0.0
    grid_rows: Any = None  # hf.auto_batch_rows
    caps: dict[str, int] = field(default_factory=dict)
    starts: dict[str, int] = field(default_factory=dict)
    halvings: list[dict[str, Any]] = field(default_factory=list)

    def key(self, path: str, longest: int) -> str:
        return f"{path} <= {bucket(longest)} tokens"

    def start(self, key: str) -> int:
        got = self.starts.get(key)
        if got is None:
            if self.fixed is not None:
                got = max(1, int(self.fixed))
            else:
                tokens = int(key.rsplit("<= ", 1)[1].split()[0])
                got = self.grid_rows(self.free, self.per_token * tokens + self.per_row)
            self.starts[key] = got
        return got

    def cap(self, key: str) -> int:
        """The batch for ``key`` now: its start, or the size it was halved to."""
        return self.caps.get(key) or self.start(key)

    def halve(self, key: str, size: int) -> int:
        """A batch of ``size`` rows of ``key`` ran out of memory: the size to retry with (and to
        start later batches of ``key`` with)."""
        new = max(1, size // 2)
        self.caps[key] = min(self.cap(key), new)
        self.halvings.append({"shape": key, "from": size, "to": new})
        return new

    def summary(self) -> dict[str, Any]:
        """run.json ``batch_sizing``: per shape its start and current batch, and every halving."""
        shapes = {k: {"start": v, "now": self.cap(k)} for k, v in sorted(self.starts.items())}
        return {"shapes": shapes, "halvings": list(self.halvings)}
