"""Every `auditc` command shown in the docs works (issue 26, item 7), as the spec blocks do
(scripts/check_specs.py):

* every command in a fenced block of README.md, ARCHITECTURE.md and docs/*.md is accepted by
  `auditc`'s own parser (subcommand, flags, arguments);
* every inline `auditc ...` names a real subcommand and only flags it has;
* the fenced commands on files the repository ships, of the commands that need no model
  (check, plan, show, fmt), run and exit 0;
* docs/walkthrough.md is taken as a user takes it: its spec, its commands in order (the run with
  `--engine dryrun --limit 20`: no model), and its §3 edit of a `compare` statement adopted with
  `auditc report RUN --spec`.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from auditlang.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
PAGES = [REPO / "README.md", REPO / "ARCHITECTURE.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```", re.S | re.M)
SPAN = re.compile(r"`(auditc [^`]+)`")
NOT_SHELL = ("audit", "python", "toml", "latex", "json", "jsonc", "lua", "text")


def _fenced() -> list[tuple[str, str]]:
    """(page:line, command) for every `auditc` command line of a shell block (comments, `$ `,
    `.venv/bin/` and chained `&&` parts split off)."""
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            if m.group(1) in NOT_SHELL:
                continue
            first = text[: m.start(2)].count("\n") + 1
            for i, line in enumerate(m.group(2).splitlines()):
                for part in line.split("&&"):
                    if not re.match(r"\s*(\$ )?(\S*/)?auditc\b", part):
                        continue
                    words = shlex.split(part.replace("$ ", "", 1), comments=True)
                    if words and words[0].endswith("auditc"):
                        out.append((f"{page.relative_to(REPO)}:{first + i}", shlex.join(["auditc", *words[1:]])))
    return out


def _inline() -> list[tuple[str, str]]:
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in SPAN.finditer(text):
            if not any(c in m.group(1) for c in "[…|"):  # a synopsis ([--flag], NAME…) is not a command
                out.append((f"{page.relative_to(REPO)}:{text[: m.start()].count(chr(10)) + 1}", " ".join(m.group(1).split())))
    return out


FENCED, INLINE = _fenced(), _inline()


def _subparsers(ap: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_the_docs_show_commands() -> None:
    assert len(FENCED) >= 20 and len(INLINE) >= 100
    assert any("walkthrough" in where for where, _ in FENCED)


@pytest.mark.parametrize(("where", "command"), FENCED, ids=[w for w, _ in FENCED])
def test_every_fenced_command_is_accepted_by_the_parser(where: str, command: str, capsys) -> None:
    args = shlex.split(command)[1:]
    try:
        build_parser().parse_args(args)
    except SystemExit as e:
        assert e.code == 0, f"{where}: `{command}` is refused by auditc:\n{capsys.readouterr().err}"


@pytest.mark.parametrize(("where", "command"), INLINE, ids=[w for w, _ in INLINE])
def test_every_inline_command_names_a_real_subcommand_and_flags(where: str, command: str) -> None:
    ap = build_parser()
    words = shlex.split(command)[1:]
    if words[0].startswith("-"):
        assert words[0] in ap._option_string_actions, f"{where}: `{command}`: auditc has no {words[0]}"
        return
    subs = _subparsers(ap)
    if words[0] not in subs:
        assert words[0].isupper(), f"{where}: `{command}`: auditc has no subcommand {words[0]!r}"  # COMMAND
        return
    options = subs[words[0]]._option_string_actions
    for w in words[1:]:
        if w.startswith("--"):
            assert w.split("=")[0] in options, f"{where}: `{command}`: `auditc {words[0]}` has no {w.split('=')[0]}"


NO_MODEL = ("check", "plan", "show", "fmt")


def _runnable(command: str) -> bool:
    """A no-model command on files the repository ships (nothing that needs a pilot run)."""
    words = shlex.split(command)[1:]
    if not words or words[0] not in NO_MODEL or "--pilot" in words:
        return False
    paths = [w for w in words[1:] if w.endswith(".audit")]
    return bool(paths) and all((REPO / p).is_file() for p in paths)


RUNNABLE = [(w, c) for w, c in FENCED if _runnable(c)]


@pytest.mark.parametrize(("where", "command"), RUNNABLE, ids=[w for w, _ in RUNNABLE])
def test_fenced_commands_on_shipped_files_run(where: str, command: str) -> None:
    r = subprocess.run([sys.executable, "-m", "auditlang.cli", *shlex.split(command)[1:]], capture_output=True,
                       text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=600)
    assert r.returncode == 0, f"{where}: `{command}` exited {r.returncode}:\n{r.stderr[-3000:]}"


def _walkthrough() -> tuple[str, list[str]]:
    text = (REPO / "docs" / "walkthrough.md").read_text(encoding="utf-8")
    spec = FENCE.search(text[text.index("## 1."):]).group(2)
    return spec, [c for w, c in FENCED if w.startswith("docs/walkthrough.md")]


def test_the_walkthrough_as_a_user_takes_it(tmp_path: Path) -> None:
    if not (SHARED_DATA / "arc_challenge.jsonl").exists():
        pytest.skip("../shared/data is not available")
    spec, commands = _walkthrough()
    (tmp_path / "normshift.audit").write_text(spec, encoding="utf-8")
    (tmp_path / "auditlang.toml").write_text("", encoding="utf-8")

    def auditc(*args: str) -> subprocess.CompletedProcess:
        args = tuple(str(SHARED_DATA) if a == "../shared/data" else a for a in args)
        return subprocess.run([sys.executable, "-m", "auditlang.cli", *args], capture_output=True, text=True,
                              cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=900)

    assert [shlex.split(c)[1] for c in commands] == ["check", "plan", "run", "report"]
    for command in commands[:3]:
        args = shlex.split(command)[1:]
        if args[0] == "run":
            args += ["--engine", "dryrun", "--limit", "20", "--no-progress"]
        r = auditc(*args)
        assert r.returncode == 0, f"`{command}`: {r.stderr[-3000:]}"
        if args[0] == "plan":
            assert "12" in r.stdout  # "plan shows 1 x 1 x 2 x 3 x 2 = 12 cells"
    report = tmp_path / "runs" / "normshift" / "report"
    for name in ("index.md", "cells.md", "checklist.md", "report.html", "comparisons/gap.md", "comparisons/sp.md",
                 "comparisons/shift_summary.md", "disclosure.tex"):
        assert (report / name).is_file(), name
    # §3: edit a compare statement. `auditc report runs/normshift` reports the run as it was (the
    # stored spec); `auditc report runs/normshift --spec normshift.audit` adopts the edit.
    edited = spec.replace("compare sp = spread(demo)", "compare sp = spread(demo)\n"
                          "compare sp2 = spread(demo, variants=[s000.surface_paraphrase, s000.implicit_framing])")
    (tmp_path / "normshift.audit").write_text(edited, encoding="utf-8")
    assert "`auditc report runs/normshift` rebuilds the report exactly as the run was" in \
        (REPO / "docs" / "walkthrough.md").read_text(encoding="utf-8")
    r = auditc("report", "runs/normshift")
    assert r.returncode == 0 and not (report / "comparisons" / "sp2.md").exists()
    r = auditc(*shlex.split(commands[3])[1:])
    assert r.returncode == 0 and "it is now the run's spec" in r.stdout, r.stderr[-3000:]
    assert (report / "comparisons" / "sp2.md").is_file()
