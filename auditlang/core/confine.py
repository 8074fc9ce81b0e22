"""Which files a spec may read (docs/security.md).

A spec is code from a stranger: every file it names (imports, template files, data files, the
``settings { data_root }`` folder) must resolve, symlinks resolved first, inside the project
root or a data root the user gave outside the spec (``--data-root``, ``$AUDITLANG_DATA_ROOT``).
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_DATA_ROOT = "AUDITLANG_DATA_ROOT"


MAX_NAME_BYTES = 255  # longest file or folder name (Linux NAME_MAX)
MAX_PATH_BYTES = 4096  # longest path (Linux PATH_MAX)


def path_problem(text: str) -> str | None:
    """Why ``text`` cannot name a file on any filesystem (a NUL byte, a name over 255 bytes, a
    path over 4096 bytes), or None. Checked on every path a spec gives, before anything is opened."""
    if "\x00" in text:
        return "a path cannot contain a NUL byte"
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_PATH_BYTES:
        return f"a path is at most {MAX_PATH_BYTES} bytes long (this one is {len(raw):,})"
    for part in raw.split(b"/"):
        if len(part) > MAX_NAME_BYTES:
            return f"a file or folder name is at most {MAX_NAME_BYTES} bytes long (one here is {len(part):,})"
    return None


def inside(path: Path, roots: list[Path]) -> Path | None:
    """``path`` with symlinks resolved when it lies inside one of ``roots`` (also resolved), else None."""
    real = Path(os.path.realpath(path))
    for root in roots:
        try:
            real.relative_to(os.path.realpath(root))
            return real
        except ValueError:
            continue
    return None


def user_data_roots(cli_root: str | None = None) -> list[Path]:
    """Data roots the user gave outside the spec: ``--data-root`` and ``$AUDITLANG_DATA_ROOT``."""
    out = []
    if cli_root:
        out.append(Path(cli_root).expanduser().resolve())
    env = os.environ.get(ENV_DATA_ROOT)
    if env:
        out.append(Path(env).expanduser().resolve())
    return out


def outside_hint(roots: list[Path]) -> str:
    shown = ", ".join(str(r) for r in roots)
    return (f"a spec may read files only under {shown}; move the file there, or pass --data-root DIR "
            f"(or set ${ENV_DATA_ROOT}) to allow a data folder you trust")
