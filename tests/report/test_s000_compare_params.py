"""Study 000 comparison parameters as a user writes them: ``evaluator_repair(reference_variants=)``
(Table 1's non-format_change mean) and ``ece_gap(datasets=)`` (Table 2 is MMLU-Pro only), checked
with ``auditc check``; the numbers are in test_numbers.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditlang.cli import main

HEAD = """
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=10, seed=42)
dataset mmlu = jsonl("mmlu.jsonl", task=multiple_choice, sample=10, seed=42)
model m = hf("org/m-1b", size=1.0)
template t1 = template("Q: {{ question }} Answer:")
template t2 = template("Think step by step. {{ question }} Answer:")
template conf = template("Now state your confidence in your answer above as a decimal probability between 0.0 and 1.0.")
variant plain = variant(t1)
variant reorder = variant(t1)
variant cot = variant(t2, max_tokens=256)
protocol tok = token_prob(readout=first_token, normalise=label_set, window=top_k, top_k=200)
protocol vb = verbalized(scale=decimal_01, phrasing=conf, provenance=self, mode=followup)
evaluator fc = first_char()
evaluator rx = regex_reparse()
audit a { models = [m]  datasets = [arc]  variants = [plain, reorder, cot]  protocols = [tok, vb]  evaluators = [fc, rx] }
"""


def check(tmp_path: Path, compare: str, capsys) -> tuple[int, str]:
    p = tmp_path / "s.audit"
    p.write_text(HEAD + compare + "\n", encoding="utf-8")
    rc = main(["check", str(p)])
    out = capsys.readouterr()
    return rc, out.out + out.err


def test_repair_with_the_mean_of_reference_variants_checks(tmp_path, capsys):
    rc, out = check(tmp_path, "compare rep = evaluator_repair(a, base=fc, repairs=[rx], "
                              "reference_variants=[plain, reorder], variant=cot)", capsys)
    assert rc == 0, out


@pytest.mark.parametrize("args, code, text", [
    ("reference_variant=plain, reference_variants=[plain, reorder]", "E159", "not both"),
    ("", "E159", "one is required"),
    ("reference_variants=[plain, cot]", "E159", "the repaired variant 'cot' is also a reference variant"),
    ("reference_variants=[plain, framing]", "E", "framing"),
    ("reference_variant=framing", "E", "framing"),
])
def test_repair_reference_diagnostics(tmp_path, capsys, args, code, text):
    sep = ", " if args else ""
    rc, out = check(tmp_path, f"compare rep = evaluator_repair(a, base=fc, repairs=[rx]{sep}{args}, variant=cot)", capsys)
    assert rc != 0 and f"error[{code}" in out and text in out, out
    assert "s.audit:" in out and "^" in out and "Traceback" not in out  # file:line:col and a caret


def test_ece_gap_datasets_must_be_the_audits(tmp_path, capsys):
    rc, out = check(tmp_path, "compare g = ece_gap(a, verbal=vb, token=tok, datasets=[arc])", capsys)
    assert rc == 0, out
    rc, out = check(tmp_path, "compare g = ece_gap(a, verbal=vb, token=tok, datasets=[mmlu])", capsys)
    assert rc != 0 and "error[E156]" in out and "'mmlu' is not in audit 'a' datasets" in out, out


def test_repair_reference_audit_is_checked(tmp_path, capsys):
    # reference_audit=: the reference variants are the other audit's, and it must score the same
    # generations with the base evaluator
    extra = "audit r { models = [m]  datasets = [arc]  variants = [cot]  protocols = [tok]  evaluators = [fc, rx] }\n"
    rc, out = check(tmp_path, extra + "compare rep = evaluator_repair(r, base=fc, repairs=[rx], reference_audit=a, "
                                      "reference_variants=[plain, reorder], variant=cot)", capsys)
    assert rc == 0, out
    rc, out = check(tmp_path, extra + "compare rep = evaluator_repair(r, base=fc, repairs=[rx], "
                                      "reference_variants=[plain, reorder], variant=cot)", capsys)
    assert rc != 0 and "'plain' is not in audit 'r' variants" in out, out
    other = "audit b { models = [m]  datasets = [arc]  variants = [plain, reorder]  protocols = [vb]  evaluators = [fc] }\n"
    rc, out = check(tmp_path, extra + other + "compare rep = evaluator_repair(r, base=rx, repairs=[fc], "
                                              "reference_audit=b, reference_variants=[plain], variant=cot)", capsys)
    assert rc != 0 and "reference audit 'b' lacks protocol 'tok'" in out, out
    assert "reference audit 'b' does not score with the base evaluator 'rx'" in out and "Traceback" not in out
