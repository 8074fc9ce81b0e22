"""Text echoed to a terminal: control characters made visible (docs/security.md).

Data, templates and spec strings are untrusted: an ESC sequence in a dataset row could clear the
screen or repaint it ("ALL CHECKS PASSED"), a carriage return overwrite a line, a bidi override
reorder it. :func:`visible` shows each such character instead of sending it: C0 controls as their
one-column Unicode control pictures (ESC as ``␛``, so excerpt carets stay aligned), DEL as ``␡``,
C1 controls and bidi overrides as ``\\x9b`` / ``\\u202e``. Newlines and tabs are kept.
"""

from __future__ import annotations

import re

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # what visible() shows


def _show(m: re.Match[str]) -> str:
    c = ord(m.group())
    if c < 0x20:
        return chr(0x2400 + c)
    if c == 0x7F:
        return "\u2421"
    return f"\\x{c:02x}" if c <= 0xFF else f"\\u{c:04x}"


def visible(text: str) -> str:
    """``text`` with every terminal control character shown, not sent (newline and tab kept)."""
    return CONTROL.sub(_show, text) if CONTROL.search(text) else text
