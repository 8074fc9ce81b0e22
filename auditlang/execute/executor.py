"""Execute requests on one engine, journaling every result so a run can always resume.

Input: a loaded engine, the requests of one stage, the run's :class:`Journal`.
Output: results committed to the journal, and an :class:`ExecStats` summary.

The executor deduplicates requests by id, skips every request already committed for the
engine's fingerprint, and runs the rest through ``engine.run`` in *commit batches*: each batch's
results are committed in one transaction, in order, on the call's writer thread
(:mod:`auditlang.execute.writer`: the caller goes back to the engine while a commit's fsync runs), so
a ``kill -9`` loses at most the batch in flight and the few commits still queued (see
docs/outputs.md); the call returns once every write is on disk. The engine may batch further internally. Calling it again with the same
requests executes nothing, so the runner calls it once per stage without bookkeeping.

Order of execution: requests left to run are sorted (stably, so plan order breaks ties) by the
engine's optional hook ``sort_key(request)``, by default the request kind (homogeneous batches).
The hf engine's key puts ``choice_logprobs`` and ``generate`` requests of the same prompt next
to each other, so they land in one commit batch and share one prefill, and orders prompts by
length, so commit batches carry little padding (see auditlang/engines/hf.py). With such a hook,
a commit batch does not end between requests of equal keys (for hf: of one prompt): it grows
past ``batch_size`` until the key changes, by at most another ``batch_size`` requests. Where
batches end does not matter for resuming (each batch commits on its own; a rerun cuts the
requests still missing afresh).

Engines that declare ``streams = True`` (the vLLM engine) get the whole call in one ``run``
and yield results as they finish; the executor commits them every ``batch_size`` results, so
the engine's scheduler stays full and a ``kill -9`` still loses only uncommitted results.

Follow-ups (``followups=``, the runner's stage 2): after every commit the executor asks for the
requests built from the results just committed, and runs them in the same call. A streaming
engine gets its requests as a :class:`~auditlang.core.engine.Feed` and takes them while it
still serves the others; when it has nothing in flight it asks the feed to refill, and the
executor commits what it holds so the last answers' follow-ups are built too. Any other engine
runs them in further commit batches. Results stored before the call (a rerun) are handed to
``followups`` first, so their follow-ups are built from the journal.

Engines with a ``work_counters()`` hook (cumulative integer counters, e.g. the hf engine's
generation counters: forwards, prefilled prompts, row-steps, tokens) have the counters' change
over the call reported as ``ExecStats.engine_work``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from rich.console import Console

from auditlang.core.engine import Engine, EngineError, Feed, streams
from auditlang.execute.progress import ExecProgress
from auditlang.execute.writer import Writer
from auditlang.core.requests import Request, Result
from auditlang.store.journal import Journal
from auditlang.store.shards import Shard

__all__ = ["ExecStats", "commit_batches", "default_batch_size", "execute", "execution_order"]


@dataclass(frozen=True)
class ExecStats:
    """What one :func:`execute` call did. ``requested`` counts unique ids (after sharding)."""

    model: str
    fp_hash: str
    requested: int
    cached: int  # already committed (successes, plus failures when not retried)
    cached_errors: int  # of ``cached``: stored failures not retried (pass retry_errors=True)
    executed: int
    errors: int  # of ``executed``: results with ``error`` set
    seconds: float
    out_of_shard: int = 0  # unique requests left to other shards
    from_cache: int = 0  # of ``cached``: copied from the shared response cache (``cache=``)
    engine_work: dict[str, int] | None = None  # change of the engine's ``work_counters()`` (None: no hook)
    first_error: str = ""  # "request id: message" of the first failure executed (else kept) by this call

    def summary(self) -> str:
        text = (
            f"{self.model}: {self.requested} requests, {self.cached} cached, {self.executed} executed "
            f"({self.errors} errors) in {self.seconds:.1f}s"
        )
        if self.cached_errors:
            text += f"; {self.cached_errors} earlier failures kept (retry with retry_errors)"
        if self.out_of_shard:
            text += f"; {self.out_of_shard} left to other shards"
        if self.from_cache:
            text += f"; {self.from_cache} from the response cache"
        return text


def default_batch_size(engine: Engine) -> int:
    """Commit batch when none is given: the engine's ``call_size`` when it declares one (the
    requests it serves best in one call, e.g. the vLLM engine's chunk, so continuous batching
    is not cut into small calls), else 4 engine batches, at least 32 and at most 512 requests."""
    if streams(engine):
        return 256  # results per commit while the engine streams the whole call
    call = getattr(engine, "call_size", None)
    if isinstance(call, int) and not isinstance(call, bool) and call >= 1:
        return call
    engine_batch = getattr(getattr(engine, "config", None), "batch_size", 16)
    if not isinstance(engine_batch, int) or isinstance(engine_batch, bool) or engine_batch < 1:
        engine_batch = 16  # "auto" left unresolved by an engine that schedules its own batches
    return max(32, min(512, 4 * engine_batch))


def execute(
    engine: Engine,
    requests: Iterable[Request],
    journal: Journal,
    *,
    batch_size: int | None = None,
    progress: bool | str = True,
    shard: Shard | None = None,
    retry_errors: bool = False,
    description: str | None = None,
    console: Console | None = None,
    cache: Journal | None = None,
    followups: Callable[[list[Result]], Iterable[Request]] | None = None,
    whole=None,
) -> ExecStats:
    """Run every request not yet committed for ``engine``'s fingerprint; commit batch by batch.

    ``shard``: run only that shard's requests (see :class:`~auditlang.store.shards.Shard`) and
    label their rows. ``retry_errors``: re-run requests whose stored result is a failure.
    Raises :class:`EngineError` when the engine cannot serve a request kind or fails mid-run
    (committed batches stay; rerunning resumes), ``ValueError`` for requests of another model.
    A ``KeyboardInterrupt`` commits the results already returned, then propagates.
    ``progress``: a display of :mod:`auditlang.execute.progress` (``auto``/True, ``rich``,
    ``plain``, ``none``/False); it advances per result and, for engines with a
    ``progress_hook`` attribute, per engine batch inside a commit batch.
    ``cache``: a response cache shared across run directories (a journal of its own, keyed the
    same way): successful results stored there under this engine's fingerprint are copied into
    ``journal`` instead of executed, and every new result is added to it.
    ``whole``: this call's place in the run's progress (``progress.stage_slot``), whose
    whole-run line follows this call's lines.
    ``followups(results)``: the requests built from committed results (stage 2 from stage 1),
    called with the stored results of the requests not executed, then after every commit; new
    ones run in this same call (a streaming engine takes them while it still serves the
    others, through a :class:`~auditlang.core.engine.Feed`) and count in the returned stats.
    """
    t0 = time.perf_counter()
    if batch_size is None:
        batch_size = default_batch_size(engine)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    first: dict[str, Request] = {}
    for r in requests:
        first.setdefault(r.id, r)
    unique = list(first.values())
    selected = shard.select(unique) if shard is not None else unique
    _check_requests(engine, selected)
    call = _Call(engine, journal, cache=cache, label=shard.label if shard is not None else None,
                 retry_errors=retry_errors, followups=followups)
    work = call.run(selected, batch_size, lambda total: ExecProgress(
        total, description or call.model, enabled=progress, console=console, grows=followups is not None, whole=whole))
    n = call.n
    return ExecStats(
        model=call.model, fp_hash=call.fp_hash, requested=n["requested"], cached=n["cached"],
        cached_errors=n["cached_errors"], executed=n["executed"], errors=n["errors"],
        seconds=time.perf_counter() - t0, out_of_shard=len(unique) - len(selected), from_cache=n["from_cache"],
        engine_work=work, first_error=call.first_new or call.kept_error,
    )


class _Call:
    """The state of one :func:`execute` call, in named steps: :meth:`admit` (what is left to run),
    :meth:`grow` (follow-ups), :meth:`commit` (store results), :meth:`run` (the commit batches)."""

    def __init__(self, engine: Engine, journal: Journal, *, cache: Journal | None, label: str | None,
                 retry_errors: bool, followups: Callable[[list[Result]], Iterable[Request]] | None) -> None:
        self.engine, self.journal, self.cache, self.label = engine, journal, cache, label
        self.retry_errors, self.followups = retry_errors, followups
        self.model = engine.config.name
        fingerprint = engine.fingerprint()
        self.fp_hash = journal.register_engine(fingerprint, self.model)
        if cache is not None:
            cache.register_engine(fingerprint, self.model)  # the same hash: one fingerprint rule
        self.n = {"requested": 0, "cached": 0, "cached_errors": 0, "from_cache": 0, "executed": 0, "errors": 0,
                  "todo": 0}
        self.kept_error = self.first_new = ""  # the first stored failure kept; this call's first failure
        self.seen: set[str] = set()
        self.bar: ExecProgress | None = None
        self.writer: Writer | None = None  # the call's journal writes, on their own thread (run)

    def _put(self, which: str, method: str, *args: Any, **kw: Any) -> None:
        """One journal (``which="journal"``) or cache write, through the writer when it runs."""
        if self.writer is not None:
            self.writer.put(which, method, *args, **kw)
        else:
            getattr(self.journal if which == "journal" else self.cache, method)(*args, **kw)

    def admit(self, reqs: list[Request]) -> tuple[list[Request], list[Result]]:
        """(requests to run, stored results of the others) of ``reqs`` not seen before in this
        call: skips what is committed for the fingerprint (failures too, unless
        ``retry_errors``) and copies hits from the response cache."""
        journal, fp_hash, n = self.journal, self.fp_hash, self.n
        n["requested"] += len(reqs)
        committed = journal.committed([r.id for r in reqs], fp_hash)
        retry = self.retry_errors
        todo = [r for r in reqs if r.id not in committed or (retry and committed[r.id])]
        stored_ids = [r.id for r in reqs if r.id in committed and not (retry and committed[r.id])]
        if not retry:
            failed = [rid for rid, bad in committed.items() if bad]
            n["cached_errors"] += len(failed)
            if failed and not self.kept_error:
                kept = journal.failures(failed[:1], fp_hash)
                self.kept_error = next((f"{rid}: {msg}" for rid, msg in kept.items()), "")
        hits = self._from_cache(todo)
        todo = [r for r in todo if r.id not in hits]
        n["cached"] += len(reqs) - len(todo)
        if todo:
            self._put("journal", "put_requests", list(todo), fp_hash)
            if self.cache is not None:
                self._put("cache", "put_requests", list(todo), fp_hash)
        stored = list(hits.values())
        if self.followups is not None and stored_ids:  # their follow-ups are built from what is stored
            stored += list(journal.get_many(stored_ids, fp_hash).values())
        return todo, stored

    def _from_cache(self, todo: list[Request]) -> dict[str, Result]:
        """The response cache's successful results for ``todo``, copied into the journal."""
        if self.cache is None or not todo:
            return {}
        hits = {k: v for k, v in self.cache.get_many([r.id for r in todo], self.fp_hash).items() if v.error is None}
        if hits:
            self._put("journal", "put_requests", [r for r in todo if r.id in hits], self.fp_hash)
            self._put("journal", "put_results", list(hits.values()), self.fp_hash, shard=self.label)
            self.n["from_cache"] += len(hits)
        return hits

    def grow(self, results: list[Result]) -> list[Request]:
        """Follow-ups of ``results`` (and of the stored results they lead to) not yet seen."""
        out: list[Request] = []
        while results and self.followups is not None:
            new = [r for r in {q.id: q for q in self.followups(results)}.values() if r.id not in self.seen]
            self.seen.update(r.id for r in new)
            _check_requests(self.engine, new)
            todo, results = self.admit(new)
            out += todo
        return out

    def commit(self, results: list[Result]) -> list[Request]:
        """Commit ``results``; returns the follow-ups built from them, admitted to run."""
        self._put("journal", "put_results", list(results), self.fp_hash, shard=self.label)
        if self.cache is not None:
            self._put("cache", "put_results", [r for r in results if r.error is None], self.fp_hash)
        self.n["executed"] += len(results)
        self.n["errors"] += sum(r.error is not None for r in results)
        if not self.first_new:
            self.first_new = next((f"{r.request_id}: {r.error}" for r in results if r.error is not None), "")
        more = self.grow(results)
        if more:
            if self.bar is not None:
                self.bar.grow(len(more))
            self.n["todo"] += len(more)
        return more

    def run(self, selected: list[Request], batch_size: int,
            display: Callable[[int], ExecProgress]) -> dict[str, int] | None:
        """Run what is left of ``selected`` and its follow-ups, commit batch by commit batch;
        returns the change of the engine's ``work_counters()`` (None: it has none)."""
        engine = self.engine
        counters = getattr(engine, "work_counters", None)
        before = counters() if callable(counters) else None
        self.writer = Writer(self.journal, self.cache)
        try:
            self._batches(selected, batch_size, display)
        except BaseException:
            self._close_writer(quiet=True)
            raise
        self._close_writer()
        if before is None:
            return None
        after = counters()  # type: ignore[misc]
        return {k: int(after[k]) - int(before.get(k, 0)) for k in after}

    def _batches(self, selected: list[Request], batch_size: int, display: Callable[[int], ExecProgress]) -> None:
        engine = self.engine
        self.seen.update(r.id for r in selected)
        todo, stored = self.admit(selected)
        todo = execution_order(engine, todo + self.grow(stored))
        self.n["todo"] = len(todo)
        streaming = streams(engine)
        calls = [(0, len(todo))] if streaming and todo else list(commit_batches(engine, todo, batch_size))
        with display(len(todo)) as self.bar:
            while calls:
                start, end = calls.pop(0)
                batch = todo[start:end]
                self.bar.begin_batch(len(batch))
                try:
                    more = _run_batch(engine, batch, self.bar, self.commit,
                                      commit_every=batch_size if streaming else len(batch))
                except _BatchFailed as failed:
                    self.fail(failed)
                if more:  # follow-ups the engine did not take in its call: run them now
                    more = execution_order(engine, more)
                    base = len(todo)
                    todo += more
                    calls += ([(base, len(todo))] if streaming else
                              [(base + a, base + b) for a, b in commit_batches(engine, more, batch_size)])

    def _close_writer(self, quiet: bool = False) -> None:
        """Wait for the call's writes (every result handed over is on disk when it returns) and
        stop the writer; ``quiet``: on the way out of another failure, keep that one."""
        writer, self.writer = self.writer, None
        if writer is None:
            return
        try:
            writer.close()
        except BaseException:
            if not quiet:
                raise

    def fail(self, failed: "_BatchFailed") -> NoReturn:
        """Commit what a failed batch returned, then raise its cause, saying how far the call got."""
        self.commit(failed.results)
        if self.writer is not None:
            self.writer.drain()  # "committed" below means on disk
        done = f"{self.n['executed']}/{self.n['todo']} requests of this call committed"
        cause = failed.cause
        if isinstance(cause, KeyboardInterrupt):
            raise cause  # the interrupt itself, not a new error
        if isinstance(cause, EngineError):
            raise EngineError(f"engine for model {self.model!r} failed: {cause} ({done}; rerun to resume)",
                              hint=cause.hint) from cause
        cause.add_note(f"auditlang: while executing requests of model {self.model!r}; {done}; rerun to resume")
        raise cause  # the engine's own exception, annotated, not a new error


def commit_batches(engine: Engine, todo: Sequence[Request], batch_size: int) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each commit batch of ``todo`` (already in execution order): runs of
    ``batch_size`` requests; with an engine ``sort_key`` hook a batch is extended while the next
    request's key equals its last one's (requests that share a prompt stay in one ``run``
    call), by at most ``batch_size`` more."""
    hook = getattr(engine, "sort_key", None)
    start = 0
    while start < len(todo):
        end = min(start + batch_size, len(todo))
        if callable(hook) and end < len(todo):
            last, limit = hook(todo[end - 1]), min(start + 2 * batch_size, len(todo))
            while end < limit and hook(todo[end]) == last:
                end += 1
        yield start, end
        start = end


def execution_order(engine: Engine, requests: Sequence[Request]) -> list[Request]:
    """``requests`` sorted by the engine's ``sort_key(request)`` hook, else by kind; the sort is
    stable, so requests with equal keys keep plan order."""
    hook = getattr(engine, "sort_key", None)
    key: Callable[[Request], Any] = hook if callable(hook) else (lambda r: r.kind)
    return sorted(requests, key=key)


def _check_requests(engine: Engine, requests: Sequence[Request]) -> None:
    model = engine.config.name
    others = sorted({r.model for r in requests} - {model})
    if others:
        raise ValueError(
            f"execute() got requests for model(s) {others} but the engine serves {model!r}; "
            "run each model's requests on its own engine"
        )
    caps = engine.capabilities()
    unsupported = sorted({r.kind for r in requests} - set(caps))
    if unsupported:
        raise EngineError(
            f"the {engine.config.engine!r} engine of model {model!r} cannot serve request kind(s) {unsupported}",
            hint=f"it supports {sorted(caps)}; choose a protocol that needs only those, or another engine",
        )


class _BatchFailed(Exception):
    """Internal: a batch stopped early; carries the valid results returned before the failure."""

    def __init__(self, results: list[Result], cause: BaseException) -> None:
        super().__init__(str(cause))
        self.results = results
        self.cause = cause


def _run_batch(engine: Engine, batch: list[Request], bar: ExecProgress,
               commit: Callable[[list[Result]], list[Request]], commit_every: int) -> list[Request]:
    """Run one ``engine.run`` call over ``batch``, validating each result against the engine
    contract (one per request) and committing every ``commit_every`` results as they arrive
    (an engine that streams a whole stage commits as it goes; others commit once at the end).
    A streaming engine gets a :class:`Feed`: the follow-ups each commit builds are added to it,
    and when the engine has nothing in flight it asks the feed to refill (the results yielded so
    far are committed then). Returns the follow-ups the engine did not take."""
    expected = {r.id: r for r in batch}
    got: set[str] = set()
    buffer: list[Result] = []
    stream: Iterator[Result] | None = None
    left: list[Request] = []  # follow-ups built from a non-streaming engine's results

    def flush() -> None:
        more = commit(buffer[:])
        buffer.clear()
        if feed is not None:
            for r in more:
                expected[r.id] = r
            feed.add(more)
        else:
            left.extend(more)

    feed = Feed(batch, refill=lambda: flush() if buffer else None) if streams(engine) else None
    hooked = hasattr(engine, "progress_hook")
    if hooked:
        engine.progress_hook = bar.engine_work  # type: ignore[attr-defined]
    try:
        stream = iter(engine.run(feed if feed is not None else batch))
        for res in stream:
            _check_result(engine, res, expected, got)
            got.add(res.request_id)
            buffer.append(res)
            bar.advance(1, errors=int(res.error is not None))
            if len(buffer) >= commit_every:
                flush()
        if feed is not None:
            if buffer:
                flush()
            left = feed.take()  # follow-ups the engine did not take (it read its requests once)
            for r in left:
                del expected[r.id]
        lost = [rid for rid in expected if rid not in got]
        if lost:
            raise EngineError(
                f"engine returned no result for {len(lost)} of {len(expected)} requests (first: {lost[0]})",
                hint="an engine must yield exactly one Result per request (with error set on failure)",
            )
    except BaseException as e:  # KeyboardInterrupt included: keep what finished
        raise _BatchFailed(buffer, e) from e
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
        if hooked:
            engine.progress_hook = None  # type: ignore[attr-defined]
    if buffer:
        flush()
    return left


def _check_result(engine: Engine, res: object, expected: dict[str, Request], got: set[str]) -> None:
    if not isinstance(res, Result):
        raise EngineError(f"engine yielded {type(res).__name__}, not a Result")
    req = expected.get(res.request_id)
    if req is None:
        raise EngineError(f"engine returned a result for request {res.request_id!r}, which was not in the batch")
    if res.request_id in got:
        raise EngineError(f"engine returned two results for request {res.request_id!r}")
    if res.kind != req.kind:
        raise EngineError(f"engine returned a {res.kind!r} result for the {req.kind!r} request {res.request_id!r}")
