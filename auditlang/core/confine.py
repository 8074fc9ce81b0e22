"""Which files a spec may read (docs/security.md).

A spec is code from a stranger: every file it names (imports, template files, data files, the
``settings { data_root }`` folder) must resolve, symlinks resolved first, inside the project
root or a data root the user gave outside the spec (``--data-root``, ``$AUDITLANG_DATA_ROOT``).
A local ``hf(PATH)``/``vllm(PATH)`` checkpoint must resolve inside the project root, the data roots
of the environment, a model root the user allows (``$AUDITLANG_MODEL_ROOT``), or a model cache
(auditlang's converted checkpoints under ``$AUDITLANG_CACHE``, the Hugging Face hub cache).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ENV_DATA_ROOT = "AUDITLANG_DATA_ROOT"
ENV_MODEL_ROOT = "AUDITLANG_MODEL_ROOT"  # folders of checkpoints the user allows (os.pathsep-separated)
ENV_CACHE = "AUDITLANG_CACHE"  # converted embedded checkpoints (engines/embedded.py), and engine caches
_HUB_MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


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


def cache_root() -> Path:
    """``$AUDITLANG_CACHE`` or ``~/.cache/auditlang`` (embedded checkpoints live in ``models/``)."""
    env = os.environ.get(ENV_CACHE)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "auditlang"


def local_model_path(path: str) -> Path | None:
    """The file or folder an ``hf``/``vllm`` model ``path`` loads from when it is local (as the
    engines read it: relative to the working directory), else None (a Hub id ``org/name``)."""
    p = Path(path).expanduser()
    if path.startswith(("/", "~", ".")) or "\\" in path or not _HUB_MODEL_ID.match(path) or p.exists():
        return p
    return None


def model_roots(project_root: Path) -> list[Path]:
    """Where a spec's local checkpoint may resolve: the project root, the environment's data root,
    ``$AUDITLANG_MODEL_ROOT`` (each folder), auditlang's model cache and the Hugging Face hub cache."""
    roots = [Path(project_root), *user_data_roots()]
    roots += [Path(r).expanduser() for r in os.environ.get(ENV_MODEL_ROOT, "").split(os.pathsep) if r.strip()]
    roots.append(cache_root() / "models")
    hf_home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    roots.append(Path(os.environ.get("HF_HUB_CACHE") or os.path.join(hf_home, "hub")).expanduser())
    return roots


def model_outside_hint(roots: list[Path]) -> str:
    shown = ", ".join(str(r) for r in roots)
    return (f"a spec may load a local checkpoint only under {shown}; move or copy it there, or set "
            f"${ENV_MODEL_ROOT}=DIR (outside the spec) to allow a folder of checkpoints you trust")
