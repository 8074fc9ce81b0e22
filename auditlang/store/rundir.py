"""The run directory: its layout (the one place that names its files) and its inputs.

```
RUN_DIR/
  run.json              run metadata: format, spec entry (relative), limit, fingerprints per model,
                        model swaps, static keys (docs/outputs.md)
  plan.json             the plan that was executed (versioned, hashed; cells, datasets, sample indices)
  plan.requests.tsv.gz  stage-1 request ids of the plan, one "model<TAB>kind<TAB>id" per line
  spec/project/...      the project's spec files that were compiled (imports, template files), same layout
  spec/stdlib/...       the standard library the spec was compiled against
  data/<dataset>/FILE   each dataset's data file as it was read (byte copy; hub data as JSONL rows)
  journal.sqlite        every request and result (store/journal.py)
  run.lock, heartbeat.json   who is running (store/runlock.py)
  units/<model>.<i>of<K>/    --executor ray: one unit's journal, run.json, attempts.jsonl, merged.json
  records.parquet       one row per cell x item (score stage); metrics/ per-cell tables; report/
```

Everything later commands need (``report``, ``status``, ``rescore``, ``merge``) is inside, so a run
directory can be moved to another machine; ``auditlang.api.load_run`` reads it back and checks
that the plan rebuilt from ``spec/`` and ``data/`` has the hash stored in ``plan.json``.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from auditlang.core.errors import UserError
from auditlang.core.hashing import sha256_file

RUN_FORMAT = "auditlang.run/2"
RUN_FILE = "run.json"
PLAN_FILE = "plan.json"
PLAN_IDS_FILE = "plan.requests.tsv.gz"
SPEC_DIR = "spec"
PROJECT_DIR = "spec/project"
STDLIB_DIR = "spec/stdlib"
DATA_DIR = "data"
JOURNAL = "journal.sqlite"
RECORDS = "records.parquet"
RECORDS_JSONL = "records.jsonl"  # the same rows as JSON lines (store/records.py)
METRICS_DIR = "metrics"
CELLS_CSV = "metrics/cells.csv"  # per-cell metrics with intervals (score/cellmetrics.py); also .md and .json
REPORT_DIR = "report"
FIGURE_CACHE_DIR = ".figures-cache"  # under report/: the figures last drawn and the hash of their inputs
RESCORE_DIR = "rescore"  # rescore/<label>/: `auditc rescore` (records, cells.csv, cells.md, rescore.json)
RESCORE_META = "rescore.json"  # in rescore/<label>/: the evaluator expression and what it compiled to
LOCK_FILE = "run.lock"
HEARTBEAT_FILE = "heartbeat.json"
PROJECT_MARKER = "auditlang.toml"  # makes spec/project/ the project root when compiled from the copy


# Every name auditlang writes at the top of a run directory: a folder holding only these is a run
# that stopped before it wrote run.json (e.g. on a full disk), and may be resumed.
RUN_NAMES = frozenset({
    RUN_FILE, PLAN_FILE, PLAN_IDS_FILE, SPEC_DIR, SPEC_DIR + ".new", SPEC_DIR + ".old", DATA_DIR, JOURNAL,
    JOURNAL + "-wal", JOURNAL + "-shm", LOCK_FILE, HEARTBEAT_FILE, RECORDS, RECORDS_JSONL, METRICS_DIR, REPORT_DIR,
    RESCORE_DIR})


RUN_FORMAT_PREFIX = "auditlang.run/"


def run_file_owner(path: Path) -> str:
    """Whether ``run.json`` in ``path`` is one auditlang wrote for this folder: ``"owned"`` (an
    ``auditlang.run/...`` format, and for this format the sha256 of ``plan.json`` it recorded
    when it wrote the inputs matches the plan.json beside it: a key anyone could write is not
    enough), ``"mismatch"`` (this format, but plan.json is missing or not the one it recorded),
    or ``"foreign"`` (absent, unreadable, or not auditlang's format)."""
    try:
        info = json.loads((Path(path) / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return "foreign"
    fmt = info.get("format") if isinstance(info, dict) else None
    if not isinstance(fmt, str) or not fmt.startswith(RUN_FORMAT_PREFIX):
        return "foreign"
    if fmt != RUN_FORMAT:
        return "owned"  # an older auditlang's run directory (no hashes yet): resumed to bring it up to date
    arts = info.get("artifacts")
    want = arts.get(PLAN_FILE) if isinstance(arts, dict) else None
    want = want.get("sha256") if isinstance(want, dict) else None
    try:
        return "owned" if isinstance(want, str) and sha256_file(Path(path) / PLAN_FILE) == want else "mismatch"
    except OSError:
        return "mismatch"


def is_run_dir(path: Path) -> bool:
    """A folder auditlang wrote: its ``run.json`` is auditlang's and vouches for the plan.json
    beside it (:func:`run_file_owner`), or a run stopped before writing it: the run lock is there
    and nothing but names auditlang writes (:data:`RUN_NAMES`, and their ``.tmp`` files)."""
    if run_file_owner(path) == "owned":
        return True
    try:
        names = [p.name for p in Path(path).iterdir()]
    except OSError:
        return False
    started = LOCK_FILE in names or HEARTBEAT_FILE in names  # written first by every run
    # (a run.json that is damaged is rewritten by the resumed run: see read_run_file)
    return started and all(n in RUN_NAMES or n.endswith(".tmp") for n in names)


def check_out_dir(path: Path) -> None:
    """Refuse an output folder that would overwrite the user's files: a path that exists but is not
    a folder, or a non-empty folder that is not a run directory. Nothing is written."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UserError(f"{path} exists and is not a folder", hint="name a new folder or an existing run directory")
    if path.is_dir():
        try:
            entries = next(iter(path.iterdir()), None)
        except OSError as e:
            raise UserError(f"{path}: cannot list the folder ({e.strerror})") from None
        if entries is not None and not is_run_dir(path) and run_file_owner(path) == "mismatch":
            raise UserError(f"{path / RUN_FILE} names an auditlang run, but {path / PLAN_FILE} is missing or is not the "
                            "plan it recorded (edited, or a run.json copied from elsewhere); refusing to write into "
                            "the folder, nothing was written",
                            hint=f"restore {PLAN_FILE} from a copy of the run directory, or run into a new folder "
                                 "(--out runs/NEW)")
        if entries is not None and not is_run_dir(path):
            raise UserError(f"{path} is a non-empty folder that is not an auditlang run directory (no {RUN_FILE} "
                            "auditlang wrote for it); refusing to write into it, nothing was written",
                            hint="name a new or empty folder (e.g. runs/NAME), or an existing run directory to resume it")
    else:
        parent = next((a for a in path.absolute().parents if a.exists()), None)
        if parent is not None and not parent.is_dir():
            raise UserError(f"{path}: {parent} is not a folder", hint="name a new folder")
        try:
            path.mkdir(parents=True)
        except OSError as e:
            raise UserError(f"{path}: cannot create the folder ({e.strerror})",
                            hint="name a folder you can write to") from None


def read_run_file(run_dir: Path, lenient: bool = False) -> dict[str, Any]:
    """``run.json`` ({} when absent). A file that is not a JSON object is a ``UserError`` naming
    it and how to rebuild it; ``lenient``: {} instead (``auditc run`` rewrites it)."""
    p = Path(run_dir) / RUN_FILE
    if not p.exists():
        return {}
    try:
        info = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        info, why = None, f"{type(e).__name__}: {e}"
    else:
        why = f"a JSON {type(info).__name__}, not an object"
    if isinstance(info, dict) or lenient:
        return info if isinstance(info, dict) else {}
    raise UserError(f"{p} is damaged ({why[:200]}): the run directory's metadata cannot be read",
                    hint=damaged_hint(run_dir, RUN_FILE))


def damaged_hint(run_dir: Path, name: str) -> str:
    """What to do about a damaged file of a run directory (docs/outputs.md)."""
    if name == RUN_FILE:
        return (f"rerun the `auditc run SPEC --out {run_dir}` that wrote it: run.json is rewritten and the results "
                f"committed in {JOURNAL} are reused, not executed again")
    if name == RECORDS:
        return (f"delete {Path(run_dir) / RECORDS} and run `auditc report {run_dir}`: the records are rebuilt "
                f"from {JOURNAL}")
    return f"rerun the `auditc run SPEC --out {run_dir}` that wrote it (committed results are reused)"


def check_cache_dir(path: str | Path) -> Path:
    """The ``--cache`` folder, created when missing; a path that is not a folder, or a folder that
    cannot be created or written, is a ``UserError`` before anything is planned."""
    p = Path(path).expanduser()
    hint = "name a folder you can write to (created when missing), e.g. --cache ~/.cache/auditlang/responses"
    if p.exists() and not p.is_dir():
        raise UserError(f"--cache {path}: {p} exists and is not a folder", hint=hint)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"--cache {path}: cannot create the folder ({e.strerror})", hint=hint) from None
    if not os.access(p, os.W_OK | os.X_OK):
        raise UserError(f"--cache {path}: the folder is not writable", hint=hint)
    return p


def write_json_atomic(path: Path, data: Any, **dump_kwargs: Any) -> None:
    """Write JSON through a temporary file and a rename; no partial file is left on failure."""
    write_bytes_atomic(path, json.dumps(data, **dump_kwargs).encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` through ``PATH.tmp`` (flushed to disk) and a rename: the file is either the
    old one or the new one, and no ``.tmp`` is left behind when the write fails (e.g. a full disk)."""
    tmp = path.with_name(path.name + ".tmp")
    mode = file_mode()
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as e:
        if e.filename is None:  # name the file (a write on a full disk carries no name)
            raise OSError(e.errno, e.strerror, str(path)) from e
        raise
    finally:
        if tmp.exists():
            tmp.unlink()


def file_mode() -> int:
    """0666 less the umask: the mode every output file gets (as open() would)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_run_file(run_dir: Path, data: dict[str, Any]) -> None:
    write_json_atomic(Path(run_dir) / RUN_FILE, data, indent=1, sort_keys=True)


def read_plan_file(run_dir: Path) -> dict[str, Any]:
    p = Path(run_dir) / PLAN_FILE
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


# ------------------------------------------------------------------ plan ids
def write_plan_ids(run_dir: Path, rows: Iterable[tuple[str, str, str]]) -> None:
    """(model, kind, request id) of every stage-1 request, gzip TSV (read by ``auditc status``)."""
    body = "".join(f"{m}\t{k}\t{i}\n" for m, k, i in rows).encode("utf-8")
    write_bytes_atomic(Path(run_dir) / PLAN_IDS_FILE, gzip.compress(body, compresslevel=6, mtime=0))


def read_plan_ids(run_dir: Path) -> dict[str, list[str]] | None:
    """Model -> stage-1 request ids, or None when the file is absent."""
    p = Path(run_dir) / PLAN_IDS_FILE
    if not p.exists():
        return None
    out: dict[str, list[str]] = {}
    try:
        for line in gzip.decompress(p.read_bytes()).decode("utf-8").splitlines():
            m, _, i = line.split("\t")
            out.setdefault(m, []).append(i)
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as e:  # truncated or overwritten
        raise UserError(f"{p} is damaged ({type(e).__name__}: {str(e)[:200]})",
                        hint=damaged_hint(run_dir, PLAN_IDS_FILE)) from None
    return out


# ------------------------------------------------------------------ inputs
def copy_tree_files(files: Iterable[tuple[Path, Path]]) -> None:
    for src, dst in files:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)


def replace_dir(staged: Path, final: Path) -> None:
    """Swap a fully written ``staged`` folder into ``final`` (the old one is removed after)."""
    old = final.with_name(final.name + ".old")
    if old.exists():
        shutil.rmtree(old)
    if final.exists():
        os.replace(final, old)
    os.replace(staged, final)
    if old.exists():
        shutil.rmtree(old)
