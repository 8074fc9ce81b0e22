"""`-M MODEL.KEY=VALUE`, `--model-args KEY=VALUE,...` and `--limit` as a count, a fraction or a
range, through `auditc check / plan / show / run` as a user types them (issue 35, item 4)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from scripted_engine import number_items  # noqa: E402

from auditlang.cli import main  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

SPEC = """import "stdlib/s000"

dataset nums = jsonl("n.jsonl", task=multiple_choice, sample=30, seed=5)
model smol = embedded("smollm2-135m-instruct", dtype=float32, max_tokens=8)
model judge = embedded("gemma3-270m", max_tokens=8)
audit a {
  models = [smol]
  datasets = [nums]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm]
  evaluators = [s000.first_char]
  metrics = [accuracy]
}
"""


@pytest.fixture
def study(tmp_path: Path, monkeypatch) -> Path:
    (tmp_path / "n.jsonl").write_text(number_items(40), encoding="utf-8")
    (tmp_path / "s.audit").write_text(SPEC, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _auditc(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "auditlang.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


def test_unknown_key_and_model_point_at_the_argument(study: Path) -> None:
    p = _auditc("check", "s.audit", "-M", "smol.dtyp=bfloat16", "-M", "smoll.max_tokens=4",
                "--model-args", "batch_size=four", cwd=study)
    assert p.returncode == 1, p.stderr
    # the command line is the pseudo-file: one line per override argument, in the order they apply
    assert "command line:2:9: error[E120]: unknown parameter 'dtyp' for embedded()" in p.stderr
    assert "   2 | -M smol.dtyp=bfloat16\n               ^^^^\n  hint: did you mean 'dtype'?" in p.stderr
    assert "command line:3:4: error[E109]: unknown model 'smoll'" in p.stderr and "did you mean 'smol'?" in p.stderr
    p = _auditc("check", "s.audit", "--model-args", "batch_size=four", cwd=study)
    assert p.returncode == 1 and "command line:1:14: error[E123]: invalid value for 'batch_size'" in p.stderr
    p = _auditc("check", "s.audit", "-M", "dtype=bfloat16", cwd=study)
    assert p.returncode == 2 and "expected MODEL.KEY=VALUE" in p.stderr
    p = _auditc("check", "s.audit", "-M", "smol.dtype=bfloat16", "--model-args", "max_tokens=4", cwd=study)
    assert p.returncode == 0, p.stderr
    assert "note: model smol: dtype overridden from the command line (-M smol.dtype=bfloat16): float32 → bfloat16" in p.stderr
    assert "note: model smol: max_tokens overridden from the command line (--model-args max_tokens=4): 8 → 4" in p.stderr
    assert "model judge" not in p.stderr  # --model-args: the audited models only


def _plan_json(capsys, *args: str) -> dict:
    capsys.readouterr()
    assert main(["plan", "s.audit", "--data-root", ".", "--format", "json", "--no-requests", *args]) == 0
    return json.loads(capsys.readouterr().out)["datasets"]["nums"]


def test_limit_count_fraction_range_in_plan_json(study: Path, capsys) -> None:
    full = _plan_json(capsys)["indices"]
    for limit, positions in (("10", range(10)), ("0.1", range(3)), ("10%", range(3)), ("10:14", range(10, 14)),
                             ("25:", range(25, 30))):
        nums = _plan_json(capsys, "--limit", limit)
        assert nums["indices"] == [full[i] for i in positions], limit  # items by their sampled order
        assert nums["limit"] == (int(limit) if limit.isdigit() else limit) and nums["n_drawn"] == 30


def test_bad_limit_is_a_usage_error(study: Path, capsys) -> None:
    for bad in ("abc", "-3", "0", "1.5", "20:10", "150%"):  # 0 would run nothing
        assert main(["plan", "s.audit", "--data-root", ".", f"--limit={bad}"]) == 2, bad
        err = capsys.readouterr().err
        assert f"--limit: invalid limit '{bad}'" in err and "a range of sampled positions" in err
    p = _auditc("run", "s.audit", "--limit", "ten", cwd=study)  # as typed in a shell: exit 2, nothing written
    assert p.returncode == 2 and "--limit: invalid limit 'ten'" in p.stderr and not (study / "runs").exists()


def test_show_uses_the_override(study: Path, capsys) -> None:
    assert main(["show", "s.audit", "a/*", "--data-root", ".", "-M", "smol.max_tokens=3"]) == 0
    assert "max_tokens=3" in capsys.readouterr().out


def test_run_records_overrides_and_limit_and_the_checklist_states_them(study: Path, capsys) -> None:
    assert main(["run", "s.audit", "--engine", "dryrun", "--data-root", ".", "--no-progress", "--out", "runs/o",
                 "--limit", "10:14", "-M", "smol.dtype=bfloat16", "--model-args", "max_tokens=4,dtype=float16"]) == 0
    err = capsys.readouterr().err
    assert "note: model smol: dtype overridden from the command line (-M smol.dtype=bfloat16): float32 → bfloat16" in err
    info = json.loads((study / "runs/o/run.json").read_text())
    assert info["limit"] == "10:14"
    assert info["model_args"] == [{"flag": "--model-args", "text": "max_tokens=4,dtype=float16"},
                                  {"flag": "-M", "text": "smol.dtype=bfloat16"}]
    assert {(o["key"], o["from"], o["to"]) for o in info["model_overrides"]} == {("max_tokens", "8", "4"),
                                                                                 ("dtype", "float32", "bfloat16")}
    plan = json.loads((study / "runs/o/plan.json").read_text())
    assert plan["datasets"]["nums"]["limit"] == "10:14" and len(plan["datasets"]["nums"]["indices"]) == 4
    checklist = (study / "runs/o/report/checklist.md").read_text()
    assert "model smol: dtype overridden from the command line (-M smol.dtype=bfloat16): float32 → bfloat16" in checklist
    assert "model smol: max_tokens overridden from the command line (--model-args max_tokens=4,dtype=float16): 8 → 4" in checklist
    assert "only positions 10 to 13 (4 items) of the 30 sampled items were planned and scored" in checklist
    # read back exactly as it ran: the stored spec compiled with the recorded overrides, the plan hash checked
    assert main(["report", "runs/o"]) == 0
    assert "dtype overridden" in (study / "runs/o/report/checklist.md").read_text()
    # the same command again executes nothing
    assert main(["run", "s.audit", "--engine", "dryrun", "--data-root", ".", "--no-progress", "--out", "runs/o",
                 "--limit", "10:14", "-M", "smol.dtype=bfloat16", "--model-args", "max_tokens=4,dtype=float16"]) == 0
    assert "executed 0" in capsys.readouterr().err
