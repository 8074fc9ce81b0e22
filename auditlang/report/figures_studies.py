"""The results figures of studies 000 and 003 drawn from their comparisons' data (the same numbers
as the comparison tables): 000 Figure 1 (accuracy drop under the repaired variant, from
``evaluator_repair``) and Figure 2 (verbal vs token confidence vs accuracy, from ``ece_gap``); 003
Figure 1 (accuracy gap vs ECE gap per view), Figures 2-3 (raw vs aligned gap per pair type),
Figure 4 (reversal combinations) and Figure 5 (reversal rate by accuracy-gap bin), from ``aligned``.

``report/figures.py`` calls :func:`study_figures` with its own ``save`` (so figures render and are
cached like every other figure); this module imports no matplotlib state of its own beyond pyplot.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from auditlang.report.comparisons.common import Comparison
from auditlang.report.figures_s001 import s001_figures
from auditlang.report.figures_s002 import s002_figures
from auditlang.report.figures_s004 import s004_figures

Save = Callable[[Any, str, str], Any]


def study_figures(comps: list[Comparison], save: Save, safe: Callable[[str], str]) -> list[Any]:
    figs: list[Any] = []
    for c in comps:
        if c.shape == "evaluator_repair" and c.data.get("drop"):
            figs.append(_drop_figure(c, save, safe))
        elif c.shape == "ece_gap" and any(r["included"] for r in c.data.get("means", [])):
            figs.append(_overconf_figure(c, save, safe))
        elif c.shape == "aligned" and c.data.get("pooled"):
            figs += _aligned_figures(c, save, safe)
    return figs + s001_figures(comps, save, safe) + s002_figures(comps, save, safe) + s004_figures(comps, save, safe)


def _drop_figure(c: Comparison, save: Save, safe) -> Any:
    """000 Figure 1: per model, the base evaluator's accuracy on the reference variants (mean) and on
    the repaired variant; over each pair the relative change and the paired interval of the accuracy
    change (variant - reference, the sign of the label: a drop is negative in both)."""
    rows = c.data["drop"]
    labels = [r["model"] + (f"\n{r['dataset']}" if len({x["dataset"] for x in rows}) > 1 else "") for r in rows]
    ref_col = next(k for k in rows[0] if k.startswith("acc ") and "@" in k and not k.endswith(c.data["variant"]))
    var_col = next(k for k in rows[0] if k.startswith("acc ") and k.endswith(c.data["variant"]))
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(max(3.6, 0.9 * len(rows) + 1.5), 3.0), layout="constrained")
    ax.bar(x - 0.2, [r[ref_col] for r in rows], 0.4, label=c.data["reference"], color="0.55")
    ax.bar(x + 0.2, [r[var_col] for r in rows], 0.4, label=c.data["variant"], color="tab:red")
    for k, r in enumerate(rows):
        text = change_label(r["relative drop %"]) + change_interval(r["drop lo"], r["drop hi"])
        ax.text(k, max(r[ref_col], r[var_col]) + 0.03, text, ha="center", fontsize=6)
    chance = [r.get("random baseline", np.nan) for r in rows]
    note = _chance_line(ax, x, chance)
    ax.set_xticks(x, labels)
    ax.set_ylim(0, 1.15)
    ax.set_ylabel(f"accuracy ({c.data['base']})")
    ax.legend(fontsize=6, loc="upper right")
    title = f"Accuracy under {c.data['variant']} vs {c.data['reference']} ({c.name}); relative change, paired interval of the accuracy change"
    ax.set_title(title, fontsize=7)
    return save(fig, safe(f"drop_{c.name}"), title + f" (study 000 Figure 1{note})")


def change_interval(drop_lo: float, drop_hi: float) -> str:
    """The second line of a bar label: the paired interval of the drop (reference - variant) turned
    into the accuracy change (variant - reference), so its sign agrees with the relative change above
    it ("+300%" over "[+0.00, +0.75]", not over the drop's "[-0.75, 0.00]"); "" without an interval."""
    if drop_lo != drop_lo or drop_hi != drop_hi:
        return ""
    lo, hi = -drop_hi + 0.0, -drop_lo + 0.0  # + 0.0: no "-0.00"
    return f"\n[{lo:+.2f}, {hi:+.2f}]"


def change_label(rel_drop: float) -> str:
    """The bar label of a relative drop in percent: the signed change ("-100%" for a drop of 100%,
    "+300%" for a rise, never "--300%"); "-" without a reference accuracy (NaN)."""
    return "-" if rel_drop != rel_drop else f"{-rel_drop:+.0f}%"


def _chance_line(ax, x: np.ndarray, chance: list[float]) -> str:
    """000 Figure 1's random-baseline line (1 / options, 0.25 for 4-choice MCQ): one dashed line when every
    bar group has the same baseline, else a dashed segment over each group; the caption's note."""
    known = [v for v in chance if v == v]
    if not known:
        return ""
    if max(known) - min(known) < 1e-9:
        ax.axhline(known[0], color="k", lw=0.8, ls="--", label=f"random baseline ({known[0]:.2f})")
        return f"; dashed: random baseline {known[0]:.2f} = mean 1 / options"
    for k, v in enumerate(chance):
        if v == v:
            ax.hlines(v, x[k] - 0.45, x[k] + 0.45, color="k", lw=0.8, ls="--",
                      label="random baseline (1 / options)" if k == chance.index(v) and v == known[0] else None)
    return "; dashed: random baseline per group = mean 1 / options"


def _overconf_figure(c: Comparison, save: Save, safe) -> Any:
    """000 Figure 2: per model, means over the VPR-passing cells of accuracy, token and verbal confidence
    on the parsed rows."""
    cells = [r for r in c.data["means"] if r["included"]]
    models = list(dict.fromkeys(r["model"] for r in cells))
    series = [("accuracy", "accuracy", "0.55"), ("token", f"token ({c.data['token']})", "tab:blue"),
              ("verbal", f"verbal ({c.data['verbal']})", "tab:red")]
    x = np.arange(len(models))
    fig, ax = plt.subplots(figsize=(max(3.6, 0.9 * len(models) + 1.5), 3.0), layout="constrained")
    for k, (key, label, col) in enumerate(series):
        ax.bar(x + (k - 1) * 0.27, [np.mean([r[key] for r in cells if r["model"] == m]) for m in models], 0.27,
               label=label, color=col)
    ax.set_xticks(x, [f"{m}\n(n={sum(r['model'] == m for r in cells)})" for m in models])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("mean over included cells")
    ax.legend(fontsize=6)
    title = f"Verbal vs token confidence vs accuracy on the parsed rows ({c.name}), cells passing the VPR threshold"
    ax.set_title(title, fontsize=7)
    return save(fig, safe(f"overconfidence_{c.name}"), title + " (study 000 Figure 2; n = cells)")


def _aligned_figures(c: Comparison, save: Save, safe) -> list[Any]:
    cases, views = c.data["pooled"], c.data["views"]
    out = []
    # 003 Figure 1: accuracy gap vs ECE gap per pair and dataset, mean over methods, one panel per view
    pts = next((t for t in c.tables if t.name == f"{c.name}_confound"), None)
    rt = next((t for t in c.tables if t.name == f"{c.name}_confound_rho"), None)
    rho = {r["view"]: r for r in rt.records()} if rt is not None else {}
    if pts is not None and pts.rows:
        recs = pts.records()
        vs = ["raw", *views]
        fig, axes = plt.subplots(1, len(vs), figsize=(2.4 * len(vs), 2.6), sharey=True, squeeze=False,
                                 layout="constrained")
        for ax, v in zip(axes[0], vs):
            ax.axhline(0, color="0.7", lw=0.6)
            ax.axvline(0, color="0.7", lw=0.6)
            ax.plot([r["acc gap (1-2)"] for r in recs], [r[f"{v} ECE gap (1-2)"] for r in recs], "o", ms=3)
            r = rho.get(v, {})
            ax.set_title(f"{v}: rho = {r.get('Spearman rho', float('nan')):.2f} (n={r.get('n', 0)})", fontsize=7)
            ax.set_xlabel("acc_1 - acc_2")
        axes[0][0].set_ylabel("ECE_1 - ECE_2 (mean over methods)")
        title = f"Accuracy gap vs ECE gap per pair and dataset ({c.name})"
        fig.suptitle(title, fontsize=8)
        out.append(save(fig, safe(f"confound_{c.name}"), title + " (study 003 Figure 1)"))
    # 003 Figures 2-3: raw vs aligned gap, one figure per pair type, a panel per view
    def group(x) -> str:  # Figure 3 shows thinking vs non-thinking: Qwen3 modes and GPT-OSS efforts together
        return "mode-effort" if x.pair_type in ("mode", "effort") else x.pair_type

    for ptype in dict.fromkeys(group(x) for x in cases):
        sel = [x for x in cases if group(x) == ptype]
        fig, axes = plt.subplots(1, len(views), figsize=(2.6 * len(views), 2.7), squeeze=False, layout="constrained")
        for ax, v in zip(axes[0], views):
            ax.axhline(0, color="0.7", lw=0.6)
            ax.axvline(0, color="0.7", lw=0.6)
            for k, metric in enumerate(("ECE", "Brier")):
                xy = [(x.diffs[metric]["raw"], x.diffs[metric][v]) for x in sel if v in x.diffs.get(metric, {})]
                if xy:
                    ax.plot(*zip(*xy), "os"[k], ms=3, mfc="none" if k else None, label=metric)
                n_rev = sum(1 for a, b in xy if a * b < 0)
                ax.text(0.02, 0.95 - 0.08 * k, f"{metric}: {n_rev}/{len(xy)} reversed", transform=ax.transAxes,
                        fontsize=6, va="top")
            ax.set_title(f"{v} vs raw", fontsize=7)
            ax.set_xlabel("raw gap (1-2)")
        axes[0][0].set_ylabel("aligned gap (1-2)")
        axes[0][0].legend(fontsize=6, loc="lower right")
        title = f"Raw vs accuracy-aligned calibration gap, {ptype} pairs ({c.name}); quadrants II/IV: reversal"
        fig.suptitle(title, fontsize=8)
        out.append(save(fig, safe(f"aligned_gaps_{c.name}_{ptype}"), title + " (study 003 Figures 2-3)"))
    # 003 Figure 4: reversal combinations
    pat = next((t for t in c.tables if t.name == f"{c.name}_patterns"), None)
    if pat is not None and pat.rows:
        fig, ax = plt.subplots(figsize=(3.6, 2.6), layout="constrained")
        recs = pat.records()
        ax.barh([r["combination"] for r in recs][::-1], [r["cases"] for r in recs][::-1], color="tab:purple")
        ax.set_xlabel("cases")
        title = f"Reversal combinations relative to the raw ECE winner ({c.name})"
        ax.set_title(title, fontsize=7)
        out.append(save(fig, safe(f"reversal_patterns_{c.name}"), title + " (study 003 Figure 4)"))
    # 003 Figure 5: reversal rate by accuracy-gap bin, by method and by view
    gb = next((t for t in c.tables if t.name == f"{c.name}_gap_bins"), None)
    if gb is not None and gb.rows:
        recs = gb.records()
        fig, axes = plt.subplots(1, 2, figsize=(6.0, 2.6), sharey=True, layout="constrained")
        for ax, by in zip(axes, ("method", "view")):
            groups = list(dict.fromkeys(r["group"] for r in recs if r["grouped by"] == by))
            bins = list(dict.fromkeys(r["|acc gap| bin"] for r in recs))
            w = 0.8 / max(len(groups), 1)
            for k, g in enumerate(groups):
                ys = [next(r["reversal rate %"] for r in recs if r["grouped by"] == by and r["group"] == g
                           and r["|acc gap| bin"] == b) for b in bins]
                ax.bar(np.arange(len(bins)) + (k - (len(groups) - 1) / 2) * w, np.nan_to_num(ys), w, label=g)
            ax.set_xticks(range(len(bins)), bins, fontsize=6)
            ax.set_xlabel("|acc_1 - acc_2|")
            ax.set_title(f"by {by}", fontsize=7)
            ax.legend(fontsize=5.5)
        axes[0].set_ylabel("reversal rate (%)")
        title = f"Reversal rate by accuracy-gap bin ({c.name})"
        fig.suptitle(title, fontsize=8)
        out.append(save(fig, safe(f"reversal_by_gap_{c.name}"), title + " (study 003 Figure 5; empty bins at 0)"))
    # 003 Figure 6: confidence histograms on both-wrong vs both-right items, per method and dataset
    methods = list(dict.fromkeys(x.protocol for x in cases))
    datasets = list(dict.fromkeys(x.dataset for x in cases))
    if any(len(x.shared.get("both-right", ())) or len(x.shared.get("both-wrong", ())) for x in cases):
        fig, axes = plt.subplots(len(methods), len(datasets), figsize=(2.0 * len(datasets) + 0.8, 1.6 * len(methods) + 0.8),
                                 squeeze=False, sharex=True, layout="constrained")
        for i, m in enumerate(methods):
            for j, d in enumerate(datasets):
                ax = axes[i][j]
                for key, col in (("both-wrong", "tab:red"), ("both-right", "tab:blue")):
                    xs = np.concatenate([x.shared.get(key, np.array([])) for x in cases
                                         if x.protocol == m and x.dataset == d] or [np.array([])])
                    if xs.size:
                        ax.hist(xs, bins=10, range=(0, 1), density=True, histtype="step", color=col,
                                label=f"{key} (n={xs.size})")
                        ax.axvline(float(xs.mean()), color=col, lw=0.8, ls="--")
                ax.set_title(f"{m} / {d}", fontsize=6)
                if ax.get_legend_handles_labels()[0]:
                    ax.legend(fontsize=5)
        title = f"Confidence on both-wrong vs both-right items, both models of each pair pooled ({c.name})"
        fig.suptitle(title, fontsize=8)
        out.append(save(fig, safe(f"shared_outcomes_{c.name}"), title + " (study 003 Figure 6; dashed: means)"))
    return out
