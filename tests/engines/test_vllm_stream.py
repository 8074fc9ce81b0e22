"""engines/vllm_stream.py against a scripted LLMEngine (no vLLM needed): the order jobs reach
vLLM's queue, the phases, jobs that join while the stream runs, and failures of one job."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field

import pytest

from auditlang.engines import vllm_stream


VLLM = types.SimpleNamespace(TokensPrompt=lambda prompt_token_ids: prompt_token_ids)  # stream's ``vllm`` argument


@pytest.fixture(autouse=True)
def fake_vllm(monkeypatch):
    """The one vLLM name the stream imports itself."""
    mod = types.ModuleType("vllm.sampling_params")
    mod.RequestOutputKind = types.SimpleNamespace(FINAL_ONLY="final")  # type: ignore[attr-defined]
    pkg = types.ModuleType("vllm")
    pkg.sampling_params = mod  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", pkg)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", mod)


@dataclass
class Params:
    max_tokens: int = 8
    logprobs: int | None = 0
    logprob_token_ids: list | None = None
    output_kind: str = ""


@dataclass
class Job:
    prompt: list[int]
    params: Params
    name: str = ""


@dataclass
class Out:
    request_id: str
    finished: bool = True


@dataclass
class Engine:
    """First come first served, ``width`` jobs per step; a job finishes after max_tokens steps.
    ``log``: ("add", name) and ("step", names in the step). ``labels``: (params id, prompt) -> name."""

    width: int = 4
    reject: set = field(default_factory=set)
    labels: dict = field(default_factory=dict)
    log: list = field(default_factory=list)
    waiting: list = field(default_factory=list)
    running: dict = field(default_factory=dict)
    names: dict = field(default_factory=dict)

    def add_request(self, rid, prompt, params):
        name = self.labels[id(params), tuple(prompt)]
        if name in self.reject:
            raise ValueError(f"{name}: impossible parameter")
        self.log.append(("add", name))
        self.names[rid] = name
        self.waiting.append((rid, params.max_tokens))

    def step(self):
        while self.waiting and len(self.running) < self.width:
            rid, left = self.waiting.pop(0)
            self.running[rid] = left
        self.log.append(("step", sorted(self.names[r] for r in self.running)))
        out = []
        for rid in list(self.running):
            self.running[rid] -= 1
            if self.running[rid] == 0:
                del self.running[rid]
                out.append(Out(rid))
        return out

    def has_unfinished_requests(self):
        return bool(self.waiting or self.running)

    def abort_request(self, rids):
        for r in rids:
            self.running.pop(r, None)


def _run(jobs, *, mixed_ok, more=None, width=4, reject=()):
    everything = list(jobs) + [j for batch in (more or {}).values() for j in batch]
    eng = Engine(width=width, reject=set(reject), labels={(id(j.params), tuple(j.prompt)): j.name for j in everything})
    llm = types.SimpleNamespace(llm_engine=eng)
    calls = []

    def ask(idle):
        calls.append(idle)
        steps = sum(1 for e in eng.log if e[0] == "step")
        return (more or {}).pop(steps, []) if not idle else (more or {}).pop("idle", [])

    done = [(j.name, isinstance(o, Exception)) for j, o in
            vllm_stream.stream(llm, VLLM, jobs, mixed_ok=mixed_ok, more=ask if more is not None else None)]
    return eng.log, done, calls


def window(name, p):
    return Job([p], Params(max_tokens=1, logprobs=200), name)


def answer(name, p, n=3):
    return Job([p], Params(max_tokens=n), name)


def ids(name, p):
    return Job([p], Params(max_tokens=1, logprobs=None, logprob_token_ids=[1, 2]), name)


def adds(log):
    return [e[1] for e in log if e[0] == "add"]


def test_mrv2_queues_the_rest_right_behind_the_windows_no_drained_batch_between():
    jobs = [answer("a1", 5), window("w1", 5), answer("a2", 3), window("w2", 3)]
    log, done, _ = _run(jobs, mixed_ok=True)
    assert adds(log) == ["w2", "w1", "a2", "a1"]  # windows first, each sorted by prompt
    assert log.index(("add", "a1")) < next(i for i, e in enumerate(log) if e[0] == "step")  # all queued at once
    assert sorted(n for n, _ in done) == ["a1", "a2", "w1", "w2"]


def test_mrv1_streams_windows_then_the_rest_then_logprob_token_ids():
    jobs = [answer("a1", 5), window("w1", 5), ids("c1", 5), window("w2", 3)]
    log, done, _ = _run(jobs, mixed_ok=False)
    first_answer = log.index(("add", "a1"))
    assert all(e[1] in (["w1", "w2"], ["w2"], ["w1"], []) for e in log[:first_answer] if e[0] == "step")
    assert adds(log) == ["w2", "w1", "a1", "c1"]
    steps_with_ids = [e[1] for e in log if e[0] == "step" and "c1" in e[1]]
    assert steps_with_ids and all(s == ["c1"] for s in steps_with_ids)  # never beside a window or answer
    assert len(done) == 4


def test_jobs_joining_the_stream_run_beside_it_and_late_windows_wait_for_the_answers():
    jobs = [answer("a1", 1, n=4), answer("a2", 2, n=4)]
    late = {1: [answer("f1", 9, n=2), window("fw", 9)], "idle": [answer("g1", 7, n=1)]}
    log, done, calls = _run(jobs, mixed_ok=True, more=late, width=8)
    f1 = log.index(("add", "f1"))
    assert f1 < log.index(("add", "fw"))
    assert any(e[0] == "step" and {"a1", "f1"} <= set(e[1]) for e in log)  # the follow-up joined the running batch
    fw_steps = [e[1] for e in log if e[0] == "step" and "fw" in e[1]]
    assert fw_steps and all(s == ["fw"] for s in fw_steps)  # the late window ran after the answers drained
    assert True in calls and [n for n, _ in done].count("g1") == 1  # asked when idle, and ran what came
    assert sorted(n for n, _ in done) == ["a1", "a2", "f1", "fw", "g1"]


def test_a_job_vllm_rejects_fails_alone():
    jobs = [answer("a1", 1), answer("bad", 2), window("w1", 3)]
    log, done, _ = _run(jobs, mixed_ok=True, reject={"bad"})
    assert ("bad", True) in done and ("a1", False) in done and ("w1", False) in done


def test_phases_groups_the_plain_scripts_calls_in_phase_order():
    """The benchmarks' plain vLLM script: one ``llm.generate`` per phase, jobs in the given order."""
    jobs = [answer("a1", 5), ids("c1", 5), window("w1", 5), answer("a2", 3), window("w2", 3)]
    names = lambda groups: [[j.name for j in g] for g in groups]  # noqa: E731
    assert names(vllm_stream.phases(jobs, mixed_ok=True)) == [["w1", "w2"], ["a1", "c1", "a2"]]
    assert names(vllm_stream.phases(jobs, mixed_ok=False)) == [["w1", "w2"], ["a1", "a2"], ["c1"]]
    assert vllm_stream.phases([], mixed_ok=True) == []
