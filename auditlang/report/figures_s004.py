"""The results figures of study 004 drawn from its ``consistency`` comparisons' data (the same
numbers as the comparison tables ``<compare>_cross_by_type`` and ``<compare>_by_type``):

* Figures 4-8: per model and dataset, the cross-method heatmaps (probe x probe) of DecCons and of
  IoU_cons, one panel per variant type (the reference variant first, as ``original``), each value
  the mean over the type's variants (``consistency_by_type_<compare>_<metric>_<model>_<dataset>``);
* Figure 2: the mean IoU_cons over the variant types per probe against model size, one line per
  probe, when the comparison's models have at least two distinct declared sizes
  (``consistency_size_<compare>``, a panel per dataset and evaluator; the numbers of ``<compare>_by_size``).

``report/figures_studies.py`` calls :func:`s004_figures` with the report's ``save``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from auditlang.report.comparisons.common import Comparison
from auditlang.report.heatmap import annotated, pair_matrix

Save = Callable[[Any, str, str], Any]
CROSS_METRICS = ("DecCons", "IoU_cons")


def s004_figures(comps: list[Comparison], save: Save, safe: Callable[[str], str]) -> list[Any]:
    figs: list[Any] = []
    for c in comps:
        if c.shape != "consistency":
            continue
        for key, hm in c.data.get("cross_by_type", {}).items():
            figs += [_cross_types(c, key, hm, mt, save, safe) for mt in CROSS_METRICS]
        if (sm := c.data.get("size_means")) and _sized(sm):
            figs.append(_size_figure(c, sm, save, safe))
    return figs


NA_NOTE = "n/a: no value, for want of abstain decisions under the variants of the type"


def cross_matrix(hm: dict[str, Any], metric: str, vtype: str) -> np.ndarray:
    """The symmetric probe x probe matrix of one variant type, NaN where a pair has no value; 1 on
    the diagonal only where the probe has a value with another probe (``heatmap.pair_matrix``)."""
    return pair_matrix(hm["probes"], lambda pair: hm[metric].get((vtype, *pair)))


def _cross_types(c: Comparison, key: tuple[str, str, str], hm: dict[str, Any], metric: str, save: Save, safe) -> Any:
    m, d, e = key
    types, probes = hm["types"], hm["probes"]
    fig, axes = plt.subplots(1, len(types), figsize=(2.6 * len(types) + 0.8, 2.9), layout="constrained", squeeze=False)
    mats = [cross_matrix(hm, metric, vt) for vt in types]
    short = [p.split(".")[-1] for p in probes]
    for ax, vt, mat in zip(axes[0], types, mats):
        im = annotated(ax, mat, short, short, vt)
    fig.colorbar(im, ax=list(axes[0]), fraction=0.02)
    title = (f"Cross-method {metric} per variant type, mean over each type's variants: model {m}, dataset {d} "
             f"({c.name}, evaluator {e}; study 004 Figures 4-8)")
    if any(np.isnan(x).any() for x in mats):
        title += f"; {NA_NOTE}"
    fig.suptitle(title, fontsize=8)
    return save(fig, safe(f"consistency_by_type_{c.name}_{metric}_{m}_{d}"), title)


def _sized(sm: dict[str, Any]) -> bool:
    """Every model has a declared size and there are at least two distinct sizes."""
    sizes = list(sm["sizes"].values())
    return all(s is not None for s in sizes) and len(set(sizes)) >= 2


def size_lines(sm: dict[str, Any]) -> dict[tuple[str, str], dict[tuple[str, str], list[tuple[float, float]]]]:
    """(dataset, evaluator) -> (probe, family) -> [(size, mean IoU_cons)] sorted by size: Figure 2's
    lines, one per probe within one model family (a model without a declared family is its own), so
    no line joins the sizes of two families."""
    out: dict[tuple[str, str], dict[tuple[str, str], list[tuple[float, float]]]] = {}
    for (d, e, p, m), v in sm["values"].items():
        fam = sm["families"].get(m) or f"model {m}"
        out.setdefault((d, e), {}).setdefault((p, fam), []).append((float(sm["sizes"][m]), v))
    for lines in out.values():
        for key in lines:
            lines[key].sort()
    return out


STYLES = ("-", "--", ":", "-.")  # one line style per model family


def _size_figure(c: Comparison, sm: dict[str, Any], save: Save, safe) -> Any:
    panels = size_lines(sm)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.0), layout="constrained", squeeze=False)
    sizes = sorted(set(sm["sizes"].values()))
    names = {s: ", ".join(m for m, x in sm["sizes"].items() if x == s) for s in sizes}
    fams = list(dict.fromkeys(f for lines in panels.values() for _, f in lines))
    for ax, ((d, e), lines) in zip(axes[0], panels.items()):
        for k, p in enumerate(sm["probes"]):
            for fam in fams:
                if (p, fam) in lines:
                    xs, ys = zip(*lines[(p, fam)])
                    label = p.split(".")[-1] + (f" ({fam})" if len(fams) > 1 else "")
                    ax.plot(xs, ys, marker="o", color=plt.cm.tab10(k % 10), ls=STYLES[fams.index(fam) % len(STYLES)],
                            label=label)
        ax.set_xscale("log")
        ax.set_xticks(sizes, [f"{names[s]}\n{s:g}B" for s in sizes], fontsize=6)
        ax.minorticks_off()
        ax.set_ylim(0, 1.02)
        ax.set_ylabel("mean IoU_cons over variant types", fontsize=7)
        ax.set_title(f"dataset {d}, evaluator {e}", fontsize=8)
        ax.legend(fontsize=6)
    families = sorted({f for f in sm["families"].values() if f})
    head = (f"Mean intra-method IoU_cons per probe against model size ({c.name}; model families: "
            f"{', '.join(families) or 'not declared'}; study 004 Figure 2)")
    tail = ["one line per probe and family (line style), none joins two families"] if len(fams) > 1 else []
    fig.suptitle(";\n".join([head, *tail]), fontsize=8)  # two lines: the plot keeps its width
    return save(fig, safe(f"consistency_size_{c.name}"), "; ".join([head, *tail]))
