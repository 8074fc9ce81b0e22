"""Writing a run's inputs into its run directory: spec sources, data files, plan, plan ids.

See :mod:`auditlang.store.rundir` for the layout. Written once per ``auditc run`` (and by
``auditc report --spec``), atomically per file or folder, before any model is loaded.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from auditlang.core.hashing import sha256_file
from auditlang.plan.model import Plan
from auditlang.resolve.spec import Spec
from auditlang.stdlib_location import stdlib_root
from auditlang.store.rundir import (
    DATA_DIR, PLAN_FILE, PROJECT_DIR, PROJECT_MARKER, RUN_FORMAT, SPEC_DIR, STDLIB_DIR, copy_tree_files, read_run_file,
    replace_dir, write_bytes_atomic, write_json_atomic, write_plan_ids, write_run_file)


def _inside(path: Path, root: Path) -> Path | None:
    try:
        return path.resolve().relative_to(root.resolve())
    except ValueError:
        return None


def spec_files(spec: Spec) -> list[tuple[Path, Path]]:
    """(source, path relative to the project root) of every project file the spec compiled:
    its modules and the project template files it names (stdlib files are copied whole)."""
    out: dict[Path, Path] = {}
    stdlib = stdlib_root()
    for f in spec.files:
        p = Path(f)
        if _inside(p, stdlib) is not None:
            continue
        rel = _inside(p, spec.root)
        out[p.resolve()] = rel if rel is not None else Path("_outside") / p.name
    for obj in spec.objects.values():
        file = getattr(obj.value, "file", None) if obj.kind == "template" else None
        if isinstance(file, str) and not file.startswith("stdlib:"):
            p = (spec.entry.parent / file).resolve()
            rel = _inside(p, spec.root)
            if p.is_file() and rel is not None:  # files outside the root are refused (E118)
                out[p] = rel
    return sorted(out.items(), key=lambda kv: str(kv[1]))


def save_spec(spec: Spec, run_dir: Path) -> str:
    """Copy the compiled sources to ``RUN_DIR/spec`` (atomically swapped in); returns the entry
    spec's path relative to the run directory."""
    staged = run_dir / "spec.new"
    if staged.exists():
        shutil.rmtree(staged)
    project = staged / Path(PROJECT_DIR).name
    entry = spec.entry.resolve()
    try:
        copy_tree_files((src, project / rel) for src, rel in spec_files(spec)
                        if not (src == entry and spec.entry_text is not None))
        project.mkdir(parents=True, exist_ok=True)
        rel = _inside(spec.entry, spec.root)
        entry_rel = rel if rel is not None else Path("_outside") / spec.entry.name
        if spec.entry_text is not None:  # compiled from text (an editor buffer, a notebook string)
            (project / entry_rel).parent.mkdir(parents=True, exist_ok=True)
            (project / entry_rel).write_text(spec.entry_text, encoding="utf-8")
        (project / PROJECT_MARKER).write_text("# project root of the spec copy this run compiled\n", encoding="utf-8")
        shutil.copytree(stdlib_root(), staged / Path(STDLIB_DIR).name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        replace_dir(staged, run_dir / SPEC_DIR)
    finally:  # a failed copy (a full disk) leaves no half-written folder behind
        if staged.exists():
            shutil.rmtree(staged, ignore_errors=True)
    return (Path(PROJECT_DIR) / entry_rel).as_posix()


def save_data(plan: Plan, run_dir: Path) -> dict[str, dict[str, Any]]:
    """Copy every dataset the plan read to ``RUN_DIR/data/<dataset>/`` (a file byte for byte; a
    hub split as the JSON lines of its rows); returns the ``run.json`` entry per dataset (file
    relative to the run directory, sha256, and the dataset's recorded identity ``meta``)."""
    out: dict[str, dict[str, Any]] = {}
    for dsid, ds in sorted(plan.sources.items()):
        if ds.raw_rows is not None:
            name = ds.path.split(":", 1)[-1].replace("/", "__") + ".jsonl"
            body = "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in ds.raw_rows)
            rel = Path(DATA_DIR) / dsid / name
            (run_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(run_dir / rel, body.encode("utf-8"))
        else:
            src_path = Path(ds.path)
            rel = Path(DATA_DIR) / dsid / src_path.name
            dst = run_dir / rel
            if src_path.resolve() != dst.resolve():
                dst.parent.mkdir(parents=True, exist_ok=True)
                tmp = dst.with_name(dst.name + ".tmp")
                try:
                    shutil.copyfile(src_path, tmp)
                    tmp.replace(dst)
                finally:  # no .tmp left when the copy fails (a full disk)
                    tmp.unlink(missing_ok=True)
        out[dsid] = {"file": rel.as_posix(), "sha256": sha256_file(run_dir / rel), "meta": ds.meta}
    return out


def save_inputs(spec: Spec, plan: Plan, run_dir: Path, **run_fields: Any) -> dict[str, Any]:
    """Write spec, data, plan and plan ids; merge ``run_fields`` into ``run.json``. Returns run.json."""
    run_dir.mkdir(parents=True, exist_ok=True)
    entry = save_spec(spec, run_dir)
    data = save_data(plan, run_dir)
    write_json_atomic(run_dir / PLAN_FILE, plan.to_dict(include_requests=False), indent=1)
    write_plan_ids(run_dir, ((r.model, r.kind, r.id) for r in plan.requests))
    info = read_run_file(run_dir)
    info.update(run_fields)
    info.update({"format": RUN_FORMAT, "spec_entry": entry, "data": data, "plan_hash": plan.hash,
                 "spec_source": spec.entry.name})
    write_run_file(run_dir, info)
    return info
