"""``case_study(...)``'s user mistakes are diagnostics at check time (E156 / E157), each with
file:line:col, a caret under the parameter and a hint, through ``auditc check`` on the s002 twin
with one mistake written into it."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditlang.cli import main

TWIN = (Path(__file__).resolve().parents[2] / "examples" / "s002_twin.audit").read_text(encoding="utf-8")
SAMPLES_CASES = 'cases=[["smollm2", "triviaqa", "first"], ["gemma3", "popqa", "first"]],\n  methods=["Prob.", "PS", "P(True)"],'

MISTAKES = [
    pytest.param("sources=[robustness_answer, robustness_vc]", "sources=[robustness_answer, simulation]", "sources",
                 "E157", "compare 'case_prompts': sources= names 'simulation', which is not a robustness comparison",
                 "hint: list the ids of robustness(...) comparisons", id="source-not-robustness"),
    pytest.param("sources=[robustness_answer],\n  by=samples", "sources=[robustness_vc],\n  by=samples", "sources",
                 "E157", "compare 'case_samples': by=samples reads sampled answers, but source 'robustness_vc' has no samples=",
                 "hint: name robustness comparisons with samples=<protocol>", id="source-without-samples"),
    pytest.param(SAMPLES_CASES, SAMPLES_CASES.replace('["gemma3", "popqa", "first"]', '["gemma3", "popqa"]'), "cases",
                 "E156", "compare 'case_samples': a case is [model, dataset, item], got [gemma3, popqa]",
                 'hint: write cases=[["model", "dataset", "first"], ...]', id="case-of-two"),
    pytest.param(SAMPLES_CASES, SAMPLES_CASES.replace('"triviaqa"', '"arc"'), "cases",
                 "E156", "compare 'case_samples': no source's audit runs model 'smollm2' on dataset 'arc'",
                 "hint: the sources' audits run models smollm2, gemma3 on datasets triviaqa, popqa", id="dataset-not-run"),
    pytest.param(SAMPLES_CASES, SAMPLES_CASES.replace('"PS"', '"PSS"'), "methods",
                 "E157", "compare 'case_samples': method 'PSS' is named by no source's methods=",
                 "hint: did you mean 'PS'?", id="method-misspelt"),
]


@pytest.mark.parametrize(("old", "new", "param", "code", "message", "hint"), MISTAKES)
def test_case_study_mistake_is_a_diagnostic(tmp_path, capsys, old, new, param, code, message, hint):
    assert TWIN.count(old) == 1
    text = TWIN.replace(old, new)
    spec = tmp_path / "t.audit"
    spec.write_text(text, encoding="utf-8")
    assert main(["check", str(spec)]) == 1
    err = capsys.readouterr().err
    lines = text.splitlines()
    start = text[:text.index(new)].count("\n")  # the line where the edited text begins (0-based)
    line = next(i for i in range(start, len(lines)) if lines[i].lstrip().startswith(param + "=")) + 1
    col = lines[line - 1].index(param) + 1
    assert f"t.audit:{line}:{col}: error[{code}]: {message}" in err, err
    assert hint in err, err
    caret = err.split(f"t.audit:{line}:{col}: error[{code}]: {message}", 1)[1].splitlines()
    assert caret[2].strip() == "^" * len(param), caret  # the caret row under the parameter's name
    assert err.count("error[") == 1, err  # one mistake, one diagnostic


def test_the_twin_itself_checks_clean(tmp_path):
    spec = tmp_path / "t.audit"
    spec.write_text(TWIN, encoding="utf-8")
    assert main(["check", str(spec)]) == 0


PLAN_CASE = 'cases=[["smollm2", "triviaqa", "first"], ["gemma3", "popqa", "first"]],\n  methods=["Prob.", "PS", "P(True)"],'


def _plan(tmp_path, capsys, shared_data, item: str, *extra: str) -> tuple[int, str, str]:
    text = TWIN.replace(PLAN_CASE, PLAN_CASE.replace('"triviaqa", "first"', f'"triviaqa", "{item}"'))
    spec = tmp_path / "t.audit"
    spec.write_text(text, encoding="utf-8")
    rc = main(["plan", str(spec), "--data-root", str(shared_data), *extra])
    return rc, capsys.readouterr().err, text


def test_a_case_item_outside_the_sample_is_a_plan_time_error(tmp_path, capsys, shared_data):
    """The item id is checked against the loaded sample before any model runs (auditc check has no
    data): a misspelt id is E156 with the close ids as the hint, also under --limit (not in the data)."""
    rc, err, text = _plan(tmp_path, capsys, shared_data, "triviaqa_sm_sub_7")
    line = next(i for i, s in enumerate(text.splitlines(), 1) if "triviaqa_sm_sub_7" in s)
    assert rc == 1
    assert (f"t.audit:{line}:3: error[E156]: compare 'case_samples': case [smollm2, triviaqa, triviaqa_sm_sub_7]: "
            "item 'triviaqa_sm_sub_7' is not in the data of dataset 'triviaqa' (20 sampled item(s))") in err, err
    assert "hint: did you mean 'triviaqa_sm_sub_79'" in err
    rc, err, _ = _plan(tmp_path, capsys, shared_data, "triviaqa_sm_sub_7", "--limit", "3")
    assert rc == 1 and "error[E156]" in err and "cut by --limit" in err


def test_a_sampled_case_item_plans_and_one_cut_by_limit_is_a_warning(tmp_path, capsys, shared_data):
    rc, err, _ = _plan(tmp_path, capsys, shared_data, "triviaqa_sm_sub_746")  # in the 20-item sample
    assert rc == 0 and "E156" not in err and "W156" not in err, err
    rc, err, _ = _plan(tmp_path, capsys, shared_data, "triviaqa_sm_sub_746", "--limit", "3")
    assert rc == 0, err
    assert ("warning[W156]: compare 'case_samples': case [smollm2, triviaqa, triviaqa_sm_sub_746]: item "
            "'triviaqa_sm_sub_746' is in the data but not in the sample of dataset 'triviaqa' (3 sampled item(s), "
            "cut by --limit)") in err, err
