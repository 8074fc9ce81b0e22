"""The Python API of docs/python.md, executed as written (issue 12: a notebook-style example)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


def test_docs_example_runs(tmp_path: Path, monkeypatch) -> None:
    if not (SHARED_DATA / "arc_challenge.jsonl").exists():
        pytest.skip("../shared/data is not available")
    text = (REPO / "docs" / "python.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/python.md", "exec"), {"DATA": str(SHARED_DATA), "OUT": str(tmp_path / "run")})
    assert (tmp_path / "run" / "records.parquet").exists()


def test_import_is_light() -> None:
    out = subprocess.run([sys.executable, "-c", "import sys, auditlang; print(sorted(m for m in sys.modules "
                          "if m.split('.')[0] in ('pandas', 'numpy', 'torch', 'lark', 'pydantic')))"],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_compile_text_reports_diagnostics_with_locations(tmp_path: Path) -> None:
    import auditlang
    from auditlang.core.diagnostics import CompileError

    with pytest.raises(CompileError) as e:
        auditlang.compile('model m = embeded("smollm2-135m-instruct")\n', path=tmp_path / "nb.audit")
    d = e.value.diagnostics[0]
    assert d.span is not None and d.span.line == 1 and "nb.audit" in d.span.file
    assert d.hint and "embedded" in d.hint


def test_python_run_checks_hosts_and_secrets_like_auditc(tmp_path: Path, monkeypatch) -> None:
    import auditlang
    from auditlang.core.diagnostics import CompileError

    monkeypatch.setenv("AUDITLANG_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.chdir(tmp_path)
    text = ('import "stdlib/s001"\n'
            'model m = openai("gpt-x", base_url="https://exfil.invalid/v1", api_key_env="HOME")\n'
            'dataset d = jsonl("d.jsonl", task=open_qa)\n'
            'audit a {\n  models = [m]\n  datasets = [d]\n  variants = [s001.bare]\n  protocols = [s001.verbal_self]\n}\n')
    (tmp_path / "d.jsonl").write_text('{"id": "1", "question": "q?", "answer": "a"}\n', encoding="utf-8")
    with pytest.raises(CompileError) as e:
        auditlang.run(text, out=tmp_path / "run", data_root=tmp_path)
    codes = {d.code for d in e.value.diagnostics}
    assert codes == {"E180", "E181"} and not (tmp_path / "run").exists()


def test_python_run_takes_the_pipeline_of_auditc_run(tmp_path: Path, monkeypatch) -> None:
    """auditlang.run() and `auditc run` share one chain (api.plan_run, api.start_run; issue 26
    item 2): the same refusal of a spec with no cell, the same run.json fields, and the
    allowances are enforced only while the run runs (the API left them switched on)."""
    import json

    import auditlang
    from auditlang.cli import main
    from auditlang.core import trust
    from auditlang.core.errors import UserError

    monkeypatch.setenv("AUDITLANG_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.chdir(tmp_path)
    data = REPO / "examples" / "data"
    with pytest.raises(UserError, match="nothing to run: .* plans 0 cells"):
        auditlang.run('model m = embedded("smollm2-135m-instruct")\n', out=tmp_path / "none", data_root=data)
    spec = tmp_path / "s.audit"
    spec.write_text('import "stdlib/s000"\n'
                    'dataset capitals = jsonl("demo_capitals.jsonl", task=multiple_choice, sample=3, seed=1)\n'
                    'model smol = embedded("smollm2-135m-instruct", max_tokens=4)\n'
                    'model srv = openai("served-model")\n'
                    'audit a {\n  models = [smol, srv]\n  datasets = [capitals]\n  variants = [s000.surface_paraphrase]\n'
                    '  protocols = [s000.verbal_decimal]\n  evaluators = [s000.first_char]\n}\nreport cells\n', encoding="utf-8")
    auditlang.run(spec, out=tmp_path / "api", data_root=data, engine="dryrun")
    assert trust._ACTIVE is None
    assert main(["run", str(spec), "--out", str(tmp_path / "cli"), "--data-root", str(data), "--engine", "dryrun",
                 "--no-progress"]) == 0
    api, cli = (json.loads((tmp_path / d / "run.json").read_text()) for d in ("api", "cli"))
    for key in ("env_settings", "access"):
        assert api[key] == cli[key], key
    assert api["env_settings"] == {"srv": {"base_url": "http://127.0.0.1:9/v1", "from": "OPENAI_BASE_URL"}}
