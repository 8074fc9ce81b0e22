"""LaTeX helpers: escaping for pdflatex (ASCII output) and a minimal standalone document."""

from __future__ import annotations

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


PREAMBLE = r"""\documentclass[10pt]{article}
\usepackage[margin=2cm]{geometry}
\usepackage{booktabs}
\usepackage{graphicx}
\usepackage{fancyvrb}
\usepackage{amssymb}
\usepackage{xcolor}
\usepackage{longtable}
"""


def document(body: str, title: str) -> str:
    """A standalone document around ``body`` (compiles with pdflatex from texlive-latex-recommended)."""
    return (PREAMBLE + "\\title{" + escape(title) + "}\n\\date{}\n\\begin{document}\n\\maketitle\n"
            + body + "\n\\end{document}\n")
