"""Feed vLLM a whole stage and hand back each request's output as soon as it finishes.

``LLM.generate`` returns only when its last request is done, so feeding it in chunks turns
every chunk into a barrier that drains vLLM's continuous batch. Instead, :func:`stream` adds
the jobs with ``LLMEngine.add_request`` (``RequestOutputKind.FINAL_ONLY``, as ``LLM.generate``
sets it) and drives ``LLMEngine.step()`` itself, the loop ``LLM._run_engine`` runs (vLLM
0.26-0.33), yielding ``(job, RequestOutput)`` per finished job. At most ``max_in_flight`` jobs
sit in vLLM at once (default: all), topped up as jobs finish, so the scheduler stays full.

Jobs go in sorted by prompt tokens, so requests of one prompt (and prompts sharing a prefix,
e.g. one few-shot context) are adjacent and reach vLLM's prefix cache together.

Phases: vLLM computes a step's top-k logprobs at the widest k of any request in the step, for
every row (``max_num_logprobs`` in both model runners), so one-token top-k windows (logprobs=200)
run first: mixed into decoding they made every decoding step of the stage pay for a 200-wide
top-k (H100, study-000 design: 188 s for stage 1 instead of ~50 s). On Model Runner V2 the rest
is queued right behind them (vLLM serves its queue first come first served, so only the steps
where the windows end mix the two, and the batch is never drained between them). On Model
Runner V1 the windows are a phase of their own, streamed whole before the rest, and a batch step
that holds any ``logprob_token_ids`` request gives those ids batch-wide precedence over plain
``logprobs=k`` windows (shared/notes/vllm.md §1.5), so those requests run as a third phase.

Jobs may join while the stream runs (``more``): the engine builds them from the follow-ups the
executor adds to its feed (stage 2 beside the rest of stage 1). A job of the running phase is
added at once; one of another phase waits until the running phase drains.

A job vLLM rejects when it is added (an impossible parameter) fails alone: ``(job, exception)``.
A failure inside ``step()`` is the engine's, not a request's: it propagates after the jobs in
flight are aborted. Closing the generator early (interrupt, consumer error) aborts them too.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from auditlang.core.engine import EngineError

_IDS = itertools.count()


class Job(Protocol):
    prompt: list[int]
    params: Any


def _is_window(job: Job) -> bool:
    """A one-token top-k window request (a first-token or choice window)."""
    p = job.params
    return p.max_tokens == 1 and bool(p.logprobs) and not getattr(p, "logprob_token_ids", None)


def phases(jobs: Sequence[Job], mixed_ok: bool) -> list[list[Job]]:
    """The jobs grouped by :func:`phase_of`, in phase order, each in the given order: the plain
    vLLM script of the benchmarks runs one ``llm.generate`` per group, one after the other."""
    groups: list[list[Job]] = [[], [], []]
    for j in jobs:
        groups[phase_of(j, mixed_ok)].append(j)
    return [g for g in groups if g]


def phase_of(job: Job, mixed_ok: bool) -> int:
    """The phase a job runs in: 0 one-token top-k windows (vLLM computes a step's top-k at the
    batch's widest k for every row, so a window mixed into decoding steps makes every row of every
    step pay for it), 1 the rest; on Model Runner V1 (``mixed_ok`` False) 2 the
    ``logprob_token_ids`` requests, on their own."""
    if _is_window(job):
        return 0
    return 2 if not mixed_ok and getattr(job.params, "logprob_token_ids", None) else 1


def stream(llm: Any, vllm: Any, jobs: Sequence[Job], *, mixed_ok: bool, max_in_flight: int | None = None,
           on_fail: Callable[[BaseException], None] | None = None,
           more: Callable[[bool], Sequence[Job]] | None = None) -> Iterator[tuple[Job, Any]]:
    """``(job, RequestOutput | Exception)`` for every job, in finishing order.

    ``more(idle)``: further jobs, asked after every engine step (``idle`` False) and whenever
    nothing is in flight (``idle`` True: the consumer may first turn the outputs it was given
    into follow-up jobs). A job of the running phase joins it at once; a job of another phase
    waits until the running phase drains (a one-token window arriving while answers decode
    runs after them, not beside them). The stream ends when nothing is in flight or waiting and
    ``more(True)`` has nothing to add."""
    from vllm.sampling_params import RequestOutputKind  # lazy: vLLM only when a model runs

    engine = llm.llm_engine
    held: list[Job] = list(jobs)
    while True:
        if not held and more is not None:
            held = list(more(True))
        if not held:
            return
        first = min(phase_of(j, mixed_ok) for j in held)
        # On Model Runner V2 the windows and the rest start as one queue, windows first: vLLM
        # schedules first come first served, so they share steps only where one ends and the
        # other begins, and no drained batch waits between them. Jobs that join later join the
        # phase of the queue's tail; a window arriving while answers decode waits for them.
        starts = (0, 1) if mixed_ok and first == 0 else (first,)
        queue: deque[Job] = deque(j for p in starts for j in sorted((j for j in held if phase_of(j, mixed_ok) == p),
                                                                    key=_prompt))
        cur = max(phase_of(j, mixed_ok) for j in queue)
        held = [j for j in held if phase_of(j, mixed_ok) not in starts]
        live: dict[str, Job] = {}
        limit = max_in_flight or float("inf")

        def admit(new: Sequence[Job], cur=cur, queue=queue, held=held) -> None:  # this phase's, bound now
            for job in sorted(new, key=_prompt):
                (queue if phase_of(job, mixed_ok) == cur else held).append(job)

        def top_up(live=live, limit=limit, queue=queue) -> Iterator[tuple[Job, Any]]:
            while queue and len(live) < limit:
                job = queue.popleft()
                job.params.output_kind = RequestOutputKind.FINAL_ONLY
                rid = f"al-{next(_IDS)}"
                try:
                    engine.add_request(rid, vllm.TokensPrompt(prompt_token_ids=job.prompt), job.params)
                except Exception as e:  # noqa: BLE001 - vLLM's validation: this request fails alone
                    if on_fail is not None:
                        on_fail(e)
                    yield job, e
                    continue
                live[rid] = job

        try:
            yield from top_up()
            while live or queue:
                if live:
                    try:
                        outs = engine.step()
                    except Exception as e:  # noqa: BLE001 - the engine's failure, not a request's
                        if on_fail is not None:
                            on_fail(e)  # raises for a dead engine core
                        raise EngineError(f"vLLM failed while executing requests ({type(e).__name__}: {e})",
                                          hint="see vLLM's log above; rerun `auditc run` to resume") from e
                    for out in outs:
                        if not getattr(out, "finished", False):
                            continue
                        job = live.pop(out.request_id, None)
                        if job is not None:
                            yield job, out
                    if not outs and live and not engine.has_unfinished_requests():
                        lost = list(live.values())
                        live.clear()
                        for job in lost:  # vLLM dropped them: a failure of each, never an answer
                            yield job, RuntimeError("vLLM finished without returning this request's output")
                if more is not None:
                    admit(more(False))
                    if not live and not queue:
                        admit(more(True))
                yield from top_up()
        finally:
            if live:
                try:
                    engine.abort_request(list(live))
                except Exception:  # noqa: BLE001 - best effort; the engine may be dead already
                    pass


def _prompt(job: Job) -> list[int]:
    return job.prompt
