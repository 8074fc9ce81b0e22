"""`auditc` start-up: import time and modules loaded by `auditc --version` and `auditc check`.

Issue 26, item 5: "`auditc --version` and `auditc check` on a study spec import no pandas, no
engines and no report code; report the import time ratio against today". Each command runs in a
fresh interpreter (``python -c PROBE ARGS``) once per tree, alternating BEFORE / AFTER; BEFORE is
a temporary ``git worktree`` of ``--before`` (default: the commit this work started from), AFTER
the working tree this script lives in. Per command and tree it reports the median wall time and
CPU time (user + sys of the child) of the whole process, the median ``-X importtime`` total of
``auditlang.cli`` plus the subcommand's imports, and the modules loaded (auditlang's, all,
whether pandas / numpy / an engine / report code is among them). Usage::

    python benchmarks/bench_startup.py --repeats 10
    python benchmarks/bench_startup.py --before 640a8ef --spec specs/s000_multivariant_audit.audit
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BEFORE = "640a8ef"  # main when issue 26 was taken up: every command imported 111 auditlang modules

PROBE = """
import json, sys
from auditlang.cli import main
try:
    rc = main(sys.argv[1:])
except SystemExit as e:  # --version exits from argparse
    rc = e.code
mods = sorted(sys.modules)
ours = [m for m in mods if m.startswith("auditlang")]
print("PROBE " + json.dumps({"rc": rc, "auditlang": len(ours), "all": len(mods),
      "pandas": "pandas" in sys.modules, "numpy": "numpy" in sys.modules,
      "engines": sorted(m for m in ours if m.startswith("auditlang.engines.")),
      "report": sorted(m for m in ours if m.startswith("auditlang.report"))}), file=sys.stderr)
"""


def run_once(tree: Path, args: list[str], importtime: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "AUDITLANG_NO_PLUGINS": "1"}
    cmd = [sys.executable, *(["-X", "importtime"] if importtime else []), "-c", PROBE, *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=tree, env=env, timeout=300)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    line = [x for x in out.stderr.splitlines() if x.startswith("PROBE ")]
    if not line:
        raise SystemExit(f"bench_startup: {args} failed in {tree}:\n{out.stderr[-2000:]}")
    info = json.loads(line[-1][6:])
    info["wall"] = wall
    info["cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if importtime:  # cumulative microseconds of every top-level import (the lines with no indentation)
        tops = [x.split("|") for x in out.stderr.splitlines() if x.startswith("import time:")]
        info["import_s"] = sum(int(c[1]) for c in tops[1:] if c[2].startswith(" ") and not c[2].startswith("  ")) / 1e6
    return info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", default=BEFORE, help=f"git ref of the BEFORE tree (default {BEFORE})")
    ap.add_argument("--spec", default="specs/s000_multivariant_audit.audit", help="the study spec `check` reads")
    ap.add_argument("--repeats", type=int, default=7)
    a = ap.parse_args()
    commands = {"--version": ["--version"], "check": ["check", a.spec]}
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp) / "before"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(before), a.before], check=True)
        try:
            trees = {"before": before, "after": REPO}
            rows: dict[tuple[str, str], list[dict]] = {}
            for i in range(a.repeats):
                order = ["before", "after"] if i % 2 == 0 else ["after", "before"]
                for name, args in commands.items():
                    for side in order:
                        rows.setdefault((name, side), []).append(run_once(trees[side], args, importtime=False))
                        rows[(name, side)][-1]["import_s"] = run_once(trees[side], args, importtime=True)["import_s"]
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(before)], check=False)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
          f"{a.repeats} alternating repeats, before = {a.before}")
    print("| command | tree | wall s | CPU s | import s | auditlang modules | all modules | pandas | numpy | engine modules | report modules |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in commands:
        med = {}
        for side in ("before", "after"):
            rs = rows[(name, side)]
            m = {k: statistics.median(r[k] for r in rs) for k in ("wall", "cpu", "import_s")}
            med[side] = m
            r = rs[-1]
            print(f"| `auditc {' '.join(commands[name])}` | {side} | {m['wall']:.2f} | {m['cpu']:.2f} | {m['import_s']:.2f} | "
                  f"{r['auditlang']} | {r['all']} | {'yes' if r['pandas'] else 'no'} | {'yes' if r['numpy'] else 'no'} | "
                  f"{len(r['engines'])} | {len(r['report'])} |")
        print(f"| `auditc {' '.join(commands[name])}` | before / after | "
              + " | ".join(f"{med['before'][k] / med['after'][k]:.1f}x" for k in ("wall", "cpu", "import_s"))
              + " | | | | | | |")


if __name__ == "__main__":
    main()
