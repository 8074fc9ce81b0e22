"""Field mapping for Hub schemas, for files and Hub splits alike: one options list for every row
(`choices=[...]`, a classification set whose rows hold only the label index), `gold=none` (the
gold is the option at `gold_index`), and a number in a dotted path indexing a list (`turns.0`)."""

from __future__ import annotations

import json
from pathlib import Path

from auditlang.cli import main

SPEC = """import "stdlib/s000"
import "stdlib/s001"
model m = embedded("smollm2-135m-instruct", dtype=float32, max_tokens=8)
dataset sst = jsonl("sst.jsonl", task=classification, id="idx", question="sentence", choices=["negative", "positive"],
                    gold=none, gold_index="label")
dataset turns = jsonl("turns.jsonl", task=open_qa, question="turns.0", gold="ground_truth")
audit a {
  models = [m]
  datasets = [sst]
  variants = [s000.implicit_framing]
  protocols = [s000.token_norm]
}
audit b {
  models = [m]
  datasets = [turns]
  variants = [s001.bare]
  protocols = [s001.verbal_self]
}
"""


def _write(tmp_path: Path, spec: str = SPEC) -> Path:
    (tmp_path / "sst.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
        {"idx": 7, "sentence": "a gem of a film", "label": 1}, {"idx": 8, "sentence": "a dull mess", "label": 0}]),
        encoding="utf-8")
    (tmp_path / "turns.jsonl").write_text(json.dumps({"turns": ["What is 2 + 2?", "and 3 + 3?"], "ground_truth": "4"})
                                          + "\n", encoding="utf-8")
    p = tmp_path / "s.audit"
    p.write_text(spec, encoding="utf-8")
    return p


def test_constant_choices_gold_none_and_list_index(tmp_path, capsys):
    from auditlang.data.loader import load_dataset
    from auditlang.resolve import compile_spec

    spec = _write(tmp_path)
    capsys.readouterr()
    assert main(["plan", str(spec), "--format", "json"]) == 0, capsys.readouterr().err
    plan = json.loads(capsys.readouterr().out)
    prompts = [r["prompt"] if isinstance(r["prompt"], str) else json.dumps(r["prompt"]) for r in plan["requests"]]
    assert any("a gem of a film" in p and "negative" in p and "positive" in p for p in prompts)
    assert any("What is 2 + 2?" in p and "and 3 + 3?" not in p for p in prompts)
    s = compile_spec(spec)
    sst = load_dataset(s, "sst", tmp_path).items
    assert [(i["id"], i["choices"], i["answer"], i["answer_index"]) for i in sst] == [
        ("7", ["negative", "positive"], "positive", 1), ("8", ["negative", "positive"], "negative", 0)]
    assert load_dataset(s, "turns", tmp_path).items[0]["question"] == "What is 2 + 2?"


def test_gold_none_needs_options_and_an_index(tmp_path, capsys):
    spec = _write(tmp_path, SPEC.replace('gold="ground_truth"', "choices=none, gold=none"))
    capsys.readouterr()
    assert main(["check", str(spec)]) == 1
    err = capsys.readouterr().err
    assert f"{spec}:6:86: error[E159]: dataset 'turns': gold=none takes the gold from the options by gold_index=, but " \
           "choices=none as well" in err
    spec = _write(tmp_path, SPEC.replace('gold="ground_truth"', "gold=none"))
    capsys.readouterr()
    assert main(["plan", str(spec)]) == 1
    err = capsys.readouterr().err
    assert "turns.jsonl:1: gold=none takes the gold from the options, but the row has no field 'choices'" in err
    spec = _write(tmp_path, SPEC.replace('gold_index="label"', 'gold_index="lable"'))
    capsys.readouterr()
    assert main(["plan", str(spec)]) == 1
    err = capsys.readouterr().err
    assert "error[E170]" in err and "sst.jsonl:1: row has no gold index (field 'lable'), and gold=none names no " \
                                    "gold-text field" in err and "fields present: idx, sentence, label" in err
