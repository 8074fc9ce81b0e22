"""The engine protocol: one small interface every backend implements.

The planner never imports this package's engine modules; the runner loads one engine per
model through :func:`auditlang.engines.registry.load_engine`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from auditlang.core.errors import EXIT, AuditlangError
from auditlang.core.requests import Request, Result


@dataclass(frozen=True)
class ModelConfig:
    """What an engine needs to know about one declared model (from the resolved spec)."""

    name: str  # the spec's name for the model
    engine: str  # "hf" | "vllm" | "openai" | "dryrun"
    path: str  # local path, hub id, embedded short name, or served model name
    dtype: str = "auto"  # "auto" | "float32" | "bfloat16" | "float16"
    chat: bool = True  # apply the chat template (False: base model, raw text)
    device: str = "auto"  # hf: "cpu" | "cuda" | "cuda:N" | "auto"
    batch_size: int | str = 16  # or "auto" (the hf engine resolves it at load; see HFEngine)
    revision: str | None = None
    options: dict[str, Any] = field(default_factory=dict)  # engine-specific (base_url, max_logprobs, ...)


class EngineError(AuditlangError):
    """A user-facing engine problem (missing package, unreachable server, unknown model)."""

    exit_code = EXIT["runtime"]


ProgressHook = Callable[[float], None]
"""The executor's progress callback: called with the requests' worth of work an engine just
finished inside the current ``run`` call (fractions allowed: one sample of a request with n
samples is 1/n; a request whose forward rows are split over batches counts 1/rows per row)."""


def report_progress(engine: object, units: float) -> None:
    """Tell the executor ``units`` requests' worth of work finished (no-op when no hook is set).
    Engines call this per engine batch or per finished request/sample, so progress moves while a
    commit batch is still running (docs/engines.md, "Progress"). Thread-safe on the executor side."""
    hook = getattr(engine, "progress_hook", None)
    if hook is not None and units:
        hook(units)


class Feed:
    """The requests of one ``run`` call of a streaming engine (``streams = True``), which may
    grow while the call runs: the executor adds follow-ups built from results already yielded
    (stage 2 from stage-1 answers), so they reach the engine while it still serves stage 1.

    Iterating a feed takes the requests it holds now, so an engine that reads ``run``'s argument
    once (``list(requests)``) serves them and the executor hands the rest to a further call. A
    streaming engine instead calls :meth:`take` whenever it can accept more, and :meth:`refill`
    when it has nothing left in flight: the consumer then commits the results it holds, builds
    their follow-ups and adds them. Single-threaded: every call happens inside ``run``'s
    generator or between its results.
    """

    def __init__(self, requests: Iterable[Request] = (), refill: Callable[[], None] | None = None) -> None:
        self._new: list[Request] = list(requests)
        self._refill = refill

    def __iter__(self) -> Iterator[Request]:
        return iter(self.take())

    def take(self) -> list[Request]:
        """The requests added since the last take (and removes them from the feed)."""
        out, self._new = self._new, []
        return out

    def add(self, requests: Iterable[Request]) -> None:
        self._new.extend(requests)

    def refill(self) -> bool:
        """Ask the consumer for more work (it commits what it was yielded and adds the follow-ups);
        True when the feed now holds requests."""
        if self._refill is not None and not self._new:
            self._refill()
        return bool(self._new)


def streams(engine: object) -> bool:
    """Whether ``engine`` declares ``streams = True``: it takes a whole call at once, as a
    :class:`Feed`, and yields results as they finish (vLLM)."""
    return getattr(engine, "streams", False) is True


@runtime_checkable
class Engine(Protocol):
    """A loaded model that executes requests.

    ``capabilities`` lists the request kinds it can serve (see ``REQUEST_KINDS``).
    ``fingerprint`` identifies everything that can change results (engine name and version,
    model path and revision, dtype, device class, padding side...); the store keys its cache
    by request id + fingerprint hash.
    ``run`` executes a batch and yields one Result per request (any order; request_id set).
    A request the model fails on yields a Result with ``error`` set; it must not raise.
    An engine that declares ``streams = True`` gets each call's requests as a :class:`Feed`, to
    which the executor adds follow-ups while the call runs; it may take them (vLLM does) or
    leave them to a further call.

    Progress (optional, not part of the runtime check): an engine that declares the attribute
    ``progress_hook: ProgressHook | None = None`` gets it set by the executor for the duration of
    each ``run`` call, and calls :func:`report_progress` (``report_progress(self, n)``) as work
    finishes inside the call: per forward batch (hf scoring), per finished sample (hf
    generation), per finished request (openai), per finished vLLM request output. Results
    yielded by ``run`` advance the count too; the engine's reports only let it move earlier.
    """

    config: ModelConfig

    def capabilities(self) -> frozenset[str]: ...

    def fingerprint(self) -> dict[str, Any]: ...

    def run(self, requests: Iterable[Request]) -> Iterator[Result]: ...

    def close(self) -> None: ...
