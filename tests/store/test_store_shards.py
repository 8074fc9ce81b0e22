"""Sharding a plan and merging shard journals."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest
from store_fake_engine import HashEngine, arc_requests, dump_results, hash_result

from auditlang.execute import execute
from auditlang.core.requests import Request, Result
from auditlang.store import Journal, JournalError, Shard, merge_journals, shard_of, shard_requests

FP = HashEngine().fingerprint()


def test_shards_form_a_partition(requests_100: list[Request]) -> None:
    ids = [r.id for r in requests_100]
    for n in (1, 2, 3, 7):
        parts = [shard_requests(requests_100, n, i) for i in range(n)]
        seen = [r.id for part in parts for r in part]
        assert sorted(seen) == sorted(ids)  # every request exactly once
        for part in parts:  # input order kept inside a shard
            assert [r.id for r in part] == [i for i in ids if i in {r.id for r in part}]
    sizes = [len(shard_requests(requests_100, 4, i)) for i in range(4)]
    assert min(sizes) > 10  # the hash spreads requests over all shards


def test_shard_assignment_is_stable(requests_100: list[Request]) -> None:
    # golden values: changing the hash would silently re-shard plans already half run
    assert [shard_of(k, 4) for k in ("a", "b", "c", "rdeadbeef", "mmlu/0")] == [2, 2, 2, 1, 3]
    shuffled = list(requests_100)
    random.Random(7).shuffle(shuffled)
    for i in range(3):
        assert {r.id for r in shard_requests(shuffled, 3, i)} == {r.id for r in shard_requests(requests_100, 3, i)}


def test_shard_key_keeps_an_items_requests_together(requests_100: list[Request]) -> None:
    item_of = {r.id: f"arc/{i // 2}" for i, r in enumerate(requests_100)}  # generate + choice per item
    shard = Shard(1, 3, key=lambda r: item_of[r.id])
    chosen = shard.select(requests_100)
    items = {item_of[r.id] for r in chosen}
    assert len(chosen) == 2 * len(items) and items


def test_shard_parse_and_errors() -> None:
    assert Shard.parse("2/8") == Shard(2, 8) and Shard(2, 8).label == "2/8"
    with pytest.raises(ValueError, match="INDEX/COUNT"):
        Shard.parse("2-8")
    with pytest.raises(ValueError, match=r"0\.\.7 \(0-based\)"):
        Shard.parse("8/8")
    with pytest.raises(ValueError, match="number of shards"):
        shard_requests([], 0, 0)


def _run_shard(tmp_path: Path, name: str, reqs: list[Request], shard: Shard) -> Path:
    with Journal(tmp_path / name) as j:
        execute(HashEngine(), reqs, j, progress=False, shard=shard)
    return tmp_path / name


def test_merge_of_shards_equals_one_run_and_is_idempotent(tmp_path: Path, requests_100: list[Request]) -> None:
    shards = [_run_shard(tmp_path, f"s{k}", requests_100, Shard(k, 3)) for k in range(3)]
    report = merge_journals(tmp_path / "merged", shards)
    assert report.results_added == 100 and report.conflicts == [] and report.identical == 0
    assert report.engines_added == 1 and report.requests_added == 100
    with Journal(tmp_path / "single") as j:
        execute(HashEngine(), requests_100, j, progress=False)
    assert dump_results(tmp_path / "merged" / "journal.sqlite") == dump_results(tmp_path / "single" / "journal.sqlite")

    again = merge_journals(tmp_path / "merged", shards)
    assert (again.results_added, again.requests_added, again.engines_added) == (0, 0, 0)
    assert again.identical == 100 and again.conflicts == []
    assert dump_results(tmp_path / "merged" / "journal.sqlite") == dump_results(tmp_path / "single" / "journal.sqlite")
    with Journal(tmp_path / "merged") as j:  # the merged store serves the whole plan from cache
        assert execute(HashEngine(), requests_100, j, progress=False).executed == 0
        assert j.counts().pending == 0


def test_merge_conflicts_keep_first_and_errors_yield_to_successes(tmp_path: Path) -> None:
    reqs = arc_requests(3)
    good = [hash_result(r) for r in reqs]
    other = Result(reqs[0].id, reqs[0].kind, samples=[], meta={})  # differs from good[0]
    same_but_meta = hash_result(reqs[1])
    same_but_meta.meta = {"latency_s": 9.9}
    with Journal(tmp_path / "a") as a:
        fp = a.register_engine(FP, "fake")
        a.put_results([good[0], good[1], Result(reqs[2].id, reqs[2].kind, error="oom")], fp)
    with Journal(tmp_path / "b") as b:
        b.register_engine(FP, "fake")
        b.put_results([other, same_but_meta, good[2], good[3]], fp)
    report = merge_journals(tmp_path / "a", [tmp_path / "b"])
    assert [(c.request_id, c.fp_hash) for c in report.conflicts] == [(reqs[0].id, fp)]
    assert report.conflicts[0].source.endswith("journal.sqlite")
    assert report.errors_replaced == 1 and report.results_added == 1 and report.identical == 1
    assert "1 conflicts (first result kept)" in report.summary()
    with Journal(tmp_path / "a") as a:
        assert a.get(reqs[0].id, fp) == good[0]  # first kept
        assert a.get(reqs[2].id, fp) == good[2]  # error replaced
        assert a.get(reqs[1].id, fp) == good[1]
        assert a.counts().errors == 0 and a.counts().results == 4


def test_merge_refuses_itself_missing_and_foreign_files(tmp_path: Path) -> None:
    Journal(tmp_path / "t").close()
    with pytest.raises(ValueError, match="into itself"):
        merge_journals(tmp_path / "t", [tmp_path / "t"])
    with pytest.raises(FileNotFoundError, match="no journal at"):
        merge_journals(tmp_path / "t", [tmp_path / "nope"])
    (tmp_path / "foreign").mkdir()
    sqlite3.connect(tmp_path / "foreign" / "journal.sqlite").execute("CREATE TABLE x (y)").connection.close()
    with pytest.raises(JournalError, match="not an auditlang journal"):
        merge_journals(tmp_path / "t", [tmp_path / "foreign"])
