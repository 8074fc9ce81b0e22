"""Reports: per-cell tables, comparisons, reporting checklist, disclosure tables, figures, HTML.

:func:`build_report` is called after ``auditc run`` and by ``auditc report``. It reads the run
directory (records, cell metrics, journal fingerprints), computes every comparison the spec
declares and writes the outputs the spec's ``report`` statement asks for (all of them when the
spec has none) under ``run_dir/report/``. See docs/report.md for every file.

Figures are read from ``report/.figures-cache/`` when what they are drawn from is unchanged. Else,
on a host that renders them in forked workers (figures.render_workers), they are drawn as the
build starts and render while it computes the comparisons, tables, checklist and disclosure; the
build collects them where it first needs them (the figure files, the HTML). Elsewhere they are
drawn and rendered one by one after the comparisons. The files are the same either way.
The sample browser (samples.SamplesBuild) is likewise written in a forked child beside the build
on such a host, and collected before the HTML.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from auditlang.plan.model import Plan
from auditlang.report.paths import spec_path
from auditlang.resolve.schema import REPORT_OUTPUTS
from auditlang.resolve.spec import Spec
from auditlang.report.tables import NA, Table, safe_name
from auditlang.report import textables as T
from auditlang.report.checklist import build_checklist
from auditlang.report.comparisons import compute_all, compute_one, vpr_tables
from auditlang.report.disclosure import claims as disclosure_claims, disclosure_tables
from auditlang.report.html import render_html
from auditlang.report.figure_file import Figure
from auditlang.report.htmlcells import errors_note
from auditlang.report.latex import IDENT_DEF, document
from auditlang.report import methods as M
from auditlang.report import runfacts as R
from auditlang.report.rundata import load_run
from auditlang.report.samples import PAGE_FILE as SAMPLES_PAGE, SamplesBuild
from auditlang.report.safe_text import write_report_text
from auditlang.report.rescores import rescore_tables
from auditlang.core.hashing import sha256_file
from auditlang.store.rundir import CELLS_CSV, FIGURE_CACHE_DIR, METRICS_DIR, RECORDS, REPORT_DIR, RESCORE_DIR

__all__ = ["OUTPUTS", "build_report", "requested_outputs"]

CLAIMS_FILE = "claims.json"  # every statement of checklist, methods and disclosure with the facts it is built from
OUTPUTS = REPORT_OUTPUTS  # cells, checklist, disclosure, figures, html, comparisons


def requested_outputs(spec: Spec) -> dict[str, dict[str, Any]]:
    """Output name -> parameters, from the spec's ``report`` statement (every output when absent)."""
    if not spec.report:
        return {name: {} for name in OUTPUTS}
    out: dict[str, dict[str, Any]] = {}
    for name, params in spec.report:
        out.setdefault(name, {}).update(params)
    return out


def _formats(params: dict[str, Any]) -> set[str]:
    fmt = params.get("format", "both")
    return {"latex", "markdown"} if fmt == "both" else {fmt}


def _cells_table(cells: pd.DataFrame, excluded: dict[str, str], notes: list[str] | None = None,
                 na: dict[str, set[str]] | None = None):
    """metrics/cells.csv as a table, plus an ``excluded`` column: why the audit's own VPR rule
    excludes a cell ("no" for an included cell). A column that does not apply to a cell (``na``:
    the VPR of a token cell, ...) is ``n/a``, an undefined value ``–`` (blank in CSV)."""
    na = na or {}
    t = Table("cells", "Per-cell results (point estimate [95% bootstrap interval])",
              [str(c) for c in cells.columns] + ["excluded"], legend=True)
    cols = [str(c) for c in cells.columns]
    for row in cells.itertuples(index=False):
        cid = str(row[0]) if len(row) else ""
        skip = na.get(cid, set())
        vals = [NA if (c in skip or (c.endswith((" lo", " hi")) and c[:-3] in skip)) else
                None if (isinstance(v, float) and v != v) else v for c, v in zip(cols, row)]
        t.add(*vals, NA if "excluded" in skip else (excluded.get(cid) or "no") if len(vals) else None)
    if cells.empty:
        t.notes.append("not computable: the run has no scored records")
    t.notes.append(errors_note(cells))
    t.notes += notes or []
    if excluded:
        t.notes.append(f"{len(excluded)} cells are excluded by their audit's verbal parse-rate rule (column "
                       "'excluded'); their calibration values are shown for reference only")
    return t


def build_report(spec: Spec, plan: Plan, run_dir: Path) -> Path:
    """Write ``run_dir/report/`` from stored records and metrics; returns the report folder."""
    run_dir = Path(run_dir)
    out = run_dir / REPORT_DIR
    out.mkdir(parents=True, exist_ok=True)
    _remove_previous(out)
    want = requested_outputs(spec)
    rd = load_run(spec, plan, run_dir)
    with_comps = "comparisons" in want or "html" in want or "checklist" in want
    # the sample browser report.html links to (`auditc view` rewrites it with chat templates
    # applied): started first, so that a child it forks is forked before the figures' pool threads
    samples = SamplesBuild(run_dir, dict(rd.run_info.get("fingerprints") or {}), title=f"Samples: {spec.entry.name}") \
        if "html" in want and (run_dir / RECORDS).exists() else None
    try:
        with _Figures(rd, out, with_comps) if ("figures" in want or "html" in want) else _NoFigures() as fw:
            return _build(spec, plan, run_dir, out, want, rd, with_comps, fw, samples)
    finally:
        if samples is not None:
            samples.close()


def _build(spec: Spec, plan: Plan, run_dir: Path, out: Path, want: dict[str, dict[str, Any]], rd, with_comps: bool,
           fw: _Figures | _NoFigures, samples: SamplesBuild | None) -> Path:
    written: list[Path] = []
    excl = T.excluded_cells(rd)
    cell_notes = R.cell_notes(rd)
    na = R.not_applicable(rd)
    cells = _cells_table(rd.cells, excl, cell_notes, na)
    vprs = [t for aid in rd.audit_ids() for t in vpr_tables(rd, aid)]
    comps = compute_all(rd, fw.comps) if with_comps else []
    rescores = rescore_tables(run_dir) if ("cells" in want or "html" in want) else []
    fw.draw(comps)  # drawn and rendered here unless they render in workers already
    checklist = build_checklist(rd, comps) if ("checklist" in want or "html" in want) else None
    disclosure = disclosure_tables(rd) if ("disclosure" in want or "html" in want) else []
    cite = M.methods_sentences(rd) if ("checklist" in want or "html" in want) else []

    if "cells" in want:
        if "markdown" in _formats(want["cells"]):
            written += cells.write(out)
            for t in vprs:
                written += t.write(out / "vpr")
            if rescores:
                parts = ["# Rescored under other evaluators (auditc rescore)", ""]
                for t in rescores:
                    written += t.write(out / "rescore")
                    parts.append(t.to_markdown(heading=2))
                written.append(_write(out / "rescore.md", "\n".join(parts)))
        if "latex" in _formats(want["cells"]):
            for aid, tables in T.cells_tables(rd).items():
                written.append(_write(out / "tables" / f"cells_{safe_name(aid)}.tex", T.fragment(tables)))
    if "comparisons" in want and "latex" in _formats(want["comparisons"]):
        for stem, tables in T.comparison_tables(rd, comps).items():
            written.append(_write(out / "tables" / f"{safe_name(stem)}.tex", T.fragment(tables)))
    if "comparisons" in want and "markdown" in _formats(want["comparisons"]):
        cdir = out / "comparisons"
        parts = [f"# Comparisons: {spec.entry.name}", ""]
        for c in comps:
            # a comparison of other comparisons (grid_rows) has no audit of its own: its notes name the grids'
            parts.append(f"## {c.name} ({c.ctor}" + (f", audit {c.audit}" if c.audit else "") + ")\n")
            parts += [f"- {s}" for s in c.summary]
            for t in c.tables:
                written += t.write(cdir)
                parts.append(t.to_markdown(heading=3))
        if not comps:
            parts.append("The spec declares no comparison (`compare NAME = ...`).")
        write_report_text(out / "comparisons.md", "\n".join(parts))
        written.append(out / "comparisons.md")
    figs, fig_note = fw.result()  # the figures' first use: wait for their workers
    if "figures" in want:
        if fig_note:
            write_report_text(out / "figures.md", fig_note + "\n")
            written.append(out / "figures.md")
        for f in figs:
            written += f.write(out / "figures")
    if "checklist" in want and checklist is not None:
        fmts = _formats(want["checklist"])
        if "markdown" in fmts:
            write_report_text(out / "checklist.md", checklist.to_markdown() + "\n" + M.to_markdown(cite))
            written.append(out / "checklist.md")
        if "latex" in fmts:
            body = checklist.to_latex_body() + M.to_latex_section(cite)
            write_report_text(out / "checklist.tex", document(body, checklist.title))
            write_report_text(out / "methods.tex", M.to_latex_fragment(cite))
            written += [out / "checklist.tex", out / "methods.tex"]
    if "checklist" in want or "disclosure" in want:
        claims = (checklist.claims() + M.claims(cite) if "checklist" in want and checklist is not None else []) + \
            (disclosure_claims(disclosure) if "disclosure" in want else [])
        (out / CLAIMS_FILE).write_text(json.dumps(claims, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(out / CLAIMS_FILE)
    if "disclosure" in want:
        fmts = _formats(want["disclosure"])
        if "markdown" in fmts:
            md = "\n".join(t.to_markdown(heading=2) for t in disclosure)
            write_report_text(out / "disclosure.md", f"# Protocol disclosure: {spec.entry.name}\n\n" + md)
            written.append(out / "disclosure.md")
        if "latex" in fmts:
            head = "% Generated by auditlang. Needs \\usepackage{booktabs,tabularx,array}.\n" + IDENT_DEF
            for stem, wide in (("disclosure", False), ("disclosure_wide", True)):
                frag = head + "\n".join(t.to_latex(caption=t.title + ". Generated by auditlang from the spec's "
                                                    "protocols.", label=f"tab:{t.name}" + ("-wide" if wide else ""),
                                                    wide=wide) for t in disclosure)
                write_report_text(out / f"{stem}.tex", frag)
                written.append(out / f"{stem}.tex")
                if not wide:
                    # [!htbp]: the preview starts with the first table under its title (with [tbp] a
                    # table taller than LaTeX's top-float share went to page 2, page 1 held the title only)
                    write_report_text(out / "disclosure_standalone.tex",
                        document(frag.replace("}[tbp]", "}[!htbp]"), f"Protocol disclosure: {spec.entry.name}"))
                    written.append(out / "disclosure_standalone.tex")
    if "html" in want:
        files = "; ".join(f"{Path(p).name} {h[:16]}" for p, h in spec.files.items())
        meta = [("spec (relative to the run directory)", spec_path(spec.entry, run_dir, rd.run_info)), ("spec files (sha256)", files),
                ("plan hash", rd.run_info.get("plan_hash") or rd.plan_json.get("hash", "not recorded")),
                ("run directory", f"{run_dir.name} (the folder holding report/)"), ("records", f"{len(rd.records)} answered" + (f", {len(rd.failed)} missing (failed requests, n_error in the "
                                                             "cell tables)" if len(rd.failed) else ", 0 request errors")), ("cells", str(len(plan.cells))),
                ("missing run files", ", ".join(rd.missing) or "none")] + ([("figures", fig_note)] if fig_note else [])
        comp_tables = [(f"{c.name} ({c.ctor})", c.tables) for c in comps]
        if samples is not None:
            written += samples.finish()
        html = render_html(f"Audit report: {spec.entry.name}", meta, vprs, comp_tables, figs, checklist, disclosure,
                           cells_df=rd.cells.assign(excluded=[excl.get(str(c), "") for c in rd.cells["cell_id"]])
                           if not rd.cells.empty else rd.cells, cells_na=na, cite=M.to_html(cite),
                           cells_notes=R.cell_notes(rd, warnings=True), samples=SAMPLES_PAGE if samples is not None else "",
                           rescores=rescores)
        write_report_text(out / "report.html", html)
        written.append(out / "report.html")
    index = _index(spec, rd, comps, written, out)
    write_report_text(out / "index.md", index)
    written.append(out / "index.md")
    write_report_text(out / "manifest.json", json.dumps({"outputs": sorted(want), "files": sorted(
        str(p.relative_to(out)) for p in written)}, indent=1))
    return out


def _write(path: Path, text: str) -> Path:
    return write_report_text(path, text)


class _Figures:
    """The figures of one build: ``(figures, note)`` from ``result()``. Drawn again only when what
    they are drawn from changed (records, cell metrics, the spec and plan, the report code,
    matplotlib); else read from ``report/.figures-cache/`` (an unchanged rerun or `auditc report`
    redrew them in 15 of 20 s). On a host that renders them in forked workers
    (figures.render_workers) they are drawn when the build starts, from the comparisons they
    show (computed first, here), and render while the comparisons, tables, checklist and
    disclosure are built; elsewhere they are drawn and rendered one by one after the comparisons
    (``draw``). A context manager: leaving it stops workers that are still rendering."""

    def __init__(self, rd, out: Path, with_comps: bool) -> None:
        self.rd, self.cache, self.key = rd, out / FIGURE_CACHE_DIR, _figure_key(rd)
        self.comps: dict[str, Any] = {}  # compare id -> the comparisons computed for the figures
        self._done: tuple[list, str] | None = None
        self._rendering = None
        stored = _read_figure_cache(self.cache, self.key)
        if stored is not None:
            self._done = stored, ""
            return
        try:
            from auditlang.report.figures import (  # lazy: auditlang.report.figures imports matplotlib, needed only here
                all_figures, render_workers, start_figures)
        except ImportError as err:  # matplotlib is the optional `report` extra
            self._done = [], f"not computable: figures need matplotlib ({err}); pip install 'auditlang[report]'"
            return
        self._all_figures = all_figures
        if render_workers() > 1:
            if with_comps:
                self.comps = {cid: compute_one(rd, cid) for cid, obj in rd.spec.of_kind("compare").items()
                              if obj.value.FIGURES}
            self._rendering = start_figures(rd, list(self.comps.values()))

    def draw(self, comps: list) -> None:
        """Draw and render them now, from every comparison, unless read or started already."""
        if self._done is None and self._rendering is None:
            self._finish(self._all_figures(self.rd, comps))

    def result(self) -> tuple[list, str]:
        if self._done is None:
            self._finish(self._rendering.result())
        return self._done

    def _finish(self, figs: list) -> None:
        _write_figure_cache(self.cache, self.key, figs)
        self._done = figs, ""

    def __enter__(self) -> _Figures:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._rendering is not None:
            self._rendering.close()


class _NoFigures:
    """No figure asked for."""

    comps: dict[str, Any] = {}

    def draw(self, comps: list) -> None:
        pass

    def result(self) -> tuple[list, str]:
        return [], ""

    def __enter__(self) -> _NoFigures:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def _figure_key(rd) -> str | None:
    """Hash of every input of the figures, or None when one cannot be read (then they are drawn)."""
    h = hashlib.sha256()
    try:
        for f in [rd.run_dir / RECORDS, *sorted((rd.run_dir / METRICS_DIR).glob("*"))]:
            h.update(f.name.encode() + b"\0" + (sha256_file(f) if f.is_file() else "-").encode())
        code = Path(__file__).resolve().parents[1]
        for f in sorted([*(code / "report").rglob("*.py"), *(code / "metrics").rglob("*.py")]):
            h.update(f.relative_to(code).as_posix().encode() + b"\0" + f.read_bytes())
    except OSError:
        return None
    try:
        mpl = importlib.metadata.version("matplotlib")
    except importlib.metadata.PackageNotFoundError:  # the `report` extra is not installed: nothing is cached
        return None
    h.update(json.dumps([rd.plan.hash, sorted(rd.spec.files.values()), mpl]).encode())
    return h.hexdigest()


def _read_figure_cache(cache: Path, key: str | None) -> list | None:
    if key is None:
        return None
    try:
        index = json.loads((cache / "index.json").read_text(encoding="utf-8"))
        if index.get("key") != key:
            return None
        return [Figure(f["name"], f["title"], (cache / f"{f['name']}.png").read_bytes(),
                              (cache / f"{f['name']}.pdf").read_bytes()) for f in index["figures"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_figure_cache(cache: Path, key: str | None, figs: list) -> None:
    if key is None:
        return
    try:
        if cache.is_dir():
            shutil.rmtree(cache)
        cache.mkdir(parents=True)
        for f in figs:
            (cache / f"{f.name}.png").write_bytes(f.png)
            (cache / f"{f.name}.pdf").write_bytes(f.pdf)
        index = {"key": key, "figures": [{"name": f.name, "title": f.title} for f in figs]}
        (cache / "index.json").write_text(json.dumps(index, indent=1), encoding="utf-8")  # last: marks it complete
    except OSError:
        pass  # a read-only run directory only costs drawing them next time


def _remove_previous(out: Path) -> None:
    """Delete the files the previous build listed in its manifest (and nothing else)."""
    manifest = out / "manifest.json"
    try:
        files = json.loads(manifest.read_text(encoding="utf-8")).get("files", [])
    except (OSError, ValueError):
        return
    root = out.resolve()
    for rel in files:
        p = (out / rel).resolve()
        if p.is_file() and root in p.parents:
            p.unlink()
    manifest.unlink(missing_ok=True)
    for sub in ("comparisons", "figures", "vpr", "tables", "rescore"):
        d = out / sub
        if d.is_dir() and not any(d.iterdir()):
            d.rmdir()


def _index(spec: Spec, rd, comps, written: list[Path], out: Path) -> str:
    lines = [f"# Audit report: {spec.entry.name}", "",
             f"Run directory: {rd.run_dir.name} (the folder holding report/); spec: "
             f"{spec_path(spec.entry, rd.run_dir, rd.run_info)} — {len(rd.records)} records, {len(rd.cells)} cells with metrics; "
             + (f"{len(rd.failed)} records missing because a request failed (n_error per cell)." if len(rd.failed)
                else "0 request errors."), ""]
    if rd.missing:
        lines += [f"Missing run files: {', '.join(rd.missing)}.", ""]
    if comps:
        lines += ["## Comparisons", ""]
        for c in comps:
            lines.append(f"- {c.name} ({c.ctor}): " + ("; ".join(c.summary) or "see comparisons.md"))
        lines.append("")
    rescored = sorted(p.parent.name for p in (rd.run_dir / RESCORE_DIR).glob(f"*/{Path(CELLS_CSV).name}"))
    if rescored:
        lines += ["## Rescores", "", f"Re-scored with `auditc rescore` under: {', '.join(rescored)} (rescore.md).", ""]
    lines += ["## Files", ""] + [f"- {p.relative_to(out)}" for p in written]
    return "\n".join(lines) + "\n"
