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
METRICS_DIR = "metrics"
REPORT_DIR = "report"
PROJECT_MARKER = "auditlang.toml"  # makes spec/project/ the project root when compiled from the copy


def read_run_file(run_dir: Path) -> dict[str, Any]:
    p = Path(run_dir) / RUN_FILE
    if p.exists():
        return json.loads(p.read_text(encoding="utf-8"))
    return {}


def write_json_atomic(path: Path, data: Any, **dump_kwargs: Any) -> None:
    """Write JSON through a temporary file and a rename; no partial file is left on failure."""
    write_bytes_atomic(path, json.dumps(data, **dump_kwargs).encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


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
    for line in gzip.decompress(p.read_bytes()).decode("utf-8").splitlines():
        m, _, i = line.split("\t")
        out.setdefault(m, []).append(i)
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
