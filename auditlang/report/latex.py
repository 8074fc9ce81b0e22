"""LaTeX helpers: escaping for pdflatex (ASCII output), line-breakable text and a standalone document.

Everything generated here compiles in a plain ``article`` (one- or two-column) at the size it
states: no ``\\resizebox``; long identifiers get break points, long hashes are shortened with the
full value in a footnote (:func:`breakable`).
"""

from __future__ import annotations

import re

_SPECIAL = {  # OT1-safe (pdflatex without T1 fonts)
    "\\": r"$\backslash$", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"$\{$", "}": r"$\}$", "~": r"\~{}", "^": r"\^{}",
    "<": r"$<$", ">": r"$>$", "|": r"$|$", '"': "''",
    "\n": " ", "\t": " ", "\r": " ",  # a blank line would end a paragraph inside a command argument
}
_UNICODE = {
    "–": "--", "—": "---", "≥": r"$\geq$", "≤": r"$\leq$", "×": r"$\times$", "±": r"$\pm$",
    "Δ": r"$\Delta$", "ρ": r"$\rho$", "λ": r"$\lambda$", "σ": r"$\sigma$", "…": r"\ldots{}",
    "’": "'", "‘": "`", "“": "``", "”": "''", "→": r"$\rightarrow$", "∩": r"$\cap$", "ℓ": r"$\ell$",
    "✗": r"$\times$", "✓": r"$\checkmark$", "−": "-", "\u00a0": "~",
}


def escape(text: object) -> str:
    """Escape ``text`` for LaTeX body text; non-ASCII characters without a mapping become ``[U+XXXX]``."""
    out = []
    for ch in str(text):
        if ch in _SPECIAL:
            out.append(_SPECIAL[ch])
        elif ch in _UNICODE:
            out.append(_UNICODE[ch])
        elif ord(ch) > 126 or (ord(ch) < 32 and ch not in "\n\t"):
            out.append(f"[U+{ord(ch):04X}]")
        else:
            out.append(ch)
    text = "".join(out)
    return "{[}" + text[1:] if text.startswith("[") else text  # never an optional argument (\\item [x], \\\\ [x])


VERBATIM_END = "\\end{Verbatim}"


def verbatim_safe(text: str) -> str:
    """Text for a ``Verbatim`` environment: ASCII only (``[U+XXXX]`` for the rest), tabs expanded,
    and ``\\end{Verbatim}`` (which fancyvrb obeys anywhere on a line, letting the rest of the text
    run as LaTeX) written ``\\end {Verbatim}``."""
    text = "".join(ch if (32 <= ord(ch) <= 126 or ch == "\n") else ("    " if ch == "\t" else f"[U+{ord(ch):04X}]")
                   for ch in text)
    return text.replace(VERBATIM_END, "\\end {Verbatim}")


# Verbatim that wraps long lines at any character (fvextra); straight quotes would need the bitmap TS1 font
VERBATIM = ("\\begin{Verbatim}[fontsize=\\footnotesize,breaklines,breakanywhere,curlyquotes,"
            "breaksymbolleft=\\ensuremath{\\hookrightarrow}]")

# Packages every generated fragment needs (fvextra: texlive-latex-extra; the rest: -base/-recommended).
PACKAGES = ("booktabs", "tabularx", "array", "fvextra", "amssymb", "xcolor", "graphicx")

PREAMBLE = r"""\documentclass[10pt]{article}
\usepackage{booktabs}
\usepackage{tabularx}
\usepackage{array}
\usepackage{fvextra}
\usepackage{graphicx}
\usepackage{amssymb}
\usepackage{xcolor}
"""


def document(body: str, title: str) -> str:
    """A standalone document around ``body`` (compiles with pdflatex from texlive-latex-recommended)."""
    return (PREAMBLE + "\\title{" + escape(title) + "}\n\\date{}\n\\begin{document}\n\\maketitle\n"
            + body + "\n\\end{document}\n")


HASH = re.compile(r"(?<![0-9a-fA-F])[0-9a-f]{24,}(?![0-9a-fA-F])")
SHORT_HASH = 12
_BREAK_AFTER = "_/=;:|-("
BREAK = "\\penalty100\\hskip0pt\\relax{}"  # a break point TeX takes only where no space is near (the
# glue after it lets TeX hyphenate the next word)
_RUN = 14  # a longer run of letters/digits gets a break point every _RUN characters


def breakable(text: object, footnote_hashes: bool = False) -> str:
    """:func:`escape` plus line-break points, so no word is wider than a narrow column.

    Break points follow ``_ / = ; : | - (`` and a dot before a letter and fall every 14 characters inside longer runs.
    Hex hashes of 24+ digits are shortened to 12 with the full value in a footnote when
    ``footnote_hashes`` (body text), else broken like any long run (tables, footnotes).
    """
    s = str(text)
    out, pos = [], 0
    for m in HASH.finditer(s) if footnote_hashes else ():
        out.append(_breaks(s[pos:m.start()]))
        h = m.group(0)
        out.append(f"\\texttt{{{h[:SHORT_HASH]}}}\\ldots\\footnote{{\\texttt{{{_breaks(h)}}}}}")
        pos = m.end()
    out.append(_breaks(s[pos:]))
    return "".join(out)


def _breaks(s: str) -> str:
    out, run = [], 0
    for i, ch in enumerate(s):
        out.append(escape(ch))
        if ch.isalnum():
            run += 1
            if run >= _RUN:
                out.append(BREAK)
                run = 0
        else:
            run = 0
            if ch in _BREAK_AFTER or (ch == "." and s[i + 1:i + 2].isalpha()):  # "s000.token_norm", not "0.95"
                out.append(BREAK)
    return "".join(out)
