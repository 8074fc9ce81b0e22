"""Report files that quote untrusted text stay text (docs/security.md "Report files").

A server's error message, a model path or a data value reaches the checklist, the methods text
and the tables. In Markdown a ``<script>`` there is raw HTML a viewer may run, and in every format
an ESC sequence repaints the terminal of whoever runs ``cat`` on the file. :func:`write_report_text`
is how the report writes a text file: control characters are shown (core/terminal.py's
:func:`visible`; ``[x1b]`` in LaTeX, whose fonts lack the control pictures), and in Markdown every
``<`` that could open an HTML tag, comment or autolink outside a fenced code block is ``&lt;``.
HTML and LaTeX escape their specials where the text is inserted (``html.escape``,
report/latex.py).
"""

from __future__ import annotations

import re
from pathlib import Path

from auditlang.core.terminal import CONTROL, visible

# what CommonMark reads as raw HTML or an autolink after a `<`: a tag name ended by a space, `/`, `>`
# or the line's end; a closing tag; a comment, declaration or processing instruction; a URI scheme
_TAG = re.compile(r"<(?=[A-Za-z][A-Za-z0-9-]*(?:[\s/>]|$)|/[A-Za-z]|!|\?|[A-Za-z][A-Za-z0-9+.-]{1,31}:)")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def md_safe(text: str) -> str:
    """Markdown with control characters shown and no raw HTML outside fenced code blocks (whose
    content a renderer shows literally). Fences are tracked as CommonMark does: an opening run of
    3+ backticks (no backtick in its info string) or tildes, closed by a run of the same
    character at least as long."""
    out: list[str] = []
    fence: str | None = None
    for line in visible(text).split("\n"):
        if fence is not None:
            out.append(line)
            if re.match(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", line):
                fence = None
            continue
        m = _FENCE.match(line)
        if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            fence = m.group(1)
        out.append(_TAG.sub("&lt;", line))
    return "\n".join(out)


def md_line(text: str) -> str:
    """One Markdown list item or table cell: newlines folded into spaces, so quoted text cannot
    start a line of its own (a heading, a fence, an HTML block)."""
    return re.sub(r"\s*[\r\n]+\s*", " ", text)


def fence_for(text: str) -> str:
    """A backtick fence longer than any backtick run in ``text`` (which then cannot close it)."""
    longest = max((len(r) for r in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def tex_safe(text: str) -> str:
    """LaTeX with each control character written ``[x1b]`` / ``[u202e]`` (pdflatex has no glyph
    for the control pictures, and the bytes would reach a terminal)."""
    return CONTROL.sub(lambda m: f"[x{ord(m.group()):02x}]" if ord(m.group()) <= 0xFF else f"[u{ord(m.group()):04x}]",
                       text)


def write_report_text(path: Path, text: str) -> Path:
    """Write a report file, made safe for its format (by suffix: .md, .html, .tex; others as
    they are)."""
    suffix = Path(path).suffix
    if suffix == ".md":
        text = md_safe(text)
    elif suffix == ".html":
        text = visible(text)
    elif suffix == ".tex":
        text = tex_safe(text)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text, encoding="utf-8")
    return Path(path)
