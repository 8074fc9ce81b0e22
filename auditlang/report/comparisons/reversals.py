"""Study 003's cross-case analyses of ranking reversal, pooled over every case of an ``aligned``
comparison (all its audits): Tables 1 (per method), 2 (per dataset), 7 (knowledge vs reasoning
reversal rates), 8 (per pair type), 9 (IA retention), and the data of Figures 1 (accuracy gap vs
calibration gap), 4 (reversal combinations) and 5 (reversal rate by accuracy-gap bin).

A case is one (pair, dataset, variant, method, evaluator); its reversal flag per view is True,
False or None (the view could not be computed: it neither agrees nor reverses, and the case is
"not assessed" wherever every view is needed). The tables read the ECE flags, as 003 does ("the Raw
ECE winner").
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from auditlang.metrics.correlation import fisher_interval, pearson, spearman
from auditlang.report.tables import Table

METRIC = "ECE"  # the metric whose winner 003's reversal tables follow


@dataclass
class Case:
    audit: str
    model_1: str
    model_2: str
    pair_type: str
    dataset: str
    variant: str
    protocol: str
    evaluator: str
    acc_1: float
    acc_2: float
    n_ia: int
    n_d: int
    diffs: dict[str, dict[str, float]] = field(default_factory=dict)  # metric -> view ("raw", "IA", ...) -> 1 - 2
    # "both-right" / "both-wrong" -> both models' confidences on those shared items (Figure 6)
    shared: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def flags(self, views: list[str], metric: str = METRIC) -> dict[str, bool | None]:
        """view -> reverses the raw winner (None: the view was not computed)."""
        d = self.diffs.get(metric, {})
        raw = d.get("raw", math.nan)
        out: dict[str, bool | None] = {}
        for v in views:
            x = d.get(v)
            out[v] = None if x is None or math.isnan(x) or math.isnan(raw) else bool(np.sign(raw) * np.sign(x) < 0)
        return out

    @property
    def gap(self) -> float:
        return self.acc_1 - self.acc_2


def _pct(k: int, n: int) -> float:
    return 100.0 * k / n if n else math.nan


def _exclusive(name: str, title: str, key: str, cases: list[Case], views: list[str], groups: list[str]) -> Table:
    """Table 1 / 2: per group, % of the assessed cases where exclusively one view overturns the raw ECE
    winner, and NRR; cases missing a view are counted apart (never as agreeing)."""
    t = Table(name, title, [key, "cases", "assessed"] + [f"{v} only %" for v in views] + ["NRR %", "not assessed"])
    for g in groups:
        sel = [c for c in cases if getattr(c, "protocol" if key == "method" else key) == g]
        flags = [c.flags(views) for c in sel]
        ok = [f for f in flags if all(x is not None for x in f.values())]
        only = [_pct(sum(1 for f in ok if f[v] and not any(f[w] for w in views if w != v)), len(ok)) for v in views]
        t.add(g, len(sel), len(ok), *only, _pct(sum(1 for f in ok if not any(f.values())), len(ok)), len(sel) - len(ok))
    missing = sum(r[-1] for r in t.rows)
    if missing:
        t.notes.append(f"{missing} of {len(cases)} cases miss a view that could not be computed: they are not assessed "
                       "(neither reversal nor agreement) and the percentages are of the assessed cases; a group with "
                       "no assessed case shows no rate.")
    t.notes.append(f"Exclusive RR: % of assessed cases where only that view overturns the raw {METRIC} winner (its "
                   "aligned difference has the strictly opposite sign of the raw one); NRR: no view overturns it.")
    return t


def _patterns(name: str, cases: list[Case], views: list[str]) -> Table:
    """Figure 4: the distribution of reversal combinations, and DA-IA agreement."""
    t = Table(f"{name}_patterns", f"Reversal combinations relative to the raw {METRIC} winner ({name}, study 003 "
              "Figure 4)", ["combination", "cases", "% of assessed"])
    cnt: Counter = Counter()
    n_ok = 0
    agree = [0, 0]
    for c in cases:
        f = c.flags(views)
        if any(x is None for x in f.values()):
            cnt["not assessed"] += 1
        else:
            n_ok += 1
            cnt["+".join(sorted(v for v in views if f[v])) or "none"] += 1
        if f.get("DA") is not None and f.get("IA") is not None:
            agree[0] += int(f["DA"] == f["IA"])
            agree[1] += 1
    for k, n in sorted(cnt.items(), key=lambda kv: (kv[0] == "not assessed", -kv[1], kv[0])):
        t.add(k, n, _pct(n, n_ok) if k != "not assessed" else math.nan)
    if "DA" in views and "IA" in views:
        t.notes.append(f"DA and IA share the same reversal status in {agree[0]} of {agree[1]} cases where both were "
                       f"computed ({_pct(agree[0], agree[1]):.1f} %)." if agree[1] else
                       "DA and IA agreement not assessed: no case has both views computed.")
    return t


def _rate(flags: list[bool | None]) -> tuple[int, float]:
    ok = [f for f in flags if f is not None]
    return len(ok), _pct(sum(ok), len(ok))


def _knowledge(name: str, cases: list[Case], views: list[str], knowledge: list[str], reasoning: list[str],
               methods: list[str]) -> list[Table]:
    """Tables 7 and 8: reversal rates on knowledge vs reasoning datasets (KRR / RRR)."""
    t7 = Table(f"{name}_knowledge", f"Knowledge (KRR) and reasoning (RRR) reversal rates per method and view ({name}, "
               "study 003 Table 7)", ["method", "view", "knowledge cases", "KRR %", "reasoning cases", "RRR %",
                                      "delta (RRR-KRR)"])
    t8 = Table(f"{name}_pair_type", f"Reversal rates by pair type, all methods and views merged ({name}, study 003 "
               "Table 8)", ["pair type", "KRR %", "RRR %", "delta (RRR-KRR)", "pairs"])
    if not knowledge and not reasoning:
        for t in (t7, t8):
            t.notes.append("not computable: the comparison declares no knowledge= / reasoning= datasets (003 §5.1's "
                           "two categories)")
        return [t7, t8]
    kn, re_ = set(knowledge), set(reasoning)
    for m in methods:
        for v in views:
            k = [c.flags([v])[v] for c in cases if c.protocol == m and c.dataset in kn]
            r = [c.flags([v])[v] for c in cases if c.protocol == m and c.dataset in re_]
            (nk, krr), (nr, rrr) = _rate(k), _rate(r)
            t7.add(m, v, nk, krr, nr, rrr, rrr - krr)
    groups: dict[str, list[Case]] = {}
    for c in cases:
        groups.setdefault("mode/effort" if c.pair_type in ("mode", "effort") else c.pair_type, []).append(c)
    for g, sel in groups.items():
        k = [f for c in sel if c.dataset in kn for f in c.flags(views).values()]
        r = [f for c in sel if c.dataset in re_ for f in c.flags(views).values()]
        (_, krr), (_, rrr) = _rate(k), _rate(r)
        t8.add(g, krr, rrr, rrr - krr, len({(c.model_1, c.model_2) for c in sel}))
    note = (f"knowledge datasets: {', '.join(knowledge) or 'none'}; reasoning datasets: {', '.join(reasoning) or 'none'} "
            f"(knowledge= / reasoning=); rates are % of the (case, view) reversals of raw {METRIC} among those computed.")
    t7.notes.append(note)
    t8.notes += [note, "pair type from the model declarations: mode (same checkpoint, enable_thinking differs), effort "
                 "(reasoning_effort differs), size (two checkpoints of one declared family), model (other pairs)."]
    return [t7, t8]


def _retention(name: str, cases: list[Case]) -> Table:
    """Table 9: |D_IA| and |D_IA| / |D| per pair and dataset (App. E.4)."""
    t = Table(f"{name}_retention", f"Instance-Aligned retained sample sizes per pair and dataset ({name}, study 003 "
              "Table 9)", ["model_1", "model_2", "pair type", "dataset", "variant", "evaluator", "|D_IA|", "|D|",
                           "retention %"])
    seen = set()
    for c in cases:
        key = (c.model_1, c.model_2, c.dataset, c.variant, c.evaluator)
        if key in seen:  # correctness is the answer's, the same for every method of the pair
            continue
        seen.add(key)
        t.add(c.model_1, c.model_2, c.pair_type, c.dataset, c.variant, c.evaluator, c.n_ia, c.n_d, _pct(c.n_ia, c.n_d))
    vals = [r[-1] for r in t.rows if not math.isnan(r[-1])]
    if vals:
        q1, med, q3 = np.percentile(vals, [25, 50, 75])
        t.notes.append(f"retention over {len(vals)} pair-dataset cells: median {med:.1f} %, IQR [{q1:.1f} %, {q3:.1f} %], "
                       f"min {min(vals):.1f} %")
    t.notes.append("|D| is every item of the dataset in the run (failed requests included); D_IA the items both models "
                   "got right or both got wrong (003 App. E.4: retention = |D_IA| / |D|).")
    return t


def _confound(name: str, cases: list[Case], views: list[str], level: float) -> list[Table]:
    """Figure 1: per (pair, dataset) the accuracy gap and the calibration gap averaged over methods, and the
    correlation between them per view, with Fisher-z intervals."""
    pts = Table(f"{name}_confound", f"Accuracy gap vs {METRIC} gap per pair and dataset, mean over methods ({name}, "
                "study 003 Figure 1)", ["model_1", "model_2", "dataset", "variant", "evaluator", "methods",
                                        "acc gap (1-2)"] + [f"{v} {METRIC} gap (1-2)" for v in ["raw", *views]])
    groups: dict[tuple, list[Case]] = {}
    for c in cases:
        groups.setdefault((c.model_1, c.model_2, c.dataset, c.variant, c.evaluator), []).append(c)
    cols: dict[str, list[float]] = {v: [] for v in ["raw", *views]}
    gaps = []
    for key, sel in groups.items():
        means = []
        for v in ["raw", *views]:
            xs = [c.diffs.get(METRIC, {}).get(v) for c in sel]
            xs = [x for x in xs if x is not None and not math.isnan(x)]
            means.append(float(np.mean(xs)) if xs else math.nan)
            cols[v].append(means[-1])
        gaps.append(float(np.mean([c.gap for c in sel])))
        pts.add(*key, len(sel), gaps[-1], *means)
    rho = Table(f"{name}_confound_rho", f"Correlation of the accuracy gap with the {METRIC} gap per view ({name}, "
                "study 003 Figure 1)", ["view", "n", "Spearman rho", "rho lo", "rho hi", "p", "Pearson r"])
    for v in ["raw", *views]:
        s = spearman(gaps, cols[v], missing="drop") if gaps else None
        if s is None:
            continue
        lo, hi = fisher_interval(s.r, s.n, level)
        rho.add(v, s.n, s.r, lo, hi, s.p, pearson(gaps, cols[v], missing="drop").r)
        if math.isnan(s.r):
            rho.nc("fewer than 3 pair-dataset points, or a constant gap", v)
    rho.notes.append(f"rho: Spearman over the pair-dataset points; interval {level * 100:g} % by Fisher's z transform "
                     "(003 A.2 reports rho = -0.670, n = 40, 95% CI [-0.81, -0.45], which this transform gives).")
    return [pts, rho]


def _bin_label(lo: float, hi: float, last: bool) -> str:
    return f"[{lo:g}, {hi:g}{']' if last else ')'}"


def _gap_bins(name: str, cases: list[Case], views: list[str], edges: list[float], methods: list[str]) -> Table:
    """Figure 5: reversal rate per |accuracy gap| bin, grouped by method (views merged) and by view (methods merged)."""
    t = Table(f"{name}_gap_bins", f"Reversal rate by accuracy-gap bin ({name}, study 003 Figure 5)",
              ["grouped by", "group", "|acc gap| bin", "cases", "flags", "reversal rate %"])

    def in_bin(c: Case, k: int) -> bool:
        g = abs(c.gap)
        return edges[k] <= g < edges[k + 1] or (k == len(edges) - 2 and g == edges[-1])

    for by, groups in (("method", methods), ("view", views)):
        for g in groups:
            for k in range(len(edges) - 1):
                sel = [c for c in cases if in_bin(c, k) and (by == "view" or c.protocol == g)]
                flags = [f for c in sel for v, f in c.flags(views).items() if by == "method" or v == g]
                n, rate = _rate(flags)
                t.add(by, g, _bin_label(edges[k], edges[k + 1], k == len(edges) - 2), len(sel), n, rate)
    t.notes.append(f"bins of |acc_1 - acc_2| with edges {', '.join(f'{e:g}' for e in edges)} (gap_bins=; 003 names only "
                   f"the 0.1 threshold); flags: the (case, view) reversals of raw {METRIC} that were computed.")
    return t


def pooled_tables(name: str, cases: list[Case], views: list[str], c: Any, level: float) -> tuple[list[Table], dict]:
    """Every pooled table of one aligned comparison and the data its figures draw."""
    methods = list(dict.fromkeys(x.protocol for x in cases))
    datasets = list(dict.fromkeys(x.dataset for x in cases))
    t1 = _exclusive(f"{name}_by_method", f"Method-level ranking reversal rates ({name}, study 003 Table 1)", "method",
                    cases, views, methods)
    t2 = _exclusive(f"{name}_by_dataset", f"Dataset-level ranking reversal rates ({name}, study 003 Table 2)",
                    "dataset", cases, views, datasets)
    tables = [t1, t2, _patterns(name, cases, views)]
    tables += _knowledge(name, cases, views, list(c.knowledge), list(c.reasoning), methods)
    tables.append(_retention(name, cases))
    tables += _confound(name, cases, views, level)
    tables.append(_gap_bins(name, cases, views, list(c.gap_bins), methods))
    return tables, {"methods": methods, "datasets": datasets}
