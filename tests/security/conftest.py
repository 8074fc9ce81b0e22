"""A tiny project on disk (spec, data folder, root marker) for hostile-input tests."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from auditlang.cli import main

ARC_ROWS = "".join(json.dumps({"id": f"q{i}", "question": f"Which number is {i}?",
                               "choices": [str(i), str(i + 1), str(i + 2), str(i + 3)], "answer": str(i)}) + "\n"
                   for i in range(12))

BASE = """import "stdlib/s000"
# a small audit
dataset arc = jsonl("arc.jsonl", task=multiple_choice, sample=4, seed=7)
model smol = embedded("smollm2-135m-instruct", dtype=float32, batch_size=4, max_tokens=8)
audit a {
  models = [smol]
  datasets = [arc]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm]
  evaluators = [s000.first_char]
  metrics = [accuracy]
}
report cells, checklist
"""


def spec_with_template(args: str, dataset: str = 'dataset arc = jsonl("arc.jsonl", task=multiple_choice, sample=4, seed=7)',
                       extra: str = "") -> str:
    """BASE with the variant's template replaced by ``template(ARGS)`` (declared on line 4)."""
    return f'''import "stdlib/s000"
{dataset}
model smol = embedded("smollm2-135m-instruct", dtype=float32, batch_size=4, max_tokens=8)
template t = template({args})
variant v = variant(multiple_choice=t)
audit a {{
  models = [smol]
  datasets = [arc]
  variants = [v]
  protocols = [s000.token_norm]
  evaluators = [s000.first_char]
  metrics = [accuracy]
}}
report cells, checklist
{extra}'''


def make_project(proj: Path, spec: str = BASE, rows: str = ARC_ROWS) -> Path:
    """Create the project and make it the working directory."""
    (proj / "data").mkdir(parents=True)
    (proj / "auditlang.toml").write_text("", encoding="utf-8")
    (proj / "data" / "arc.jsonl").write_text(rows, encoding="utf-8")
    (proj / "s.audit").write_text(spec, encoding="utf-8")
    os.chdir(proj)
    return proj


def run_dryrun(spec: str, out: str, *extra: str) -> int:
    return main(["run", spec, "--data-root", "data", "--out", out, "--engine", "dryrun", "--no-progress", *extra])


@pytest.fixture(autouse=True)
def _keep_cwd():
    cwd = os.getcwd()
    yield
    os.chdir(cwd)
