"""The request journal: a durable, resumable cache of every engine result of a run.

Input: requests and the results an engine returned for them. Output: ``run_dir/journal.sqlite``.

Results are keyed by ``(request_id, fp_hash)``: the content hash of the request
(:attr:`Request.id`) and the hash of the engine fingerprint that produced it
(:func:`~auditlang.store.codec.fingerprint_hash`). A request whose key is committed is never
executed again; a different engine (other model revision, dtype, engine version...) has a
different fingerprint and therefore re-executes everything.

Durability. SQLite in WAL mode with ``synchronous=FULL``: a batch is one transaction, and once
:meth:`Journal.put_results` returns its rows are on disk (the WAL is fsynced at every commit).
This survives ``kill -9`` of the process at any instant *and* an OS crash or power cut; a
transaction interrupted before its commit leaves no trace. (``synchronous=NORMAL`` would be
enough for ``kill -9`` alone, but may lose the last commits on power loss; the cost of FULL is
one fsync per batch, which is negligible next to model inference.)

Concurrency. Several processes may write one journal at once (e.g. shards of a plan on one
machine): every write is a ``BEGIN IMMEDIATE`` transaction and waits up to ``busy_timeout``
seconds for the lock. Do not put the journal on a network filesystem (NFS, SMB): SQLite's WAL
needs shared memory between writers; run shards with their own run directories instead and
:func:`~auditlang.store.shards.merge_journals` them.
"""

from __future__ import annotations

import contextlib

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from auditlang.core.errors import AuditlangError
from auditlang.core.requests import Request, Result
from auditlang.store.codec import dumps, fingerprint_hash, request_to_json, result_from_json, result_to_json
from auditlang.store.rundir import JOURNAL

__all__ = ["JOURNAL_FILE", "SCHEMA_VERSION", "EngineRecord", "Journal", "JournalCounts", "JournalError",
           "check_journal_file"]

JOURNAL_FILE = JOURNAL  # the name is store/rundir.py's
SCHEMA_VERSION = 1
_CHUNK = 500  # request ids per `IN (...)` query (well below SQLite's variable limit)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS engines (
    fp_hash TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS requests (
    request_id TEXT NOT NULL,
    fp_hash TEXT NOT NULL,
    model TEXT NOT NULL,
    kind TEXT NOT NULL,
    request TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (request_id, fp_hash)
);
CREATE TABLE IF NOT EXISTS results (
    request_id TEXT NOT NULL,
    fp_hash TEXT NOT NULL,
    result TEXT NOT NULL,
    error TEXT,
    created_at TEXT NOT NULL,
    shard TEXT,
    PRIMARY KEY (request_id, fp_hash)
);
"""

# A committed success is final; an error row is replaced by any later result (a retry).
_UPSERT_RESULT = """
INSERT INTO results (request_id, fp_hash, result, error, created_at, shard) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (request_id, fp_hash) DO UPDATE SET
    result = excluded.result, error = excluded.error, created_at = excluded.created_at, shard = excluded.shard
WHERE results.error IS NOT NULL
"""


class JournalError(AuditlangError):
    """The journal file is unusable (newer schema, not a journal, locked for too long)."""


@dataclass(frozen=True)
class EngineRecord:
    """One engine fingerprint seen by this journal."""

    fp_hash: str
    model: str
    fingerprint: dict[str, Any]
    created_at: str


@dataclass(frozen=True)
class JournalCounts:
    """Row counts (for one fingerprint, or the whole journal)."""

    requests: int  # requests recorded as planned for execution
    results: int  # results committed (ok + errors)
    ok: int
    errors: int  # results with ``error`` set
    pending: int  # recorded requests without a result (e.g. after a kill)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _chunks(items: Sequence[str], size: int = _CHUNK) -> Iterator[Sequence[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


_TABLES = frozenset({"meta", "engines", "requests", "results"})


def check_journal_file(path: Path) -> None:
    """A JournalError unless ``path`` is absent, empty, or a journal auditlang wrote: a SQLite file
    whose tables are the journal's and whose ``meta`` holds its ``schema_version`` (written when
    the journal is created). A user's own ``journal.sqlite`` (in a ``--cache`` folder, say) is
    refused before anything is written into it. Read as an immutable file, so no ``-wal``/``-shm``
    file is left beside it; a file with a ``-wal`` (open elsewhere, or not checkpointed) is checked
    by :class:`Journal` on its own connection instead."""
    path = Path(path)
    try:
        if path.exists() and not path.is_file():
            raise JournalError(f"{path} is not a file; refusing to use it as a journal",
                               hint="name another folder, or remove it")
        if not path.is_file() or path.stat().st_size == 0 or Path(f"{path}-wal").exists():
            return
    except OSError as e:
        raise JournalError(f"cannot read {path}: {e.strerror}") from None
    try:
        # no -wal: every committed page is in the file itself, read without creating -wal/-shm files
        db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, timeout=30)
        try:
            why = _not_a_journal(db)
        finally:
            db.close()
    except sqlite3.DatabaseError as e:
        raise JournalError(f"cannot open the journal {path}: {e}; it is not an auditlang journal, nothing was written",
                           hint="name a folder auditlang created (or a new one) with --cache/--out") from None
    _refuse(path, why)


def _not_a_journal(db: sqlite3.Connection) -> str | None:
    """Why the database behind ``db`` is not an auditlang journal (None: it is one, or is empty)."""
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
              if not str(r[0]).startswith("sqlite_")}
    if not tables:
        return None  # a new, empty database
    if tables - _TABLES:
        return f"it holds tables auditlang does not write ({', '.join(sorted(tables - _TABLES)[:5])})"
    if "meta" not in tables or db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() is None:
        return "it has no journal schema version (auditlang writes one when it creates a journal)"
    return None


def _refuse(path: Path, why: str | None) -> None:
    if why:
        raise JournalError(f"{path} is not an auditlang journal: {why}; refusing to write into it, nothing was written",
                           hint="name a folder auditlang created (or a new one) with --cache/--out; auditlang never "
                                "adds its tables to a database it did not create")


class Journal:
    """The request journal of one run directory (``run_dir/journal.sqlite``).

    Use as a context manager or call :meth:`close`. One instance per thread.
    """

    def __init__(self, run_dir: str | Path, *, busy_timeout: float = 60.0, synchronous: str = "FULL") -> None:
        if synchronous.upper() not in ("FULL", "NORMAL", "EXTRA"):
            raise ValueError(f"synchronous must be FULL, NORMAL or EXTRA, got {synchronous!r}")
        self.run_dir = Path(run_dir)
        if self.run_dir.exists() and not self.run_dir.is_dir():
            raise ValueError(f"run directory {self.run_dir} exists and is not a directory")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / JOURNAL_FILE
        self._settings = {"busy_timeout": busy_timeout, "synchronous": synchronous}
        check_journal_file(self.path)  # never add tables to a database auditlang did not create
        try:
            self._db = sqlite3.connect(self.path, timeout=busy_timeout, isolation_level=None)
            why = _not_a_journal(self._db)  # also one with a -wal beside it, on this connection
            if why:
                self._db.close()
                _refuse(self.path, why)
            self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            self._init_schema()
        except sqlite3.DatabaseError as e:
            raise JournalError(f"cannot open the journal {self.path}: {e}") from e
        self._cache: dict[tuple[str, str], Result] | None = None  # see cached_reads

    # ------------------------------------------------------------------ lifecycle

    def _init_schema(self) -> None:
        with self._write():
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    self._db.execute(stmt)
            row = self._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                self._db.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) > SCHEMA_VERSION:
                raise JournalError(
                    f"{self.path} has journal schema version {row[0]}, newer than this auditlang "
                    f"understands ({SCHEMA_VERSION}); upgrade auditlang to read it"
                )

    def close(self) -> None:
        self._db.close()

    def reopen(self) -> Journal:
        """Another connection to this journal, with the same settings (for another thread: a
        connection is used only by the thread that opened it)."""
        return Journal(self.run_dir, **self._settings)

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def _write(self) -> _Transaction:
        return _Transaction(self._db)

    # results kept decoded at once inside cached_reads (then it restarts): readers go unit by
    # unit, and a result with a 200-token window is ~20 KB of Python objects
    READ_CACHE_MAX = 8_192

    @contextlib.contextmanager
    def cached_reads(self) -> Iterator[None]:
        """Inside this block :meth:`get` and :meth:`get_many` decode each stored result once and
        hand the same (read-only) ``Result`` to every later reader: scoring reads an answer once
        per protocol and evaluator of its item, and decoding its token windows was most of the
        scoring time. Any write through this journal empties the cache; outside the block every
        read decodes afresh (another process may have retried a result meanwhile)."""
        outer = self._cache
        if outer is None:
            self._cache = {}
        try:
            yield
        finally:
            if outer is None:
                self._cache = None

    # ------------------------------------------------------------------ meta

    def get_meta(self, key: str) -> str | None:
        """A value of the ``meta`` table (e.g. a response cache's static key -> fingerprint)."""
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def put_meta(self, key: str, value: str) -> None:
        with self._write():
            self._db.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET "
                             "value = excluded.value", (key, value))

    # ------------------------------------------------------------------ engines

    def register_engine(self, fingerprint: dict[str, Any], model: str) -> str:
        """Record an engine fingerprint (idempotent) and return its hash."""
        fp_hash = fingerprint_hash(fingerprint)
        if self._db.execute("SELECT 1 FROM engines WHERE fp_hash = ?", (fp_hash,)).fetchone() is not None:
            return fp_hash  # known: no write (cheap for repeated per-stage calls)
        with self._write():
            self._db.execute(
                "INSERT OR IGNORE INTO engines (fp_hash, model, fingerprint, created_at) VALUES (?, ?, ?, ?)",
                (fp_hash, model, dumps(fingerprint, sort_keys=True), _now()),
            )
        return fp_hash

    def fingerprints(self) -> dict[str, EngineRecord]:
        """Every engine fingerprint in the journal, by hash."""
        rows = self._db.execute("SELECT fp_hash, model, fingerprint, created_at FROM engines ORDER BY created_at, fp_hash")
        return {h: EngineRecord(h, m, json.loads(fp), c) for h, m, fp, c in rows}

    def _check_fp(self, fp_hash: str) -> None:
        if self._db.execute("SELECT 1 FROM engines WHERE fp_hash = ?", (fp_hash,)).fetchone() is None:
            raise ValueError(
                f"unknown engine fingerprint {fp_hash!r} in {self.path}; "
                "call Journal.register_engine(engine.fingerprint(), model) first"
            )

    # ------------------------------------------------------------------ requests

    def put_requests(self, requests: Iterable[Request], fp_hash: str) -> int:
        """Record requests about to be executed (one transaction; known ones are ignored)."""
        self._check_fp(fp_hash)
        now = _now()
        rows = [(r.id, fp_hash, r.model, r.kind, request_to_json(r), now) for r in requests]
        with self._write():
            before = self._db.total_changes
            self._db.executemany(
                "INSERT OR IGNORE INTO requests (request_id, fp_hash, model, kind, request, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
            return self._db.total_changes - before

    def committed(self, request_ids: Iterable[str], fp_hash: str) -> dict[str, bool]:
        """For each given id with a committed result: ``True`` if that result is a failure."""
        ids = list(dict.fromkeys(request_ids))
        out: dict[str, bool] = {}
        for chunk in _chunks(ids):
            marks = ",".join("?" * len(chunk))
            q = f"SELECT request_id, error IS NOT NULL FROM results WHERE fp_hash = ? AND request_id IN ({marks})"
            out.update((rid, bool(err)) for rid, err in self._db.execute(q, (fp_hash, *chunk)))
        return out

    def failures(self, request_ids: Iterable[str], fp_hash: str | None = None) -> dict[str, str]:
        """Request id -> error message of the given ids whose committed result is a failure
        (under ``fp_hash``, or any fingerprint when None)."""
        ids = list(dict.fromkeys(request_ids))
        out: dict[str, str] = {}
        for chunk in _chunks(ids):
            marks = ",".join("?" * len(chunk))
            where, args = ("fp_hash = ? AND ", (fp_hash,)) if fp_hash else ("", ())
            q = f"SELECT request_id, error FROM results WHERE {where}error IS NOT NULL AND request_id IN ({marks})"
            out.update(self._db.execute(q, (*args, *chunk)))
        return out

    def missing(self, requests: Iterable[Request], fp_hash: str, *, retry_errors: bool = False) -> list[Request]:
        """The requests (deduplicated by id, in first-seen order) with no committed result.

        A stored failure counts as committed unless ``retry_errors``.
        """
        unique: dict[str, Request] = {}
        for r in requests:
            unique.setdefault(r.id, r)
        done = self.committed(unique, fp_hash)
        return [r for rid, r in unique.items() if rid not in done or (retry_errors and done[rid])]

    # ------------------------------------------------------------------ results

    def put_results(self, results: Iterable[Result], fp_hash: str, *, shard: str | None = None) -> int:
        """Commit results in ONE transaction; returns the number of rows written.

        A result whose key already holds a success is ignored (first success wins); a stored
        error is replaced by the new result (a retry).
        """
        self._check_fp(fp_hash)
        now = _now()
        rows = []
        for res in results:
            if not isinstance(res, Result) or not res.request_id:
                raise ValueError(f"put_results needs Result objects with request_id set, got {res!r:.120}")
            rows.append((res.request_id, fp_hash, result_to_json(res), res.error, now, shard))
        if not rows:
            return 0
        if self._cache:
            self._cache.clear()
        with self._write():
            before = self._db.total_changes
            self._db.executemany(_UPSERT_RESULT, rows)
            return self._db.total_changes - before

    def get(self, request_id: str, fp_hash: str) -> Result | None:
        cache = self._cache
        if cache is not None and (request_id, fp_hash) in cache:
            return cache[(request_id, fp_hash)]
        row = self._db.execute(
            "SELECT result FROM results WHERE request_id = ? AND fp_hash = ?", (request_id, fp_hash)
        ).fetchone()
        if row is None:
            return None
        res = result_from_json(row[0])
        self._remember(request_id, fp_hash, res)
        return res

    def get_many(self, request_ids: Iterable[str], fp_hash: str) -> dict[str, Result]:
        """Committed results of the given ids (absent ids are left out)."""
        ids = list(dict.fromkeys(request_ids))
        out: dict[str, Result] = {}
        cache = self._cache
        if cache is not None:
            todo = []
            for rid in ids:
                hit = cache.get((rid, fp_hash))
                if hit is None:
                    todo.append(rid)
                else:
                    out[rid] = hit
            ids = todo
        for chunk in _chunks(ids):
            marks = ",".join("?" * len(chunk))
            q = f"SELECT request_id, result FROM results WHERE fp_hash = ? AND request_id IN ({marks})"
            for rid, text in self._db.execute(q, (fp_hash, *chunk)):
                out[rid] = res = result_from_json(text)
                self._remember(rid, fp_hash, res)
        return out

    def result_texts(self, request_ids: Iterable[str], fp_hash: str) -> Iterator[tuple[str, str]]:
        """``(request id, stored result JSON)`` of the given ids (absent ids left out), undecoded and
        not remembered: for a reader that needs a few fields of many results (`auditc view`)."""
        for chunk in _chunks(list(dict.fromkeys(request_ids))):
            marks = ",".join("?" * len(chunk))
            q = f"SELECT request_id, result FROM results WHERE fp_hash = ? AND request_id IN ({marks})"
            yield from self._db.execute(q, (fp_hash, *chunk))

    def stored_requests(self, request_ids: Iterable[str]) -> dict[str, dict[str, dict[str, Any]]]:
        """Request id -> fp_hash -> ``Request.to_dict()`` as recorded before it ran, under every
        engine fingerprint that ran it: what was sent (`auditc view`)."""
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for chunk in _chunks(list(dict.fromkeys(request_ids))):
            marks = ",".join("?" * len(chunk))
            q = f"SELECT request_id, fp_hash, request FROM requests WHERE request_id IN ({marks})"
            for rid, fp, text in self._db.execute(q, chunk):
                out.setdefault(rid, {})[fp] = json.loads(text)
        return out

    def request_params(self, request_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The stored requests of the given ids as JSON objects (any engine; absent ids left out):
        what was actually sent, for the report's statements about prompts and labels."""
        ids = list(dict.fromkeys(request_ids))
        out: dict[str, dict[str, Any]] = {}
        for chunk in _chunks(ids):
            marks = ",".join("?" * len(chunk))
            for rid, text in self._db.execute(f"SELECT request_id, request FROM requests WHERE request_id IN ({marks})",
                                              tuple(chunk)):
                out.setdefault(rid, json.loads(text))
        return out

    def _remember(self, request_id: str, fp_hash: str, res: Result) -> None:
        cache = self._cache
        if cache is None:
            return
        if len(cache) >= self.READ_CACHE_MAX:
            cache.clear()
        cache[(request_id, fp_hash)] = res

    def iter_results(self, fp_hash: str | None = None) -> Iterator[tuple[str, Result]]:
        """``(fp_hash, result)`` for every committed result, in key order."""
        if fp_hash is None:
            rows = self._db.execute("SELECT fp_hash, result FROM results ORDER BY fp_hash, request_id")
        else:
            rows = self._db.execute(
                "SELECT fp_hash, result FROM results WHERE fp_hash = ? ORDER BY request_id", (fp_hash,)
            )
        while chunk := rows.fetchmany(1000):
            for h, text in chunk:
                yield h, result_from_json(text)

    def counts(self, fp_hash: str | None = None) -> JournalCounts:
        where, args = ("WHERE fp_hash = ?", (fp_hash,)) if fp_hash else ("", ())
        n_req = self._db.execute(f"SELECT COUNT(*) FROM requests {where}", args).fetchone()[0]
        n_res, n_err = self._db.execute(
            f"SELECT COUNT(*), COALESCE(SUM(error IS NOT NULL), 0) FROM results {where}", args
        ).fetchone()
        pend_where = "AND q.fp_hash = ?" if fp_hash else ""
        pending = self._db.execute(
            "SELECT COUNT(*) FROM requests q LEFT JOIN results r "
            "ON r.request_id = q.request_id AND r.fp_hash = q.fp_hash "
            f"WHERE r.request_id IS NULL {pend_where}",
            args,
        ).fetchone()[0]
        return JournalCounts(requests=n_req, results=n_res, ok=n_res - n_err, errors=n_err, pending=pending)


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``; rolls back on any exception, KeyboardInterrupt included."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:
            raise JournalError(
                f"cannot start a write transaction on the journal: {e}; another process may hold "
                "it for longer than busy_timeout (or the filesystem does not support SQLite locks)"
            ) from e

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc_type is None:
            try:
                self._db.execute("COMMIT")
                return
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")
