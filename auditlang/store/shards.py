"""Splitting a plan into shards and merging their journals back into one store.

Input: requests (to split) or shard run directories (to merge). Output: the requests of one
shard, or one merged ``journal.sqlite`` plus a :class:`MergeReport`.

A request belongs to shard ``sha256(key) mod n``, where the key is the request id by default.
The assignment depends only on the key and ``n``, never on request order or on the machine,
so ``n`` independent processes each given the same plan and their own ``index`` cover every
request exactly once. For multi-stage plans (stage 2 prompts contain stage 1 answers) pass a
``key`` that maps every request of an item to the item (e.g. ``dataset/item_id``), so that an
item's stages stay in one shard.
"""

from __future__ import annotations

import hashlib
import heapq
import shlex
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from auditlang.core.requests import Request
from auditlang.store.codec import result_payload_equal
from auditlang.store.journal import JOURNAL_FILE, SCHEMA_VERSION, Journal, JournalError
from auditlang.store.rundir import RUN_FILE, read_run_file

__all__ = ["MergeConflict", "MergeReport", "Shard", "balanced_shards", "merge_journals", "shard_of", "shard_requests"]

ShardKey = Callable[[Request], str]
ShardOwner = Callable[[Request], int]


def shard_of(key: str, n_shards: int) -> int:
    """The shard (0-based) of a key: first 8 bytes of sha256(key), big-endian, mod ``n_shards``."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % n_shards


def _check(n_shards: int, index: int) -> None:
    if isinstance(n_shards, bool) or not isinstance(n_shards, int) or n_shards < 1:
        raise ValueError(f"the number of shards must be an integer >= 1, got {n_shards!r}")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n_shards:
        raise ValueError(f"shard index must be an integer in 0..{n_shards - 1} (0-based), got {index!r}")


def balanced_shards(weights: Mapping[str, int], n_shards: int) -> dict[str, int]:
    """Key -> shard, so that the shards' summed weights (e.g. an item's request count) are as even
    as a greedy split makes them: the heaviest key first (ties broken by :func:`shard_of`'s hash
    of the key, never by input order), each onto the lightest shard so far (ties: the lowest
    index). Depends only on the weights and ``n_shards``, so every shard process of one plan
    computes the same assignment; the largest shard exceeds the mean by at most one key's weight."""
    _check(n_shards, 0)
    order = sorted(weights, key=lambda k: (-weights[k], hashlib.sha256(k.encode("utf-8")).digest()))
    heap = [(0, i) for i in range(n_shards)]
    out: dict[str, int] = {}
    for k in order:
        load, i = heapq.heappop(heap)
        out[k] = i
        heapq.heappush(heap, (load + weights[k], i))
    return out


def shard_requests(
    requests: Iterable[Request], n_shards: int, index: int, *, key: ShardKey | None = None,
    owner: ShardOwner | None = None,
) -> list[Request]:
    """The requests of shard ``index`` of ``n_shards`` (input order kept, duplicates kept):
    ``owner(request)`` when given, else the hash of ``key(request)`` (default: the request id)."""
    _check(n_shards, index)
    if owner is not None:
        return [r for r in requests if owner(r) == index]
    get_key = key or (lambda r: r.id)
    return [r for r in requests if shard_of(get_key(r), n_shards) == index]


@dataclass(frozen=True)
class Shard:
    """One shard of a plan: ``index`` (0-based) of ``count``. Written ``"index/count"``, e.g. ``"0/4"``.

    ``key`` maps a request to its shard key (default: the request id); ``owner`` maps it to its
    shard directly (it wins over ``key``); see the module docstring.
    """

    index: int
    count: int
    key: ShardKey | None = field(default=None, compare=False)
    owner: ShardOwner | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        _check(self.count, self.index)

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    def __str__(self) -> str:
        return self.label

    def select(self, requests: Iterable[Request]) -> list[Request]:
        return shard_requests(requests, self.count, self.index, key=self.key, owner=self.owner)

    @staticmethod
    def parse(text: str, key: ShardKey | None = None) -> Shard:
        """Parse ``"i/n"`` (0-based ``i``), e.g. ``"0/4"`` ... ``"3/4"``."""
        parts = str(text).strip().split("/")
        try:
            index, count = (int(p) for p in parts)
        except ValueError:
            raise ValueError(f"invalid shard {text!r}: write it as INDEX/COUNT with a 0-based index, e.g. 0/4") from None
        return Shard(index, count, key)


# ----------------------------------------------------------------------------- shard runs

SHARD_FIELD = "shard"  # run.json of an `auditc run --shard I/N` directory: {"index", "count", "requests": {model: n}}


def shard_info(info: dict) -> dict | None:
    """The ``shard`` record of a run directory's run.json, or None (not a shard run)."""
    sh = info.get(SHARD_FIELD)
    return sh if isinstance(sh, dict) and isinstance(sh.get("index"), int) and isinstance(sh.get("count"), int) else None


def shard_siblings(run_dir: str | Path) -> dict[int, Path]:
    """Shard index -> directory, for the shard runs of the same plan and shard count found next to
    ``run_dir`` (its parent folder; ``run_dir`` itself included), the first directory by name per index."""
    run_dir = Path(run_dir)
    info = read_run_file(run_dir, lenient=True)
    mine = shard_info(info)
    if mine is None:
        return {}
    out: dict[int, Path] = {mine["index"]: run_dir}
    try:
        folders = sorted(p for p in run_dir.parent.iterdir() if (p / RUN_FILE).is_file())
    except OSError:
        return out
    for d in folders:
        other = read_run_file(d, lenient=True)
        sh = shard_info(other)
        if sh and other.get("plan_hash") == info.get("plan_hash") and sh["count"] == mine["count"]:
            out.setdefault(sh["index"], d)
    return out


def merge_command(run_dir: str | Path) -> tuple[str, Path, list[str]]:
    """(the `auditc merge` command for the shard run ``run_dir`` and its siblings, its target, the
    shards (``I/N``) not found next to it). The target is ``<spec name>-merged`` beside the shards."""
    run_dir = Path(run_dir)
    info = read_run_file(run_dir, lenient=True)
    count = shard_info(info)["count"]
    found = shard_siblings(run_dir)
    stem = Path(str(info.get("spec_source") or "run")).stem
    target = run_dir.parent / f"{stem}-merged"
    missing = [f"{i}/{count}" for i in range(count) if i not in found]
    dirs = " ".join(shlex.quote(str(found[i])) for i in sorted(found))
    return f"auditc merge {shlex.quote(str(target))} {dirs}" + (" OTHER_SHARD_DIR..." if missing else ""), target, missing


# ----------------------------------------------------------------------------- merge


@dataclass(frozen=True)
class MergeConflict:
    """Two successful results for one key that differ (outside ``meta``); the target's is kept."""

    request_id: str
    fp_hash: str
    source: str


@dataclass
class MergeReport:
    sources: list[str] = field(default_factory=list)
    engines_added: int = 0
    requests_added: int = 0
    results_added: int = 0  # keys new to the target
    errors_replaced: int = 0  # target held an error, the source a success
    identical: int = 0  # key already in the target with the same payload (or both errors)
    conflicts: list[MergeConflict] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"merged {len(self.sources)} journal(s): {self.results_added} results added, "
            f"{self.errors_replaced} errors replaced by successes, {self.identical} already present, "
            f"{len(self.conflicts)} conflicts (first result kept)"
        )


def _journal_path(run_dir: str | Path) -> Path:
    p = Path(run_dir)
    path = p if p.name == JOURNAL_FILE else p / JOURNAL_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no journal at {path}: expected a run directory containing {JOURNAL_FILE}")
    return path


def merge_journals(target_run_dir: str | Path, source_run_dirs: Sequence[str | Path]) -> MergeReport:
    """Merge shard journals into the target's journal (created if absent). Idempotent.

    Per key ``(request_id, fp_hash)``: a key new to the target is copied; a success replaces a
    stored error; two successes with different payloads are a *conflict*: the target's (first)
    result is kept and the key is reported. Sources are merged in the given order, each in one
    transaction, and are only read.
    """
    report = MergeReport()
    with Journal(target_run_dir) as target:
        own = target.path.resolve()
        for src in source_run_dirs:
            path = _journal_path(src)
            if path.resolve() == own:
                raise ValueError(f"cannot merge the journal {path} into itself")
            _merge_one(target._db, path, report)
            report.sources.append(str(path))
    return report


def _merge_one(db: sqlite3.Connection, path: Path, report: MergeReport) -> None:
    db.execute("ATTACH DATABASE ? AS src", (str(path),))
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM src.sqlite_master WHERE type = 'table'")}
        if not {"meta", "engines", "requests", "results"} <= tables:
            raise JournalError(f"{path} is not an auditlang journal (tables missing)")
        version = db.execute("SELECT value FROM src.meta WHERE key = 'schema_version'").fetchone()
        if version is None or int(version[0]) > SCHEMA_VERSION:
            raise JournalError(f"{path} has journal schema version {version and version[0]}; this auditlang reads <= {SCHEMA_VERSION}")
        db.execute("BEGIN IMMEDIATE")
        try:
            _copy_rows(db, path, report)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    finally:
        db.execute("DETACH DATABASE src")


def _copy_rows(db: sqlite3.Connection, path: Path, report: MergeReport) -> None:
    def changes(sql: str) -> int:
        before = db.total_changes
        db.execute(sql)
        return db.total_changes - before

    report.engines_added += changes("INSERT OR IGNORE INTO main.engines SELECT fp_hash, model, fingerprint, created_at FROM src.engines")
    report.requests_added += changes(
        "INSERT OR IGNORE INTO main.requests SELECT request_id, fp_hash, model, kind, request, created_at FROM src.requests"
    )
    overlap = db.execute(
        "SELECT t.request_id, t.fp_hash, t.result, t.error IS NOT NULL, s.result, s.error IS NOT NULL "
        "FROM main.results t JOIN src.results s ON s.request_id = t.request_id AND s.fp_hash = t.fp_hash"
    ).fetchall()
    for rid, fp, t_json, t_err, s_json, s_err in overlap:
        if t_err and not s_err:
            continue  # replaced below
        if t_err or s_err or result_payload_equal(t_json, s_json):
            report.identical += 1
        else:
            report.conflicts.append(MergeConflict(rid, fp, str(path)))
    report.errors_replaced += changes(
        "UPDATE main.results SET result = s.result, error = s.error, created_at = s.created_at, shard = s.shard "
        "FROM src.results s WHERE s.request_id = main.results.request_id AND s.fp_hash = main.results.fp_hash "
        "AND main.results.error IS NOT NULL AND s.error IS NULL"
    )
    report.results_added += changes(
        "INSERT INTO main.results (request_id, fp_hash, result, error, created_at, shard) "
        "SELECT request_id, fp_hash, result, error, created_at, shard FROM src.results s "
        "WHERE NOT EXISTS (SELECT 1 FROM main.results t WHERE t.request_id = s.request_id AND t.fp_hash = s.fp_hash)"
    )
