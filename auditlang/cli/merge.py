"""`auditc merge TARGET SHARD_DIR...`: merge shard run directories into one run directory.

Every shard must have run the same plan (same ``plan.json`` hash). The journals are merged
(``store/shards.py``); the run's inputs (spec/, data/, plan files) come from the first shard
when the target has none; then `auditc report TARGET` scores and reports the whole run.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from auditlang.cli.common import EXIT_OK, say
from auditlang.core.errors import UserError
from auditlang.store.rundir import (
    DATA_DIR, JOURNAL, PLAN_FILE, PLAN_IDS_FILE, SPEC_DIR, check_out_dir, read_plan_file, read_run_file,
    write_run_file)
from auditlang.store.integrity import ARTIFACTS, INPUTS, check_files, check_journal, record
from auditlang.store.shards import SHARD_FIELD, merge_journals


def cmd_merge(args) -> int:
    target = Path(args.target)
    rep = merge_runs(target, [Path(s) for s in args.sources])
    say(f"{target}: {rep.summary()}")
    say(f"next: auditc report {target}")
    return EXIT_OK


def merge_runs(target: Path, sources: list[Path]):
    """Merge the shard run directories ``sources`` into ``target`` (checked: one plan);
    returns the :class:`~auditlang.store.shards.MergeReport` (``auditlang.merge``)."""
    target, sources = Path(target), [Path(s) for s in sources]
    if not sources:
        raise UserError("nothing to merge: name the shard run directories", hint="auditc merge TARGET SHARD_DIR...")
    for s in sources:
        if not (s / JOURNAL).exists():
            raise UserError(f"{s} has no {JOURNAL}", hint="pass the --out directories of `auditc run --shard` runs")
    for s in sources:  # each shard as its run wrote it (store/integrity.py)
        info = read_run_file(s)
        check_files(s, (PLAN_FILE, PLAN_IDS_FILE), info)
        check_journal(s, info)
    hashes = {str(s): read_plan_file(s).get("hash") for s in sources}
    if (target / PLAN_FILE).exists():
        hashes[f"{target} (target)"] = read_plan_file(target).get("hash")
    if len(set(hashes.values())) > 1:
        listing = ", ".join(f"{k}: {v}" for k, v in hashes.items())
        raise UserError(f"the shards ran different plans ({listing})",
                        hint="merge only shards of one `auditc run SPEC --shard I/N` command line")
    check_out_dir(target)  # never into a user's folder (docs/security.md)
    rep = merge_journals(target, sources)
    first = sources[0]
    for name in (SPEC_DIR, DATA_DIR):
        if (first / name).is_dir() and not (target / name).exists():
            shutil.copytree(first / name, target / name)
    for name in (PLAN_FILE, PLAN_IDS_FILE):
        if (first / name).exists() and not (target / name).exists():
            shutil.copyfile(first / name, target / name)
    info = read_run_file(target)
    for s in sources:
        for k, v in read_run_file(s).items():
            if k in (ARTIFACTS, SHARD_FIELD):
                continue  # the shards' own hashes (the target's are recorded below) and which shard each ran
            if k == "fingerprints":
                info.setdefault("fingerprints", {}).update(v)
            else:
                info.setdefault(k, v)
    info.pop(SHARD_FIELD, None)  # the target is the whole run
    info["merged_shards"] = list(dict.fromkeys([*info.get("merged_shards", []), *(str(s) for s in sources)]))
    record(target, INPUTS, journal=True, info=info)
    write_run_file(target, info)
    return rep
