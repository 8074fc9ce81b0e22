"""Figures (matplotlib, Agg backend): reliability diagrams, spread plots, consistency heatmaps.

Each figure is saved as vector PDF (Type 42 fonts) and PNG under ``report/figures/`` (when
requested) and kept as PNG bytes for the HTML report. Every figure is drawn from the same numbers
as the tables; reliability diagrams are per dataset with bin counts, spread plots share their
y-axis and name their comparison, and no figure is written twice.
"""

from __future__ import annotations

import io
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.layout_engine import PlaceHolderLayoutEngine  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
import numpy as np  # noqa: E402

from auditlang.core.workers import FIGURE_WORKERS_ENV, AsyncMap, fork_map_async, stage_workers  # noqa: E402,F401
from auditlang.metrics.calibration import reliability_bins  # noqa: E402
from auditlang.report.comparisons import Comparison  # noqa: E402
from auditlang.report.comparisons.common import known  # noqa: E402
from auditlang.report.figure_file import Figure  # noqa: E402,F401 - the drawn figures' type
from auditlang.report.facts import program_declares  # noqa: E402
from auditlang.report.figures_studies import study_figures  # noqa: E402
from auditlang.report.heatmap import annotated, pair_matrix  # noqa: E402
from auditlang.report.rundata import RunData  # noqa: E402





# Type 42 (TrueType) fonts in PDFs: several venues' PDF checks reject matplotlib's default Type 3.
RC = {"pdf.fonttype": 42, "ps.fonttype": 42, "font.size": 8, "axes.titlesize": 8, "legend.fontsize": 6.5,
      "savefig.dpi": 150}
SPARSE = 5  # bins with fewer items are drawn as hollow points and never joined by a line


FORMATS = ("png", "pdf")
# figures drawn but not yet rendered, inside start_figures: (placeholder Figure, matplotlib figure)
_DEFERRED: list[tuple[Figure, object]] | None = None


def _freeze_layout(fig) -> None:
    """Lay a constrained-layout figure out once and keep that layout: its PNG and PDF then no
    longer depend on which was rendered first (a layout engine re-runs on every draw, starting
    from the positions the last draw left), so the two render separately, in either order or in
    two workers, with the same bytes."""
    engine = fig.get_layout_engine()
    if engine is None or isinstance(engine, PlaceHolderLayoutEngine):
        return
    fig.draw_without_rendering()
    fig.set_layout_engine("none")


def _savefig(fig, fmt: str) -> bytes:
    """The figure's bytes in one format, as it is laid out now."""
    b = io.BytesIO()
    fig.savefig(b, format=fmt, bbox_inches="tight", metadata={"CreationDate": None} if fmt == "pdf" else None)
    return b.getvalue()


def _render(fig, fmt: str) -> bytes:
    _freeze_layout(fig)
    return _savefig(fig, fmt)


def _save(fig, name: str, title: str) -> Figure:
    if _DEFERRED is not None:  # all_figures renders every figure at the end (maybe in workers)
        placeholder = Figure(name, title, b"", b"")
        _DEFERRED.append((placeholder, fig))
        return placeholder
    bufs = [_render(fig, fmt) for fmt in FORMATS]
    plt.close(fig)
    return Figure(name, title, bufs[0], bufs[1])


def _render_job(job: tuple[int, str]) -> bytes:
    i, fmt = job
    return _render(_DEFERRED[i][1], fmt)  # type: ignore[index]


def _render_jobs(pending: list[tuple[Figure, object]]) -> list[tuple[int, str]]:
    """One job per figure and format, the figures with most axes first (a free worker takes the
    next job, so the longest renders start first), each figure's PDF (the slower) before its PNG."""
    order = sorted(range(len(pending)), key=lambda i: -len(pending[i][1].axes))  # type: ignore[attr-defined]
    return [(i, fmt) for i in order for fmt in ("pdf", "png")]


class Rendering:
    """Figures drawn by :func:`start_figures`: rendered already, or being rendered in forked
    workers while the caller goes on. ``result()`` collects them; ``close()`` (on every path)
    stops the workers and closes the matplotlib figures."""

    def __init__(self, drawn: list[Figure], pending: list[tuple[Figure, object]], jobs: list[tuple[int, str]],
                 job: AsyncMap | list) -> None:
        self._drawn, self._pending, self._jobs, self._job = drawn, pending, jobs, job
        self._figs: list[Figure] | None = None

    def result(self) -> list[Figure]:
        """Every figure, in drawing order; figures with identical PNG bytes are kept once."""
        if self._figs is None:
            try:
                out = self._job.get() if isinstance(self._job, AsyncMap) else self._job
                got = dict(zip(self._jobs, out, strict=True))
                done = {id(ph): Figure(ph.name, ph.title, *(got[i, fmt] for fmt in FORMATS))
                        for i, (ph, _) in enumerate(self._pending)}
            finally:
                self.close()
            self._figs = _unique([done[id(f)] for f in self._drawn])
        return self._figs

    def close(self) -> None:
        if isinstance(self._job, AsyncMap):
            self._job.close()
        for _, fig in self._pending:
            plt.close(fig)


def start_figures(rd: RunData, comps: list[Comparison]) -> Rendering:
    """Every figure drawn now; rendered (each figure's PDF and PNG two jobs: its layout is
    fixed before either renders, see _freeze_layout) in forked workers that go on while the caller
    works, on a host with cores to spare, else here at once. The bytes are the same either way
    (rendering is deterministic; the workers are forked inside the figures' rc_context)."""
    global _DEFERRED
    with plt.rc_context({**RC, "figure.max_open_warning": 0}):
        _DEFERRED = pending = []
        try:
            drawn = (reliability_figures(rd) + spread_figures(comps, rd) + consistency_figures(comps)
                     + study_figures(comps, _save, _safe))
            jobs = _render_jobs(pending)
            workers = stage_workers("figures", len(jobs))
            if workers > 1:
                job: AsyncMap | list = fork_map_async(_render_job, jobs, workers)
            else:
                job = [_render_job(j) for j in jobs]
        except BaseException:
            for _, fig in pending:
                plt.close(fig)
            raise
        finally:
            _DEFERRED = None  # the forked workers keep their own copy
    return Rendering(drawn, pending, jobs, job)


def _safe(s: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in s)


STYLES = ("-", "--", ":", "-.")  # one line style per evaluator


def _reliability_panel(ax, hax, curves: list[tuple[int, int, str, object]], title: str,
                       names: list[str] | None = None) -> None:
    """Reliability points (hollow for bins with < SPARSE items; lines only between adjacent dense
    bins) over a step histogram of the bin counts; colour = protocol, line style = evaluator. A
    legend beside the panel gives each curve's name (``names``, one per curve) and n in this panel."""
    ax.plot([0, 1], [0, 1], color="0.6", lw=0.8, ls="--")
    handles = []
    for c, (k, j, drawn, rb) in enumerate(curves):
        col, ls = plt.cm.tab10(k % 10), STYLES[j % len(STYLES)]
        mk = "o" if drawn == "token" else "s"
        dense = rb.counts >= SPARSE
        x, y = rb.mean_conf, rb.accuracy
        for i in range(len(x) - 1):  # join adjacent dense bins only
            if dense[i] and dense[i + 1]:
                ax.plot(x[i:i + 2], y[i:i + 2], ls, color=col, lw=1)
        ax.plot(x[dense], y[dense], mk, ms=4, color=col)
        sparse = (rb.counts > 0) & ~dense
        ax.plot(x[sparse], y[sparse], mk, ms=4, mfc="none", color=col)
        hax.step(rb.edges, np.append(rb.counts, rb.counts[-1]), where="post", color=col, lw=1, ls=ls)
        handles.append(Line2D([], [], color=col, marker=mk, ms=3, ls=ls, lw=1, label=(f"{names[c]}: " if names else "") + f"n={rb.n}"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, fontsize=5.5,
              title="n in this panel", title_fontsize=5.5, handlelength=2.2)  # beside the panel: hides no point
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("accuracy")
    ax.set_title(title)
    ax.tick_params(labelbottom=False)
    hax.set_xlim(-0.02, 1.02)
    hax.set_ylim(bottom=0)
    hax.set_xlabel("confidence (bin mean)")
    hax.set_ylabel("items / bin")


def reliability_figures(rd: RunData) -> list[Figure]:
    """One figure per (audit, model), one panel per dataset, one curve per protocol and evaluator
    (an evaluator repair shows as the same protocol's curves under each evaluator); variants are
    pooled (stated in the title)."""
    figs = []
    for aid in rd.audit_ids():
        a = rd.audit(aid)
        protos = [p for p in a.protocols if program_declares(rd, p, "reliability_diagram")]
        if not protos:
            continue
        evs = rd.evaluators(aid)
        pooled = f"pooled over {len(a.variants)} variants" if len(a.variants) > 1 else f"variant {a.variants[0]}"
        for m in a.models:
            panels = []
            for d in a.datasets:
                curves, names = [], []
                for p in protos:
                    for ev in evs:
                        df = known(rd.rows(aid, model=m, dataset=d, protocol=p, evaluator=ev), True)
                        if not df.empty:
                            rb = reliability_bins(df["confidence"].to_numpy(float), df["correct"].to_numpy(float), bins=10)
                            curves.append((protos.index(p), evs.index(ev), program_declares(rd, p, "reliability_diagram"), rb))
                            names.append(p + (f", {ev}" if len(evs) > 1 else ""))
                if curves:
                    panels.append((d, curves, names))
            if not panels:
                continue
            ncol = 2 if len(panels) == 4 else min(len(panels), 3)
            nrow = math.ceil(len(panels) / ncol)
            fig = plt.figure(figsize=(max(4.0 * ncol, 5.5), 3.4 * nrow + 0.6), layout="constrained")
            gs = fig.add_gridspec(2 * nrow, ncol, height_ratios=[3, 1] * nrow)
            for k, (d, curves, names) in enumerate(panels):
                r, c = divmod(k, ncol)
                ax = fig.add_subplot(gs[2 * r, c])
                hax = fig.add_subplot(gs[2 * r + 1, c], sharex=ax)
                _reliability_panel(ax, hax, curves, f"dataset {d}", names)
            handles = [Line2D([], [], color="0.6", ls="--", lw=0.8, label="perfect calibration")]
            drawn = {(k, j) for _, cs, _ in panels for k, j, _, _ in cs}
            for k, p in enumerate(protos):
                for j, ev in enumerate(evs):
                    if (k, j) in drawn:
                        label = f"{p} ({rd.protocol_ctor(p)})" + (f", evaluator {ev}" if len(evs) > 1 else "")
                        handles.append(Line2D([], [], color=plt.cm.tab10(k % 10), marker="o" if program_declares(
                                              rd, p, "reliability_diagram") == "token" else "s", ms=4, ls=STYLES[j % len(STYLES)], lw=1, label=label))
            handles.append(Line2D([], [], color="0.3", marker="o", mfc="none", ls="", ms=4,
                                  label=f"bin with < {SPARSE} items (not joined)"))
            fig.legend(handles=handles, loc="outside lower center", ncol=min(2 if len(evs) > 1 else 3, len(handles)))
            who = f"evaluator {evs[0]}" if len(evs) == 1 else f"{len(evs)} evaluators (line style)"
            head = f"Reliability, model {m}, audit {aid}, {who}; {pooled}; 10 equal-width bins"
            fig.suptitle(head, fontsize=8)
            figs.append(_save(fig, _safe(f"reliability_{aid}_{m}"), head + f"; hollow points: bins with fewer than "
                              f"{SPARSE} items; lower panels: items per bin; n per curve in each panel"))
    return figs


def _bounded(metric: str) -> bool:
    m = metric.lower()
    return any(k in m for k in ("accuracy", "ece", "brier", "auroc", "mce", "rate", "cons", "iou"))


def spread_figures(comps: list[Comparison], rd: RunData) -> list[Figure]:
    """Per-variant values per model, one panel per dataset with a shared y-axis; a comparison whose
    data equal an earlier one's adds its name to that figure instead of a duplicate."""
    figs: list[Figure] = []
    seen: dict[str, tuple[int, list[str]]] = {}  # data key -> (figure index, comparison names)
    for c in comps:
        if c.shape not in ("spread", "size_spread") or not c.data.get("rows"):
            continue
        rows = c.data["rows"]
        variants = c.data["variants"]
        metric = c.data.get("metric", "accuracy")
        datasets = list(dict.fromkeys(r["dataset"] for r in rows))
        ev = rows[0]["evaluator"]
        key = repr((metric, variants, [(r["model"], r["dataset"], r["evaluator"], r["protocol"],
                                        sorted(r["values"].items())) for r in rows]))
        names = (seen[key][1] if key in seen else []) + [c.name]
        title = f"Spread of {metric} over {len(variants)} prompt variants per model ({ev})"
        fig, axes = plt.subplots(1, len(datasets), figsize=(max(2.6 * len(datasets), 4.5), 3.6), squeeze=False,
                                 sharey=True, layout="constrained")
        vals_all = [v for r in rows for v in r["values"].values() if v == v]
        for ax, d in zip(axes[0], datasets):
            rs = [r for r in rows if r["dataset"] == d and r["evaluator"] == ev]
            many = len({r["protocol"] for r in rs}) > 1
            step = min(0.12, 0.6 / max(len(variants), 1))  # variants side by side: equal values stay visible
            for k, r in enumerate(rs):
                vals = [r["values"][v] for v in variants]
                ax.vlines(k, np.nanmin(vals), np.nanmax(vals), color="0.6", lw=2)
                for j, (v, y) in enumerate(zip(variants, vals)):
                    ax.plot(k + (j - (len(variants) - 1) / 2) * step, y, "o^sDv<>"[j % 7], ms=4,
                            color=plt.cm.tab10(j % 10), label=v if k == 0 else None)
            ax.set_xticks(range(len(rs)))
            ax.set_xticklabels([r["model"] + (f" / {r['protocol']}" if many else "") for r in rs], rotation=30, ha="right")
            ax.set_xlim(-0.6, len(rs) - 0.4)
            ax.set_title(f"dataset {d}")
        if _bounded(metric) and all(0 <= v <= 1 for v in vals_all):
            axes[0][0].set_ylim(-0.03, 1.03)
        axes[0][0].set_ylabel(metric)
        fig.legend(*axes[0][0].get_legend_handles_labels(), loc="outside lower center", title="variant",
                   ncol=min(3, len(variants)))
        fig.suptitle(f"{title}\ncomparison {', '.join(names)}", fontsize=8)
        f = _save(fig, _safe(f"spread_{names[0]}"), f"{title}; comparison {', '.join(names)}")
        if key in seen:
            figs[seen[key][0]] = f
        else:
            figs.append(f)
        seen[key] = (seen[key][0] if key in seen else len(figs) - 1, names)
        pts = [p for p in c.data.get("size_points") or [] if len(p) < 5 or p[4] == ev]
        if pts:
            many = len({p[5] for p in pts if len(p) > 5}) > 1
            fig, ax = plt.subplots(figsize=(3.8, 3.0), layout="constrained")
            for k, grp in enumerate(dict.fromkeys((p[0], p[5] if many else "") for p in pts)):
                sel = [p for p in pts if (p[0], p[5] if many else "") == grp]
                ax.plot([p[2] for p in sel], [p[3] for p in sel], "o^sDv<>"[k % 7], ms=5,
                        label=" / ".join(x for x in grp if x))
            sizes = sorted({p[2] for p in pts})
            ax.set_xscale("log")
            ax.set_xticks(sizes, [f"{x:g}B" for x in sizes])
            ax.minorticks_off()
            ax.set_xlabel("model size (parameters, log scale)")
            ax.set_ylabel(f"spread of {metric} (max - min)")
            ys_all = [p[3] for p in pts if p[3] == p[3]]
            if ys_all and _bounded(metric):
                ax.set_ylim(0, max(0.05, max(ys_all) * 1.15))
            ax.legend(title="dataset / protocol" if many else "dataset")
            ax.set_title(f"Model size vs spread of {metric} ({ev}): comparison {c.name}")
            figs.append(_save(fig, _safe(f"size_spread_{c.name}"),
                              f"Model size vs spread of {metric} over variants ({c.name}, evaluator {ev})"))
    return figs


def consistency_figures(comps: list[Comparison]) -> list[Figure]:
    figs = []
    for c in comps:
        if c.shape != "consistency":
            continue
        for (m, d, e), hm in c.data.get("heat", {}).items():
            probes, variants = hm["probes"], hm["variants"]
            if not hm["intra"] and not hm["cross"]:
                continue
            fig, axes = plt.subplots(1, 2, figsize=(7.5, 3.2), layout="constrained")
            intra = np.array([[hm["intra"].get((p, v), math.nan) for v in variants] for p in probes], dtype=float)
            cross = pair_matrix(probes, hm["cross"].get)
            for ax, mat, cols, what in ((axes[0], intra, variants, f"IoU_cons vs '{c.data['reference']}'"),
                                        (axes[1], cross, probes, f"cross-method DecCons ('{c.data['reference']}')")):
                im = annotated(ax, mat, probes, cols, what, fontsize=7, label_size=7, title_size=9, rotation=30)
                fig.colorbar(im, ax=ax, fraction=0.046)
            fig.suptitle(f"Consistency of probes, comparison {c.name}: model {m}, dataset {d}, evaluator {e}", fontsize=8)
            caption = f"Consistency heatmaps, {m} / {d} ({c.name}, evaluator {e})"
            if np.isnan(intra).any() or np.isnan(cross).any():
                caption += f"; {CONSISTENCY_NA_NOTE}"
            figs.append(_save(fig, _safe(f"consistency_{c.name}_{m}_{d}"), caption))
    return figs


CONSISTENCY_NA_NOTE = "n/a: no value, for want of abstain decisions under the variants compared"


def render_workers() -> int:
    """More than 1 when this host renders figures in forked workers (then ``all_figures`` draws
    them all first; ``start_figures`` lets the caller work while they render)."""
    return stage_workers("figures", 2)


def all_figures(rd: RunData, comps: list[Comparison]) -> list[Figure]:
    """Every figure, drawn with Type 42 fonts; figures with identical PNG bytes are kept once."""
    if render_workers() <= 1:
        with plt.rc_context(RC):  # one at a time, each rendered and closed as soon as it is drawn
            figs = (reliability_figures(rd) + spread_figures(comps, rd) + consistency_figures(comps)
                    + study_figures(comps, _save, _safe))
        return _unique(figs)
    # every figure drawn first, then rendered in forked workers (same bytes: see start_figures)
    return start_figures(rd, comps).result()


def _unique(figs: list[Figure]) -> list[Figure]:
    """Figures with identical PNG bytes kept once (the first)."""
    out, seen = [], set()
    for f in figs:
        if f.png not in seen:
            seen.add(f.png)
            out.append(f)
    return out
