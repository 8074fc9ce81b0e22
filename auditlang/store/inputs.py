"""Writing a run's inputs into its run directory: spec sources, data files, plan, plan ids.

See :mod:`auditlang.store.rundir` for the layout. Written once per ``auditc run`` (and by
``auditc report --spec``), atomically per file or folder, before any model is loaded.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from auditlang.core.hashing import sha256_file
from auditlang.core.registry import REGISTRY
from auditlang.plan.model import Plan
from auditlang.store.integrity import INPUTS, record
from auditlang.resolve.spec import Spec
from auditlang.stdlib_location import stdlib_root
from auditlang.store.rundir import (
    DATA_DIR, METRICS_DIR, PLAN_FILE, RECORDS, REPORT_DIR, PROJECT_DIR, PROJECT_MARKER, RUN_FORMAT, SPEC_DIR, STDLIB_DIR, copy_tree_files, read_run_file,
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


def _entry_rel(spec: Spec) -> Path:
    """The entry spec's path relative to its project root (``_outside/NAME`` outside it)."""
    rel = _inside(spec.entry, spec.root)
    return rel if rel is not None else Path("_outside") / spec.entry.name


def run_owner(spec: Spec, run_dir: Path) -> str | None:
    """The spec (its path in the project) that owns ``run_dir`` when that is not ``spec``: a run
    directory belongs to the spec file it was first run from, edits of that file included. None
    when the folder holds no run, or a run of this spec."""
    stored = read_run_file(run_dir, lenient=True).get("spec_entry")  # damaged: resuming rewrites it
    mine = (Path(PROJECT_DIR) / _entry_rel(spec)).as_posix()
    if not isinstance(stored, str) or stored == mine:
        return None
    return stored.removeprefix(PROJECT_DIR + "/")


def clear_outputs(run_dir: Path) -> None:
    """Remove what a run derived from its spec (records, metrics, report, rescores) before another
    spec takes the run directory over (``auditc run --replace``); the journal is kept."""
    for name in (RECORDS, METRICS_DIR, REPORT_DIR, "rescore"):
        p = run_dir / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()


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
        entry_rel = _entry_rel(spec)
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


_ABS_PATH = re.compile(r"(?<![\w.])/[^\s'\"(),]+")


def portable_plan(d: dict[str, Any], spec: Spec, entry: str, data: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``plan.json`` as the run directory keeps it: no absolute path of the machine it ran on (the
    spec's path is its copy's, a dataset's path its data copy's, a path in a note is made relative
    to the project root, or shortened to its name). The paths are not hashed, so the hash stays."""
    d = dict(d)
    d["spec"] = {**d["spec"], "path": entry}
    d["datasets"] = {k: ({**v, "path": data[k]["file"]} if k in data and v.get("path") else v)
                     for k, v in d.get("datasets", {}).items()}
    root = Path(spec.root).resolve()

    def rel(m: re.Match) -> str:
        p = Path(m.group(0))
        inside = _inside(p, root)
        return inside.as_posix() if inside is not None else f".../{p.name}"

    d["notes"] = [_ABS_PATH.sub(rel, n) for n in d.get("notes", [])]
    return d


_PLUGIN_KINDS = {"protocol": "protocol", "evaluator": "evaluator", "perturbation": "perturbation", "compare": "comparison"}


def plugin_components(spec: Spec) -> dict[str, str]:
    """``"<kind> <name>"`` -> ``"<distribution> <version>"`` of every component the spec uses that
    an installed plugin registered (run.json ``plugin_components``: a machine without the plugin
    is told which one to install, ``api.load_run``)."""
    used = {(_PLUGIN_KINDS[o.kind], o.ctor) for o in spec.objects.values() if o.kind in _PLUGIN_KINDS}
    used |= {("metric", m.name) for m in spec.metrics.values()}
    out = {}
    for kind, name in sorted(used):
        entry = REGISTRY.find(kind, name)
        if entry is not None and entry.meta.get("plugin"):
            out[f"{kind} {name}"] = str(entry.meta["plugin"])
    return out


def save_inputs(spec: Spec, plan: Plan, run_dir: Path, **run_fields: Any) -> dict[str, Any]:
    """Write spec, data, plan and plan ids; merge ``run_fields`` into ``run.json``. Returns run.json."""
    run_dir.mkdir(parents=True, exist_ok=True)
    entry = save_spec(spec, run_dir)
    data = save_data(plan, run_dir)
    write_json_atomic(run_dir / PLAN_FILE, portable_plan(plan.to_dict(include_requests=False), spec, entry, data), indent=1)
    write_plan_ids(run_dir, ((r.model, r.kind, r.id) for r in plan.requests))
    info = read_run_file(run_dir, lenient=True)  # a damaged run.json is rewritten
    info.update(run_fields)
    info.update({"format": RUN_FORMAT, "spec_entry": entry, "data": data, "plan_hash": plan.hash,
                 "spec_source": spec.entry.name, "plugin_components": plugin_components(spec)})
    record(run_dir, INPUTS, journal=True, info=info)  # the hashes later commands check (store/integrity.py)
    write_run_file(run_dir, info)
    return info
