"""`auditc check` finds every error `auditc plan --no-data` finds (issue 13): each combination of a
protocol's axes is run through both commands, as a user types them.

For every combination the two commands agree: both succeed, or both exit 1 with the same
diagnostics; neither ever exits 70 (an internal error with a traceback).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from auditlang.cli import main

HEAD = """dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=5)
dataset tqa = jsonl("triviaqa.jsonl", task=open_qa, sample=5)
model smol = embedded("smollm2-135m-instruct")
variant v = variant("Q: {{ question }}\\nA:")
template phr = "How sure are you that {{ generation }} is right? Probability:"
template pre = "Guess: {{ generation }}"
"""


def _spec(protocols: str, names: list[str], dataset: str = "arc") -> str:
    return HEAD + protocols + f"""
audit a {{
  models = [smol]
  datasets = [{dataset}]
  variants = [v]
  protocols = [{', '.join(names)}]
}}
"""


def _token_prob(readout: str, scored: str | None, context: str | None, prefix: bool, prefill: bool) -> str:
    args = [f"readout={readout}"]
    args += [f"scored={scored}"] if scored else []
    args += [f"context={context}"] if context else []
    args += ["prefix=pre"] if prefix else []
    args += ['prefill="Guess:"'] if prefill else []
    return f"protocol p = token_prob({', '.join(args)}, normalise=raw)\n"


def _verbalized(mode: str, provenance: str, phrasing: bool, prefill: bool) -> str:
    args = [f"mode={mode}", f"provenance={provenance}"]
    args += ["phrasing=phr"] if phrasing else []
    args += ['prefill="Guess: {{ proposed_answer }}\\nProbability:"'] if prefill else []
    return f"protocol p = verbalized({', '.join(args)})\n"


def _p_true(template: bool, labels: str) -> str:
    args = ["template=phr"] if template else []
    args += [f"labels={labels}"]
    return f"protocol p = p_true({', '.join(args)})\n"


TOKEN = [_token_prob(*c) for c in itertools.product(
    ("first_token", "T1", "T2"), (None, "gold"), (None, "verbal_prefix"), (False, True), (False, True))]
VERBAL = [_verbalized(*c) for c in itertools.product(
    ("followup", "joint"), ("self", "gold", "off_type"), (False, True), (False, True))]
PTRUE = [_p_true(*c) for c in itertools.product((False, True), ('["A", "B"]', '["A"]', '["A", "A"]'))]
PLATT = [
    "protocol b = token_prob(readout=T1)\nprotocol p = platt(b)\n",
    "protocol b = ask_cal()\nprotocol p = platt(b)\n",
    "protocol b = embedding_probe()\nprotocol p = platt(b)\n",
    "protocol b0 = token_prob(readout=T1)\nprotocol b = platt(b0)\nprotocol p = platt(b)\n",
]
CASES = TOKEN + VERBAL + PTRUE + PLATT


def _run(argv: list[str], capsys) -> tuple[int, str]:
    rc = main(argv)
    captured = capsys.readouterr()
    return rc, captured.err


@pytest.mark.parametrize("decl", CASES, ids=lambda d: d.strip().splitlines()[-1][len("protocol p = "):])
def test_check_and_plan_agree(decl: str, tmp_path: Path, capsys, monkeypatch, shared_data) -> None:
    monkeypatch.setenv("AUDITLANG_DATA_ROOT", str(shared_data))
    monkeypatch.setenv("NO_COLOR", "1")
    dataset = "tqa" if decl.startswith("protocol p = token_prob(readout=T") else "arc"
    path = tmp_path / "s.audit"
    path.write_text(_spec(decl, ["p"], dataset), encoding="utf-8")
    rc_check, err_check = _run(["check", str(path)], capsys)
    rc_plan, err_plan = _run(["plan", "--no-data", str(path)], capsys)
    assert rc_check in (0, 1) and rc_plan in (0, 1), err_check + err_plan
    assert "Traceback" not in err_check + err_plan
    assert rc_check == rc_plan, f"check exit {rc_check}, plan --no-data exit {rc_plan}:\n{err_check}\n{err_plan}"
    if rc_check:
        assert err_check == err_plan  # the same diagnostics, found by the resolver
        assert "error[E159]" in err_check, err_check


def test_the_issue_reproduction(tmp_path: Path, capsys) -> None:
    """`token_prob(readout=first_token, scored=gold)`: check now fails where plan used to crash."""
    path = tmp_path / "s.audit"
    path.write_text(_spec("protocol p = token_prob(readout=first_token, scored=gold)\n", ["p"]), encoding="utf-8")
    rc, err = _run(["check", str(path)], capsys)
    assert rc == 1
    assert "s.audit:7:46: error[E159]: protocol 'p': scored=gold needs teacher forcing" in err
    assert "hint: add readout=T1 (or T2), or drop scored=" in err


def test_expected_rejections(tmp_path: Path, capsys) -> None:
    """The rules themselves (so that agreement is not agreement on accepting everything)."""
    bad = [
        _token_prob("first_token", "gold", None, False, False),
        _token_prob("first_token", None, "verbal_prefix", False, False),
        _token_prob("T1", None, None, True, False),
        _verbalized("joint", "gold", False, False),
        _verbalized("joint", "self", False, True),
        _verbalized("followup", "self", False, False),
        _p_true(False, '["A", "B"]'),
        _p_true(True, '["A", "A"]'),
        PLATT[1], PLATT[2], PLATT[3],
    ]
    good = [_token_prob("T1", "gold", "verbal_prefix", True, True), _verbalized("followup", "gold", True, False),
            _verbalized("joint", "self", False, False), _p_true(True, '["A", "B"]'), PLATT[0]]
    for decl in bad + good:
        path = tmp_path / "s.audit"
        path.write_text(_spec(decl, ["p"]), encoding="utf-8")
        rc, err = _run(["check", str(path)], capsys)
        assert rc == (1 if decl in bad else 0), decl + err
        if decl in bad:
            assert err.count("error[E159]") == 1, decl + err


def test_template_syntax_error_is_found_by_check(tmp_path: Path, capsys) -> None:
    path = tmp_path / "s.audit"
    path.write_text(_spec('protocol p = verbalized(phrasing="Sure? {{ generation ")\n', ["p"]), encoding="utf-8")
    for argv in (["check", str(path)], ["plan", "--no-data", str(path)]):
        rc, err = _run(argv, capsys)
        assert rc == 1 and "Traceback" not in err
        assert "error[E160]: template 'p.phrasing', line 1, col 7: unexpected end of template" in err


def test_fmt_missing_file_and_directory(tmp_path: Path, capsys) -> None:
    (tmp_path / "spec.audit").write_text('model m = embedded("gemma3-270m")\n', encoding="utf-8")
    rc, err = _run(["fmt", str(tmp_path / "spce.audit")], capsys)
    assert rc == 1 and "error[E100]: file not found" in err and "did you mean 'spec.audit'" in err
    rc, err = _run(["fmt", "--check", str(tmp_path)], capsys)
    assert rc == 1 and "error[E111]" in err and "is a directory" in err and "Traceback" not in err
    # the good file given with a bad one is still formatted; the exit code reports the bad one
    rc, err = _run(["fmt", "--check", str(tmp_path / "spec.audit"), str(tmp_path / "nope.audit")], capsys)
    assert rc == 1 and "nope.audit" in err


def test_item_level_problems_are_plan_diagnostics(tmp_path: Path, capsys, shared_data) -> None:
    """What only the data can show (an item without a gold answer, a few-shot pool too small) is a
    plan diagnostic naming the item, never a traceback; `check` (no data) cannot see it."""
    import json

    rows = [json.loads(line) for line in (shared_data / "triviaqa.jsonl").read_text(encoding="utf-8").splitlines()[:5]]
    rows[2]["answer"] = ""
    (tmp_path / "tqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    spec = (
        'dataset tqa = jsonl("tqa.jsonl", task=open_qa)\nmodel smol = embedded("smollm2-135m-instruct")\n'
        'variant v = variant("Q: {{ question }}\\nA:", fewshot=FS)\nprotocol g = token_prob(readout=T1, scored=gold)\n'
        "audit a {\n  models = [smol]\n  datasets = [tqa]\n  variants = [v]\n  protocols = [g]\n}\n")
    path = tmp_path / "s.audit"
    for fewshot, code, text in ((0, "E164", f"scored=gold but item '{rows[2]['id']}' of dataset 'tqa' has no gold answer"),
                                (10, "E163", "few-shot k=10 but the pool has only 4 items")):
        path.write_text(spec.replace("FS", str(fewshot)), encoding="utf-8")
        assert _run(["check", str(path)], capsys)[0] == 0
        rc, err = _run(["plan", "--data-root", str(tmp_path), str(path)], capsys)
        assert rc == 1 and "Traceback" not in err, err
        assert f"error[{code}]" in err and text in err, err


def test_engine_capabilities_are_found_by_check(tmp_path: Path, capsys, monkeypatch, shared_data) -> None:
    """E172 needs no data: the request kinds come from the protocol programs' roles."""
    monkeypatch.setenv("AUDITLANG_DATA_ROOT", str(shared_data))
    src = (Path(__file__).parent / "cases" / "engine_capabilities.audit").read_text(encoding="utf-8")
    path = tmp_path / "s.audit"
    path.write_text(src, encoding="utf-8")
    outs = [_run(argv + [str(path)], capsys) for argv in (["check"], ["plan", "--no-data"], ["plan"])]
    assert [rc for rc, _ in outs] == [1, 1, 1]
    assert outs[0][1] == outs[1][1] == outs[2][1]
    err = outs[0][1]
    assert "cannot serve continuation_logprobs requests needed by cell(s) a/gpt/arc/v/t1/first_char, a/gpt/arc/v/t1/c\n" in err
    assert "cannot serve constrained_choice requests needed by cell(s) a/gpt/arc/v/t1/c, a/gpt/arc/v/ft/c\n" in err
    # served by vLLM's OpenAI-compatible server: the same spec plans
    path.write_text(src.replace('openai("gpt-4o-mini")', 'openai("gpt-4o-mini", server=vllm)'), encoding="utf-8")
    assert _run(["check", str(path)], capsys)[0] == 0
    assert _run(["plan", "--no-data", str(path)], capsys)[0] == 0


def test_dataset_filter_without_values_is_found_by_check(tmp_path: Path, capsys, monkeypatch, shared_data) -> None:
    monkeypatch.setenv("AUDITLANG_DATA_ROOT", str(shared_data))
    path = tmp_path / "s.audit"
    spec = _spec("protocol p = token_prob()\n", ["p"])
    for given, other in (('filter_field="subject"', "filter_in"), ('filter_in=["a"]', "filter_field")):
        path.write_text(spec.replace("sample=5)", f"sample=5, {given})", 1), encoding="utf-8")
        for argv in (["check"], ["plan", "--no-data"], ["plan"]):
            rc, err = _run(argv + [str(path)], capsys)
            assert rc == 1 and f"error[E159]: dataset 'arc': {given.split('=')[0]}= without {other}=" in err, err


def test_protocol_template_undefined_variable_is_a_plan_diagnostic(tmp_path: Path, capsys, monkeypatch,
                                                                   shared_data) -> None:
    monkeypatch.setenv("AUDITLANG_DATA_ROOT", str(shared_data))
    path = tmp_path / "s.audit"
    path.write_text(_spec('protocol p = p_true(template="Is {{ proposed_answer }} right for {{ quesion }}?", '
                          "provenance=gold)\n", ["p"]), encoding="utf-8")
    rc, err = _run(["plan", str(path)], capsys)
    assert rc == 1 and "Traceback" not in err
    assert "error[E163]: rendering protocol 'p': variable 'quesion' is undefined" in err and "question" in err


def test_python_compile_finds_what_check_finds() -> None:
    """`auditlang.compile` mirrors `auditc check`: the planner's data-free check included."""
    import auditlang
    from auditlang.core.diagnostics import CompileError

    path = Path(__file__).parent / "cases" / "engine_capabilities.audit"
    with pytest.raises(CompileError) as err:
        auditlang.compile(path)
    assert [d.code for d in err.value.diagnostics] == ["E172", "E172"]
