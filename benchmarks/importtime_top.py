"""Summarise a ``python -X importtime`` log: top packages by self time, top modules by cumulative time.

``-X importtime`` writes one line per imported module to stderr (``import time: self [us] |
cumulative | imported package``, nested modules indented). This prints the top-level packages
ranked by the sum of their modules' self times (where the import's time really went) and the
modules ranked by cumulative time (what pulled the time in), issue 36 session 21.

    python -X importtime -c "import vllm" 2> imp.log; python benchmarks/importtime_top.py imp.log [--top 40]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

LINE = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)\s*$")


def parse(text: str) -> list[tuple[str, int, int, int]]:
    """(module, self us, cumulative us, depth) per importtime line, in log order."""
    rows = []
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            rows.append((m.group(4), int(m.group(1)), int(m.group(2)), (len(m.group(3)) - 1) // 2))
    return rows


def summarise(rows: list[tuple[str, int, int, int]], top: int) -> dict[str, object]:
    by_pkg: dict[str, int] = defaultdict(int)
    count: dict[str, int] = defaultdict(int)
    for mod, self_us, _cum, _depth in rows:
        by_pkg[mod.split(".")[0]] += self_us
        count[mod.split(".")[0]] += 1
    total = sum(r[2] for r in rows if r[3] == 0)
    pkgs = sorted(by_pkg.items(), key=lambda kv: -kv[1])[:top]
    mods = sorted(rows, key=lambda r: -r[2])[:top]
    return {
        "total_s": round(total / 1e6, 3),
        "modules": len(rows),
        "packages_by_self_s": [{"package": p, "self_s": round(us / 1e6, 3), "modules": count[p]} for p, us in pkgs],
        "modules_by_cumulative_s": [{"module": m, "cumulative_s": round(c / 1e6, 3), "self_s": round(s / 1e6, 3),
                                     "depth": d} for m, s, c, d in mods],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", help="stderr of python -X importtime")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--json", help="write the summary as JSON here too")
    args = ap.parse_args(argv)
    summary = summarise(parse(Path(args.log).read_text(encoding="utf-8", errors="replace")), args.top)
    print(f"{args.log}: {summary['modules']} modules, top-level imports {summary['total_s']:.2f} s")
    print("packages by self time:")
    for p in summary["packages_by_self_s"]:
        print(f"  {p['package']:<32} {p['self_s']:7.3f} s  ({p['modules']} modules)")
    print("modules by cumulative time:")
    for m in summary["modules_by_cumulative_s"]:
        print(f"  {'  ' * min(m['depth'], 8)}{m['module']:<48} {m['cumulative_s']:7.3f} s (self {m['self_s']:.3f})")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
