"""`auditc plan` builds a lean plan (issue 17: the planner at study scale): no Request objects, no
per-item units. Its hash, counts, cells, token estimates and printed summary must equal those of the
full plan `auditc run` builds; checked on every example spec with the data present."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console

from auditlang.cli import main
from auditlang.plan.planner import build_plan
from auditlang.plan.summary import print_summary
from auditlang.resolve import compile_spec

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
EXAMPLES = sorted((ROOT / "examples").glob("*.audit"))


def _data_root(spec: Path) -> list[str]:
    return [] if spec.name.startswith("quickstart") else ["--data-root", str(DATA)]


def _summary(spec, plan) -> str:
    con = Console(record=True, width=400, file=open("/dev/null", "w"))
    print_summary(spec, plan, show_cells=True, console=con)
    return con.export_text()


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_lean_plan_equals_full_plan(path: Path, tmp_path: Path, capsys) -> None:
    if not path.name.startswith("quickstart") and not (DATA / "sst2.jsonl").exists():
        pytest.skip("../shared/data is not available")
    root = None if path.name.startswith("quickstart") else str(DATA)
    spec = compile_spec(path)
    full = build_plan(spec, data_root=root)
    streamed = []
    lean = build_plan(spec, data_root=root, lean=True, sink=streamed.append)
    assert lean.lean and not lean.requests and full.requests
    assert lean.to_dict(include_requests=False) == full.to_dict(include_requests=False)
    assert lean.hash == full.hash
    assert lean.request_counts == dict(Counter((r.model, r.kind) for r in full.requests))
    assert [r.id for r in streamed] == [r.id for r in full.requests]  # the sink sees each once, in plan order
    assert lean.token_estimate_followups == full.token_estimate_followups
    assert all(not u.stage1 for u in lean.units.values())  # no per-item requests held
    assert _summary(spec, lean) == _summary(spec, full)
    with pytest.raises(ValueError):
        lean.to_dict(include_requests=True)
    # the user's commands, all from a lean plan: the JSON without requests, and with them (spooled
    # to temporary files and spliced in): the same text, hash included, as the full plan's JSON
    out = tmp_path / "plan.json"
    assert main(["plan", str(path), *_data_root(path), "--format", "json", "--no-requests", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["hash"] == full.hash
    for compact in ([], ["--compact"]):
        assert main(["plan", str(path), *_data_root(path), "--format", "json", *compact, "-o", str(out)]) == 0
        text = out.read_text()
        body = json.loads(text)
        want = {**full.to_dict(include_requests=True), "access": body["access"]}
        assert body == want and body["hash"] != full.hash  # the JSON's hash covers its requests
        assert text == json.dumps(want, indent=None if compact else 1, ensure_ascii=False)
    capsys.readouterr()
    assert main(["plan", str(path), *_data_root(path)]) == 0
    printed = capsys.readouterr().out
    assert f"stage 1 {len(full.requests):,}" in printed or "estimated" in printed
