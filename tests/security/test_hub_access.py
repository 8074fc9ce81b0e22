"""A hub(...) dataset contacts the Hub: `auditc run` asks for the user's permission first, like a
remote model endpoint, unless the Hub libraries run offline (issue 15; docs/security.md)."""

from __future__ import annotations

from pathlib import Path

from auditlang.cli import main

SPEC = """import "stdlib/s000"
dataset arc = hub("allenai/ai2_arc", "test", config="ARC-Challenge", task=multiple_choice, sample=3, seed=1,
                  choices="choices.text", labels="choices.label", gold="answerKey", size=1172)
model smol = embedded("smollm2-135m-instruct", max_tokens=4)
audit a {
  models = [smol]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm]
}
"""


def test_hub_download_needs_permission_unless_offline(tmp_path: Path, monkeypatch, capsys) -> None:
    for v in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE", "HF_ENDPOINT"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("AUDITLANG_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.invalid")  # never contacted: refused before planning
    spec = tmp_path / "h.audit"
    spec.write_text(SPEC, encoding="utf-8")
    assert main(["run", str(spec), "--out", str(tmp_path / "r"), "--engine", "dryrun", "--display", "none"]) == 1
    err = capsys.readouterr().err
    assert "error[E180]" in err and "dataset 'arc' would be downloaded from hub.invalid" in err
    assert "h.audit:2:" in err and "HF_DATASETS_OFFLINE=1" in err
    assert not (tmp_path / "r").exists()
    assert main(["plan", str(spec), "--no-data"]) == 0
    assert "dataset arc: https://hub.invalid/datasets/allenai/ai2_arc" in capsys.readouterr().out
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")  # offline: the local cache only, nothing to allow
    from auditlang.execute.access import hub_access
    from auditlang.resolve import compile_spec

    assert hub_access(compile_spec(spec)) == []


def test_openai_url_from_the_environment_is_attributed_to_it(tmp_path: Path, monkeypatch) -> None:
    from auditlang.execute.access import run_access
    from auditlang.resolve import compile_spec

    spec = tmp_path / "o.audit"
    spec.write_text('model m = openai("gpt-x")\nmodel n = openai("gpt-x", base_url="http://127.0.0.1:9/v1")\n'
                    'dataset d = jsonl("d.jsonl", task=open_qa)\n'
                    'audit a {\n  models = [m, n]\n  datasets = [d]\n  variants = [s001.bare]\n'
                    '  protocols = [s001.verbal_self]\n}\nimport "stdlib/s001"\n', encoding="utf-8")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8001/v1")
    got = {a.model: (a.url, a.url_from) for a in run_access(compile_spec(spec))}
    assert got == {"m": ("http://127.0.0.1:8001/v1", "environment"), "n": ("http://127.0.0.1:9/v1", "spec")}
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert {a.model: a.url_from for a in run_access(compile_spec(spec))}["m"] == "default"
