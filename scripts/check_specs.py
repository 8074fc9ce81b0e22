"""Every spec the project ships is canonical and compiles (issue 13, item 5; run by .ci/run).

Checks, with the `auditc` command a user would type:
  * `auditc fmt --check` and `auditc check` on specs/*.audit, stdlib/*.audit, examples/*.audit;
  * every ```audit block in README.md, ARCHITECTURE.md and docs/*.md, each written to a file of
    its own (in a temporary project folder) and run through the same two commands.
Exit status 0 when everything passes; otherwise the failures are listed and the status is 1.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```audit\n(.*?)^```", re.S | re.M)


def auditc(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "auditlang.cli", *args], capture_output=True, text=True, cwd=cwd)


def doc_blocks() -> list[tuple[str, str]]:
    out = []
    for md in [REPO / "README.md", REPO / "ARCHITECTURE.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = md.read_text(encoding="utf-8")
        for m in BLOCK.finditer(text):
            line = text[: m.start()].count("\n") + 2
            out.append((f"{md.relative_to(REPO)}:{line}", m.group(1)))
    return out


def main() -> int:
    failures: list[str] = []
    files = [p for d in ("specs", "stdlib", "examples") for p in sorted((REPO / d).glob("*.audit"))]
    for p in files:
        rel = str(p.relative_to(REPO))
        for cmd in (("fmt", "--check", rel), ("check", rel)):
            r = auditc(*cmd, cwd=REPO)
            if r.returncode != 0:
                failures.append(f"auditc {' '.join(cmd)}: exit {r.returncode}\n{r.stdout}{r.stderr}")
    blocks = doc_blocks()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "auditlang.toml").write_text("", encoding="utf-8")
        for i, (where, body) in enumerate(blocks):
            f = root / f"block{i}.audit"
            f.write_text(body, encoding="utf-8")
            for cmd in (("fmt", "--check", f.name), ("check", f.name)):
                r = auditc(*cmd, cwd=root)
                if r.returncode != 0:
                    failures.append(f"{where}: auditc {cmd[0]}: exit {r.returncode}\n{r.stdout}{r.stderr}")
    print(f"{len(files)} spec files and {len(blocks)} doc blocks checked; {len(failures)} problem(s)")
    for f in failures:
        print("\n" + f.rstrip())
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
