"""`auditc diff RUN_A RUN_B`: cell-by-cell B - A with paired bootstrap intervals (auditlang/score/rundiff.py)."""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditlang.api import load_run
from auditlang.cli.common import EXIT_OK, say
from auditlang.core.diagnostics import did_you_mean
from auditlang.core.errors import UsageError, UserError
from auditlang.metrics.registry import METRICS
from auditlang.resolve.spec import MetricRef
from auditlang.score.cellmetrics import DEFAULT_METRICS, audit_bootstrap
from auditlang.score.rundiff import DiffMetric, cautions, diff_runs, match_cells, significance
from auditlang.store.records import read_records
from auditlang.store.rundir import RECORDS, RESCORE_DIR, RUN_FILE
import pandas as pd

SUPPORTED_INPUTS = ("correct", "conf+correct")  # metrics computed from one cell's records


def _audit_metrics(spec, audit: str) -> list:
    """(shown label, MetricRef) of an audit's metrics: the spec's metric ids (e.g. s000.ece10) by name."""
    if audit not in spec.objects:
        return []
    ids = spec.get(audit).value.metrics
    if not ids:
        return [(m.label, m) for m in DEFAULT_METRICS]
    named = {ref.label: k for k, ref in spec.metrics.items() if "[" not in k}  # e.g. s000.ece10 = ece(bins=10, ...)
    return [(named.get(spec.metrics[mid].label, spec.metrics[mid].label) if "[" in mid else mid, spec.metrics[mid])
            for mid in ids]


def _metrics_for(run_a, run_b, cells: list[str], wanted: list[str]) -> dict[str, list]:
    out: dict[str, list] = {}
    known: set[str] = set()
    for cid in cells:
        audit = cid.split("/")[0]
        in_a = _audit_metrics(run_a.spec, audit)
        in_b_labels = {ref.label for _, ref in _audit_metrics(run_b.spec, audit)}
        common = [(shown, ref) for shown, ref in in_a
                  if ref.label in in_b_labels and METRICS.get(ref.name) and METRICS[ref.name].inputs in SUPPORTED_INPUTS]
        known |= {shown for shown, _ in common} | {ref.label for _, ref in common}
        chosen = []
        if not wanted:
            chosen = [(shown, ref) for shown, ref in common]
        for w in wanted:
            hit = next(((s, r) for s, r in common if w in (s, r.label)), None)
            if hit is None and w in METRICS and METRICS[w].inputs in SUPPORTED_INPUTS:
                hit = (w, MetricRef(w))
            if hit is not None:
                chosen.append(hit)
        out[cid] = [DiffMetric(shown, ref.name, ref.params) for shown, ref in chosen]
    registered = {n for n, m in METRICS.items() if m.inputs in SUPPORTED_INPUTS}
    for w in wanted:
        if w not in known and w not in registered:
            raise UsageError(f"--metric {w!r}: not a metric of the compared audits nor a registered metric",
                             hint=did_you_mean(w, known | registered, "metrics"))
    return out


@dataclass
class RunDiff:
    """`auditc diff RUN_A RUN_B` computed: the paired differences (``result.rows``, cells only
    in one run), the shared cells and what ran under each model name (``auditlang.diff``)."""

    result: Any
    shared: list[str]
    models: dict[str, dict[str, str]]
    match: list[str] = field(default_factory=list)  # the --match keys
    matched: list[dict[str, str]] = field(default_factory=list)  # A's cell -> B's cell under B's name

    def frame(self):
        """The rows as a pandas DataFrame with the statement column (what ``--format csv`` writes)."""
        df = pd.DataFrame([{**r.to_dict(), "statement": significance(r)} for r in self.result.rows])
        df.attrs.update(only_a=list(self.result.only_a), only_b=list(self.result.only_b), models=self.models)
        return df


def compare_runs(run_a, run_b, metrics=(), resamples: int | None = None, seed: int | None = None,
                 level: float | None = None, match=()) -> RunDiff:
    """Cell-by-cell B - A of two run directories (or rescore folders ``RUN_DIR/rescore/LABEL``)
    with paired bootstrap intervals; ``match``: ``--match`` keys pairing cells that differ only by a name."""
    if resamples is not None and resamples < 1:
        raise UsageError(f"--resamples {resamples}: expected a positive integer")
    if seed is not None and seed < 0:
        raise UsageError(f"--seed {seed}: expected an integer >= 0")
    if level is not None and not 0 < level < 1:
        raise UsageError(f"--level {level}: expected a number between 0 and 1, e.g. 0.95")
    (run_a, rec_a), (run_b, rec_b) = _side(run_a), _side(run_b)
    match = list(match or [])
    original_b: dict[str, str] = {}
    if match:
        try:
            m = match_cells(rec_a, rec_b, match)
        except ValueError as e:
            raise UsageError(str(e), hint="e.g. --match model (runs of one model each) or --match smol=gemma "
                                          "(A's smol cells with B's gemma cells; RUN_A and RUN_B may be the same run)") from None
        rec_a, rec_b, original_b = m.records_a, m.records_b, m.original_b
    shared = [c for c in dict.fromkeys(rec_a["cell_id"]) if c in set(rec_b["cell_id"])]
    chosen = _metrics_for(run_a, run_b, shared, list(metrics))
    settings = {}
    for cid in shared:
        audit = cid.split("/")[0]
        B, s, lv = audit_bootstrap(run_a.spec, audit) if audit in run_a.spec.objects else (1000, 42, 0.95)
        settings[cid] = (resamples or B, s if seed is None else seed, lv if level is None else level)
    result = diff_runs(rec_a, rec_b, chosen, settings)
    models = {"A": _models(run_a, shared), "B": _models(run_b, [original_b.get(c, c) for c in shared])}
    matched = [{"a": c, "b": original_b[c]} for c in shared if c in original_b]
    return RunDiff(result, shared, models, match, matched)


def cmd_diff(args) -> int:
    d = compare_runs(args.run_a, args.run_b, args.metric, args.resamples, args.seed, args.level,
                     getattr(args, "match", None) or ())
    result, shared, models, match, matched = d.result, d.shared, d.models, d.match, d.matched
    if args.format == "json":

        body = {"run_a": str(args.run_a), "run_b": str(args.run_b), "difference": "B - A",
                "models_a": models["A"], "models_b": models["B"], "cautions": cautions(result.rows),
                "bootstrap": "paired percentile bootstrap over the items both runs scored",
                "rows": [_jsonable(r.to_dict()) for r in result.rows], "only_a": result.only_a, "only_b": result.only_b,
                "match": match, "matched": matched}
        sys.stdout.write(json.dumps(body, indent=1, ensure_ascii=False) + "\n")
        return EXIT_OK
    if args.format == "csv":
        buf = io.StringIO()
        fields = list(result.rows[0].to_dict()) if result.rows else ["cell_id", "metric"]
        w = csv.DictWriter(buf, fieldnames=fields + ["statement"], lineterminator="\n")
        w.writeheader()
        for r in result.rows:
            w.writerow({**r.to_dict(), "statement": significance(r)})
        sys.stdout.write(buf.getvalue())
        return EXIT_OK
    say(render_table(args.run_a, args.run_b, result, shared, models, match=match, matched=matched))
    return EXIT_OK


def _models(run, cells: list[str]) -> dict[str, str]:
    """model name -> what ran under it in this run (engine and model id; a --swap-model says so)."""
    out: dict[str, str] = {}
    swaps = getattr(run.spec, "model_swaps", {}) or {}
    for mid in dict.fromkeys(c.split("/")[1] for c in cells if c.count("/") >= 1):
        if mid not in run.spec.objects:
            continue
        o = run.spec.get(mid)
        v = o.value
        name = getattr(v, "path", None) or getattr(v, "name", mid)
        rev = getattr(v, "revision", None)
        out[mid] = (f"{o.ctor} {name}" + (f" at revision {rev}" if rev else "")
                    + (f" (--swap-model {mid}={swaps[mid]})" if mid in swaps else ""))
    return out


def _side(path: str):
    """(run, records) of a run directory, or of a rescore folder RUN_DIR/rescore/NAME (the run's
    spec and plan, the rescored records)."""
    p = Path(path)
    if p.parent.name == RESCORE_DIR and (p / RECORDS).is_file() and not (p / RUN_FILE).exists():
        run = load_run(p.parent.parent)
        return run, read_records(p / RECORDS)
    if p.name == RESCORE_DIR and p.is_dir():
        names = sorted(x.name for x in p.iterdir() if (x / RECORDS).is_file())
        raise UsageError(f"{path} holds the rescores of a run, not one: name one of them",
                         hint=" or ".join(f"{p / n}" for n in names[:3]) or "run `auditc rescore` first")
    run = load_run(path)
    return run, _records(run)


def _records(run):
    try:
        return run.records
    except FileNotFoundError:
        raise UserError(f"{run.run_dir} holds no scored records ({RECORDS}): its run did not get to scoring",
                        hint=f"rerun the same `auditc run` (stored results are reused), or `auditc status {run.run_dir}`") from None


def _jsonable(d: dict) -> dict:
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}


def _ran(models: dict[str, str] | None) -> str:
    return ("; ran " + ", ".join(f"{mid} = {what}" for mid, what in models.items())) if models else ""


def _f(v: float) -> str:
    return "–" if math.isnan(v) else f"{v:.3f}"


def render_table(a: str, b: str, result, shared: list[str], models: dict[str, dict[str, str]] | None = None,
                 match: list[str] | None = None, matched: list[dict[str, str]] | None = None) -> str:
    models = models or {}
    lines = [f"A = {a}" + _ran(models.get("A")), f"B = {b}" + _ran(models.get("B")),
             f"{len(shared)} cell(s) in both runs, {len(result.only_a)} only in A, {len(result.only_b)} only in B"]
    if match:
        lines.append(f"cells matched by --match {' --match '.join(match)}: {len(matched or [])} pair(s); each row names "
                     "A's cell, B's is the same cell under B's name" + "".join(
                         f"\n  {m['a']}  <->  {m['b']}" for m in (matched or [])[:6])
                     + (f"\n  ... and {len(matched) - 6} more" if matched and len(matched) > 6 else ""))
    settings = sorted({(r.B, r.seed, r.level) for r in result.rows})
    for B, seed, level in settings:
        lines.append(f"paired bootstrap over the items both runs scored: B={B} resamples, seed={seed}, "
                     f"level={level * 100:g} %")
    if result.rows:
        head = ["cell", "metric", "n paired", "A", "B", "B - A", "interval", "statement"]
        body = [[r.cell_id, r.metric, str(r.n_paired), _f(r.a), _f(r.b),
                 "–" if math.isnan(r.diff) else f"{r.diff:+.3f}",
                 "–" if math.isnan(r.low) else f"[{r.low:+.3f}, {r.high:+.3f}]", significance(r)] for r in result.rows]
        widths = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
        lines.append("")
        for row in [head] + body:
            lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        n_sig = sum(1 for r in result.rows if r.significant)
        lines += ["", f"{n_sig} of {len(result.rows)} difference(s) significant (interval excludes 0)"]
        lines += cautions(result.rows)
    for title, cells in (("only in A", result.only_a), ("only in B", result.only_b)):
        if cells:
            lines += ["", f"{title} ({len(cells)}):"] + [f"  {c}" for c in cells]
    return "\n".join(lines)
