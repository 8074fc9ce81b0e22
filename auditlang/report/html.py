"""The self-contained HTML report: jinja2 template, tables inline, figures as base64 PNG."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import pandas as pd

from auditlang.report.checklist import Checklist
from auditlang.report.htmlcells import cells_html
from auditlang.report.tables import Table

if TYPE_CHECKING:  # figures imports matplotlib (~0.3 s); only annotations need it here
    from auditlang.report.figures import Figure

TEMPLATES = Path(__file__).parent / "templates"


@dataclass
class Section:
    id: str
    title: str
    intro: str = ""
    html: list[str] = field(default_factory=list)
    figures: list[dict[str, str]] = field(default_factory=list)


def _figs(figs: list[Figure]) -> list[dict[str, str]]:
    return [{"title": f.title, "b64": base64.b64encode(f.png).decode("ascii")} for f in figs]


def render_html(title: str, meta: list[tuple[str, Any]], cells: list[Table], comparisons: list[tuple[str, list[Table]]],
                figures: list[Figure], checklist: Checklist | None, disclosure: list[Table], *,
                cells_df: pd.DataFrame | None = None, cite: str = "", cells_notes: list[str] | None = None,
                cells_na: dict[str, set[str]] | None = None, samples: str = "",
                rescores: list[Table] | None = None) -> str:
    """``cells_df``: the per-cell metrics, shown metrics first (htmlcells.py) before the ``cells`` tables;
    ``samples``: the sample browser's file name (report/samples.py), linked from the top of the page."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    first = [cells_html(cells_df, cells_notes, cells_na)] if cells_df is not None else []
    sections = [Section("cells", "Per-cell results", "Point estimates with 95% percentile-bootstrap intervals (second "
                        "line). Click a column header to sort.", first + [t.to_html() for t in cells])]
    if comparisons:
        sec = Section("comparisons", "Comparisons declared in the spec")
        for name, tables in comparisons:
            sec.html.append(f"<h3>{name}</h3>")
            sec.html += [t.to_html() for t in tables]
        sections.append(sec)
    if rescores:
        sections.append(Section("rescores", "Rescored under other evaluators (auditc rescore)",
                                "The run's stored answers scored again with no model call; per-cell metrics with "
                                "their bootstrap intervals.", [t.to_html() for t in rescores]))
    if figures:
        sections.append(Section("figures", "Figures", figures=_figs(figures)))
    if disclosure:
        sections.append(Section("disclosure", "Protocol disclosure", "Study 001 Table 1 shape.",
                                [t.to_html() for t in disclosure]))
    if checklist is not None:
        sections.append(Section("checklist", "Reporting checklist", "", [checklist.to_html()]))
    if cite:
        sections.append(Section("cite", "How to cite the setup", "", [cite]))
    return env.get_template("report.html.j2").render(title=title, meta=meta, sections=sections, samples=samples)
