"""Everyday loop leftovers (issue 25 item 6). User path: the example specs, `auditc` through
``main([...])``, the dry-run engine where no model is needed."""

from __future__ import annotations

import json
from pathlib import Path

from auditlang.cli import main

ROOT = Path(__file__).resolve().parents[2]
QUICK = ROOT / "examples" / "quickstart_full.audit"


def test_cache_into_a_new_out_with_everything_cached_loads_no_model(tmp_path: Path, capsys) -> None:
    cache = tmp_path / "cache"
    args = ["--limit", "2", "--engine", "dryrun", "--no-report", "--display", "none", "--cache", str(cache)]
    assert main(["run", str(QUICK), "--out", str(tmp_path / "a"), *args]) == 0
    first = json.loads((tmp_path / "a" / "run.json").read_text())["last_run"]
    capsys.readouterr()
    assert main(["run", str(QUICK), "--out", str(tmp_path / "b"), *args]) == 0
    out = capsys.readouterr().err
    assert "loading" not in out, out
    assert "[smollm2] unchanged and every request stored: not loaded" in out
    second = json.loads((tmp_path / "b" / "run.json").read_text())
    assert second["last_run"]["executed"] == 0 and second["last_run"]["from_cache"] == first["executed"]
    assert set(second["static_keys"]) == {"smollm2", "gemma3"}
    # the run directory is complete on its own: its report matches the first run's numbers
    assert main(["report", str(tmp_path / "a")]) == 0 and main(["report", str(tmp_path / "b")]) == 0
    a = (tmp_path / "a" / "metrics" / "cells.csv").read_text()
    assert a == (tmp_path / "b" / "metrics" / "cells.csv").read_text()


# -- rescore takes its evaluators from the registry ----------------------------------------

def _small_run(tmp_path: Path) -> Path:
    run = tmp_path / "r"
    assert main(["run", str(QUICK), "--limit", "2", "--engine", "dryrun", "--out", str(run), "--no-report",
                 "--display", "none"]) == 0
    return run


def test_rescore_accepts_boxed_letter_and_plugin_evaluators(tmp_path: Path, capsys) -> None:
    import sys

    from auditlang.core.registry import REGISTRY

    run = _small_run(tmp_path)
    assert main(["rescore", str(run), "--evaluator", "boxed_letter"]) == 0
    assert (run / "rescore" / "boxed_letter" / "cells.csv").exists()
    # an installed plugin's evaluator (the example plugin, registered as its entry point would)
    sys.path.insert(0, str(ROOT / "examples" / "plugin"))
    try:
        from auditlang_example_plugin import LastLetterEvaluator
    finally:
        sys.path.remove(str(ROOT / "examples" / "plugin"))
    name = "integrity_test_last_letter"
    REGISTRY.register("evaluator", name, impl=LastLetterEvaluator, reads="labels")
    try:
        assert main(["rescore", str(run), "--evaluator", name]) == 0
        assert (run / "rescore" / name / "records.parquet").exists()
    finally:
        REGISTRY.unregister("evaluator", name)
    # evaluators that send model requests are refused, by their registry entry
    capsys.readouterr()
    for needs_model in ("constrained", "llm_judge", "loglik_argmax"):
        assert main(["rescore", str(run), "--evaluator", needs_model]) == 1
        assert "sends requests to a model" in capsys.readouterr().err


# -- a plugin component on a machine without the plugin -------------------------------------

def test_run_dir_names_the_plugin_a_machine_lacks(tmp_path: Path, capsys, monkeypatch) -> None:
    """The run directory records which plugin each component came from; `auditc report` where
    that plugin is not installed names it instead of guessing a built-in."""
    import shutil

    data = ROOT.parent / "shared" / "data" / "arc_challenge.jsonl"
    if not data.exists():
        import pytest

        pytest.skip("../shared/data is not available")
    import sys

    from auditlang.core.registry import REGISTRY

    sys.path.insert(0, str(ROOT / "examples" / "plugin"))
    try:
        from auditlang_example_plugin import LastLetterEvaluator
    finally:
        sys.path.remove(str(ROOT / "examples" / "plugin"))
    name = "integrity_plugin_eval"
    REGISTRY._plugin = "auditlang-integrity-plugin 0.2.0"  # what load_plugins sets while a plugin registers
    try:
        REGISTRY.register("evaluator", name, impl=LastLetterEvaluator, reads="labels")
    finally:
        REGISTRY._plugin = None
    proj = tmp_path / "p"
    proj.mkdir()
    shutil.copy(data, proj / "arc_challenge.jsonl")
    (proj / "p.audit").write_text(f"""import "stdlib/s000"

dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=3, seed=1)
model smol = embedded("smollm2-135m-instruct", max_tokens=8)
evaluator last = {name}()
audit a {{
  models = [smol]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm]
  evaluators = [s000.first_char, last]
  metrics = [accuracy]
}}
report cells
""", encoding="utf-8")
    try:
        assert main(["run", str(proj / "p.audit"), "--engine", "dryrun", "--out", str(tmp_path / "r"),
                     "--display", "none"]) == 0
        info = json.loads((tmp_path / "r" / "run.json").read_text())
        assert info["plugin_components"] == {f"evaluator {name}": "auditlang-integrity-plugin 0.2.0"}
    finally:
        REGISTRY.unregister("evaluator", name)  # the plugin is gone: another machine
    capsys.readouterr()
    assert main(["report", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert f"evaluator '{name}' comes from plugin auditlang-integrity-plugin 0.2.0, not installed" in err
    assert "pip install auditlang-integrity-plugin==0.2.0" in err and "did you mean" not in err
    # the spec itself, checked here: the hint says what a missing plugin means
    assert main(["check", str(proj / "p.audit")]) == 1
    assert f"if evaluator '{name}' comes from a plugin, that plugin is not installed here" in capsys.readouterr().err


# -- small ones ------------------------------------------------------------------------------

def test_compile_error_is_exported() -> None:
    import auditlang

    assert "CompileError" in auditlang.__all__
    try:
        auditlang.compile("audit a {")
    except auditlang.CompileError as e:
        assert e.diagnostics
    else:
        raise AssertionError("a broken spec compiled")


def test_plan_json_keeps_no_absolute_path(tmp_path: Path, monkeypatch) -> None:
    run = tmp_path / "r"
    assert main(["run", str(QUICK), "--data-root", str(ROOT / "examples" / "data"), "--limit", "2", "--engine",
                 "dryrun", "--out", str(run), "--no-report", "--display", "none"]) == 0
    text = (run / "plan.json").read_text(encoding="utf-8")
    assert str(ROOT) not in text and str(tmp_path) not in text
    plan = json.loads(text)
    assert plan["spec"]["path"] == json.loads((run / "run.json").read_text())["spec_entry"]
    assert all((run / d["path"]).is_file() for d in plan["datasets"].values())
    assert main(["report", str(run)]) == 0  # the hash is unchanged: the run reads back


def test_plan_summary_counts_cells_per_axis_value(capsys) -> None:
    assert main(["plan", str(QUICK), "--data-root", str(ROOT / "examples" / "data"), "--limit", "2"]) == 0
    out = capsys.readouterr().out
    assert "48 cells" in out  # quickstart_full: 2 models x 2 datasets x 2 variants x 3 protocols x 2 evaluators
    rows = {line.split("│")[0].strip(): line.split("│")[-1].strip() for line in out.splitlines() if "│" in line}
    assert rows["model"] == "24 each" and rows["protocol"] == "16 each" and rows["audit"] == "48"


def test_twin_specs_name_no_developer_path() -> None:
    for spec in sorted((ROOT / "examples").glob("s00*_twin.audit")):
        text = spec.read_text(encoding="utf-8")
        assert "/work/" not in text and "--data-root DIR" in text, spec.name
