"""Plugins through entry points (issue 12): the worked example under examples/plugin, installed
with pip and used through the `auditc` command (a metric, a perturbation, an evaluator), named
in the checklist with its distribution and version."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

SPEC = """import "stdlib/s000"

dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=4, seed=1)
model smol = embedded("smollm2-135m-instruct", max_tokens=8)
variant loud = s000.surface_paraphrase with (perturb=[shout()])
evaluator last = last_letter()
audit a {
  models = [smol]
  datasets = [arc]
  variants = [s000.surface_paraphrase, loud]
  protocols = [s000.token_norm]
  evaluators = [s000.first_char, last]
  metrics = [accuracy, overconfidence]
}
report cells, checklist, disclosure(format=latex)
"""


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--target", str(site), str(REPO / "examples" / "plugin")], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot build the example plugin here: {r.stderr[-500:]}")
    return site


def _auditc(site: Path, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "auditlang.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{REPO}", **env}, timeout=600)


def test_installed_plugin_components_work_through_auditc(plugin_site: Path, tmp_path: Path) -> None:
    if not (SHARED_DATA / "arc_challenge.jsonl").exists():
        pytest.skip("../shared/data is not available")
    (tmp_path / "p.audit").write_text(SPEC, encoding="utf-8")
    assert _auditc(plugin_site, "check", "p.audit", cwd=tmp_path).returncode == 0
    plan = _auditc(plugin_site, "plan", "p.audit", "--data-root", str(SHARED_DATA), "--format", "json", cwd=tmp_path)
    assert plan.returncode == 0 and "WELL-DRAINED" in plan.stdout.upper() and "A PLANT THAT NEEDS" in plan.stdout
    run = _auditc(plugin_site, "run", "p.audit", "--data-root", str(SHARED_DATA), "--engine", "dryrun",
                  "--out", "r", "--no-progress", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    cells = pd.read_csv(tmp_path / "r" / "metrics" / "cells.csv")
    assert "overconfidence" in cells.columns and set(cells["evaluator"]) == {"s000.first_char", "last"}
    checklist = (tmp_path / "r" / "report" / "checklist.md").read_text(encoding="utf-8")
    for line in ("evaluator `last_letter`: from plugin auditlang-example-plugin 0.1.0",
                 "metric `overconfidence`: from plugin auditlang-example-plugin 0.1.0",
                 "perturbation `shout`: from plugin auditlang-example-plugin 0.1.0"):
        assert line in checklist
    # the plugin declares that shout draws nothing: no seed line, no "sets no seed" flag (issue 34)
    assert "(shout) makes no random choice with its default parameters (declared by the perturbation), so no seed" in checklist
    assert not [ln for ln in checklist.splitlines() if "sets no seed" in ln and "shout" in ln]
    # the methods paragraph names each plugin component in the words it declares: the evaluator's
    # PROSE, the perturbation's DOC without its "Example plugin: " label
    methods = (tmp_path / "r" / "report" / "methods.tex").read_text(encoding="utf-8")
    assert "the last standalone option letter in the answer (last)" in methods
    assert "applies the perturbation ``the question in upper case''" in methods
    assert "The metrics are accuracy and overconfidence (the mean confidence minus accuracy)." in methods  # its words
    assert "Example plugin" not in methods and "example plugin" not in methods
    # without the plugin the same spec is a diagnostic with a location, not a traceback
    off = _auditc(plugin_site, "check", "p.audit", cwd=tmp_path, AUDITLANG_NO_PLUGINS="1")
    assert off.returncode == 1 and "p.audit:5:" in off.stderr and "Traceback" not in off.stderr


def test_the_example_metric_and_evaluator_by_hand(plugin_site: Path) -> None:
    sys.path.insert(0, str(plugin_site))
    try:
        import numpy as np

        from auditlang_example_plugin import LastLetterEvaluator, Shout, overconfidence
    finally:
        sys.path.remove(str(plugin_site))
    assert overconfidence(np.array([0.9, 0.8, 0.7, 0.6]), np.array([1, 0, 0, 1])) == pytest.approx(0.75 - 0.5)
    ev = LastLetterEvaluator()
    item = {"question": "q", "choices": ["a", "b", "c"], "answer_index": 2}
    out = ev.label("I think A, no wait, it is C.", item)
    assert out.ok and out.value == "C" and ev.correct("C", item) is True
    assert not ev.label("no idea", item).ok
    assert Shout()({"question": "why?"}, 1)["question"] == "WHY?"


def test_a_broken_plugin_is_a_clear_error(tmp_path: Path) -> None:
    site = tmp_path / "site"
    pkg = site / "broken_plugin"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("def register():\n    raise RuntimeError('boom')\n", encoding="utf-8")
    dist = site / "broken_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 1.0\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[auditlang.plugins]\nbroken = broken_plugin:register\n", encoding="utf-8")
    # (plugins load with the registry: on the first component a command looks up)
    (tmp_path / "s.audit").write_text('model m = embedded("smollm2-135m-instruct")\nevaluator e = first_char()\n',
                                      encoding="utf-8")
    r = _auditc(site, "check", "s.audit", cwd=tmp_path)
    assert r.returncode == 1 and "plugin broken-plugin 1.0" in r.stderr and "boom" in r.stderr
    assert "Traceback" not in r.stderr and "AUDITLANG_NO_PLUGINS" in r.stderr
    assert _auditc(site, "check", "s.audit", cwd=tmp_path, AUDITLANG_NO_PLUGINS="1").returncode == 0


FIRST_WORD = '''
from typing import Any, ClassVar

from pydantic import Field

from auditlang.core.registry import register as register_component
from auditlang.evaluators.base import Evaluator
from auditlang.evaluators.outcome import ParseOutcome, failure
from auditlang.resolve.schema import Obj


class FirstWordEvaluator(Evaluator):
    """The first word of the answer, compared with the gold answer."""

    name = "first_word"
    source = "a test plugin"

    class Params(Obj):
        DOC: ClassVar[str] = "The first word of the answer equals the gold answer."
        fold_case: bool = Field(True, description="compare lower-cased")

    def describe(self) -> str:
        return "The first whitespace-separated word of the answer" + (" (lower-cased)" if self.params["fold_case"] else "")

    def label(self, text, item) -> ParseOutcome:
        words = (text or "").split()
        return ParseOutcome(words[0], True, "first_word", None) if words else failure("empty")

    def correct(self, pred: Any, item) -> bool | None:
        gold = item.get("answer")
        if not isinstance(gold, str):
            return None
        f = str.lower if self.params["fold_case"] else str
        return isinstance(pred, str) and f(pred) == f(gold)


class ShadowFirstChar(FirstWordEvaluator):
    class Params(Obj):
        DOC: ClassVar[str] = "A plugin evaluator whose name a built-in already has."
        shadow: int = 1


def register() -> None:
    # one declaration: the class's Params is the schema the spec, the docs and the editor see
    register_component("evaluator", "first_word", impl=FirstWordEvaluator, reads="text")
    register_component("evaluator", "first_char", impl=ShadowFirstChar, reads="text")
'''

FIRST_WORD_SPEC = """import "stdlib/s000"
dataset capitals = jsonl("demo_capitals.jsonl", task=multiple_choice, sample=3, seed=1)
model smol = embedded("smollm2-135m-instruct", max_tokens=4)
evaluator fw = first_word(fold_case=false)
audit a {
  models = [smol]
  datasets = [capitals]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm]
  evaluators = [s000.first_char, fw]
}
report cells
"""

LSP_PROBE = """
import sys
from auditlang.lsp.complete import complete
text = sys.argv[1]
print("LABELS", " ".join(sorted(i.label for i in complete(text, len(text), None))))
"""


def _site_with(tmp_path: Path, name: str, module: str) -> Path:
    site = tmp_path / "site"
    pkg = site / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(module, encoding="utf-8")
    dist = site / f"{name}-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: 1.0\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text(f"[auditlang.plugins]\nwords = {name}:register\n", encoding="utf-8")
    return site


def test_a_plugin_evaluator_is_seen_by_check_rescore_the_editor_and_the_docs(tmp_path: Path) -> None:
    site = _site_with(tmp_path, "words_plugin", FIRST_WORD)
    (tmp_path / "s.audit").write_text(FIRST_WORD_SPEC, encoding="utf-8")
    # check: its parameters are the class's Params (a misspelt one is a diagnostic with a hint)
    r = _auditc(site, "check", "s.audit", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (tmp_path / "bad.audit").write_text(FIRST_WORD_SPEC.replace("fold_case=", "fold_cas="), encoding="utf-8")
    r = _auditc(site, "check", "bad.audit", cwd=tmp_path)
    assert r.returncode == 1 and "bad.audit:4:" in r.stderr and "unknown parameter 'fold_cas' for first_word()" in r.stderr
    assert "fold_case" in r.stderr  # did you mean
    # rescore: an evaluator needing no model is accepted offline, built from the same Params
    run = _auditc(site, "run", "s.audit", "--data-root", str(REPO / "examples" / "data"), "--engine", "dryrun",
                  "--out", "r", "--no-progress", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    r = _auditc(site, "rescore", "r", "--evaluator", "first_word", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "r" / "rescore" / "first_word" / "cells.csv").is_file()
    r = _auditc(site, "rescore", "r", "--evaluator", "first_wrd", cwd=tmp_path)
    assert r.returncode == 1 and "did you mean 'first_word'" in r.stderr
    # the editor: completion of an evaluator constructor and of its parameters
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{REPO}"}
    for text, want in (("evaluator e = first_w", "first_word"), ("evaluator e = first_word(", "fold_case")):
        out = subprocess.run([sys.executable, "-c", LSP_PROBE, text], capture_output=True, text=True, env=env, timeout=300)
        assert want in out.stdout.split(), out.stdout + out.stderr
    # the docs table, generated from the registry
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "registry_docs.py"), "evaluator"], capture_output=True,
                         text=True, env=env, timeout=300)
    assert "| `first_word` | `fold_case` (true) | The first word of the answer equals the gold answer. | plugin words-plugin 1.0 |" \
        in out.stdout, out.stdout + out.stderr


def test_a_plugin_name_a_built_in_has_stays_the_built_in_with_a_warning(tmp_path: Path) -> None:
    site = _site_with(tmp_path, "words_plugin", FIRST_WORD)
    spec = tmp_path / "s.audit"
    spec.write_text(FIRST_WORD_SPEC.replace("first_word(fold_case=false)", "first_char(shadow=2)"), encoding="utf-8")
    r = _auditc(site, "check", "s.audit", cwd=tmp_path)  # first_char is the built-in: it has no `shadow`
    assert r.returncode == 1 and "unknown parameter 'shadow' for first_char()" in r.stderr
    assert "warning: plugin words-plugin 1.0: evaluator 'first_char' is also auditlang's" in r.stderr
    assert "write 'words.first_char'" in r.stderr and "Traceback" not in r.stderr
    spec.write_text(FIRST_WORD_SPEC.replace("first_word(fold_case=false)", "words.first_char(shadow=2)"), encoding="utf-8")
    r = _auditc(site, "check", "s.audit", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
