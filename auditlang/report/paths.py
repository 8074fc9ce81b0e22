"""How report files name files: never by an absolute machine path.

Run files are named relative to the run directory, the spec by its copy in the run directory
(``run.json`` ``spec_entry``) or else relative to the run directory, and data files by their file
name and sha256 (``run.json`` ``data``, else hashed here): the same bytes can be found on any machine.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from auditlang.core.hashing import sha256_file


def relative(path: str | Path, run_dir: str | Path) -> str:
    """``path`` relative to ``run_dir`` (POSIX separators; ``..`` segments where it lies outside)."""
    try:
        rel = os.path.relpath(Path(path).resolve(), Path(run_dir).resolve())
    except ValueError:  # another drive (Windows): the name alone
        rel = Path(path).name
    return Path(rel).as_posix()


@functools.lru_cache(maxsize=64)
def _sha256(path: str, mtime_ns: int, size: int) -> str:
    """Cached per (path, mtime, size): a report names the same data file many times."""
    return sha256_file(path)


def file_sha256(path: str | Path | None) -> str | None:
    """sha256 of a file's bytes, or None when it cannot be read."""
    if not path:
        return None
    try:
        st = os.stat(path)
        return _sha256(str(path), st.st_mtime_ns, st.st_size)
    except OSError:
        return None


def spec_path(spec_entry: str | Path, run_dir: str | Path, run_info: dict) -> str:
    """The spec as a report names it: its copy in the run directory, else its path relative to the
    run directory when inside it, else its file name."""
    if run_info.get("spec_entry"):
        return str(run_info["spec_entry"])
    rel = relative(spec_entry, run_dir)
    return rel if not rel.startswith("..") else Path(spec_entry).name


def data_file(path: str | Path | None, stored: dict | None = None) -> str:
    """A data file as ``name (sha256 <hex>)``: no directory, the digest identifies the bytes.
    ``stored``: the run.json entry of the dataset (``file``, ``sha256``), preferred when present."""
    if stored and stored.get("sha256"):
        return f"{Path(str(stored.get('file') or path)).name} (sha256 {stored['sha256']})"
    if not path:
        return "no file"
    digest = file_sha256(path)
    return f"{Path(str(path)).name} (sha256 {digest if digest else 'not computable: file not readable at report time'})"


def data_source(dsid: str, info: dict) -> str | None:
    """Where a Hub dataset's items came from (its plan entry ``info``): the Hub split (revision or
    commit), or its local fallback file; None for a file dataset or data not read."""
    if not info.get("available"):
        return None
    where = f"{info.get('hub_id')}" + (f" ({info['config']})" if info.get("config") else "") + f", split {info.get('split')}"
    if info.get("source") == "fallback":
        return (f"{dsid} was read from the local file {info.get('fallback_file')} (sha256 {str(info.get('sha256'))[:12]}) "
                f"in place of the Hugging Face Hub dataset {where}, which was not available offline")
    if info.get("source") == "hub":
        commit = info.get("revision") or info.get("commit")
        return f"{dsid} is the Hugging Face Hub dataset {where}" + (f" at revision {str(commit)[:12]}" if commit else "")
    return None
