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


# -- every command a function (issue 35, item 6) -----------------------------------------------

def _rendered(name: str, f) -> str:
    """A signature as docs/python.md writes it: names and defaults, `*` before keyword-only ones."""
    import inspect

    out, star = [], False
    for p in inspect.signature(f).parameters.values():
        if p.kind is p.KEYWORD_ONLY and not star:
            out.append("*")
            star = True
        out.append(p.name if p.default is p.empty else f"{p.name}={p.default!r}")
    return f"{name}({', '.join(out)})"


def test_docs_signatures_are_the_real_ones_and_every_command_has_a_function() -> None:
    import auditlang
    from auditlang.cli import build_parser

    text = (REPO / "docs" / "python.md").read_text(encoding="utf-8")
    documented = dict(re.findall(r"^\| `auditlang\.(\w+)(\(.*?\))` \|", text, re.M))
    functions = [n for n in auditlang.__all__ if n not in ("CompileError", "__version__")]
    assert set(documented) == set(functions), "docs/python.md must document exactly the API's functions"
    for name, sig in documented.items():
        assert _rendered(name, getattr(auditlang, name)) == f"{name}{sig}", name
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert set(sub.choices) - {"lsp"} == set(auditlang.COMMANDS)
    assert all(callable(getattr(auditlang, f)) for f in auditlang.COMMANDS.values())


SPEC = """import "stdlib/s000"
dataset nums = jsonl("n.jsonl", task=multiple_choice, sample=6, seed=2)
model smol = embedded("smollm2-135m-instruct", max_tokens=8)
audit a {
  models = [smol]
  datasets = [nums]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm]
  evaluators = [s000.first_char]
  metrics = [accuracy]
}
report cells
"""


def test_every_command_as_a_notebook_calls_it(tmp_path: Path, monkeypatch, capsys) -> None:
    import pandas as pd

    import auditlang
    from auditlang.cli import main

    sys.path.insert(0, str(REPO / "tests"))
    from scripted_engine import number_items

    monkeypatch.chdir(tmp_path)
    (tmp_path / "n.jsonl").write_text(number_items(10), encoding="utf-8")
    (tmp_path / "s.audit").write_text(SPEC, encoding="utf-8")
    checked = auditlang.check("s.audit", model_args=["smol.max_tokens=4"])
    assert checked.counts["model"] == 1 and "1 audit" in checked.summary()
    assert checked.spec.get("smol").value.max_tokens == 4 and checked.spec.model_overrides[0]["to"] == "4"
    with pytest.raises(auditlang.CompileError) as e:
        auditlang.compile("s.audit", model_args=["smol.max_tokns=4"])
    assert e.value.diagnostics[0].span.file == "command line" and "max_tokens" in e.value.diagnostics[0].hint
    assert auditlang.fmt("model   m = embedded( \"x\" )\n") == 'model m = embedded("x")\n'
    plan = auditlang.plan("s.audit", data_root=".", limit="50%")
    assert len(plan.requests) == 3
    text = auditlang.show("s.audit", "a/*", item=1, data_root=".")
    assert text.startswith("cell a/smol/nums/") and "item 1 of 6 sampled" in text

    capsys.readouterr()
    run = auditlang.run("s.audit", out="runs/a", data_root=".", engine="dryrun")  # progress shown by default
    err = capsys.readouterr().err
    assert "[smol stage 1] 6 requests to run" in err and "[run] 6/6 requests" in err, err
    assert len(run.records) == 6
    quiet = auditlang.run("s.audit", out="runs/q", data_root=".", engine="dryrun", progress="none",
                          model_args=["smol.max_tokens=4"])
    assert capsys.readouterr().err == "" and quiet.info["model_overrides"][0]["key"] == "max_tokens"
    assert auditlang.open_run("runs/q").spec.get("smol").value.max_tokens == 4

    assert auditlang.write_report("runs/a").resolve() == tmp_path / "runs/a/report"
    tables = auditlang.rescore("runs/a", "exact_match")
    assert set(tables) == {"exact_match"} and isinstance(tables["exact_match"], pd.DataFrame)
    assert (tmp_path / "runs/a/rescore/exact_match/cells.csv").is_file()
    d = auditlang.diff("runs/a", "runs/q", metrics=["accuracy"])
    assert list(d["metric"]) == ["accuracy"] and "statement" in d and d.attrs["only_a"] == []

    status = auditlang.status("runs/a")
    assert status.complete and status.left == 0 and str(status).endswith("complete")
    for i in (0, 1):
        assert main(["run", "s.audit", "--data-root", ".", "--engine", "dryrun", "--shard", f"{i}/2",
                     "--out", f"runs/s{i}", "--no-progress"]) == 0
    shard = auditlang.status("runs/s0")
    assert shard.shard == "0/2" and not shard.complete and "auditc merge runs/s-merged runs/s0 runs/s1" in shard.text
    merged = auditlang.merge("runs/all", ["runs/s0", "runs/s1"])
    assert merged.results_added == 6 and not merged.conflicts
    auditlang.write_report("runs/all")
    pd.testing.assert_frame_equal(auditlang.open_run("runs/all").records.sort_values(["cell_id", "item_index"])
                                  .reset_index(drop=True),
                                  run.records.sort_values(["cell_id", "item_index"]).reset_index(drop=True))
