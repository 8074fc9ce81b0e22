"""Where the standard library (``stdlib/``: .audit fragments and ``templates/``) lives.

Two layouts: a repository checkout or editable install keeps ``stdlib/`` beside the
``auditlang`` package; a built wheel carries the same files inside the package as
``auditlang/_stdlib`` (``[tool.setuptools.package-dir]`` in ``pyproject.toml``). The repository
copy wins, so edits to ``stdlib/`` take effect without reinstalling.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent
REPO_STDLIB: Path = _PACKAGE_DIR.parent / "stdlib"
INSTALLED_STDLIB: Path = _PACKAGE_DIR / "_stdlib"


def _is_stdlib(path: Path) -> bool:
    return path.is_dir() and (path / "templates").is_dir()


_override: list[Path] = []  # innermost last; set by use()


@contextlib.contextmanager
def use(path: Path) -> Iterator[Path]:
    """Resolve ``stdlib/`` to ``path`` inside the block (a run directory's stored copy)."""
    if not _is_stdlib(Path(path)):
        raise FileNotFoundError(f"{path} is not an auditlang stdlib folder (no templates/)")
    _override.append(Path(path).resolve())
    try:
        yield _override[-1]
    finally:
        _override.pop()


def stdlib_root() -> Path:
    """The stdlib folder: an active :func:`use` override, else the repository's ``stdlib/`` if
    present, else the installed copy."""
    if _override:
        return _override[-1]
    if _is_stdlib(REPO_STDLIB):
        return REPO_STDLIB
    if _is_stdlib(INSTALLED_STDLIB):
        return INSTALLED_STDLIB
    raise FileNotFoundError(
        f"the auditlang stdlib is missing: neither {REPO_STDLIB} nor {INSTALLED_STDLIB} exists; "
        "reinstall auditlang (a wheel carries it as auditlang/_stdlib)")
