"""A spec without any audit plans 0 cells: `auditc plan` and `run` say so (W151); `run` stops."""

from __future__ import annotations

from auditlang.cli import main

SPEC = 'dataset d = jsonl("d.jsonl", task=classification)\nmodel m = embedded("smollm2-135m-instruct")\n'
ROW = '{"id": "1", "question": "good?", "choices": ["neg", "pos"], "answer": "pos"}\n'


def _spec(tmp_path):
    (tmp_path / "d.jsonl").write_text(ROW, encoding="utf-8")
    spec = tmp_path / "noaudit.audit"
    spec.write_text(SPEC, encoding="utf-8")
    return spec


def test_check_plan_and_run_warn_when_no_audit_is_declared(tmp_path, capsys):
    spec = _spec(tmp_path)
    assert main(["plan", str(spec)]) == 0
    err = capsys.readouterr().err
    assert "noaudit.audit:1:1: warning[W151]: the spec declares no audit" in err, err
    assert "hint: add an `audit name {" in err
    # check (and editors) do not: a fragment of shared definitions imported elsewhere has no audit
    assert main(["check", str(spec)]) == 0
    assert "W151" not in capsys.readouterr().err
    # run: the same warning, then a clear refusal (exit 1, no run folder), not an empty run
    assert main(["run", str(spec), "--engine", "dryrun", "--out", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert "warning[W151]" in err and "nothing to run" in err and "plans 0 cells (it declares no audit)" in err
    assert "internal error" not in err and not (tmp_path / "run").exists()


def test_a_spec_with_an_audit_does_not_get_w151(tmp_path, capsys):
    spec = _spec(tmp_path)
    spec.write_text(SPEC + "import \"stdlib/s000\"\nprotocol stdlib_ok = token_prob()\naudit a {\n  models = [m]\n  datasets = [d]\n  variants = [s000.surface_paraphrase]\n  protocols = [stdlib_ok]\n}\n",
                    encoding="utf-8")
    assert main(["check", str(spec)]) == 0
    assert "W151" not in capsys.readouterr().err
    # an audit that does not resolve gets its own error, not W151 on top
    spec.write_text(spec.read_text().replace("s000.surface_paraphrase", "nosuch"), encoding="utf-8")
    assert main(["check", str(spec)]) == 1
    err = capsys.readouterr().err
    assert "unknown variant 'nosuch'" in err and "W151" not in err
