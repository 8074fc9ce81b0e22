"""The rich summary `auditc plan` prints: cells by axis, requests by model and kind, tokens."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from auditlang.core.capabilities import engine_calls
from auditlang.core.terminal import visible
from auditlang.plan.gputime import EAGER_BELOW_S, eager_for
from auditlang.plan.model import Plan
from auditlang.plan.planner import PLACEHOLDER_NOTE
from auditlang.resolve.models import model_config
from auditlang.resolve.spec import Spec


def axis_cells(counts: Counter) -> str:
    """The cells of each value of one axis: ``24 each`` when equal, else ``a 30, b 18``."""
    if not counts:
        return "0"
    values = set(counts.values())
    if len(values) == 1:
        n = values.pop()
        return f"{n:,}" if len(counts) == 1 else f"{n:,} each"
    return ", ".join(f"{k} {n:,}" for k, n in counts.items())


def _text(value: object) -> str:
    """A path or note (data, file names) for rich markup: control characters shown, brackets escaped."""
    return escape(visible(str(value)))


def print_summary(spec: Spec, plan: Plan, show_cells: bool = False, console: Console | None = None) -> None:
    con = console or Console()
    est = " (estimated)" if plan.estimated else ""
    con.print(f"[bold]plan[/bold] {_text(plan.spec_path)}  ·  {len(plan.cells)} cells{est}  ·  seed {plan.seed}  ·  "
              f"{plan.version}")
    for note in plan.notes:
        con.print(f"[yellow]note[/yellow]: {_text(note)}")

    axes = Table(title="cells by axis", show_edge=False)
    axes.add_column("axis")
    axes.add_column("values")
    axes.add_column("cells per value", justify="right")
    for axis in ("audit", "model", "dataset", "variant", "protocol", "evaluator"):
        c = Counter(getattr(cell, axis) for cell in plan.cells)
        axes.add_row(axis, ", ".join(c), axis_cells(c))
    con.print(axes)

    ds = Table(title="datasets", show_edge=False)
    for col in ("dataset", "source", "items", "sample", "dev"):
        ds.add_column(col)
    for dsid, info in plan.datasets.items():
        src = str(info.get("path"))
        if info.get("source") == "fallback":
            src += f" (fallback of hub {info.get('hub_id')}: not available offline)"
        ds.add_row(dsid, visible(src), str(info.get("n_items", "?")),
                   f"{info.get('n_sample')}{'' if info.get('available') else ' (declared)'}", str(info.get("n_dev", 0)))
    con.print(ds)

    req = Table(title="requests by model and kind", show_edge=False)
    for col in ("model", "engine", "kind", "stage", "unique", ""):
        req.add_column(col, justify="right" if col == "unique" else "left")
    by = plan.request_counts or Counter((r.model, r.kind) for r in plan.requests)
    for (m, k), n in sorted(by.items()):
        req.add_row(m, plan.models.get(m, {}).get("engine", "?"), k, "1", f"{n:,}", "")
    for d in plan.estimated_stage1:
        req.add_row(d["model"], plan.models.get(d["model"], {}).get("engine", "?"), d["kind"], "1",
                    f"~{d['count']:,}", "estimated from declared sample sizes (data not read)")
    for d in sorted(plan.deferred, key=lambda d: str(d["source"]).startswith("cross:")):
        stage = "cross" if str(d["source"]).startswith("cross:") else "2"
        req.add_row(d["model"], plan.models.get(d["model"], {}).get("engine", "?"), d["kind"], stage,
                    f"{d['count']:,}", _deferred_label(d))
    con.print(req)
    calls = engine_calls_table(spec, plan)
    if calls is not None:
        con.print(calls)
    for line in (prefix_caching_line(spec, plan), streamed_stage2_line(spec, plan), eager_line(spec, plan)):
        if line:
            con.print(line, highlight=False)
    saved = plan.naive_request_count - plan.unique_request_count
    pct = 100.0 * saved / plan.naive_request_count if plan.naive_request_count else 0.0
    if plan.estimated_stage1:
        con.print(f"requests (estimated from declared sizes, data not read): ≈ {plan.unique_request_count:,} "
                  f"(stage 1 ≈ {plan.estimated_stage1_count + plan.stage1_exact_count:,}, follow-ups {plan.deferred_count:,}); "
                  + ("requests shared between cells counted on placeholder items" if PLACEHOLDER_NOTE in plan.notes else
                     "requests shared between cells are counted once per role (an approximation)"))
    else:
        con.print(f"requests: naive {plan.naive_request_count:,} → deduplicated {plan.unique_request_count:,} "
                  f"({saved:,} shared, {pct:.1f}%){est}; stage 1 {plan.stage1_exact_count:,} (exactly what `auditc run` "
                  f"executes), follow-ups {plan.deferred_count:,}")
    te = plan.token_estimate
    fu = plan.token_estimate_followups
    if plan.estimated_stage1 and not plan.stage1_exact_count:
        con.print("tokens: not estimated (prompts are rendered from the data, which was not read)")
    else:
        con.print(f"tokens (estimate, chars/4): stage 1 prompt ≈ {te.get('prompt_tokens', 0):,}, generated ≤ "
                  f"{te.get('generated_tokens_max', 0):,}" + (
                      f"; follow-ups prompt ≈ {fu.get('prompt_tokens', 0):,}, generated ≤ {fu.get('generated_tokens_max', 0):,} "
                      "(each ≈ its model's mean stage-1 prompt + answer)" if fu else ""))
    if show_cells:
        con.print("[bold]cells[/bold] (id · items · content hash; * = estimated)")
        for c in plan.cells:
            con.print(f"  {c.id}  {c.n_items}{'*' if c.estimated else ''}  {c.hash}", soft_wrap=True, highlight=False)


def engine_calls_table(spec: Spec, plan: Plan) -> Table | None:
    """What each model's engine actually executes for the stage-1 requests: its calls per request
    shape (core/capabilities.py's execution strategies), e.g. vLLM's one-token window requests."""
    if not plan.call_shapes:
        return None
    counts: Counter = Counter()
    for (mid, kind, shape), n in plan.call_shapes.items():
        engine = model_config(spec, mid, kinds=plan.model_kinds(mid)).engine
        for call in engine_calls(engine, kind, shape):
            counts[(mid, engine, kind, call)] += n
    t = Table(title="stage-1 engine calls (how each engine executes the requests above)", show_edge=False)
    for col in ("model", "engine", "kind", "engine call", "calls"):
        t.add_column(col, justify="right" if col == "calls" else "left")
    for (mid, engine, kind, call), n in sorted(counts.items()):
        t.add_row(mid, engine, kind, call, f"{n:,}")
    return t


def prefix_caching_line(spec: Spec, plan: Plan) -> str | None:
    """How `auditc run` will set vLLM's prefix cache for each vllm model (resolve/models.py's rule;
    on unless written off), or None without vllm models."""
    on, off = [], []
    for mid in plan.models:
        kinds = plan.model_kinds(mid)
        cfg = model_config(spec, mid, kinds=kinds)
        if cfg.engine == "vllm" and kinds:  # a model no audit runs is not loaded
            (on if cfg.options.get("enable_prefix_caching") else off).append(mid)
    if not on and not off:
        return None
    parts = ([f"on for {', '.join(on)} (the answers and samples of a prompt share its prefill)"] if on else []) + (
        [f"off for {', '.join(off)} (prefix_caching=off)"] if off else [])
    return "vLLM prefix caching: " + "; ".join(parts)


def eager_line(spec: Spec, plan: Plan) -> str | None:
    """Which vllm models `auditc run` starts with enforce_eager because their planned GPU work is
    small (execute/runner.py engine_config, plan/gputime.py's rule), or None."""
    picked = []
    for mid, tokens in plan.tokens_by_model.items():
        cfg = model_config(spec, mid, kinds=plan.model_kinds(mid))
        if cfg.engine != "vllm" or cfg.options.get("enforce_eager") is not None:
            continue
        rule = eager_for(cfg.engine, getattr(spec.get(mid).value, "size", None), cfg.dtype, tokens)
        if rule is not None and rule[0]:
            picked.append(f"{mid} (≈ {rule[1]:.0f} s)")
    if not picked:
        return None
    return (f"vLLM enforce_eager: on for {', '.join(picked)}: estimated GPU time under {EAGER_BELOW_S:.0f} s on an H200, "
            "where compiling costs more start than it saves (write enforce_eager=false to compile)")


def streamed_stage2_line(spec: Spec, plan: Plan) -> str | None:
    """Which vllm models get their stage-2 follow-ups inside stage 1's stream (the runner's rule
    for engines that stream, execute/runner.py), or None when no vllm model has follow-ups."""
    mids = sorted({str(d["model"]) for d in plan.deferred if d["count"] and not str(d["source"]).startswith("cross:")
                   and model_config(spec, str(d["model"]), kinds=plan.model_kinds(str(d["model"]))).engine == "vllm"})
    if not mids:
        return None
    return (f"vLLM stage 2: the follow-ups of {', '.join(mids)} join stage 1's stream as the answers are committed "
            "(no barrier between the stages; with --shard or --executor ray the stages run in turn)")


def _deferred_label(d: dict) -> str:
    src = str(d["source"])
    if src.startswith("cross:"):
        return f"{d['role']} of {src[len('cross:'):]} (answers of other units)"
    return f"{d['role']} of {src} (built from stage-1 outputs)"
