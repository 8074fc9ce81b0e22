"""`auditc status RUN_DIR`: what a run directory holds, whether a run is live, what is left.

Reads ``run.json``, ``plan.json``, the plan's request ids, the heartbeat and the journal only:
no spec is compiled and no data is read, so it answers in well under a second. The plan files
and the journal are checked against what the run recorded (store/integrity.py; the journal by
its number of rows only, and not while a run is live).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from auditlang.cli.common import EXIT_OK, say
from auditlang.core.errors import UserError
from auditlang.store.journal import Journal, JournalCounts
from auditlang.store.integrity import check_files, check_journal, stale_outputs
from auditlang.store.rundir import (
    JOURNAL, PLAN_FILE, PLAN_IDS_FILE, RECORDS, REPORT_DIR, RUN_FILE, read_plan_file, read_plan_ids, read_run_file)
from auditlang.store.runlock import is_live, read_heartbeat
from auditlang.store.shards import merge_command, shard_info


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join("  " + line for line in lines)


def run_state(run_dir: Path) -> str:
    """One line: live (pid, phase), interrupted, failed or finished, from the lock and heartbeat."""
    hb = read_heartbeat(run_dir)
    if is_live(run_dir):
        doing = hb.get("doing") or hb.get("state", "running")
        return f"LIVE: pid {hb.get('pid', '?')} on {hb.get('host', '?')} since {hb.get('started', '?')}; now {doing}"
    state = hb.get("state")
    if not hb:
        return "no run in progress (no heartbeat recorded)"
    if state == "finished":
        return f"finished at {hb.get('ended', '?')}"
    where = f" during {hb['doing']}" if hb.get("doing") else ""
    why = f" ({hb['error']})" if hb.get("error") else ""
    return f"INTERRUPTED{where}: last run (pid {hb.get('pid', '?')}) stopped at {hb.get('ended') or hb.get('updated', '?')}{why}"


def cmd_status(args) -> int:
    say(run_status(Path(args.run_dir)).text)
    return EXIT_OK


@dataclass
class Status:
    """What `auditc status` prints (``text``) and its numbers (``auditlang.status``): the run's
    state line, stage-1 requests left and failed (a shard's: of its share), and whether it is
    complete (scored, nothing left)."""

    text: str
    state: str
    left: int
    errors: int
    complete: bool
    shard: str | None = None

    def __str__(self) -> str:
        return self.text


def run_status(run_dir: Path) -> Status:
    """`auditc status RUN_DIR`: read only the run directory's plan files, heartbeat and journal."""
    run_dir = Path(run_dir)
    lines: list[str] = []
    say = lines.append
    info = read_run_file(run_dir)
    if not info:
        raise UserError(f"{run_dir} is not a run directory (no {RUN_FILE})", hint="run `auditc run SPEC --out DIR` first")
    live = is_live(run_dir)
    check_files(run_dir, (PLAN_FILE, PLAN_IDS_FILE), info)  # as the run wrote them (store/integrity.py)
    if not live:  # a live run appends to it; committed successes are checked once it stops
        check_journal(run_dir, info, quick=True)
    plan = read_plan_file(run_dir)
    ids = read_plan_ids(run_dir)
    fps = info.get("fingerprints", {})
    say(f"run     {run_dir}")
    say(f"spec    {info.get('spec_entry') or info.get('spec')}  (plan {plan.get('hash', '?')}, "
          f"{len(plan.get('cells', []))} cells)")
    say(f"state   {run_state(run_dir)}")
    shard = shard_info(info)
    if shard is not None:
        say(f"shard   {shard['index']}/{shard['count']} of `auditc run --shard`: its share of each model's items")
    if ids is None:
        say("  (this run directory predates plan.requests.tsv.gz: rerun `auditc run` to refresh it)")
        return Status("\n".join(lines), run_state(run_dir), 0, 0, False)
    rows = [["model", "stage-1 committed", "errors", "follow-ups committed"]]
    left = 0
    deferred: dict[str, int] = {}
    for d in plan.get("deferred", []):
        deferred[d["model"]] = deferred.get(d["model"], 0) + int(d["count"])
    models = sorted(set(ids) | set(deferred))
    errors = 0  # stage-1 requests whose stored result is a failure
    jpath = run_dir / JOURNAL
    usable = jpath.is_file() and jpath.stat().st_size > 0  # a 0-byte file holds no results (and is not opened)
    if not usable and fps:  # the run executed requests: their results are gone
        what = "is missing" if not jpath.exists() else "is empty (0 bytes)" if jpath.is_file() else "is not a file"
        say(f"journal {jpath} {what}: the results this run executed are lost, so nothing counts as committed; "
              f"rerun the same `auditc run` command to execute them again (or restore the file from a backup)")
    with Journal(run_dir) if usable else _NoJournal() as journal:
        for mid in models:
            mine = ids.get(mid, [])
            total = len(mine) if shard is None else int(shard.get("requests", {}).get(mid, 0))
            fp = fps.get(mid)
            if fp is None:
                done = {}
                extra = 0
            else:
                done = journal.committed(mine, fp)
                extra = max(journal.counts(fp).results - len(done), 0)
            left += max(total - len(done), 0)
            n_err = sum(1 for e in done.values() if e)
            errors += n_err
            note = "" if fp else " (not started)"
            rows.append([mid, f"{len(done)}/{total}{note}", str(n_err),
                         f"{extra} of ~{deferred.get(mid, 0)} planned" if deferred.get(mid) else str(extra)])
    say(_table(rows))
    rec = run_dir / RECORDS
    say(f"records {'written' if rec.exists() else 'not yet'}; report {'written' if (run_dir / REPORT_DIR).exists() else 'not yet'}")
    stale = [f for group in stale_outputs(run_dir, info) for f in group]
    if stale and not live:
        say(f"changed since scoring: {', '.join(stale)} (`auditc report {run_dir}` rebuilds "
              f"{'it' if len(stale) == 1 else 'them'})")
    if live:
        say(f"in progress: {left} stage-1 request(s) still to run" if left else "in progress: stage 1 is done")
    elif shard is not None:
        _shard_next(run_dir, shard, left, errors, say)
    elif left:
        say(f"{left} stage-1 request(s) left: rerun the same `auditc run` command to resume")
    elif not rec.exists() and info.get("merged_shards"):
        say(f"merged from {len(info['merged_shards'])} shard run(s), not scored yet: `auditc report {run_dir}` "
              "scores and reports it")
    elif not rec.exists():
        say("every stage-1 request is committed; rerun `auditc run` to finish follow-ups and scoring")
    elif errors:
        say(f"complete, with {errors} failed stage-1 request(s) (their items are missing from the metrics): "
              "rerun the same `auditc run` command to retry exactly them")
    else:
        say("complete")
    label = f"{shard['index']}/{shard['count']}" if shard is not None else None
    return Status("\n".join(lines), run_state(run_dir), left, errors,
                  complete=not live and not left and not errors and rec.exists(), shard=label)


def _shard_next(run_dir: Path, shard: dict, left: int, errors: int, say) -> None:
    """What to do next with a stopped shard run: resume it, or merge it with its siblings."""
    label = f"{shard['index']}/{shard['count']}"
    if left:
        say(f"{left} stage-1 request(s) of shard {label} left: rerun the same `auditc run ... --shard {label}` "
              "command to resume")
        return
    command, target, missing = merge_command(run_dir)
    retry = (f" ({errors} failed stage-1 request(s): rerun the same `auditc run ... --shard {label}` to retry "
             "exactly them first, or merge as is and they are missing from the metrics)") if errors else ""
    if missing:
        say(f"shard {label} complete{retry}; shard(s) {', '.join(missing)} not found next to it. Once every shard "
              f"is done: `{command}`, then `auditc report {target}`")
    else:
        say(f"shard {label} complete{retry}; every shard of this plan is here: `{command}`, "
              f"then `auditc report {target}`")


class _NoJournal:
    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def committed(self, ids, fp):
        return {}

    def counts(self, fp=None):
        return JournalCounts(0, 0, 0, 0, 0)
