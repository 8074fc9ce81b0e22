"""The weights' sha256 in an engine fingerprint (``weights_sha256``), and hashing it beside the load.

- Embedded models: the GGUF's sha256 from their provenance; Hub snapshots: None (the commit
  identifies them); a local checkpoint: sha256 over ``name NUL sha256(file) LF`` of its weight
  files in name order, each file's sha256 cached by path, size and mtime in
  ``$AUDITLANG_CACHE/file-sha256.json`` so a checkpoint hashes once per machine.
- :class:`WeightHash`: an engine starts one when it resolves its model. Files not in the cache are
  hashed by a child Python process (stdlib only, ``-I -S``) while the engine imports its stack and
  loads, so no thread of the engine's process is running when vLLM forks its engine core; a
  single 15 GB shard of an 8 B checkpoint takes 12-15 s on one core (issue 36). If the child
  fails, :meth:`WeightHash.get` hashes in this process instead, so a bad child never costs a
  fingerprint and an unreadable file raises its own error.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from auditlang.core.confine import cache_root
from auditlang.core.hashing import sha256_file



class ResolvedModel(Protocol):
    """What is read of ``engines.hf.ResolvedModel`` (which imports this module)."""

    local_dir: Path
    gguf_file: str | None
    source: str
    provenance: dict[str, Any] | None

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")
HASH_THREADS = 4  # weight files hashed at once (file reads and hashlib release the GIL)
CACHE_FILE = "file-sha256.json"

# the child: argv = [threads, path...]; prints a JSON list of hex digests in argv order
_CHILD = """
import hashlib, json, sys
from concurrent.futures import ThreadPoolExecutor
def digest(path):
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
paths = sys.argv[2:]
with ThreadPoolExecutor(max_workers=max(1, min(int(sys.argv[1]), len(paths)))) as pool:
    sys.stdout.write(json.dumps(list(pool.map(digest, paths))))
"""


def weight_files(resolved: ResolvedModel) -> list[Path] | None:
    """The files :func:`weights_sha256` reads, in name order; None when it reads none."""
    if resolved.source in ("embedded", "hub"):
        return None
    d = resolved.local_dir
    if resolved.gguf_file:
        return [d / resolved.gguf_file]
    return sorted(f for f in d.iterdir() if f.suffix in WEIGHT_SUFFIXES)


def weights_hashed_beside(resolved: ResolvedModel) -> bool:
    """Whether :func:`weights_sha256` reads files (a local checkpoint), so an engine hashes them
    beside the load instead of after it."""
    return weight_files(resolved) is not None


def _no_files_value(resolved: ResolvedModel) -> str | None:
    return (resolved.provenance or {}).get("gguf_sha256") if resolved.source == "embedded" else None


def _combine(files: Sequence[Path], digests: Sequence[str]) -> str:
    h = hashlib.sha256()
    for f, digest in zip(files, digests):
        h.update(f.name.encode() + b"\0" + digest.encode() + b"\n")
    return h.hexdigest()


def weights_sha256(resolved: ResolvedModel) -> str | None:
    """Content hash of the weights (module docstring), hashed here: files not cached yet on up to
    :data:`HASH_THREADS` threads."""
    files = weight_files(resolved)
    return _no_files_value(resolved) if files is None else _combine(files, _cached_file_sha256s(files))


def _keys(paths: Sequence[Path]) -> list[str]:
    keys = []
    for path in paths:
        st = path.stat()
        keys.append(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}")
    return keys


def _read_cache() -> dict[str, str]:
    try:
        known = json.loads((cache_root() / CACHE_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return known if isinstance(known, dict) else {}


def _write_cache(new: dict[str, str]) -> None:
    """Merge ``new`` into the cache file (re-read first: another engine may have written it)."""
    store = cache_root() / CACHE_FILE
    try:
        known = _read_cache()
        known.update(new)
        store.parent.mkdir(parents=True, exist_ok=True)
        tmp = store.with_name(f".{store.name}.{os.getpid()}.{threading.get_ident()}")
        tmp.write_text(json.dumps(known, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, store)
    except OSError:
        pass  # a read-only cache only costs re-hashing next time


def _cached_file_sha256s(paths: Sequence[Path], given: dict[str, str] | None = None) -> list[str]:
    """sha256 of each file from the cache and ``given`` (cache key -> digest, e.g. a child's);
    files in neither are hashed on up to :data:`HASH_THREADS` threads of this process, and what
    was not in the cache is written to it once."""
    keys = _keys(paths)
    known = _read_cache()
    new = dict(given or {})
    known.update(new)
    missing = [i for i, k in enumerate(keys) if k not in known]
    if missing:
        with ThreadPoolExecutor(max_workers=min(HASH_THREADS, len(missing)), thread_name_prefix="auditlang-sha256") as pool:
            for i, digest in zip(missing, pool.map(sha256_file, [paths[i] for i in missing])):
                new[keys[i]] = known[keys[i]] = digest
    if new:
        _write_cache(new)
    return [str(known[k]) for k in keys]


class WeightHash:
    """``weights_sha256(resolved)``, started now: cached or file-less values at once, the rest in a
    child process (:attr:`child`) that :meth:`get` waits for."""

    def __init__(self, resolved: ResolvedModel) -> None:
        self._resolved = resolved
        self._lock = threading.Lock()
        self._value: str | None = None
        self._done = False
        self.child: subprocess.Popen[bytes] | None = None
        self._files = weight_files(resolved)
        if self._files is None:
            self._value, self._done = _no_files_value(resolved), True
            return
        keys = _keys(self._files)
        known = _read_cache()
        self._missing = [f for f, k in zip(self._files, keys) if k not in known]
        self._missing_keys = [k for k in keys if k not in known]
        if not self._missing:
            self._value, self._done = _combine(self._files, [known[k] for k in keys]), True
        elif sys.executable:
            try:
                self.child = subprocess.Popen(
                    [sys.executable, "-I", "-S", "-c", _CHILD, str(HASH_THREADS), *map(str, self._missing)],
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=True)
            except OSError:
                self.child = None  # no child: get() hashes here
            else:  # an engine that failed to build, or this process exiting, stops the child
                weakref.finalize(self, _stop, self.child)

    def get(self) -> str | None:
        """The hash: the child's digests (cached for next time), or hashed here if it failed."""
        with self._lock:
            if not self._done:
                self._value = self._finish()
                self._done = True
            return self._value

    def _finish(self) -> str | None:
        files = self._files or []
        child, self.child = self.child, None
        given: dict[str, str] = {}
        if child is not None:
            out, _ = child.communicate()
            try:
                digests = json.loads(out.decode()) if child.returncode == 0 else None
            except (UnicodeDecodeError, json.JSONDecodeError):
                digests = None
            if isinstance(digests, list) and len(digests) == len(self._missing):
                given = dict(zip(self._missing_keys, map(str, digests)))  # keyed by what the child was given
        return _combine(files, _cached_file_sha256s(files, given))

    def cancel(self) -> None:
        """Stop the child (the engine failed to load); a later :meth:`get` hashes in this process."""
        child, self.child = self.child, None
        if child is not None:
            _stop(child)


def _stop(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        child.kill()
        child.wait()
    for stream in (child.stdout, child.stderr):
        if stream is not None:
            stream.close()
