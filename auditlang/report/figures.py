"""Figures (matplotlib, Agg backend): reliability diagrams, spread plots, consistency heatmaps.

Each figure is saved as PNG and PDF under ``report/figures/`` (when requested) and kept as PNG
bytes for the HTML report. Every figure is drawn from the same numbers as the tables.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from auditlang.metrics.calibration import reliability_bins  # noqa: E402
from auditlang.report.comparisons import Comparison  # noqa: E402
from auditlang.report.comparisons.common import known  # noqa: E402
from auditlang.report.rundata import RunData  # noqa: E402

TOKEN_CTORS = ("token_prob", "tok_prob_probe")
VERBAL_CTORS = ("verbalized", "ask_cal", "p_true")


@dataclass
class Figure:
    name: str
    title: str
    png: bytes
    pdf: bytes

    def write(self, folder: Path) -> list[Path]:
        folder.mkdir(parents=True, exist_ok=True)
        out = [folder / f"{self.name}.png", folder / f"{self.name}.pdf"]
        out[0].write_bytes(self.png)
        out[1].write_bytes(self.pdf)
        return out


def _save(fig, name: str, title: str) -> Figure:
    bufs = []
    for fmt in ("png", "pdf"):
        b = io.BytesIO()
        fig.savefig(b, format=fmt, dpi=110, bbox_inches="tight", metadata={"CreationDate": None} if fmt == "pdf" else None)
        bufs.append(b.getvalue())
    plt.close(fig)
    return Figure(name, title, bufs[0], bufs[1])


def _safe(s: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in s)


def reliability_figures(rd: RunData) -> list[Figure]:
    """One diagram per (audit, model): verbal and token protocols, pooled over datasets and variants."""
    figs = []
    for aid in rd.audit_ids():
        a = rd.audit(aid)
        protos = [p for p in a.protocols if rd.protocol_ctor(p) in TOKEN_CTORS + VERBAL_CTORS]
        if not protos:
            continue
        ev = rd.evaluators(aid)[0]
        for m in a.models:
            curves = []
            for p in protos:
                df = known(rd.rows(aid, model=m, protocol=p, evaluator=ev), True)
                if df.empty:
                    continue
                rb = reliability_bins(df["confidence"].to_numpy(float), df["correct"].to_numpy(float), bins=10)
                curves.append((p, rb))
            if not curves:
                continue
            fig, ax = plt.subplots(figsize=(4.6, 4.2))
            ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls="--", label="perfect calibration")
            for p, rb in curves:
                ok = rb.counts > 0
                style = "-o" if rd.protocol_ctor(p) in TOKEN_CTORS else "-s"
                ax.plot(rb.mean_conf[ok], rb.accuracy[ok], style, ms=4, label=f"{p} ({rd.protocol_ctor(p)}, n={rb.n})")
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1)
            ax.set_xlabel("confidence (bin mean)")
            ax.set_ylabel("accuracy")
            ax.set_title(f"{m}: reliability ({aid}, {ev})", fontsize=9)
            ax.legend(fontsize=6, loc="upper left")
            figs.append(_save(fig, _safe(f"reliability_{aid}_{m}"), f"Reliability diagram, {m} (audit {aid}, evaluator {ev}; "
                              "10 equal-width bins, pooled over datasets and variants)"))
    return figs


def spread_figures(comps: list[Comparison], rd: RunData) -> list[Figure]:
    figs = []
    for c in comps:
        if c.ctor not in ("spread", "size_spread") or not c.data.get("rows"):
            continue
        rows = c.data["rows"]
        variants = c.data["variants"]
        datasets = list(dict.fromkeys(r["dataset"] for r in rows))
        ev = rows[0]["evaluator"]
        fig, axes = plt.subplots(1, len(datasets), figsize=(3.6 * len(datasets), 3.6), squeeze=False)
        for ax, d in zip(axes[0], datasets):
            rs = [r for r in rows if r["dataset"] == d and r["evaluator"] == ev]
            for k, r in enumerate(rs):
                vals = [r["values"][v] for v in variants]
                ax.vlines(k, min(vals), max(vals), color="0.5", lw=2)
                for j, (v, y) in enumerate(zip(variants, vals)):
                    ax.plot(k, y, "o^sDv<>"[j % 7], ms=5, color=plt.cm.tab10(j % 10), label=v if k == 0 else None)
            ax.set_xticks(range(len(rs)))
            ax.set_xticklabels([r["model"] for r in rs], rotation=30, ha="right", fontsize=7)
            ax.set_title(d, fontsize=9)
            ax.set_ylabel(c.data.get("metric", "accuracy"))
        axes[0][0].legend(fontsize=6)
        figs.append(_save(fig, _safe(f"spread_{c.name}"),
                          f"Per-variant {c.data.get('metric')} and spread ({c.name}, evaluator {ev})"))
        pts = c.data.get("size_points")
        if pts:
            fig, ax = plt.subplots(figsize=(4.6, 3.8))
            for d in dict.fromkeys(p[0] for p in pts):
                xs = [p[2] for p in pts if p[0] == d]
                ys = [p[3] for p in pts if p[0] == d]
                ax.plot(xs, ys, "o", label=d)
            ax.set_xscale("log")
            ax.set_xlabel("model size (B parameters)")
            ax.set_ylabel("spread")
            ax.legend(fontsize=7)
            figs.append(_save(fig, _safe(f"size_spread_{c.name}"), f"Model size vs spread ({c.name})"))
    return figs


def consistency_figures(comps: list[Comparison]) -> list[Figure]:
    figs = []
    for c in comps:
        if c.ctor != "consistency":
            continue
        for (m, d, e), hm in c.data.get("heat", {}).items():
            probes, variants = hm["probes"], hm["variants"]
            if not hm["intra"] and not hm["cross"]:
                continue
            fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
            intra = np.array([[hm["intra"].get((p, v), math.nan) for v in variants] for p in probes], dtype=float)
            _heat(axes[0], intra, probes, variants, f"IoU_cons vs '{c.data['reference']}'")
            cross = np.full((len(probes), len(probes)), math.nan)
            for i, p1 in enumerate(probes):
                cross[i, i] = 1.0
                for j, p2 in enumerate(probes):
                    val = hm["cross"].get((p1, p2), hm["cross"].get((p2, p1)))
                    if val is not None and i != j:
                        cross[i, j] = val
            _heat(axes[1], cross, probes, probes, f"cross-method DecCons ('{c.data['reference']}')")
            figs.append(_save(fig, _safe(f"consistency_{c.name}_{m}_{d}"),
                              f"Consistency heatmaps, {m} / {d} ({c.name}, evaluator {e})"))
    return figs


def _heat(ax, mat: np.ndarray, rows: list[str], cols: list[str], title: str) -> None:
    im = ax.imshow(np.ma.masked_invalid(mat), vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels(cols, rotation=30, ha="right", fontsize=7)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows, fontsize=7)
    for i in range(mat.shape[0]):
        for j in range(mat.shape[1]):
            if not math.isnan(mat[i, j]):
                ax.text(j, i, f"{mat[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if mat[i, j] < 0.6 else "black")
    ax.set_title(title, fontsize=9)
    ax.figure.colorbar(im, ax=ax, fraction=0.046)


def all_figures(rd: RunData, comps: list[Comparison]) -> list[Figure]:
    return reliability_figures(rd) + spread_figures(comps, rd) + consistency_figures(comps)
