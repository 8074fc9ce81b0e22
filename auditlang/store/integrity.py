"""The run directory vouches for itself: content hashes of what each stage wrote, checked on read.

Each stage records what it wrote in ``run.json`` under ``artifacts`` (path relative to the run
directory -> entry), in the manner of dbt's artifact checks:

* inputs (``store/inputs.py``): ``plan.json``, ``plan.requests.tsv.gz`` (sha256 of the bytes),
  ``spec/`` (one sha256 over every file's relative path and bytes) and the journal's digest (that
  of an empty journal on a new run); the data copies keep their
  sha256 in ``run.json``'s ``data`` entry, as before;
* scoring, a ``--shard`` run's execution and ``auditc merge``: ``journal.sqlite`` as a digest of its
  committed rows and successes (below);
* scoring (``score/stage.py``): ``records.parquet``, ``records.jsonl`` and ``metrics/cells.*``.

A later command (``auditc report``, ``rescore``, ``status``, ``diff``, ``merge``, and
``auditlang.open_run``) checks what it reads. A mismatch in an input or in the journal is an
:class:`IntegrityError` (exit 1) naming the file and what to do; records and metrics that no
longer match are derived data, so ``auditc report`` rebuilds them (records from the journal,
metrics from records) and says so.

The journal is append-only (a committed success is never overwritten; a stored failure may be
replaced by a retry), so its digest covers what cannot change: the successes committed up to the
recorded row (``max_rowid``) and time (``last``). Later appends and retries leave it unchanged;
a row that was edited or deleted, or an emptied or replaced journal, does not.

A run directory without its hashes is not read: run.json with no ``artifacts`` (or ``{}``), an
input or an output on disk with no entry, a data copy with no sha256, or a journal with no digest
(recorded with the inputs, as an empty journal's before the first result) is an :class:`IntegrityError` (exit 1; :func:`check_recorded`):
deleting a hash must not turn its check off. Records and metrics without an entry are rebuilt by
``auditc report`` like mismatched ones.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from auditlang.core.errors import UserError
from auditlang.core.hashing import sha256_file
from auditlang.store.rundir import (
    JOURNAL, METRICS_DIR, PLAN_FILE, PLAN_IDS_FILE, RECORDS, RECORDS_JSONL, RUN_FILE, SPEC_DIR, read_run_file, write_run_file)

__all__ = [
    "ARTIFACTS", "INPUTS", "METRICS_FILES", "OUTPUTS", "IntegrityError", "check_data", "check_files",
    "check_inputs", "check_journal", "check_recorded", "journal_digest", "outputs_state", "record", "stale_outputs"]

ARTIFACTS = "artifacts"  # run.json key
INPUTS = (PLAN_FILE, PLAN_IDS_FILE, SPEC_DIR)
RECORD_FILES = (RECORDS, RECORDS_JSONL)
METRICS_FILES = tuple(f"{METRICS_DIR}/cells.{ext}" for ext in ("csv", "md", "json"))
OUTPUTS = RECORD_FILES + METRICS_FILES


class IntegrityError(UserError):
    """A run-directory file does not match the hash recorded when its stage wrote it (exit 1)."""


# ------------------------------------------------------------------ digests


def tree_files(folder: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under ``folder`` (no ``__pycache__``)."""
    return {p.relative_to(folder).as_posix(): sha256_file(p)
            for p in sorted(Path(folder).rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def tree_sha256(files: dict[str, str]) -> str:
    """One sha256 over a folder's files (relative path and file hash, in sorted path order)."""
    return hashlib.sha256("".join(f"{k}\0{v}\n" for k, v in sorted(files.items())).encode("utf-8")).hexdigest()


def _file_entry(run_dir: Path, rel: str) -> dict[str, Any] | None:
    p = run_dir / rel
    if p.is_dir():
        files = tree_files(p)
        return {"sha256": tree_sha256(files), "files": files}
    if p.is_file():
        return {"sha256": sha256_file(p), "bytes": p.stat().st_size}
    return None


def _sqlite_ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)


def journal_digest(run_dir: Path, upto: dict[str, Any] | None = None, *, quick: bool = False) -> dict[str, Any]:
    """The journal's digest: ``max_rowid``, ``last`` (latest ``created_at``), ``rows`` (results
    with ``rowid <= max_rowid``: rows are never deleted, a retry updates its row in place), and
    over the successes with ``rowid <= max_rowid`` and ``created_at <= last`` (a success is never
    overwritten): ``ok`` (their number), ``bytes`` (their result JSON's total length) and
    ``sha256`` over (request id, fingerprint hash, result JSON). With ``upto`` (a recorded digest)
    the bounds are taken from it, so the digest of an intact journal equals the recorded one
    however much was appended since. ``quick``: ``rows`` only, from the table's b-tree without
    reading the results (``auditc status``, which must answer at once, 0.2 s for a 500 MB
    journal). Raises ``sqlite3.DatabaseError`` for a file that is not a journal."""
    path = Path(run_dir) / JOURNAL
    db = _sqlite_ro(path)
    try:
        if upto is None:
            max_rowid, last = db.execute("SELECT COALESCE(MAX(rowid), 0), COALESCE(MAX(created_at), '') "
                                         "FROM results").fetchone()
        else:
            max_rowid, last = int(upto.get("max_rowid", 0)), str(upto.get("last", ""))
        rows = db.execute("SELECT COUNT(*) FROM results WHERE rowid <= ?", (max_rowid,)).fetchone()[0]
        out = {"max_rowid": int(max_rowid), "last": last, "rows": int(rows)}
        if not quick:
            h = hashlib.sha256()
            ok = size = 0
            for rid, fp, res in db.execute("SELECT request_id, fp_hash, result FROM results WHERE error IS NULL "
                                           "AND rowid <= ? AND created_at <= ? ORDER BY rowid", (max_rowid, last)):
                data = res.encode("utf-8")
                h.update(f"{rid}\t{fp}\t".encode("utf-8") + data + b"\n")
                ok += 1
                size += len(data)
            out.update(ok=ok, bytes=size, sha256=h.hexdigest())
    finally:
        db.close()
    return out


# ------------------------------------------------------------------ recording


def record(run_dir: Path, rels: Iterable[str], *, journal: bool = False, info: dict[str, Any] | None = None) -> dict:
    """Record the hashes of ``rels`` (and the journal's digest) in ``run.json``'s ``artifacts``.
    With ``info`` (a run.json dict about to be written by the caller) the entries go there and
    nothing is written; otherwise run.json is read, updated and written. Returns the entries."""
    run_dir = Path(run_dir)
    entries: dict[str, Any] = {}
    for rel in rels:
        e = _file_entry(run_dir, rel)
        if e is not None:
            entries[rel] = e
    if journal and (run_dir / JOURNAL).is_file():
        try:
            entries[JOURNAL] = journal_digest(run_dir)
        except sqlite3.Error:
            pass  # not a journal: nothing to vouch for
    elif journal:  # no results yet: the digest of an empty journal, so the entry is there from the start
        entries[JOURNAL] = {"max_rowid": 0, "last": "", "rows": 0, "ok": 0, "bytes": 0,
                            "sha256": hashlib.sha256().hexdigest()}
    target = info if info is not None else read_run_file(run_dir)
    arts = dict(target.get(ARTIFACTS) or {})
    arts.update(entries)
    target[ARTIFACTS] = arts
    if info is None:
        write_run_file(run_dir, target)
    return entries


# ------------------------------------------------------------------ checking


NO_HASH = "has no hash recorded in run.json"  # a file on disk whose entry is gone (_mismatch)


def _mismatch(run_dir: Path, rel: str, info: dict[str, Any]) -> str | None:
    """Why ``rel`` does not match its recorded entry, or None (matches, or neither file nor entry)."""
    want = (info.get(ARTIFACTS) or {}).get(rel)
    p = run_dir / rel
    if not isinstance(want, dict) or not isinstance(want.get("sha256"), str):
        return NO_HASH if p.exists() else None
    if not p.exists():
        return "is missing"
    got = _file_entry(run_dir, rel) or {}
    if got.get("sha256") == want["sha256"]:
        return None
    if "files" in want:  # a folder: name what changed
        old, new = want["files"], got.get("files", {})
        changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        shown = ", ".join(f"{k}{'' if k in new else ' (missing)'}{'' if k in old else ' (added)'}" for k in changed[:5])
        return f"has changed since it was written: {shown}{' ...' if len(changed) > 5 else ''}"
    if want.get("bytes") is not None and got.get("bytes") is not None and got["bytes"] != want["bytes"]:
        return f"has {got['bytes']:,} bytes, not the {want['bytes']:,} it had when written (sha256 differs)"
    return "has changed since it was written (sha256 differs)"


def _restore_hint(run_dir: Path) -> str:
    return (f"restore {run_dir / RUN_FILE} from a copy of the run directory, or run the spec again into a new "
            "folder (`auditc run SPEC --out runs/NEW`); a run directory is read only with the hashes its run "
            "recorded (docs/security.md)")


def check_recorded(run_dir: Path, info: dict[str, Any]) -> None:
    """IntegrityError when run.json holds no content hashes at all (``artifacts`` missing, empty
    or not an object): every run of this format records them when it writes its inputs, so a run
    directory without them was edited and nothing in it can be checked."""
    arts = info.get(ARTIFACTS)
    if isinstance(arts, dict) and arts:
        return
    what = "is missing" if ARTIFACTS not in info else f"is {json_kind(arts)}"
    raise IntegrityError(
        f"{Path(run_dir) / RUN_FILE}: its content hashes (`{ARTIFACTS}`) {what}, so its plan, spec, data, journal, "
        "records and metrics cannot be checked against what the run wrote; refusing to read the run directory",
        hint=_restore_hint(Path(run_dir)))


def json_kind(value: Any) -> str:
    """``{}``, ``null``, ``a JSON list``...: how a run.json value reads in a message."""
    if value == {}:
        return "empty ({})"
    if value is None:
        return "null"
    return f"a JSON {type(value).__name__}, not an object"


def check_files(run_dir: Path, rels: Iterable[str], info: dict[str, Any] | None = None) -> None:
    """IntegrityError for the first of ``rels`` that no longer matches its recorded hash, or that
    is on disk with no hash recorded."""
    run_dir = Path(run_dir)
    info = read_run_file(run_dir) if info is None else info
    check_recorded(run_dir, info)
    for rel in rels:
        why = _mismatch(run_dir, rel, info)
        if why == NO_HASH:
            raise IntegrityError(f"{run_dir / rel}: {why}, so it cannot be checked against what the run wrote; "
                                 "refusing to read the run directory", hint=_restore_hint(run_dir))
        if why:
            what = "folder" if rel == SPEC_DIR else "file"
            raise IntegrityError(
                f"{run_dir / rel}: this {what} {why}; the run directory no longer holds what its run wrote",
                hint=f"restore it from a copy, or rerun the same `auditc run SPEC --out {run_dir}` to rewrite it "
                     "(stored results are reused)")


def check_data(run_dir: Path, info: dict[str, Any]) -> None:
    """Each data copy must have the sha256 ``run.json`` recorded when the run read it."""
    run_dir = Path(run_dir)
    data = info.get("data")
    if not isinstance(data, dict):
        raise IntegrityError(f"{run_dir / RUN_FILE}: its `data` entry (each data copy's file and sha256) "
                             f"{'is missing' if data is None else 'is not an object'}", hint=_restore_hint(run_dir))
    for dsid, entry in sorted(data.items()):
        rel = entry.get("file") if isinstance(entry, dict) else None
        want = entry.get("sha256") if isinstance(entry, dict) else None
        if not rel or not isinstance(want, str):
            raise IntegrityError(f"{run_dir / RUN_FILE}: the copy of dataset '{dsid}' has no "
                                 f"{'file' if not rel else 'sha256'} recorded, so it cannot be checked against what "
                                 "the run read; refusing to read the run directory", hint=_restore_hint(run_dir))
        p = run_dir / rel
        if not p.is_file():
            raise IntegrityError(f"{p}: the copy of dataset '{dsid}' the run read is missing",
                                 hint=f"restore it, or rerun `auditc run SPEC --out {run_dir}` to copy the data again")
        got = sha256_file(p)
        if got != want:
            raise IntegrityError(
                f"{p}: the copy of dataset '{dsid}' has sha256 {got[:12]}..., not the {want[:12]}... recorded in "
                f"{run_dir / RUN_FILE} when the run read it (the file was edited)",
                hint="restore the original file; the run's results were computed on the original rows")


def check_inputs(run_dir: Path, info: dict[str, Any] | None = None) -> None:
    """plan.json, plan ids, the spec copy and the data copies, against their recorded hashes."""
    info = read_run_file(run_dir) if info is None else info
    check_files(run_dir, INPUTS, info)
    check_data(run_dir, info)


def check_journal(run_dir: Path, info: dict[str, Any] | None = None, *, quick: bool = False) -> None:
    """The journal must still hold every result committed when it was last recorded, and its
    successes unchanged. ``quick``: compare the number of rows only (a deleted, emptied or
    replaced journal; not an edited result: ``auditc status``)."""
    run_dir = Path(run_dir)
    info = read_run_file(run_dir) if info is None else info
    check_recorded(run_dir, info)
    want = (info.get(ARTIFACTS) or {}).get(JOURNAL)
    path = run_dir / JOURNAL
    if not isinstance(want, dict):
        if path.exists():  # recorded with the inputs, before the first result (store/inputs.py)
            raise IntegrityError(f"{path}: {NO_HASH} (the journal's digest), so its results cannot be checked "
                                 "against what the run committed; refusing to read the run directory",
                                 hint=_restore_hint(run_dir))
        return
    if not (want.get("rows") or want.get("ok")):
        return
    where = f"{path}: "
    held = f"it held {want.get('rows', want['ok']):,} results when last recorded"
    redo = (f"restore journal.sqlite (with its -wal file) from a copy; without it, rerun `auditc run SPEC --out "
            f"{run_dir}` to execute the requests again")
    if not path.is_file():
        raise IntegrityError(where + f"the journal is missing; {held}", hint=redo)
    if path.stat().st_size == 0:
        raise IntegrityError(where + f"the journal is empty (0 bytes); {held}", hint=redo)
    try:
        got = journal_digest(run_dir, upto=want, quick=quick)
    except sqlite3.Error as e:
        raise IntegrityError(where + f"not a readable journal ({e}); {held}", hint=redo) from None
    if got["rows"] < want.get("rows", got["rows"]):
        lost = want["rows"] - got["rows"]
        raise IntegrityError(where + f"{lost:,} of the {want['rows']:,} results it held are gone since the journal "
                                     "was last recorded", hint=redo)
    if not quick and (got["ok"], got["bytes"], got["sha256"]) != (want["ok"], want.get("bytes"), want.get("sha256")):
        lost = want["ok"] - got["ok"]
        detail = (f"{lost:,} of the {want['ok']:,} committed results are gone" if lost > 0 else
                  "committed results were edited")
        raise IntegrityError(where + detail + " since the journal was last recorded", hint=redo)


def stale_outputs(run_dir: Path, info: dict[str, Any] | None = None) -> tuple[list[str], list[str]]:
    """(records files, metrics files) that no longer match their recorded hashes or have none
    recorded (missing ones included only when a hash was recorded)."""
    run_dir = Path(run_dir)
    info = read_run_file(run_dir) if info is None else info
    return ([r for r in RECORD_FILES if _mismatch(run_dir, r, info)],
            [m for m in METRICS_FILES if _mismatch(run_dir, m, info)])


def check_outputs(run_dir: Path, rels: Iterable[str], info: dict[str, Any] | None = None) -> None:
    """Derived files a command reads without rebuilding (``diff``, ``open_run(...).records``):
    an IntegrityError naming the file; ``auditc report`` rebuilds it. A missing file is left to
    the caller (it says what to run)."""
    run_dir = Path(run_dir)
    info = read_run_file(run_dir) if info is None else info
    for rel in rels:
        if not (run_dir / rel).exists():
            continue
        why = _mismatch(run_dir, rel, info)
        if why:
            what = "it cannot be checked against" if why == NO_HASH else "it no longer holds"
            raise IntegrityError(f"{run_dir / rel}: this file {why}; {what} what the scoring stage wrote",
                                 hint=f"run `auditc report {run_dir}` to rebuild it from the journal")


def outputs_state(run_dir: Path) -> dict[str, Any]:
    """Summary for ``auditc status``: which recorded files no longer match (not raising)."""
    run_dir = Path(run_dir)
    info = read_run_file(run_dir)
    bad = [r for r in INPUTS + OUTPUTS if _mismatch(run_dir, r, info)]
    return {"changed": bad, "recorded": bool(info.get(ARTIFACTS))}
