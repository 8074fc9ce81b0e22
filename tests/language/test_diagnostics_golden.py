"""Golden tests: the rendered diagnostics for specs with mistakes (file:line:col, caret, hint)."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditlang.cli import main

CASES = Path(__file__).parent / "cases"
GOLDEN = Path(__file__).parent / "goldens" / "diagnostics"
ENTRY_CASES = sorted(p for p in CASES.glob("*.audit") if p.name != "cycle_b.audit")


@pytest.mark.parametrize("path", ENTRY_CASES, ids=lambda p: p.stem)
def test_diagnostics_golden(path: Path, golden, capsys, monkeypatch, shared_data) -> None:
    monkeypatch.setenv("AUDITLANG_DATA_ROOT", str(CASES if path.stem == "bad_data" else shared_data))
    monkeypatch.setenv("NO_COLOR", "1")
    rc = main(["plan", str(path)])
    err = capsys.readouterr().err
    assert rc == 1, err
    assert "Traceback" not in err
    repo = str(Path(__file__).resolve().parents[2])
    text = err.replace(str(CASES) + "/", "").replace(repo + "/", "").replace(repo, "<repo>")
    golden(GOLDEN / f"{path.stem}.txt", text)
    # every error has a location and a caret line
    for block in text.strip().split("\n\n"):
        if "error[" in block:
            first = block.splitlines()[0]
            assert first.count(":") >= 3, block


def test_several_errors_in_one_pass(capsys) -> None:
    rc = main(["check", str(CASES / "unknown_names.audit")])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.count("error[") >= 5
    assert "did you mean 'sample'" in err
    assert "did you mean 'embedded'" in err
    assert "did you mean 'label_set'" in err
    assert "did you mean 'smol'" in err
    assert "did you mean 'accuracy'" in err


def test_missing_spec_file(capsys, tmp_path) -> None:
    rc = main(["check", str(tmp_path / "nope.audit")])
    assert rc == 1
    assert "spec file not found" in capsys.readouterr().err


def test_usage_error_exit_code() -> None:
    assert main(["plan"]) == 2
    assert main(["frobnicate"]) == 2
