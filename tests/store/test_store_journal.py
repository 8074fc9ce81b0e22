"""The request journal: round trips, cache keys, failures, counts, schema, concurrency."""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from store_fake_engine import arc_requests, dump_results, hash_result

from auditlang.core.requests import Request, Result, Sample, TokenLogprob
from auditlang.store import Journal, JournalError, fingerprint_hash
from auditlang.store.codec import dumps, result_dict, result_json_texts

FP = {"engine": "hash", "version": "1", "path": "sha256"}
WORKER = Path(__file__).resolve().parent / "store_worker.py"
GOLDEN_FP_HASH = "f0c7621bafe57ca59"  # "f" + sha256(b'{"dtype":"float32","engine":"hf"}')[:16]


def _every_field_results() -> list[Result]:
    """Results of all five kinds that together set every Result field to a non-default value."""
    tok = TokenLogprob("é", 233, -float("inf"), {"é": -float("inf"), "\ud800": -3.5, "4": -0.01})
    return [
        Result("r_gen", "generate", samples=[Sample("4 ✓", [tok, TokenLogprob(" 4", 19, -0.25)], "length"),
                                             Sample("", [], "error")],
               meta={"latency_s": 0.5, "nested": {"a": [1, 2.5, None, True]}}),
        Result("r_choice", "choice_logprobs", choice_logprobs={"A": -0.1, "B": -2.0}, top_logprobs={"A": -0.1, " A": -3.0}),
        Result("r_cont", "continuation_logprobs", continuation=[tok]),
        Result("r_cc", "constrained_choice", choice="B"),
        Result("r_hid", "hidden_states", hidden_state=[0.0, -1.5, 3.25e-8]),
        Result("r_err", "generate", error="CUDA out of memory (simulated)"),
    ]


def test_round_trip_preserves_every_result_field(journal: Journal) -> None:
    results = _every_field_results()
    defaults = Result("x", "generate")
    for f in dataclasses.fields(Result):  # the fixture must exercise every field
        assert any(getattr(r, f.name) != getattr(defaults, f.name) for r in results), f.name
    fp = journal.register_engine(FP, "m")
    assert journal.put_results(results, fp) == len(results)
    for r in results:
        assert journal.get(r.request_id, fp) == r
    many = journal.get_many([r.request_id for r in results] + ["absent"], fp)
    assert many == {r.request_id: r for r in results}
    tok = many["r_gen"].samples[0].tokens[0]
    assert tok.logprob == -math.inf and tok.top["\ud800"] == -3.5


def test_fast_result_encoder_matches_the_contract_to_dict() -> None:
    for r in _every_field_results():
        assert result_dict(r) == r.to_dict()


def _without_tokens(d: dict) -> dict:
    return {**d, "samples": [{**s, "tokens": []} for s in d["samples"]]} if d.get("samples") is not None else d


def test_result_json_texts_cuts_the_token_lists_and_nothing_else(journal: Journal) -> None:
    """The sample browser's reader: every field but a sample's tokens as stored, from the journal's
    raw rows; text of another shape (a tokens list in meta, a sample without finish_reason, a token
    text that looks like the layout) is decoded whole or cut only where the layout is the codec's."""
    tricky = TokenLogprob('],"finish_reason":"x",', 7, -1.0, {',"tokens":[': -2.0, "finish_reason": -3.0, "meta": -4.0})
    results = _every_field_results() + [
        Result("r_tricky", "generate", samples=[Sample('say ,"tokens":[ and ],"finish_reason":', [tricky], "stop")] * 2,
               meta={"tokens": [[1, 2], [3]], "finish_reason": "meta"}),
    ]
    fp = journal.register_engine(FP, "m")
    journal.put_results(results, fp)
    rows = dict(journal.result_texts([r.request_id for r in results] + ["absent"], fp))
    assert set(rows) == {r.request_id for r in results}
    for r in results:
        got = result_json_texts(rows[r.request_id])
        assert got == _without_tokens(result_dict(r)), r.request_id
    no_finish = '{"request_id":"x","kind":"generate","samples":[{"text":"a","tokens":[{"token":"a"}]},' \
                '{"text":"b","tokens":[],"finish_reason":"stop"}],"meta":{}}'
    assert result_json_texts(no_finish) == json.loads(no_finish)  # decoded whole: no sample lost
    spaced = dumps(result_dict(results[0])).replace(',"tokens":[', ', "tokens": [')
    assert result_json_texts(spaced) == json.loads(spaced)  # another layout: not cut


def test_round_trip_of_engine_results_from_real_prompts(journal: Journal) -> None:
    reqs = arc_requests(10)
    fp = journal.register_engine(FP, "fake")
    journal.put_results([hash_result(r) for r in reqs], fp)
    assert journal.get_many([r.id for r in reqs], fp) == {r.id: hash_result(r) for r in reqs}
    assert [res.request_id for _, res in journal.iter_results(fp)] == sorted(r.id for r in reqs)


def test_requests_are_recorded_and_pending_counted(journal: Journal) -> None:
    reqs = arc_requests(5)
    fp = journal.register_engine(FP, "fake")
    assert journal.put_requests(reqs, fp) == 10
    assert journal.put_requests(reqs, fp) == 0  # idempotent
    journal.put_results([hash_result(r) for r in reqs[:4]], fp)
    c = journal.counts(fp)
    assert (c.requests, c.results, c.ok, c.errors, c.pending) == (10, 4, 4, 0, 6)
    row = journal._db.execute("SELECT request FROM requests WHERE request_id = ?", (reqs[3].id,)).fetchone()
    assert Request.from_dict(__import__("json").loads(row[0])) == reqs[3]


def test_missing_dedupes_and_skips_committed(journal: Journal) -> None:
    reqs = arc_requests(10)
    fp = journal.register_engine(FP, "fake")
    assert journal.missing(reqs + reqs[::-1], fp) == reqs
    journal.put_results([hash_result(r) for r in reqs[::2]], fp)
    assert journal.missing(reqs, fp) == reqs[1::2]
    journal.put_results([hash_result(r) for r in reqs[1::2]], fp)
    assert journal.missing(reqs, fp) == []


def test_fingerprint_change_means_re_execution(journal: Journal) -> None:
    reqs = arc_requests(4)
    fp1 = journal.register_engine(FP, "fake")
    journal.put_results([hash_result(r) for r in reqs], fp1)
    fp2 = journal.register_engine({**FP, "version": "2"}, "fake")
    assert fp2 != fp1
    assert journal.missing(reqs, fp2) == reqs
    assert journal.get(reqs[0].id, fp2) is None
    assert set(journal.fingerprints()) == {fp1, fp2}
    assert journal.fingerprints()[fp2].fingerprint == {**FP, "version": "2"}


def test_fingerprint_hash_is_order_independent_and_value_sensitive() -> None:
    assert fingerprint_hash({"a": 1, "b": [1, 2]}) == fingerprint_hash({"b": [1, 2], "a": 1})
    assert fingerprint_hash({"a": 1}) != fingerprint_hash({"a": 1.5})
    # golden value: the hash must not drift between auditlang versions (it keys every cache)
    assert fingerprint_hash({"engine": "hf", "dtype": "float32"}) == GOLDEN_FP_HASH
    with pytest.raises(TypeError, match="fingerprint must be a dict"):
        fingerprint_hash(["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cannot store a value of type object"):
        fingerprint_hash({"x": object()})


def test_errors_are_stored_counted_and_retried_only_when_asked(journal: Journal) -> None:
    reqs = arc_requests(3)
    fp = journal.register_engine(FP, "fake")
    failed = Result(reqs[0].id, reqs[0].kind, error="boom")
    journal.put_results([failed] + [hash_result(r) for r in reqs[1:]], fp)
    assert journal.get(reqs[0].id, fp).error == "boom"
    assert journal.counts(fp).errors == 1 and journal.counts(fp).ok == 5
    assert journal.missing(reqs, fp) == []
    assert journal.missing(reqs, fp, retry_errors=True) == [reqs[0]]
    assert journal.committed([reqs[0].id, reqs[1].id, "absent"], fp) == {reqs[0].id: True, reqs[1].id: False}
    # a retry's success replaces the error; a committed success is never overwritten
    assert journal.put_results([hash_result(reqs[0])], fp) == 1
    assert journal.get(reqs[0].id, fp) == hash_result(reqs[0])
    assert journal.put_results([Result(reqs[0].id, reqs[0].kind, error="later failure")], fp) == 0
    assert journal.get(reqs[0].id, fp).error is None
    assert journal.counts().errors == 0


def test_unknown_fingerprint_and_bad_results_are_rejected(journal: Journal) -> None:
    with pytest.raises(ValueError, match="register_engine"):
        journal.put_results([hash_result(arc_requests(1)[0])], "fdeadbeef")
    fp = journal.register_engine(FP, "fake")
    with pytest.raises(ValueError, match="request_id"):
        journal.put_results([Result("", "generate")], fp)
    assert journal.counts().results == 0


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    with Journal(tmp_path) as j:
        j._db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(JournalError, match="schema version 99"):
        Journal(tmp_path)


def test_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "journal.sqlite").write_text("this is not sqlite " * 100)
    with pytest.raises(JournalError, match="cannot open the journal"):
        Journal(tmp_path)


def test_wal_mode_and_reopen(tmp_path: Path) -> None:
    reqs = arc_requests(2)
    with Journal(tmp_path) as j:
        assert j._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert j._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        fp = j.register_engine(FP, "fake")
        j.put_results([hash_result(r) for r in reqs], fp)
    with Journal(tmp_path) as j:
        assert j.missing(reqs, fp) == []


def test_concurrent_writer_processes_do_not_corrupt(tmp_path: Path) -> None:
    run = tmp_path / "run"
    procs = [
        subprocess.Popen([sys.executable, str(WORKER), str(run), "60", "0.01", "3", f"{k}/3"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for k in range(3)
    ]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    reqs = arc_requests(60)
    rows = dump_results(run / "journal.sqlite")
    assert sorted(r[0] for r in rows) == sorted(r.id for r in reqs)
    db = sqlite3.connect(run / "journal.sqlite")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    shards = dict(db.execute("SELECT shard, COUNT(*) FROM results GROUP BY shard").fetchall())
    db.close()
    assert set(shards) == {"0/3", "1/3", "2/3"} and sum(shards.values()) == 120


def test_cached_reads_decode_each_result_once_and_writes_invalidate(journal: Journal, monkeypatch: pytest.MonkeyPatch) -> None:
    import auditlang.store.journal as jmod

    decoded: list[str] = []
    real = jmod.result_from_json
    monkeypatch.setattr(jmod, "result_from_json", lambda text: (decoded.append(text), real(text))[1])
    results = _every_field_results()
    fp = journal.register_engine(FP, "m")
    journal.put_results(results, fp)
    ids = [r.request_id for r in results]
    with journal.cached_reads():
        first = journal.get_many(ids, fp)
        again = journal.get_many(ids + ["absent"], fp)
        assert journal.get("r_gen", fp) is first["r_gen"] and journal.get("absent", fp) is None
        assert again == first and all(again[i] is first[i] for i in ids)
        assert len(decoded) == len(results)  # one decode per stored result
        with journal.cached_reads():  # nested blocks share the outer cache
            journal.get_many(ids, fp)
        assert len(decoded) == len(results)
        # a write (here: a retry replacing the stored error) empties the cache: the new value is read
        journal.put_results([Result("r_err", "generate", samples=[Sample("ok", [], "stop")])], fp)
        assert journal.get("r_err", fp).error is None
        assert len(decoded) == len(results) + 1
    # outside the block every read decodes afresh
    n = len(decoded)
    journal.get_many(ids, fp)
    journal.get_many(ids, fp)
    assert len(decoded) == n + 2 * len(results)


def test_cached_reads_restart_when_full(journal: Journal, monkeypatch: pytest.MonkeyPatch) -> None:
    results = _every_field_results()
    fp = journal.register_engine(FP, "m")
    journal.put_results(results, fp)
    monkeypatch.setattr(Journal, "READ_CACHE_MAX", 2)
    with journal.cached_reads():
        got = journal.get_many([r.request_id for r in results], fp)
        assert got == {r.request_id: r for r in results}
        assert len(journal._cache) <= 2
