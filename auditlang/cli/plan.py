"""`auditc plan SPEC`: every cell and deduplicated request, without touching a model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from auditlang.api import load_run
from auditlang.cli.common import (
    EXIT_OK, StepLog, parse_limit, parse_model_args, parse_swaps, print_diags, print_overrides, say, spec_warnings)
from auditlang.core.errors import UsageError
from auditlang.execute.access import (
    access_record, load_allowances, not_downloaded, offline_hubs, run_access, withhold_hub_token)
from auditlang.plan import gputime
from auditlang.plan.jsonout import RequestSpool, write_plan_json
from auditlang.plan.planner import build_plan
from auditlang.plan.summary import print_summary
from auditlang.resolve import compile_spec
from auditlang.resolve.models import model_config
from auditlang.store.rundir import RECORDS, RUN_FILE, read_run_file


def cmd_plan(args) -> int:
    _check_precision_args(args)
    swaps = parse_swaps(args.swap_model)
    limit = parse_limit(args.limit)
    spec = compile_spec(args.spec, swaps=swaps, model_args=parse_model_args(args))
    print_overrides(spec)
    allow = load_allowances(args.allow_host, args.allow_secret)
    accesses = run_access(spec)
    offline = offline_hubs(spec, accesses, allow)  # as `auditc run` reads them: the local cache, else the fallback
    cache_only = not_downloaded(accesses, allow)  # plan contacts no host the user has not allowed
    step = StepLog()
    # A lean plan (its memory does not grow with the number of requests); the JSON with every
    # request has them spooled to temporary files as they are found (auditlang/plan/jsonout.py).
    spool = None
    if args.format == "json" and not args.no_requests:
        spool = RequestSpool()
    with withhold_hub_token(allow):
        plan = build_plan(spec, data_root=args.data_root, load_data=not args.no_data, limit=limit, step=step,
                          no_download=cache_only, lean=True, sink=spool)
    step(None)
    warned = spec_warnings(spec) + list(plan.warnings)  # the spec's own (W151, W159), then the data's
    if warned:
        print_diags(warned)
    access = access_record(accesses, allow)
    for a in access:
        if a["model"] in offline and a.get("kind") == "dataset":
            a["not_downloaded"] = offline[a["model"]] + "; the local cache is read, else the fallback file"
        elif a["model"] in cache_only and a.get("kind") == "dataset":
            a["not_downloaded"] = cache_only[a["model"]] + "; plan read the local cache only"
    precision = _precision(args, spec, plan) if args.precision else None
    gpu_time = _gpu_time(args, spec, plan) if args.gpu else None
    if args.format == "json":
        # "access" is not part of the plan hash: who may be contacted is the user's choice
        indent = None if args.compact else 1
        extra = {"access": access, **({"precision": precision.to_dict()} if precision is not None else {}),
                 **({"gpu_time": gpu_time} if gpu_time is not None else {})}
        if spool is not None:
            try:
                if args.output:
                    with open(args.output, "w", encoding="utf-8") as fh:
                        write_plan_json(plan, spool, fh, indent, extra)
                else:
                    write_plan_json(plan, spool, sys.stdout, indent, extra)
                    sys.stdout.write("\n")
            finally:
                spool.close()
            return EXIT_OK
        body = plan.to_dict(include_requests=False)
        body.update(extra)
        text = json.dumps(body, indent=indent, ensure_ascii=False)
        if args.output:
            Path(args.output).write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text + "\n")
        return EXIT_OK
    print_summary(spec, plan, show_cells=args.cells)
    print_access(access)
    if precision is not None:
        print_precision(precision)
    if gpu_time is not None:
        print_gpu_time(gpu_time)
    return EXIT_OK


_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def _gpu_time(args, spec, plan) -> dict:
    """``--gpu``: each model's estimated engine start, GPU time and wall (plan/gputime.py)."""
    if args.gpus < 1:
        raise UsageError(f"--gpus {args.gpus}: expected at least 1 GPU")
    table = gputime.load_table()
    notes: list[str] = []
    if args.throughput_from:
        if not (Path(args.throughput_from) / RUN_FILE).is_file():
            raise UsageError(f"--throughput-from {args.throughput_from}: no {RUN_FILE} there",
                             hint="point it at the run directory of a finished `auditc run` on a GPU")
        table, changed = gputime.refresh(table, read_run_file(Path(args.throughput_from)), str(args.throughput_from))
        notes += changed or [f"{args.throughput_from}: no model of that run was timed on a GPU; the shipped table is used"]
    estimates, skipped = [], []
    for mid, tokens in plan.tokens_by_model.items():
        cfg = model_config(spec, mid, kinds=plan.model_kinds(mid))
        size = getattr(spec.get(mid).value, "size", None)
        est = gputime.estimate_model(table, mid, cfg.engine, size, _DTYPES.get(cfg.dtype, cfg.dtype), tokens, args.gpu.lower(),
                                     eager=cfg.options.get("enforce_eager"))
        if est is None:
            skipped.append(f"{mid} ({cfg.engine}: no GPU time)")
        else:
            estimates.append(est)
    sched = gputime.schedule(estimates, args.gpus, args.executor)
    return {"gpu": args.gpu.lower(), "models": [e.to_dict() for e in estimates], "schedule": sched, "skipped": skipped,
            "notes": notes, "table": table.get("provenance", {}).get("benchmark", "")}


def print_gpu_time(g: dict) -> None:
    con = Console()
    t = Table(title=f"GPU time on {g['gpu']} (estimate; generated tokens at their budget, an upper bound)",
              box=box.SIMPLE_HEAD)
    for col in ("model", "engine", "size", "engine start (cold / warm)", "GPU time", "run's own work", "wall"):
        t.add_column(col, justify="left" if col in ("model", "engine") else "right")
    for m in g["models"]:
        size = f"{m['size_b']} B" if m["size_b"] else "?"
        t.add_row(m["model"], m["engine"], size, f"{m['start_s']:.0f} s / {m['start_warm_s']:.0f} s", f"{m['gpu_s']:.0f} s",
                  f"{m['overhead_s']:.0f} s", f"{m['wall_s']:.0f} s")
    con.print(t)
    s = g["schedule"]
    if s["executor"] == "ray" and s["gpus"] > 1:
        con.print(f"schedule on {s['gpus']} GPUs (--executor ray, longest first): {s['wall_s']:.0f} s; "
                  + "; ".join(f"GPU {i}: {', '.join(ms) or '-'}" for i, ms in enumerate(s["per_gpu"])), highlight=False)
    else:
        con.print(f"total wall on one GPU (models in turn): {s['wall_s']:.0f} s", highlight=False)
    for m in g["models"]:
        con.print(f"  {m['model']}: {m['basis']}", highlight=False)
    for line in g["skipped"] + g["notes"]:
        con.print(f"  {line}", highlight=False)
    con.print(f"  table: {g['table']}", highlight=False)


def _check_precision_args(args) -> None:
    if args.pilot and not args.precision:
        raise UsageError("--pilot RUN_DIR is read only with --precision", hint="add --precision")
    if not 0 <= args.precision_p <= 1:
        raise UsageError(f"--precision-p {args.precision_p}: expected a planning accuracy between 0 and 1, e.g. 0.7")
    if not -1 <= args.precision_rho <= 1:
        raise UsageError(f"--precision-rho {args.precision_rho}: expected a correlation between -1 and 1, e.g. 0.3")


def _precision(args, spec, plan):
    """The precision plan: analytic from the declared sizes, or from the pilot run's records."""
    from auditlang.score.precision import precision_plan  # lazy: pandas only when --precision asks for it

    records = None
    if args.pilot:
        run = load_run(args.pilot)
        try:
            records = run.records
        except FileNotFoundError:
            raise UsageError(f"--pilot {args.pilot}: the run holds no scored records ({RECORDS}): it did not "
                             "get to scoring", hint=f"finish it first: rerun the same `auditc run`, or `auditc status "
                             f"{args.pilot}`") from None
        matched = set(records["cell_id"]) & {c.id for c in plan.cells}
        if not matched:
            raise UsageError(f"--pilot {args.pilot}: none of its cells is a cell of {args.spec}",
                             hint="run the pilot from the same spec, e.g. `auditc run SPEC --limit 20 --out runs/pilot`")
    return precision_plan(spec, plan, records, pilot=str(args.pilot) if args.pilot else None,
                          p=args.precision_p, rho=args.precision_rho)


def _fmt_stat(st: dict | None) -> str:
    if st is None:
        return "n/a"
    if abs(st["max"] - st["min"]) < 5e-4:
        return f"{st['median']:.3f}"
    return f"{st['median']:.3f}/{st['max']:.3f}"


def print_precision(pp, console=None) -> None:
    """The precision plan as two tables per audit (cells, paired contrasts) and the formulas behind them."""
    from auditlang.metrics import precision as prec  # lazy: numpy only when --precision asks for it

    con = console or Console()
    if not con.is_terminal and con.width < 130:  # a log or a pipe: no terminal to fit, keep the rows on one line
        con = Console(width=130, file=con.file)
    groups = pp.to_dict()["summary"]
    src = f"from pilot run {pp.pilot}" if pp.pilot else f"analytic, planning accuracy p={pp.p:g}"
    levels = sorted({g["level"] for g in groups}) or [0.95]
    lv = "/".join(f"{x * 100:g} %" for x in levels)
    con.print(f"[bold]precision[/bold] ({src}): ±hw = expected {lv} interval half-width at the declared N; "
              f"MDD = minimum detectable paired difference (power {pp.power * 100:g} %, two-sided α={pp.alpha:g})"
              + ("; a/b = median/max over the cells or pairs of a row (pilots without variation left out when "
                 "others have it); usable = pilot items with the metric's inputs known" if pp.pilot else ""),
              soft_wrap=True, highlight=False)
    notes: dict[str, int] = {}  # long notes as numbered footnotes keep the tables narrow

    def note(g) -> str:
        return " ".join(f"[{notes.setdefault(n['note'], len(notes) + 1)}]" + ("" if n["rows"] == g["rows"] else f"×{n['rows']}")
                        for n in g["notes"])

    def n_of(g) -> str:
        n = str(g["n_min"]) if g["n_min"] == g["n_max"] else f"{g['n_min']}–{g['n_max']}"
        return n + ("*" if g["estimated"] else "")

    def usable(g) -> str:
        u = g["usable"]
        if u is None:
            return ""
        lo, hi = round(100 * u["min"]), round(100 * u["max"])
        return f"{lo} %" if lo == hi else f"{lo}–{hi} %"

    def table(title: str, cols: list[str]) -> Table:
        t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        for col in cols:
            num = col in ("cells", "pairs", "N", "±hw", "MDD", "usable")
            t.add_column(col, justify="right" if num else "left", no_wrap=num)
        return t

    extra = ["usable"] if pp.pilot else []
    for audit in dict.fromkeys(g["audit"] for g in groups):
        mine = [g for g in groups if g["audit"] == audit]
        cells = table(f"audit {audit}: per cell", ["dataset", "metric", "cells", "N", *extra, "±hw", "note"])
        for g in (g for g in mine if g["kind"] == "cell"):
            cells.add_row(g["dataset"], g["metric"], str(g["rows"]), n_of(g), *([usable(g)] if extra else []),
                          _fmt_stat(g["half_width"]), note(g))
        con.print(cells)
        pairs = table(f"audit {audit}: paired contrasts, B - A on the same items",
                      ["contrast", "dataset", "metric", "pairs", "N", *extra, "±hw", "MDD", "note"])
        for g in (g for g in mine if g["kind"] != "cell"):
            if g["kind"] == "comparison":
                pairs.add_row(g["group"], "", g["metric"], "–", "", *([""] if extra else []), "n/a", "n/a", note(g))
            else:
                pairs.add_row(g["group"], g["dataset"], g["metric"], str(g["rows"]), n_of(g),
                              *([usable(g)] if extra else []), _fmt_stat(g["half_width"]), _fmt_stat(g["mdd"]), note(g))
        if pairs.row_count:
            con.print(pairs)
    k = pp.to_dict()["mdd_factor"]
    lines = [f"MDD = (z_{{1-α/2}} + z_{{power}}) · sd_d / √n = {k:.3f} · sd_d / √n; half-width of a difference = z · sd_d / √n"]
    if pp.pilot:
        lines += ["cells: the audit's percentile bootstrap (its B and seed) on the pilot's items, scaled by √(n_pilot/N); "
                  "binned ECE: plug-in variance, z·s/√N with s the pilot's SD of the per-item ECE terms "
                  "sign(bin gap)·(c − y);",
                  "contrasts: sd_d = SD of the per-item differences (accuracy, brier, nll, mean confidence), else "
                  "√n_pilot × SD of the paired bootstrap replicates;",
                  "metrics without a batch form (smooth/kde/binfree ECE): the delete-one jackknife SE instead of the bootstrap;",
                  "N is scaled by the pilot's usable fraction (column usable) where items lack a confidence"]
    else:
        lines += [f"accuracy: binomial z·√(p(1-p)/N) at p={pp.p:g} (--precision-p); brier: plug-in z·s/√N with "
                  f"s = {prec.calibrated_brier_sd(pp.p):.3f}, the per-item SD under an assumption: "
                  f"{prec.BRIER_ASSUMPTION} (a miscalibrated model's is wider, up to z·0.5/√N; --pilot measures it); mean confidence: bound z·0.5/√N (a [0,1] value "
                  "has variance ≤ 1/4); auroc: Hanley–McNeil SE at AUROC 0.5;",
                  f"contrasts: sd_d = √(2 s² (1 - ρ)) at ρ={pp.rho:g} (--precision-rho; items shared by both cells "
                  "usually correlate, ρ > 0, which lowers the MDD); ECE-type metrics, NLL, AURC: n/a (use --pilot)"]
    if any(g["estimated"] for g in groups):
        lines.append("* N estimated from the declared sample sizes (data not read)")
    lines += [f"[{i}] {n}" for n, i in notes.items()]
    if notes:
        lines.append("[k]×m: note k applies to m of the row's cells or pairs")
    for line in lines:
        con.print(line, highlight=False, soft_wrap=True, markup=False)


def print_access(access: list[dict]) -> None:
    """Every host a run would contact and every secret it would read, and whether it may."""
    if not access:
        say("network: none (no model calls a server, no dataset or weights are downloaded); secrets: none")
        return
    say("network and secrets (docs/security.md):")
    for a in access:
        kind = a.get("kind", "model")
        fallback = "fallback file" in (a.get("not_downloaded") or "")
        host = a["host_allowed_by"] or ("not allowed: auditc run reads the local cache, else the fallback file "
                                        f"(--allow-host {a['host']} downloads it)" if fallback else
                                        "NOT ALLOWED (not contacted; plan read the local cache only): auditc run needs "
                                        f"--allow-host {a['host']}" if kind == "dataset" else
                                        "NOT ALLOWED: auditc run needs --allow-host " + (a["host"] or "HOST"))
        say(f"  {kind} {a['model']}: {a['url']} (host {a['host']}, from {a['url_from']}): {host}")
        if a["secret"] and kind != "model":  # the Hub token: sent only when allowed, else withheld
            sec = (f"sent, allowed by {a['secret_allowed_by']}" if a["secret_allowed_by"] else
                   f"not sent (--allow-secret {a['secret']} sends it)")
            say(f"    Hub token ${a['secret']}: {sec}")
        elif a["secret"]:
            sec = a["secret_allowed_by"] or ("not set, no key is sent" if not a.get("secret_set", True) else
                                             f"NOT ALLOWED: auditc run needs --allow-secret {a['secret']}")
            say(f"    reads ${a['secret']} as its API key: {sec}")
