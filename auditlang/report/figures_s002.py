"""The results figures of study 002 drawn from its ``robustness`` comparisons' tables (the same
numbers as ``<compare>_avg``, ``<compare>_accuracy`` and ``<compare>_prompt_corr_pooled``), every
robustness comparison of the report pooled as 002 pools them (its answer-prompt methods, GPT-4o and
VC side by side; a row's method is its comparison's declared ``methods=`` name, else its protocol;
a (method, model) value comes from the first comparison that has it):

* Figure 3: per evaluator, each method's AVG over the models for P-RB, A-STB, A-SST, Brier and
  AUROC as grouped bars, A-STB / A-SST annotated with the share of items that qualify;
* Figure 4: per evaluator, the Pearson correlation of every two of those metrics over the
  (method, model) points, as a heatmap;
* Figure 5: per evaluator, one panel per metric, each model's value per method;
* Figure 6: per evaluator, accuracy per model and dataset;
* Figures 7-9: per evaluator and model group, the confidence-prompt x confidence-prompt Pearson
  heatmaps pooled over the datasets, one panel per model: one figure per model family (sizes
  descending: 002 Figs 8-9) and, with two or more families, one of each family's largest model (Fig 7).

``report/figures_studies.py`` calls :func:`s002_figures` with the report's ``save``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from auditlang.report.comparisons.common import Comparison
from auditlang.report.heatmap import annotated

Save = Callable[[Any, str, str], Any]
# 002 Figure 3's five perspectives (§6): the per-cell columns of <compare>_avg they are read from
FIG3_METRICS = (("P-RB", "P-RB"), ("A-STB", "A-STB"), ("A-SST", "A-SST"), ("Brier", "Brier (mean over prompts)"),
                ("AUROC", "AUROC (mean over prompts)"))
SHARES = {"A-STB": "A-STB share of items qualifying", "A-SST": "A-SST share of items qualifying"}


def _table(c: Comparison, suffix: str):
    return next((t for t in c.tables if t.name == f"{c.name}{suffix}"), None)


def pooled_values(comps: list[Comparison]) -> dict[str, dict[tuple[str, str], dict[str, float]]]:
    """evaluator -> (method, model) -> {metric label: each model's mean over its datasets}, from the
    ``_avg`` tables of every robustness comparison (the first comparison with a point wins)."""
    out: dict[str, dict[tuple[str, str], dict[str, float]]] = {}
    cols = dict((col, label) for label, col in FIG3_METRICS)
    for c in comps:
        avg = _table(c, "_avg")
        if avg is None:
            continue
        models = [m for m in avg.columns if m not in ("protocol", "evaluator", "metric", "AVG", "n_models")]
        names = c.data.get("methods") or {}
        for r in avg.records():
            if r["metric"] not in cols:
                continue
            for m in models:
                pt = out.setdefault(r["evaluator"], {}).setdefault((names.get(r["protocol"], r["protocol"]), m), {})
                pt.setdefault(cols[r["metric"]], float(r[m]))
    return out


def pooled_shares(comps: list[Comparison]) -> dict[tuple[str, str], dict[str, float]]:
    """(evaluator, method) -> {A-STB / A-SST: mean share of qualifying items over its cells}."""
    acc: dict[tuple[str, str], dict[str, list[float]]] = {}
    for c in comps:
        main, names = _table(c, ""), c.data.get("methods") or {}
        for r in main.records() if main is not None else []:
            for label, col in SHARES.items():
                v = r.get(col)
                if v is not None and not math.isnan(float(v)):
                    acc.setdefault((r["evaluator"], names.get(r["protocol"], r["protocol"])), {}).setdefault(label, []).append(float(v))
    return {k: {m: float(np.mean(v)) for m, v in d.items()} for k, d in acc.items()}


def _mean(xs: list[float]) -> float:
    ok = [x for x in xs if not math.isnan(x)]
    return float(np.mean(ok)) if ok else math.nan


def s002_figures(comps: list[Comparison], save: Save, safe: Callable[[str], str]) -> list[Any]:
    rob = [c for c in comps if c.shape == "robustness"]
    if not rob:
        return []
    names = ", ".join(c.name for c in rob)
    figs: list[Any] = []
    shares = pooled_shares(rob)
    for e, pts in pooled_values(rob).items():
        methods = list(dict.fromkeys(p for p, _ in pts))
        models = list(dict.fromkeys(m for _, m in pts))
        figs.append(_avg_bars(e, pts, methods, models, shares, names, save, safe))
        figs.append(_metric_heatmap(e, pts, names, save, safe))
        figs.append(_per_model(e, pts, methods, models, names, save, safe))
    figs += _accuracy(rob, names, save, safe)
    figs += _prompt_heatmaps(rob, save, safe)
    return [f for f in figs if f is not None]


def _avg_bars(e: str, pts, methods, models, shares, names: str, save: Save, safe) -> Any:
    """Figure 3: each method's AVG over the models (the models with a value), per metric."""
    labels = [lb for lb, _ in FIG3_METRICS]
    w = 0.8 / len(methods)
    fig, ax = plt.subplots(figsize=(1.3 * len(labels) + 1.5, 3.2), layout="constrained")
    for k, p in enumerate(methods):
        ys = [_mean([pts.get((p, m), {}).get(lb, math.nan) for m in models]) for lb in labels]
        xs = np.arange(len(labels)) + (k - (len(methods) - 1) / 2) * w
        ax.bar(xs, np.nan_to_num(ys), w, label=p)
        for x, y, lb in zip(xs, ys, labels):
            sh = shares.get((e, p), {}).get(lb)
            if sh is not None and not math.isnan(y):
                ax.text(x, y + 0.01, f"{100 * sh:.0f}%", ha="center", va="bottom", fontsize=5, rotation=90)
    ax.set_xticks(range(len(labels)), [f"{lb} {'↓' if lb == 'Brier' else '↑'}" for lb in labels])
    ax.set_ylim(0, 1.15)
    ax.set_ylabel(f"mean over {len(models)} models")
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    title = (f"Averaged performance among all models per method, evaluator {e} ({names}); % on A-STB / A-SST: "
             "share of items qualifying for the metric")
    ax.set_title(title, fontsize=7)
    return save(fig, safe(f"robustness_avg_{e}"), title + " (study 002 Figure 3)")


def metric_matrix(pts) -> tuple[list[str], np.ndarray, int]:
    """Figure 4: (metric labels, Pearson r of every two metrics over the (method, model) points with
    both values (NaN with fewer than three or a constant one), number of points)."""
    labels = [lb for lb, _ in FIG3_METRICS]
    mat = np.full((len(labels), len(labels)), math.nan)
    for i, a in enumerate(labels):
        for j, b in enumerate(labels):
            xy = [(v[a], v[b]) for v in pts.values() if not math.isnan(v.get(a, math.nan))
                  and not math.isnan(v.get(b, math.nan))]
            if len(xy) >= 3:
                x, y = np.array(xy).T
                if np.std(x) > 0 and np.std(y) > 0:
                    mat[i, j] = float(np.corrcoef(x, y)[0, 1])
    return labels, mat, len(pts)


def _heat(ax, mat: np.ndarray, rows: list[str], cols: list[str], title: str) -> Any:
    """A Pearson-correlation panel: values in [-1, 1] on a diverging map, NaN cells "n/a"."""
    return annotated(ax, mat, rows, cols, title, vmin=-1.0, cmap="coolwarm", title_size=7, aspect=None)


def _metric_heatmap(e: str, pts, names: str, save: Save, safe) -> Any:
    labels, mat, n = metric_matrix(pts)
    fig, ax = plt.subplots(figsize=(3.6, 3.2), layout="constrained")
    im = _heat(ax, mat, labels, labels, f"evaluator {e}, {n} (method, model) points")
    fig.colorbar(im, ax=ax, fraction=0.04)
    title = f"Pearson correlation of metrics over the (method, model) points ({names})"
    fig.suptitle(title, fontsize=7)
    return save(fig, safe(f"robustness_metric_corr_{e}"), title + " (study 002 Figure 4; n/a: undefined)")


def _per_model(e: str, pts, methods, models, names: str, save: Save, safe) -> Any:
    """Figure 5: one panel per metric, the models on the x axis and a bar per method."""
    fig, axes = plt.subplots(1, len(FIG3_METRICS), figsize=(2.3 * len(FIG3_METRICS) + 0.6, 2.9),
                             layout="constrained", squeeze=False)
    w = 0.8 / len(methods)
    for ax, (lb, _) in zip(axes[0], FIG3_METRICS):
        for k, p in enumerate(methods):
            ys = [pts.get((p, m), {}).get(lb, math.nan) for m in models]
            ax.bar(np.arange(len(models)) + (k - (len(methods) - 1) / 2) * w, np.nan_to_num(ys), w, label=p)
        ax.set_xticks(range(len(models)), models, rotation=40, ha="right", fontsize=6)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{lb} {'↓' if lb == 'Brier' else '↑'}", fontsize=7)
    axes[0][-1].legend(fontsize=5.5, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    title = f"Performance of the methods per model (mean over the datasets), evaluator {e} ({names})"
    fig.suptitle(title, fontsize=7)
    return save(fig, safe(f"robustness_by_model_{e}"), title + " (study 002 Figure 5)")


def pooled_accuracy(comps: list[Comparison]) -> dict[str, dict[tuple[str, str], float]]:
    """evaluator -> (model, dataset) -> accuracy, from the ``_accuracy`` tables (first one wins)."""
    out: dict[str, dict[tuple[str, str], float]] = {}
    for c in comps:
        t = _table(c, "_accuracy")
        for r in t.records() if t is not None else []:
            out.setdefault(r["evaluator"], {}).setdefault((r["model"], r["dataset"]), float(r["accuracy"]))
    return out


def _accuracy(comps: list[Comparison], names: str, save: Save, safe) -> list[Any]:
    """Figure 6: accuracy of each model per dataset, a bar per dataset."""
    figs = []
    for e, acc in pooled_accuracy(comps).items():
        models = list(dict.fromkeys(m for m, _ in acc))
        datasets = list(dict.fromkeys(d for _, d in acc))
        w = 0.8 / len(datasets)
        fig, ax = plt.subplots(figsize=(0.8 * len(models) + 2.0, 2.9), layout="constrained")
        for k, d in enumerate(datasets):
            ys = [acc.get((m, d), math.nan) for m in models]
            ax.bar(np.arange(len(models)) + (k - (len(datasets) - 1) / 2) * w, np.nan_to_num(ys), w, label=d)
        ax.set_xticks(range(len(models)), models, rotation=30, ha="right", fontsize=6)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel(f"accuracy ({e})")
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        title = f"Accuracy of the models on the datasets, evaluator {e} ({names})"
        ax.set_title(title, fontsize=7)
        figs.append(save(fig, safe(f"robustness_accuracy_{e}"), title + " (study 002 Figure 6)"))
    return figs


def prompt_matrix(t, model: str, e: str, prompts: list[str]) -> np.ndarray:
    """Figures 7-9: the symmetric prompt x prompt Pearson matrix of one model (1 on the diagonal)."""
    mat = np.eye(len(prompts))
    idx = {p: i for i, p in enumerate(prompts)}
    for r in t.records():
        if r["model"] == model and r["evaluator"] == e:
            i, j = idx[r["prompt_1"]], idx[r["prompt_2"]]
            mat[i, j] = mat[j, i] = float(r["pearson r"])
    return mat


def model_groups(facts: dict[str, tuple[float | None, str | None]]) -> list[tuple[str, str, list[str]]]:
    """(file key, group label, models): each family's models by size descending (002 Figs 8-9) and, with two or
    more families, each family's largest model (Fig 7); models of no declared family are their own."""
    fams: dict[str, list[str]] = {}
    for m, (_, f) in facts.items():
        fams.setdefault(f or m, []).append(m)
    for ms in fams.values():
        ms.sort(key=lambda m: -(facts[m][0] or 0.0))
    out = [(f, f"family {f}" if facts[ms[0]][1] else f"model {f} (no family declared)", ms) for f, ms in fams.items()]
    if len(fams) >= 2:
        out.insert(0, ("largest", "the largest model of each family", [ms[0] for ms in fams.values()]))
    return out


def _prompt_heatmaps(comps: list[Comparison], save: Save, safe) -> list[Any]:
    figs = []
    for c in comps:
        t, prompts = _table(c, "_prompt_corr_pooled"), c.data.get("prompts")
        if t is None or not t.rows or not prompts:
            continue
        short = [p.split(".")[-1] for p in prompts]
        for e in dict.fromkeys(r["evaluator"] for r in t.records()):
            for key, label, models in model_groups(c.data["models"]):
                fig, axes = plt.subplots(1, len(models), figsize=(2.8 * len(models) + 0.8, 2.9),
                                         layout="constrained", squeeze=False)
                for ax, m in zip(axes[0], models):
                    size = c.data["models"][m][0]
                    im = _heat(ax, prompt_matrix(t, m, e, prompts), short, short,
                               m + (f" ({size:g}B)" if size else ""))
                fig.colorbar(im, ax=list(axes[0]), fraction=0.02)
                title = (f"Pearson correlation of the confidences under two confidence prompts, datasets pooled: "
                         f"{label}, evaluator {e} ({c.name})")
                fig.suptitle(title, fontsize=7)
                figs.append(save(fig, safe(f"prompt_corr_{c.name}_{e}_{key}"),
                                 title + " (study 002 Figures 7-9)"))
    return figs
