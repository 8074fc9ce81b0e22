"""One way to declare a component (issue 37, done-when): a metric, an evaluator, a perturbation, a
protocol and an engine option (here on an engine of its own) added in ONE file of a temporary plugin,
each with its parameters declared once as a ``Params`` model (an engine option as a field of the
engine's option model), and seen — with no other file and no test edited — by ``auditc check`` (a
checked parameter, with a did-you-mean), the language server (hover and completion), the docs
tables (scripts/registry_docs.py) and the report of a real ``auditc run`` (cells.csv, the checklist).

Fast: the plugin is a dist-info folder on PYTHONPATH (no pip), the engine answers from its option
(no model), four items.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]

PLUGIN = '''
"""Everything a new component needs, in one file."""

from typing import Any, ClassVar, Literal

from pydantic import Field

from auditlang.core.engine_options import EngineOptions, option
from auditlang.core.params import Obj
from auditlang.core.registry import register
from auditlang.core.requests import Result, Sample
from auditlang.engines.dryrun import DryRunEngine
from auditlang.evaluators.base import Evaluator
from auditlang.evaluators.letters import gold_letter, item_labels
from auditlang.evaluators.outcome import ParseOutcome, failure
from auditlang.prompts.perturb import Perturbation
from auditlang.protocols.base import Program, Readout


class GapParams(Obj):
    shift: float = Field(0.0, ge=-1.0, le=1.0, description="added to mean(confidence) - accuracy")


def conf_gap(conf, correct, shift: float = 0.0) -> float:
    """mean(confidence) - accuracy + shift."""
    conf, correct = list(conf), list(correct)
    return sum(conf) / len(conf) - sum(correct) / len(correct) + shift


class Lower(Perturbation):
    name = "lower"
    source = "ext37 plugin"

    class Params(Perturbation.Params):
        DOC: ClassVar[str] = "The question in lower case."
        keep_first: bool = Field(False, description="keep the first character as written")

    def apply(self, item, seed):
        q = str(item.get("question", ""))
        return {**item, "question": (q[:1] + q[1:].lower()) if self.params.keep_first else q.lower()}


class PickLetter(Evaluator):
    name = "pick_letter"
    source = "ext37 plugin"

    class Params(Obj):
        DOC: ClassVar[str] = "The first or last option letter standing alone in the answer."
        which: Literal["first", "last"] = Field("first", description="which standalone letter counts")

    def describe(self) -> str:
        return f"The {self.params['which']} standalone option letter of the answer."

    def label(self, text, item) -> ParseOutcome:
        found = [w for w in (text or "").replace(".", " ").split() if w in item_labels(item, self.name)]
        if not found:
            return failure("no_letter")
        return ParseOutcome(found[0] if self.params["which"] == "first" else found[-1], True, "pick_letter", None)

    def correct(self, pred: Any, item) -> bool | None:
        gold = gold_letter(item)
        return None if gold is None else pred == gold


class ConstProgram(Program):
    """A constant confidence (no model call of its own)."""

    class Params(Obj):
        DOC: ClassVar[str] = "Every answer gets the same confidence."
        value: float = Field(0.5, ge=0.0, le=1.0, description="the confidence of every answer")

    def read(self, ctx, results, pred, answer_text, **kw) -> Readout:
        return Readout(self.p.value, True, self.obj.ctor)


class EchoOptions(EngineOptions):
    ENGINE: ClassVar[str] = "echo37"
    answer: str = option("A", "the text of every generated answer (default A)", spec="answer", fingerprint="answer")


class EchoEngine(DryRunEngine):
    engine_name = "echo37"

    def __init__(self, config) -> None:
        super().__init__(config)
        EchoOptions.check_names(config)
        self.answer = {**EchoOptions.defaults(), **config.options}["answer"]

    def fingerprint(self):
        return {"engine": self.engine_name, "model": self.config.path, "answer": self.answer}

    def run(self, requests):
        for r in requests:
            yield Result(request_id=r.id, kind=r.kind, samples=[Sample(text=self.answer)])


def check_config(config) -> None:
    EchoOptions.check_names(config)


def plug() -> None:
    register("metric", "conf_gap", impl=conf_gap, schema=GapParams, inputs="conf+correct")
    register("perturbation", "lower", impl=Lower)
    register("evaluator", "pick_letter", impl=PickLetter, reads="labels")
    register("protocol", "const_conf", impl=ConstProgram)
    register("engine", "echo37", impl="ext37:EchoEngine", schema=EchoOptions,
             capabilities=frozenset({"generate"}), doc="Answers every request with its answer option.")
'''

SPEC = """import "stdlib/s000"

dataset d = jsonl("items.jsonl", task=multiple_choice)
model m = echo37("any", answer="B", max_tokens=4)
variant low = s000.surface_paraphrase with (perturb=[lower(keep_first=true)])
protocol c = const_conf(value=0.75)
evaluator e = pick_letter(which=last)
audit a {
  models = [m]
  datasets = [d]
  variants = [s000.surface_paraphrase, low]
  protocols = [c]
  evaluators = [e]
  metrics = [accuracy, conf_gap(shift=0.125)]
}
report cells, checklist, disclosure(format=latex)
"""

PROBE = """
import json, sys
from auditlang.lsp import docs as D
from auditlang.lsp.complete import complete
text = open("s.audit").read()
at = text.index("conf_gap(") + len("conf_gap(")
out = {
    "hover": {"metric": D.metric_doc("conf_gap"), "evaluator": D.ctor_doc("evaluator", "pick_letter"),
              "perturbation": D.ctor_doc("perturbation", "lower"), "protocol": D.ctor_doc("protocol", "const_conf"),
              "model": D.ctor_doc("model", "echo37")},
    "complete_metric": [i.label for i in complete(text, at, None)],
    "complete_model": [i.label for i in complete(text, text.index('"any", ') + 7, None)],
    "tables": {k: D.registry_table(k) for k in ("metric", "evaluator", "perturbation", "protocol", "engine")},
}
print(json.dumps(out))
"""


def _site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    (site / "ext37.py").write_text(PLUGIN, encoding="utf-8")
    dist = site / "ext37-0.3.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ext37\nVersion: 0.3\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[auditlang.plugins]\next = ext37:plug\n", encoding="utf-8")
    return site


def _env(site: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "AUDITLANG_NO_PLUGINS"}
    return {**env, "PYTHONPATH": f"{site}{os.pathsep}{REPO}"}


def _auditc(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "auditlang.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=_env(site), timeout=600)


def test_one_file_adds_a_component_of_each_kind(tmp_path: Path) -> None:
    site = _site(tmp_path)
    items = [{"id": f"q{i}", "question": f"Which Number is {i}?", "choices": ["x", "y", "z"],
              "answer": "y" if i % 2 else "x", "answer_index": 1 if i % 2 else 0} for i in range(4)]
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(x) + "\n" for x in items), encoding="utf-8")
    (tmp_path / "s.audit").write_text(SPEC, encoding="utf-8")

    # auditc check: every plugin parameter is checked from its declaration, with a did-you-mean
    ok = _auditc(site, tmp_path, "check", "s.audit")
    assert ok.returncode == 0, ok.stderr
    bad = SPEC
    for good, typo in (('answer="B"', 'answr="B"'), ("shift=0.125", "shift=2.0"), ("which=last", "which=middle"),
                       ("value=0.75", "valeu=0.75"), ("keep_first=true", "keep_frist=true")):
        bad = bad.replace(good, typo)
    (tmp_path / "bad.audit").write_text(bad, encoding="utf-8")
    r = _auditc(site, tmp_path, "check", "bad.audit")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    for line, hint in ((4, "answer"), (5, "keep_first"), (6, "value"), (7, "first"), (14, "shift")):
        assert f"bad.audit:{line}:" in r.stderr and hint in r.stderr, (line, hint, r.stderr)

    # the language server and the docs tables read the same declarations
    probe = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=tmp_path,
                           env=_env(site), timeout=300)
    assert probe.returncode == 0, probe.stderr
    seen = json.loads(probe.stdout)
    for kind, param in (("metric", "shift"), ("evaluator", "which"), ("perturbation", "keep_first"),
                        ("protocol", "value"), ("model", "answer")):
        assert seen["hover"][kind] and param in seen["hover"][kind], (kind, seen["hover"][kind])
    assert "shift" in seen["complete_metric"] and "answer" in seen["complete_model"]
    for kind, row in (("metric", "| `conf_gap` | `shift` (0.0)"), ("evaluator", "| `pick_letter` | `which` (first"),
                      ("perturbation", "| `lower` | `seed` (none), `keep_first` (false)"),
                      ("protocol", "| `const_conf` | `value` (0.5)"), ("engine", "| `echo37` | `answer` (A) | `answer` (A)")):
        assert row in seen["tables"][kind], (kind, seen["tables"][kind])

    # the report: the run's numbers come from the plugin's components, the checklist names them
    run = _auditc(site, tmp_path, "run", "s.audit", "--data-root", str(tmp_path), "--out", "r", "--no-progress")
    assert run.returncode == 0, run.stderr
    cells = pd.read_csv(tmp_path / "r" / "metrics" / "cells.csv")
    assert len(cells) == 2 and list(cells["accuracy"]) == [0.5, 0.5]  # every answer is "B"; half the golds are
    assert [round(v, 6) for v in cells["conf_gap(shift=0.125)"]] == [0.375, 0.375]  # 0.75 - 0.5 + 0.125
    checklist = (tmp_path / "r" / "report" / "checklist.md").read_text(encoding="utf-8")
    for kind, name in (("evaluator", "pick_letter"), ("metric", "conf_gap"), ("perturbation", "lower"),
                       ("protocol", "const_conf")):
        assert f"{kind} `{name}`: from plugin ext37 0.3" in checklist, (kind, checklist)
    assert "echo37" in checklist
    # an evaluator with no PROSE is named in the methods paragraph by its one-line DOC
    methods = (tmp_path / "r" / "report" / "methods.tex").read_text(encoding="utf-8")
    assert "the first or last option letter standing alone in the answer (e: evaluator \\auditid{pick\\_letter})" in methods, methods
