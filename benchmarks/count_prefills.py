"""Stage-1 prefills of every study spec: requests, generation rows and distinct prompts per model.

Issue 16's target: "Stage-1 requests executed = distinct (model, prompt) prefills for every study
spec". For each spec (default: specs/*.audit) this plans with the data (a lean plan, requests
streamed through ``sink``) and counts per model: stage-1 requests, the generation rows they ask
for (a sampled request's ``n`` samples, 1 otherwise), the distinct prompts among them, and how
``auditc run`` loads the model (``engine_config``: the engine and, for vLLM, the resolved
``prefix_caching``). What each engine then prefills:

* hf: one prefill per distinct prompt of an ``engine.run`` call (tests/engines/test_hf_prefill_once.py;
  same-prompt requests are kept in one call by the executor);
* vLLM with the prefix cache on (every model since session 7, unless written off): every request
  is a vLLM request, but a prompt's full KV blocks are computed once and read from the cache by its
  other requests (each recomputes at most its last, partial block: 15 tokens on a GPU); off: one
  prefill per generation row.

Usage: ``python benchmarks/count_prefills.py [SPEC ...] [--data-root ../shared/data] [--json-out F]``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from auditlang.execute.runner import engine_config  # noqa: E402
from auditlang.plan.planner import build_plan  # noqa: E402
from auditlang.resolve import compile_spec  # noqa: E402


def rows_of(req: Any) -> int:
    if req.kind != "generate":
        return 1
    p = req.params if isinstance(req.params, dict) else dict(req.params)
    greedy = float(p.get("temperature", 0) or 0) == 0
    return 1 if greedy else int(p.get("n", 1) or 1)


def count(spec_path: Path, data_root: str) -> dict[str, Any]:
    spec = compile_spec(spec_path)
    per: dict[str, dict[str, Any]] = defaultdict(lambda: {"requests": 0, "rows": 0, "prompts": set()})

    def sink(req: Any) -> None:
        m = per[req.model]
        m["requests"] += 1
        m["rows"] += rows_of(req)
        m["prompts"].add(hashlib.sha1(repr(req.prompt).encode()).digest()[:12])

    t = time.perf_counter()
    plan = build_plan(spec, data_root=data_root, load_data=True, lean=True, sink=sink)
    out: dict[str, Any] = {"spec": str(spec_path.relative_to(ROOT)), "plan_s": round(time.perf_counter() - t, 1),
                           "estimated": bool(plan.estimated), "models": {}}
    for mid, m in sorted(per.items()):
        cfg = engine_config(spec, plan, mid)
        pc = cfg.options.get("enable_prefix_caching") if cfg.engine == "vllm" else None
        out["models"][mid] = {"engine": cfg.engine, "prefix_caching": pc, "stage1_requests": m["requests"],
                              "generation_rows": m["rows"], "distinct_prompts": len(m["prompts"])}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("specs", nargs="*", type=Path)
    ap.add_argument("--data-root", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--json-out", type=Path)
    a = ap.parse_args(argv)
    specs = [p.resolve() for p in a.specs] or sorted((ROOT / "specs").glob("*.audit"))
    results = []
    print(f"{'spec':<38}{'model':<22}{'engine':<8}{'prefix cache':>13}{'requests':>10}{'gen rows':>10}{'prompts':>9}{'rows/prompt':>12}")
    for sp in specs:
        r = count(sp, a.data_root)
        results.append(r)
        for mid, m in r["models"].items():
            pc = {True: "on", False: "off", None: "-"}[m["prefix_caching"]]
            print(f"{Path(r['spec']).name:<38}{mid:<22}{m['engine']:<8}{pc:>13}{m['stage1_requests']:>10,}"
                  f"{m['generation_rows']:>10,}{m['distinct_prompts']:>9,}{m['generation_rows'] / max(1, m['distinct_prompts']):>12.2f}")
    if a.json_out:
        a.json_out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
