"""What the hub tests share: the spec around a dataset named ``arc`` and `auditc plan --format json`."""

from __future__ import annotations

import json
from pathlib import Path

from auditlang.cli import main

HEAD = """import "stdlib/s000"
model m = embedded("smollm2-135m-instruct", dtype=float32, max_tokens=8)
"""


def tail(report: str = "checklist") -> str:
    return f"""
audit a {{
  models = [m]
  datasets = [arc]
  variants = [s000.implicit_framing]
  protocols = [s000.token_norm]
  evaluators = [s000.first_char]
  metrics = [accuracy]
}}
report {report}
"""


def plan_json(capsys, spec: Path, *extra: str) -> dict:
    """`auditc plan SPEC --format json EXTRA...` in-process; the plan as a dict (exit 0 asserted)."""
    capsys.readouterr()
    rc = main(["plan", str(spec), "--format", "json", *extra])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out)
