"""LaTeX helpers: escaping for pdflatex (ASCII output: Latin accents, Greek and common symbols as OT1
commands; characters with no glyph, e.g. CJK, as [U+XXXX] with a note in the document), line-breakable
text and a standalone document.

Everything generated here compiles in a plain ``article`` (one- or two-column) at the size it
states: no ``\\resizebox``; long identifiers get break points, long hashes are shortened with the
full value in a footnote (:func:`breakable`).
"""

from __future__ import annotations

import re
import unicodedata

_SPECIAL = {  # OT1-safe (pdflatex without T1 fonts)
    "\\": r"$\backslash$", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"$\{$", "}": r"$\}$", "~": r"\~{}", "^": r"\^{}",
    "<": r"$<$", ">": r"$>$", "|": r"$|$", '"': r"{\ttfamily\char34}",  # a straight quote (" A" is a token)
    "\n": " ", "\t": " ", "\r": " ",  # a blank line would end a paragraph inside a command argument
}
_UNICODE = {
    "–": "--", "—": "---", "≥": r"$\geq$", "≤": r"$\leq$", "×": r"$\times$", "±": r"$\pm$",
    "Δ": r"$\Delta$", "ρ": r"$\rho$", "λ": r"$\lambda$", "σ": r"$\sigma$", "…": r"\ldots{}",
    "’": "'", "‘": "`", "“": "``", "”": "''", "→": r"$\rightarrow$", "∩": r"$\cap$", "ℓ": r"$\ell$",
    "✗": r"$\times$", "†": r"$^{\dagger}$", "✓": r"$\checkmark$", "−": "-", "\u00a0": "~",
    # OT1 text symbols and letters without a combining accent (issue 34 item 5: none printed as [U+XXXX])
    # § and ¶ from cmsy (Type 1): \S would take the TS1 font, a Type 3 bitmap without cm-super
    "§": r"{\usefont{OMS}{cmsy}{m}{n}\char120}", "¶": r"{\usefont{OMS}{cmsy}{m}{n}\char123}", "©": "(c)", "£": "GBP", "ß": r"\ss{}", "æ": r"\ae{}",
    "Æ": r"\AE{}", "œ": r"\oe{}", "Œ": r"\OE{}", "ø": r"\o{}", "Ø": r"\O{}", "ł": r"\l{}", "Ł": r"\L{}",
    "ı": r"\i{}", "å": r"\aa{}", "Å": r"\AA{}", "¡": "!`", "¿": "?`", "«": "<<", "»": ">>", "‹": "<", "›": ">",
    "„": ",,", "‚": ",", "•": r"$\bullet$", "·": r"$\cdot$", "°": r"$^{\circ}$", "µ": r"$\mu$", "÷": r"$\div$",
    "≠": r"$\neq$", "≈": r"$\approx$", "∞": r"$\infty$", "∈": r"$\in$", "∑": r"$\sum$", "√": r"$\surd$",
    "←": r"$\leftarrow$", "↑": r"$\uparrow$", "↓": r"$\downarrow$", "↕": r"$\updownarrow$", "↔": r"$\leftrightarrow$", "⇒": r"$\Rightarrow$", "∪": r"$\cup$", "‰": " per mille",
    "€": "EUR", "¢": "c", "¥": "JPY", "™": r"$^{\mathrm{TM}}$", "®": r"(R)", "¹": r"$^1$", "²": r"$^2$", "³": r"$^3$",
    "½": r"$\frac12$", "¼": r"$\frac14$", "¾": r"$\frac34$", "‐": "-", "‑": "-", "‒": "--", "\u2009": r"\,",
    "\u200b": "", "\ufeff": "", "\u2002": " ", "\u2003": " ",
}
_GREEK = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi o pi rho varsigma sigma tau "
          "upsilon phi chi psi omega").split()
_ROMAN = {"alpha": "A", "beta": "B", "epsilon": "E", "zeta": "Z", "eta": "H", "iota": "I", "kappa": "K", "mu": "M",
          "nu": "N", "o": "O", "rho": "P", "tau": "T", "chi": "X"}  # capitals that are Latin letters in TeX
for _i, _g in enumerate(_GREEK):
    _UNICODE.setdefault(chr(0x3B1 + _i), "o" if _g == "o" else f"$\\{_g}$")
    if _g != "varsigma":  # U+03A2 is unassigned
        _UNICODE.setdefault(chr(0x391 + _i), _ROMAN.get(_g) or f"$\\{_g.capitalize()}$")
# combining accent -> OT1 accent command: a Latin letter with accents (é, ü, ñ, ç, š, ő, ...) is its
# base letter under these commands, from its Unicode decomposition
_ACCENTS = {"\u0300": "`", "\u0301": "'", "\u0302": "^", "\u0303": "~", "\u0304": "=", "\u0306": "u", "\u0307": ".",
            "\u0308": '"', "\u030a": "r", "\u030b": "H", "\u030c": "v", "\u0327": "c", "\u0328": "k", "\u0323": "d"}
# the note a document carries when a character had to fall back to its code point (CJK, emoji, ...)
FALLBACK_NOTE = ("Characters shown as [U+XXXX] (e.g. CJK) have no glyph in the fonts pdflatex uses here; "
                 "their Unicode code points are printed instead (the run directory's files hold the text itself).")


def _accented(ch: str) -> str | None:
    """``\\'{e}`` for é: the letter's canonical decomposition as OT1 accent commands, else None."""
    parts = unicodedata.normalize("NFD", ch)
    base, marks = parts[0], parts[1:]
    if not (base.isascii() and base.isalpha()) or not marks or any(m not in _ACCENTS for m in marks):
        return None
    out = {"i": r"\i{}", "j": r"\j{}"}.get(base, base) if marks[0] not in ("\u0327", "\u0328", "\u0323") else base
    for m in marks:
        cmd = _ACCENTS[m]
        out = f"\\{cmd}{{{out}}}" if cmd.isalpha() else f"{{\\{cmd}{{{out}}}}}"
    return out


def escape(text: object) -> str:
    """Escape ``text`` for LaTeX body text; non-ASCII characters without a mapping become ``[U+XXXX]``."""
    out = []
    text = str(text)
    skip = False
    for i, ch in enumerate(text):
        if skip:
            skip = False
        elif ch == "-" and text[i + 1:i + 2] == "-":
            out.append("-{}")  # "--limit", not an en dash
        elif ch in "<>" and text[i + 1:i + 2] == "=":
            out.append(r"$\geq$" if ch == ">" else r"$\leq$")  # ">=" set as one sign, not "> ="
            skip = True
        elif ch == "'" and (i == 0 or text[i - 1] in " \t\n([=:,;") and text[i + 1:i + 2].isalnum():
            out.append("`")  # an opening quote: `x', not 'x' (which sets as a closing quote on both sides)
        elif ch in _SPECIAL:
            out.append(_SPECIAL[ch])
        elif ch in _UNICODE:
            out.append(_UNICODE[ch])
        elif ord(ch) > 126 and (acc := _accented(ch)) is not None:
            out.append(acc)
        elif ord(ch) > 126 or (ord(ch) < 32 and ch not in "\n\t"):
            out.append(f"[U+{ord(ch):04X}]")
        else:
            out.append(ch)
    text = "".join(out)
    return "{[}" + text[1:] if text.startswith("[") else text  # never an optional argument (\\item [x], \\\\ [x])


VERBATIM_END = "\\end{Verbatim}"


def verbatim_safe(text: str) -> str:
    """Text for the ``Verbatim`` environment :data:`VERBATIM` (``commandchars`` for the backslash and braces): printable
    ASCII as it is, except ``\\``, ``{`` and ``}``, which are typewriter glyphs (``\\auditbs{}``, ...),
    so no text can close the block (``\\end{Verbatim}`` is never in the output) or run a command;
    tabs expanded; any other character as :func:`escape` sets it, in roman type (``§``, ``é``,
    ``→``, ...: issue 34 item 5), or ``[U+XXXX]`` where no glyph exists (CJK)."""
    out = []
    for ch in text:
        if ch in _TT_CHARS:
            out.append(_TT_CHARS[ch])
        elif 32 <= ord(ch) <= 126 or ch == "\n":
            out.append(ch)
        elif ch == "\t":
            out.append("    ")
        else:
            e = _TT_DASHES.get(ch) or escape(ch)
            if e.startswith(("[U+", "{[}U+")):
                out.append(f"[U+{ord(ch):04X}]")
            else:  # math-mode mappings through \ensuremath: "$" is an ordinary character in Verbatim
                out.append("{\\rmfamily " + re.sub(r"\$(.*?)\$", r"\\ensuremath{\1}", e) + "}")
    return "".join(out)


# typewriter glyphs of \\ { } (IDENT_DEF defines the commands: a "\\char92" written in the text
# would be split by fvextra's break points)
_TT_CHARS = {"\\": "\\auditbs{}", "{": "\\auditlb{}", "}": "\\auditrb{}"}
_TT_DASHES = {"–": "\\textendash{}", "—": "\\textemdash{}"}  # Verbatim turns the -- ligatures off

# Verbatim that wraps long lines at any character (fvextra); straight quotes would need the bitmap
# TS1 font; commandchars: the escapes verbatim_safe writes for \\ { } and non-ASCII characters
VERBATIM = ("\\begin{Verbatim}[fontsize=\\footnotesize,breaklines,breakanywhere,curlyquotes,commandchars=\\\\\\{\\},"
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
\raggedbottom
"""


def document(body: str, title: str) -> str:
    """A standalone document around ``body`` (compiles with pdflatex from texlive-latex-recommended)."""
    note = ("\n\\par\\medskip\\noindent{\\footnotesize " + escape(FALLBACK_NOTE) + "}\n") if "[U+" in body else ""
    return (PREAMBLE + "\\title{" + escape(title) + "}\n\\date{}\n\\begin{document}\n" + IDENT_DEF + "\\maketitle\n"
            + body + note + "\n\\end{document}\n")


HASH = re.compile(r"(?<![0-9a-fA-F])[0-9a-f]{24,}(?![0-9a-fA-F])")
SHORT_HASH = 12

# \auditid{s000.token\_norm}: an identifier in typewriter type that may break after "." "_" "/" "-"
# (never with an added hyphen: typewriter fonts do not hyphenate) and nowhere else: never inside a
# name part ("surface_p|araphrase"); tables size their columns so that every part fits
# (tables.Table.to_latex). Pure TeX, no package; robust, so it survives \caption. Every generated
# fragment starts with this block (defining it twice is harmless).
IDENT_DEF = r"""\makeatletter
\DeclareRobustCommand\auditid[1]{{\ttfamily\auditid@scan#1\auditid@end}}
\def\auditid@end{\auditid@end}
\def\auditid@scan#1{\ifx#1\auditid@end\else\auditid@one{#1}\expandafter\auditid@scan\fi}
\def\auditid@one#1{\ifx#1\_\textunderscore\allowbreak\else#1\auditid@brk#1\fi}
\def\auditid@brk#1{\ifx#1.\allowbreak\else\ifx#1/\allowbreak\else\ifx#1-\allowbreak\fi\fi\fi}
\makeatother
\providecommand\auditbs{\char92\relax}\providecommand\auditlb{\char123\relax}\providecommand\auditrb{\char125\relax}
"""
# an identifier: a dotted or slashed name (s000.token_norm, org/model-1b, arc_challenge.jsonl) or a
# name with an underscore (first_char); "e.g." and numbers (0.95) are prose
IDENT = re.compile(r"(?<![\w\\.])[A-Za-z][\w-]*(?:[./][A-Za-z0-9_][\w-]*)+(?![\w])|(?<![\w\\.])[A-Za-z][\w-]*_[\w-]*(?!\w)")


def ident(name: object) -> str:
    """``\\auditid{...}`` for one identifier (letters, digits, ``. _ / -``; anything else escaped plainly)."""
    s = str(name)
    if not s or not re.fullmatch(r"[\w./-]+", s) or not s.isascii():
        return escape(s)
    return "\\auditid{" + s.replace("_", "\\_") + "}"


def _is_ident(tok: str) -> bool:
    if "_" in tok:
        return True
    if "/" in tok:
        return any(ch.islower() for ch in tok) and all(len(p) >= 2 for p in tok.split("/"))  # org/model-1b, not DA/CA or n/a
    return all(len(part) >= 2 for part in tok.split("."))  # "s000.fewshot", not "e.g"


def prose(text: object, footnote_hashes: bool = False) -> str:
    """Escaped text with identifiers in :func:`ident` (line breaks at their ``. _ / -``).

    Hex hashes of 24+ digits are shortened to 12 with the full value in a footnote when
    ``footnote_hashes`` (body text), else in typewriter type with a break point every 16 digits.
    """
    s = str(text)
    out, pos = [], 0
    for m in HASH.finditer(s):
        out.append(_idents(s[pos:m.start()]))
        h = m.group(0)
        full = "\\allowbreak".join(f"\\texttt{{{h[i:i + 16]}}}" for i in range(0, len(h), 16))
        out.append(f"\\texttt{{{h[:SHORT_HASH]}}}\\ldots\\footnote{{{full}}}" if footnote_hashes else full)
        pos = m.end()
    out.append(_idents(s[pos:]))
    return "".join(out)


_JOIN = re.compile(r"(?<=\w[=(])(?=[A-Za-z])")  # "ece(bins=10": a break after "(" and "=" inside an expression


def _plain(s: str) -> str:
    return "\\allowbreak ".join(escape(part) for part in _JOIN.split(s))


def _idents(s: str) -> str:
    out, pos = [], 0
    for m in IDENT.finditer(s):
        if not _is_ident(m.group(0)):
            continue
        before = s[pos:m.start()]
        plain = _plain(before)
        if before.endswith("'") and (len(before) == 1 and pos == 0 or before[-2:-1] in tuple(" \t\n([=:,;")) \
                and plain.endswith("'"):
            plain = plain[:-1] + "`"  # 'name' opens with an opening quote, as escape() sets one before a word
        out.append(plain + ("\\allowbreak " if re.search(r"\w[=(]$", before) else ""))
        out.append(ident(m.group(0)))
        pos = m.end()
    out.append(_plain(s[pos:]))
    text = "".join(out)
    return "{[}" + text[1:] if text.startswith("[") else text


breakable = prose  # the earlier name


def unmark(tex: str) -> str:
    """``tex`` without the markup :func:`prose` adds (break points, the identifier macro): the
    escaped text a reader sees, for comparisons in tests."""
    tex = tex.replace("\\allowbreak ", "")
    return re.sub(r"\\auditid\{([^{}]*)\}", r"\1", tex)
