"""A model's *static key*: what identifies its engine fingerprint without loading it.

An engine fingerprint is only known once the model is loaded (the hf engine hashes weights,
the openai engine asks the server). A rerun whose requests are all stored would still load
every model just to learn that (47 s for the quickstart at ``--limit 10``). So after each load
the runner records ``run.json["static_keys"][model] = {"key": ..., "fp": fingerprint hash}``;
on the next run, a model whose static key is unchanged and whose every request is committed
under that fingerprint is not loaded at all.

The key hashes the model's :class:`ModelConfig`, the auditlang version, the engine's source
files, the engine packages' installed versions (package metadata, no import), the machine (host
name, architecture, ``CUDA_VISIBLE_DEVICES``) and the model files' metadata (name, size, mtime of
every file of a local checkpoint directory; the converted checkpoint of an embedded model). Models whose weights cannot be identified that way (hub ids, served models)
have no static key and are loaded as before.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import os
import platform
from pathlib import Path

from auditlang.core.version import __version__
from auditlang.core.engine import ModelConfig
from auditlang.resolve.schema import EMBEDDED_MODELS

ENGINE_PACKAGES = {"hf": ("transformers", "torch"), "vllm": ("vllm", "torch"), "dryrun": ()}
ENGINE_MODULES = {"hf": ("hf.py", "hfstack.py", "embedded.py"), "vllm": ("vllm_engine.py", "hf.py", "embedded.py"),
                  "dryrun": ("dryrun.py",)}


def _sources(engine: str) -> str:
    """Hash of the engine's own source files: an edited engine (a development checkout) may
    fingerprint differently, so it is loaded again."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parents[1] / "engines"
    for name in ENGINE_MODULES[engine]:
        try:
            h.update((root / name).read_bytes())
        except OSError:
            h.update(name.encode())
    return h.hexdigest()


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _files(d: Path) -> list[tuple[str, int, int]]:
    out = []
    for p in sorted(d.rglob("*")):
        if p.is_file():
            st = p.stat()
            out.append((p.relative_to(d).as_posix(), st.st_size, st.st_mtime_ns))
    return out


def _weights_dir(cfg: ModelConfig) -> Path | None:
    if cfg.engine == "dryrun":
        return None

    if cfg.path in EMBEDDED_MODELS:
        from auditlang.engines.embedded import checkpoint_dir  # lazy: engine modules load only when a model runs

        try:
            d = checkpoint_dir(cfg.path)
        except Exception:  # noqa: BLE001 - package not installed: no key, load as before
            return None
        return d if d.is_dir() else None
    p = Path(cfg.path).expanduser()
    return p if p.is_dir() else None


def static_key(cfg: ModelConfig) -> str | None:
    """The static key of ``cfg``, or None when its weights cannot be identified without loading."""
    if cfg.engine not in ENGINE_PACKAGES:
        return None
    files: list = []
    if cfg.engine != "dryrun":
        d = _weights_dir(cfg)
        if d is None:
            return None
        files = _files(d)
    payload = {
        "config": dataclasses.asdict(cfg),
        "auditlang": __version__,
        "packages": {p: _version(p) for p in ENGINE_PACKAGES[cfg.engine]},
        "engine_sources": _sources(cfg.engine),
        # the fingerprint records the device (a GPU's name) and CPU kernels: another machine loads again
        "machine": [platform.node(), platform.machine(), os.environ.get("CUDA_VISIBLE_DEVICES")],
        "files": files,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:24]
