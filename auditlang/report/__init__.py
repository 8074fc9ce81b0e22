"""Reports: per-cell tables, comparisons, reporting checklist, disclosure tables, figures, HTML.

:func:`build_report` is called after ``auditc run`` and by ``auditc report``. It reads the run
directory (records, cell metrics, journal fingerprints), computes every comparison the spec
declares and writes the outputs the spec's ``report`` statement asks for (all of them when the
spec has none) under ``run_dir/report/``. See docs/report.md for every file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from auditlang.plan.model import Plan
from auditlang.report.paths import spec_path
from auditlang.resolve.schema import REPORT_OUTPUTS
from auditlang.resolve.spec import Spec
from auditlang.report.tables import Table
from auditlang.report.checklist import build_checklist
from auditlang.report.comparisons import compute_all, vpr_tables
from auditlang.report.disclosure import disclosure_tables
from auditlang.report.html import render_html
from auditlang.report.latex import document
from auditlang.report import methods as M
from auditlang.report.rundata import load_run
from auditlang.store.rundir import REPORT_DIR

__all__ = ["OUTPUTS", "build_report", "requested_outputs"]

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


def _cells_table(cells: pd.DataFrame):

    t = Table("cells", "Per-cell results (point estimate [95% bootstrap interval])", [str(c) for c in cells.columns])
    for row in cells.itertuples(index=False):
        t.add(*[None if (isinstance(v, float) and v != v) else v for v in row])
    if cells.empty:
        t.notes.append("not computable: the run has no scored records")
    return t


def build_report(spec: Spec, plan: Plan, run_dir: Path) -> Path:
    """Write ``run_dir/report/`` from stored records and metrics; returns the report folder."""
    run_dir = Path(run_dir)
    out = run_dir / REPORT_DIR
    out.mkdir(parents=True, exist_ok=True)
    _remove_previous(out)
    want = requested_outputs(spec)
    rd = load_run(spec, plan, run_dir)
    written: list[Path] = []

    cells = _cells_table(rd.cells)
    vprs = [t for aid in rd.audit_ids() for t in vpr_tables(rd, aid)]
    comps = compute_all(rd) if ("comparisons" in want or "html" in want or "checklist" in want) else []
    figs, fig_note = [], ""
    if "figures" in want or "html" in want:
        try:
            from auditlang.report.figures import all_figures  # lazy: auditlang.report.figures imports matplotlib, needed only here
        except ImportError as err:  # matplotlib is the optional `report` extra
            fig_note = f"not computable: figures need matplotlib ({err}); pip install 'auditlang[report]'"
        else:
            figs = all_figures(rd, comps)
    checklist = build_checklist(rd, comps) if ("checklist" in want or "html" in want) else None
    disclosure = disclosure_tables(rd) if ("disclosure" in want or "html" in want) else []
    cite = M.methods_sentences(rd) if ("checklist" in want or "html" in want) else []

    if "cells" in want:
        written += cells.write(out)
        for t in vprs:
            written += t.write(out / "vpr")
    if "comparisons" in want:
        cdir = out / "comparisons"
        parts = [f"# Comparisons: {spec.entry.name}", ""]
        for c in comps:
            parts.append(f"## {c.name} ({c.ctor}, audit {c.audit})\n")
            parts += [f"- {s}" for s in c.summary]
            for t in c.tables:
                written += t.write(cdir)
                parts.append(t.to_markdown(heading=3))
        if not comps:
            parts.append("The spec declares no comparison (`compare NAME = ...`).")
        (out / "comparisons.md").write_text("\n".join(parts), encoding="utf-8")
        written.append(out / "comparisons.md")
    if "figures" in want:
        if fig_note:
            (out / "figures.md").write_text(fig_note + "\n", encoding="utf-8")
            written.append(out / "figures.md")
        for f in figs:
            written += f.write(out / "figures")
    if "checklist" in want and checklist is not None:
        fmts = _formats(want["checklist"])
        if "markdown" in fmts:
            (out / "checklist.md").write_text(checklist.to_markdown() + "\n" + M.to_markdown(cite), encoding="utf-8")
            written.append(out / "checklist.md")
        if "latex" in fmts:
            body = checklist.to_latex_body() + M.to_latex_section(cite)
            (out / "checklist.tex").write_text(document(body, checklist.title), encoding="utf-8")
            (out / "methods.tex").write_text(M.to_latex_fragment(cite), encoding="utf-8")
            written += [out / "checklist.tex", out / "methods.tex"]
    if "disclosure" in want:
        fmts = _formats(want["disclosure"])
        if "markdown" in fmts:
            md = "\n".join(t.to_markdown(heading=2) for t in disclosure)
            (out / "disclosure.md").write_text(f"# Protocol disclosure: {spec.entry.name}\n\n" + md, encoding="utf-8")
            written.append(out / "disclosure.md")
        if "latex" in fmts:
            head = "% Generated by auditlang. Needs \\usepackage{booktabs,tabularx,array}.\n"
            for stem, wide in (("disclosure", False), ("disclosure_wide", True)):
                frag = head + "\n".join(t.to_latex(caption=t.title + ". Generated by auditlang from the spec's "
                                                    "protocols.", label=f"tab:{t.name}" + ("-wide" if wide else ""),
                                                    wide=wide) for t in disclosure)
                (out / f"{stem}.tex").write_text(frag, encoding="utf-8")
                written.append(out / f"{stem}.tex")
                if not wide:
                    # [!htbp]: the preview starts with the first table under its title (with [tbp] a
                    # table taller than LaTeX's top-float share went to page 2, page 1 held the title only)
                    (out / "disclosure_standalone.tex").write_text(
                        document(frag.replace("}[tbp]", "}[!htbp]"), f"Protocol disclosure: {spec.entry.name}"),
                        encoding="utf-8")
                    written.append(out / "disclosure_standalone.tex")
    if "html" in want:
        files = "; ".join(f"{Path(p).name} {h[:16]}" for p, h in spec.files.items())
        meta = [("spec (relative to the run directory)", spec_path(spec.entry, run_dir, rd.run_info)), ("spec files (sha256)", files),
                ("plan hash", rd.run_info.get("plan_hash") or rd.plan_json.get("hash", "not recorded")),
                ("run directory", f"{run_dir.name} (the folder holding report/)"), ("records", str(len(rd.records))), ("cells", str(len(plan.cells))),
                ("missing run files", ", ".join(rd.missing) or "none")] + ([("figures", fig_note)] if fig_note else [])
        comp_tables = [(f"{c.name} ({c.ctor})", c.tables) for c in comps]
        html = render_html(f"Audit report: {spec.entry.name}", meta, vprs, comp_tables, figs, checklist, disclosure,
                           cells_df=rd.cells, cite=M.to_html(cite))
        (out / "report.html").write_text(html, encoding="utf-8")
        written.append(out / "report.html")
    index = _index(spec, rd, comps, written, out)
    (out / "index.md").write_text(index, encoding="utf-8")
    written.append(out / "index.md")
    (out / "manifest.json").write_text(json.dumps({"outputs": sorted(want), "files": sorted(
        str(p.relative_to(out)) for p in written)}, indent=1), encoding="utf-8")
    return out


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
    for sub in ("comparisons", "figures", "vpr"):
        d = out / sub
        if d.is_dir() and not any(d.iterdir()):
            d.rmdir()


def _index(spec: Spec, rd, comps, written: list[Path], out: Path) -> str:
    lines = [f"# Audit report: {spec.entry.name}", "",
             f"Run directory: {rd.run_dir.name} (the folder holding report/); spec: "
             f"{spec_path(spec.entry, rd.run_dir, rd.run_info)} — {len(rd.records)} records, {len(rd.cells)} cells with metrics.", ""]
    if rd.missing:
        lines += [f"Missing run files: {', '.join(rd.missing)}.", ""]
    if comps:
        lines += ["## Comparisons", ""]
        for c in comps:
            lines.append(f"- {c.name} ({c.ctor}): " + ("; ".join(c.summary) or "see comparisons.md"))
        lines.append("")
    lines += ["## Files", ""] + [f"- {p.relative_to(out)}" for p in written]
    return "\n".join(lines) + "\n"
