"""The ``auditc`` console script's fast exit (auditlang.cli.entry): the exit code of main(),
atexit handlers and non-daemon threads still honoured, output flushed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_entry(argv: list[str], prelude: str = "") -> subprocess.CompletedProcess:
    code = textwrap.dedent(f"""
        import sys
        {prelude}
        sys.argv = ["auditc", *{argv!r}]
        from auditlang.cli import entry
        entry()
        print("not reached")
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)


def test_exit_code_output_atexit_and_threads(tmp_path: Path) -> None:
    prelude = textwrap.dedent("""
        import atexit, threading, time
        atexit.register(lambda: print("atexit ran", flush=False))
        def late():
            time.sleep(0.3)
            print("thread finished", flush=False)
        threading.Thread(target=late).start()
    """).replace("\n", "\n        ")
    r = run_entry(["--version"], prelude)
    assert r.returncode == 0, r.stderr
    assert "auditc" in r.stdout or "auditlang" in r.stdout
    assert "thread finished" in r.stdout and "atexit ran" in r.stdout
    assert r.stdout.index("thread finished") < r.stdout.index("atexit ran")
    assert "not reached" not in r.stdout


def test_diagnostic_exit_code(tmp_path: Path) -> None:
    bad = tmp_path / "bad.audit"
    bad.write_text('model m = hf("x", batch_size="big")\n', encoding="utf-8")
    r = run_entry(["check", str(bad)])
    assert r.returncode == 1
    assert "error[E123]" in r.stderr and "bad.audit:1:" in r.stderr
