"""Study 001 Figure 1 (App. G) drawn from a ``protocol_grid`` whose two token configurations differ
only in the scored answer (generated vs gold, ``data["sign_pattern"]``): per (variant, evaluator)
one panel, a column per (model, dataset) setting (grouped by ``group_by=`` when given) and two rows,
the sign of g under the generated-answer (first) and the gold-teacher-forced (second) configuration
with the first estimator: blue g < 0 (verbal better), red g > 0 (token better), grey undefined. The
title counts the settings whose sign differs between the rows (001: "13/24 cells; 9/12 Instruct"),
overall and per group; the same numbers as the grid's table ``<compare>``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap

from auditlang.report.comparisons.common import Comparison

Save = Callable[[Any, str, str], Any]
COLOURS = ListedColormap(["tab:blue", "0.85", "tab:red"])  # g < 0, undefined, g > 0


def s001_figures(comps: list[Comparison], save: Save, safe: Callable[[str], str]) -> list[Any]:
    figs: list[Any] = []
    for c in comps:
        sp = c.data.get("sign_pattern") if c.shape == "protocol_grid" else None
        if sp:
            for (v, e), cols in sign_columns(c).items():
                figs.append(_sign_figure(c, sp, v, e, cols, save, safe))
    return figs


def _sign(x: float) -> int:
    return 0 if x is None or math.isnan(x) or x == 0 else (1 if x > 0 else -1)


def sign_columns(c: Comparison) -> dict[tuple[str, str], list[tuple[str, str, str, int, int]]]:
    """(variant, evaluator) -> per setting (group, model, dataset, sign g_gen, sign g_gold)."""
    sp = c.data["sign_pattern"]
    keys = [f"{cf}|{sp['estimator']}" for cf in sp["configs"]]
    out: dict[tuple[str, str], list] = {}
    for gkey, settings in c.data["groups"].items():
        grp, (v, e) = (gkey[0] if len(gkey) == 3 else ""), gkey[-2:]
        for (m, d), gaps in settings.items():
            out.setdefault((v, e), []).append((grp, m, d, _sign(gaps.get(keys[0])), _sign(gaps.get(keys[1]))))
    return out


def flip_counts(cols: list[tuple[str, str, str, int, int]]) -> dict[str, tuple[int, int]]:
    """Group ("" = all) -> (settings whose defined signs differ, settings with both signs defined)."""
    out: dict[str, list[int]] = {}
    for grp, _, _, a, b in cols:
        for k in dict.fromkeys(["", grp]):
            n = out.setdefault(k, [0, 0])
            if a and b:
                n[0] += int(a != b)
                n[1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def _sign_figure(c: Comparison, sp: dict, v: str, e: str, cols: list, save: Save, safe) -> Any:
    mat = np.array([[a for *_, a, _ in cols], [b for *_, b in cols]], dtype=float)
    fig, ax = plt.subplots(figsize=(max(3.6, 0.32 * len(cols) + 1.8), 2.2), layout="constrained")
    ax.imshow(mat, cmap=COLOURS, vmin=-1, vmax=1, aspect="auto")
    labels = [f"{(g + ': ') if g else ''}{m}/{d}" for g, m, d, *_ in cols]
    ax.set_xticks(range(len(cols)), labels, rotation=70, ha="right", fontsize=6)
    ax.set_yticks([0, 1], [f"generated ({sp['configs'][0]})", f"gold ({sp['configs'][1]})"], fontsize=6)
    for j, (*_, a, b) in enumerate(cols):
        if a and b and a != b:
            ax.add_patch(plt.Rectangle((j - 0.5, -0.5), 1, 2, fill=False, lw=1.2, ec="black"))
    counts = flip_counts(cols)
    per = "; ".join(f"{k} {n}/{t}" for k, (n, t) in counts.items() if k)
    title = (f"Sign of g = {sp['estimator']}(verbal) - {sp['estimator']}(token) per setting ({c.name}, {v}, {e}): "
             f"blue g < 0 (verbal better), red g > 0 (token better); framed: the scoring flips the sign "
             f"({counts[''][0]}/{counts[''][1]} settings{'; ' + per if per else ''})")
    ax.set_title(title, fontsize=6, wrap=True)
    return save(fig, safe(f"sign_pattern_{c.name}_{v}_{e}"), title + " (study 001 Figure 1)")
