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
report cells, checklist
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
    # without the plugin the same spec is a diagnostic with a location, not a traceback
    off = _auditc(plugin_site, "check", "p.audit", cwd=tmp_path, AUDITLANG_NO_PLUGINS="1")
    assert off.returncode == 1 and "p.audit:5:" in off.stderr and "Traceback" not in off.stderr


def test_the_example_metric_and_evaluator_by_hand(plugin_site: Path) -> None:
    sys.path.insert(0, str(plugin_site))
    try:
        import numpy as np

        from auditlang_example_plugin import LastLetterEvaluator, overconfidence, shout
    finally:
        sys.path.remove(str(plugin_site))
    assert overconfidence(np.array([0.9, 0.8, 0.7, 0.6]), np.array([1, 0, 0, 1])) == pytest.approx(0.75 - 0.5)
    ev = LastLetterEvaluator()
    item = {"question": "q", "choices": ["a", "b", "c"], "answer_index": 2}
    out = ev.label("I think A, no wait, it is C.", item)
    assert out.ok and out.value == "C" and ev.correct("C", item) is True
    assert not ev.label("no idea", item).ok
    assert shout({"question": "why?"}, 1)["question"] == "WHY?"


def test_a_broken_plugin_is_a_clear_error(tmp_path: Path) -> None:
    site = tmp_path / "site"
    pkg = site / "broken_plugin"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("def register():\n    raise RuntimeError('boom')\n", encoding="utf-8")
    dist = site / "broken_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 1.0\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[auditlang.plugins]\nbroken = broken_plugin:register\n", encoding="utf-8")
    (tmp_path / "s.audit").write_text('model m = embedded("smollm2-135m-instruct")\n', encoding="utf-8")
    r = _auditc(site, "check", "s.audit", cwd=tmp_path)
    assert r.returncode == 1 and "plugin broken-plugin 1.0" in r.stderr and "boom" in r.stderr
    assert "Traceback" not in r.stderr and "AUDITLANG_NO_PLUGINS" in r.stderr
    assert _auditc(site, "check", "s.audit", cwd=tmp_path, AUDITLANG_NO_PLUGINS="1").returncode == 0
