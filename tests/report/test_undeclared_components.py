"""Issue 34 item 1: a component that declares nothing gets an explicit UNSPECIFIED line naming it
(or no statement at all), never a built-in's wording. Through ``auditc run`` on a scripted engine:
a plugin protocol with decoding parameters of its own and no ``CALLS`` / ``facts``, and a plugin
comparison whose constructor declares no report role (``DISCLOSES``, ``CONTRASTED``, ...) and whose
outcome declares no ``shape``."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from auditlang.cli import main
from auditlang.core.params import Obj
from auditlang.core.registry import REGISTRY
from auditlang.protocols.base import Program, Readout
from auditlang.report.comparisons.common import Comparison
from auditlang.report.tables import Table
from auditlang.resolve.schema import Compare
from scripted_engine import generation, number_items, use_scripted_engine


class SampledParams(Obj):
    DOC: ClassVar[str] = "A constant confidence, with a decoding of its own calls."
    temperature: float = 0.7
    top_p: float = 1.0
    sample_top_k: int | None = None


class SampledProgram(Program):
    def read(self, ctx, results, pred, answer_text):
        return Readout(0.6, True, "sampled_const")


class TallyParams(Compare):
    DOC: ClassVar[str] = "Counts the audit's records."


def tally(rd, name, c) -> Comparison:
    t = Table(name, f"Records ({name})", ["n"])
    t.add(len(rd.records))
    return Comparison(name, "tally", c.audit, tables=[t])


SPEC = """import "stdlib/s000"
dataset nums = jsonl("nums.jsonl", task=multiple_choice)
model smol = embedded("smollm2-135m-instruct", max_tokens=4)
model gem = embedded("gemma3-270m", max_tokens=4)
protocol c = sampled_const()
audit a {
  models = [smol, gem]
  datasets = [nums]
  variants = [s000.surface_paraphrase, s000.instruction_reorder]
  protocols = [c, s000.token_norm]
  evaluators = [s000.first_char]
}
compare t = tally(a)
report cells, comparisons(format=both), checklist, disclosure
"""


def test_undeclared_plugin_components_get_no_borrowed_wording(tmp_path: Path, monkeypatch, capsys) -> None:
    use_scripted_engine(monkeypatch, lambda req: generation(req, "A") if req.kind == "generate" else None)
    REGISTRY.register("protocol", "sampled_const", schema=SampledParams, impl=SampledProgram)
    REGISTRY.register("comparison", "tally", schema=TallyParams, impl=tally)
    try:
        (tmp_path / "nums.jsonl").write_text(number_items(2), encoding="utf-8")
        spec = tmp_path / "p.audit"
        spec.write_text(SPEC, encoding="utf-8")
        out = tmp_path / "run"
        rc = main(["run", str(spec), "--data-root", str(tmp_path), "--out", str(out), "--no-progress"])
    finally:
        REGISTRY.unregister("protocol", "sampled_const")
        REGISTRY.unregister("comparison", "tally")
    assert rc in (0, 4), capsys.readouterr().err
    report = out / "report"
    checklist = " ".join((report / "checklist.md").read_text(encoding="utf-8").split())
    assert ("UNSPECIFIED: protocol 'c' (sampled_const) declares no name for its own calls (CALLS); they are "
            "called its calls below") in checklist
    assert "calls of c (sampled_const): sampled: temperature 0.7" in checklist
    for borrowed in ("probe reply of c", "sampled answers of c", "verbal-confidence call of c"):
        assert borrowed not in checklist
    disclosure = (report / "disclosure.md").read_text(encoding="utf-8")
    assert "tally" not in disclosure  # it declares no axis it measures: no row names it
    assert "| Prompt variant | s000.surface_paraphrase | s000.instruction_reorder |" in disclosure
    assert "per-cell table" in disclosure
    assert "Records (t)" in (report / "comparisons.md").read_text(encoding="utf-8")
    assert (report / "tables" / "t.tex").is_file()  # its first table, as a generic one
