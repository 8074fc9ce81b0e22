"""`auditc status RUN_DIR`: what a run directory holds, whether a run is live, what is left.

Reads ``run.json``, ``plan.json``, the plan's request ids, the heartbeat and the journal only:
no spec is compiled and no data is read, so it answers in well under a second.
"""

from __future__ import annotations

from pathlib import Path

from auditlang.cli.common import EXIT_OK
from auditlang.core.errors import UserError
from auditlang.store.journal import Journal
from auditlang.store.rundir import JOURNAL, RECORDS, REPORT_DIR, RUN_FILE, read_plan_file, read_plan_ids, read_run_file
from auditlang.store.runlock import is_live, read_heartbeat


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
    run_dir = Path(args.run_dir)
    info = read_run_file(run_dir)
    if not info:
        raise UserError(f"{run_dir} is not a run directory (no {RUN_FILE})", hint="run `auditc run SPEC --out DIR` first")
    plan = read_plan_file(run_dir)
    ids = read_plan_ids(run_dir)
    fps = info.get("fingerprints", {})
    print(f"run     {run_dir}")
    print(f"spec    {info.get('spec_entry') or info.get('spec')}  (plan {plan.get('hash', '?')}, "
          f"{len(plan.get('cells', []))} cells)")
    print(f"state   {run_state(run_dir)}")
    if ids is None:
        print("  (this run directory predates plan.requests.tsv.gz: rerun `auditc run` to refresh it)")
        return EXIT_OK
    rows = [["model", "stage-1 committed", "errors", "follow-ups committed"]]
    left = 0
    deferred: dict[str, int] = {}
    for d in plan.get("deferred", []):
        deferred[d["model"]] = deferred.get(d["model"], 0) + int(d["count"])
    models = sorted(set(ids) | set(deferred))
    with Journal(run_dir) if (run_dir / JOURNAL).exists() else _NoJournal() as journal:
        for mid in models:
            mine = ids.get(mid, [])
            fp = fps.get(mid)
            if fp is None:
                done = {}
                extra = 0
            else:
                done = journal.committed(mine, fp)
                extra = max(journal.counts(fp).results - len(done), 0)
            left += len(mine) - len(done)
            n_err = sum(1 for e in done.values() if e)
            note = "" if fp else " (not started)"
            rows.append([mid, f"{len(done)}/{len(mine)}{note}", str(n_err),
                         f"{extra} of ~{deferred.get(mid, 0)} planned" if deferred.get(mid) else str(extra)])
    print(_table(rows))
    rec = run_dir / RECORDS
    print(f"records {'written' if rec.exists() else 'not yet'}; report {'written' if (run_dir / REPORT_DIR).exists() else 'not yet'}")
    if is_live(run_dir):
        print(f"in progress: {left} stage-1 request(s) still to run" if left else "in progress: stage 1 is done")
    elif left:
        print(f"{left} stage-1 request(s) left: rerun the same `auditc run` command to resume")
    elif not rec.exists():
        print("every stage-1 request is committed; rerun `auditc run` to finish follow-ups and scoring")
    else:
        print("complete")
    return EXIT_OK


class _NoJournal:
    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def committed(self, ids, fp):
        return {}
