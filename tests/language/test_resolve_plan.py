"""Resolver and planner: names, overrides, imports, cell crossing, deduplication, estimates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from auditlang.cli import main
from auditlang.core.diagnostics import CompileError
from auditlang.plan.planner import build_plan
from auditlang.resolve import compile_spec

REPO = Path(__file__).resolve().parents[2]

SPEC = """
import "stdlib/s000"
dataset arc = jsonl("arc_challenge.jsonl", task=multiple_choice, sample=20, seed=42)
dataset sst = jsonl("sst2.jsonl", task=classification, sample=10, seed=1)
model smol = embedded("smollm2-135m-instruct")
model gemma = embedded("gemma3-270m")
protocol tok = s000.token_norm with (top_k=50)
protocol tok_raw = tok with (normalise=raw)
audit a {
  models = [smol, gemma]
  datasets = [arc, sst]
  variants = [s000.surface_paraphrase, s000.implicit_framing]
  protocols = [tok, tok_raw, s000.verbal_decimal]
  evaluators = [s000.first_char, s000.regex_reparse]
}
"""


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    p = tmp_path / "s.audit"
    p.write_text(SPEC, encoding="utf-8")
    return p


def test_override_and_imports(spec_file: Path) -> None:
    spec = compile_spec(spec_file)
    tok, raw = spec.get("tok").value, spec.get("tok_raw").value
    assert (tok.top_k, tok.normalise) == (50, "label_set")
    assert (raw.top_k, raw.normalise) == (50, "raw")
    assert spec.get("s000.token_norm").value.top_k == 200  # the stdlib object is untouched
    assert spec.get("s000.verbal_percent").value.scale == "percent_0_100"


def test_cells_cross_every_axis(spec_file: Path, shared_data: Path) -> None:
    plan = build_plan(compile_spec(spec_file), data_root=str(shared_data))
    assert len(plan.cells) == 2 * 2 * 2 * 3 * 2
    ids = [c.id for c in plan.cells]
    assert len(set(ids)) == len(ids)
    assert "a/smol/arc/s000.surface_paraphrase/tok/s000.first_char" in ids
    assert not plan.estimated
    # study 000 sampling: random.Random(seed).sample(range(n), N), reused by every cell
    import random

    n_arc = sum(1 for _ in (shared_data / "arc_challenge.jsonl").open())
    assert plan.datasets["arc"]["indices"] == random.Random(42).sample(range(n_arc), 20)


def test_requests_deduplicated_exactly(spec_file: Path, shared_data: Path) -> None:
    plan = build_plan(compile_spec(spec_file), data_root=str(shared_data))
    ids = [r.id for r in plan.requests]
    assert len(ids) == len(set(ids))
    # per (model, dataset, variant, item): one answer generation shared by all protocols and
    # evaluators; the top-50 first-token window of tok and tok_raw rides on it (issue 16: a
    # one-token window call is the first decoding step of the greedy answer)
    items = 20 + 10
    answers = [r for r in plan.requests if r.kind == "generate" and dict(r.params)["max_tokens"] != 1]
    windows = [r for r in plan.requests if r.kind == "generate" and dict(r.params)["max_tokens"] == 1]
    assert len(answers) == 2 * 2 * items and not windows
    assert all(dict(r.params)["first_top_logprobs"] == 50 for r in answers)
    assert plan.naive_request_count > plan.unique_request_count
    # verbal follow-ups are stage 2: counted per item, built at run time
    verbal = [d for d in plan.deferred if d["role"] == "verbal"]
    assert sum(d["count"] for d in verbal) == 2 * 2 * items


def test_plan_json_keys(spec_file: Path, shared_data: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "plan.json"
    rc = main(["plan", str(spec_file), "--data-root", str(shared_data), "--format", "json", "-o", str(out)])
    assert rc == 0
    d = json.loads(out.read_text())
    for key in ("version", "cells", "requests", "naive_request_count"):
        assert key in d
    assert all("id" in c for c in d["cells"])
    assert d["version"] == "auditlang.plan/1"


def test_plan_is_deterministic(spec_file: Path, shared_data: Path) -> None:
    a = build_plan(compile_spec(spec_file), data_root=str(shared_data)).to_dict()
    b = build_plan(compile_spec(spec_file), data_root=str(shared_data)).to_dict()
    assert a["hash"] == b["hash"]
    assert [c["hash"] for c in a["cells"]] == [c["hash"] for c in b["cells"]]


def test_plan_without_data_is_estimated(spec_file: Path, tmp_path: Path, capsys) -> None:
    plan = build_plan(compile_spec(spec_file), data_root=str(tmp_path))
    assert plan.estimated
    assert len(plan.cells) == 48
    assert plan.cells[0].estimated
    rc = main(["plan", str(spec_file), "--data-root", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0 and "estimated" in out


def test_rich_summary_lists_counts(spec_file: Path, shared_data: Path, capsys) -> None:
    assert main(["plan", str(spec_file), "--data-root", str(shared_data), "--cells"]) == 0
    out = capsys.readouterr().out
    assert "naive" in out and "deduplicated" in out and "cells by axis" in out
    assert "a/smol/arc/s000.surface_paraphrase/tok/s000.first_char" in out


def test_unknown_template_variable_is_a_diagnostic(tmp_path: Path, shared_data: Path) -> None:
    p = tmp_path / "t.audit"
    p.write_text(SPEC.replace('variants = [s000.surface_paraphrase, s000.implicit_framing]', 'variants = [v]')
                 + '\nvariant v = variant("{{ questoin }}")\n', encoding="utf-8")
    with pytest.raises(CompileError) as e:
        build_plan(compile_spec(p), data_root=str(shared_data))
    msg = "\n".join(d.message + str(d.hint) for d in e.value.diagnostics)
    assert "questoin" in msg and "question" in msg


def test_import_cycle_and_duplicate_namespace(tmp_path: Path) -> None:
    (tmp_path / "a.audit").write_text('import "b.audit"\n', encoding="utf-8")
    (tmp_path / "b.audit").write_text('import "a.audit"\n', encoding="utf-8")
    with pytest.raises(CompileError) as e:
        compile_spec(tmp_path / "a.audit")
    assert any(d.code == "E110" for d in e.value.diagnostics)
