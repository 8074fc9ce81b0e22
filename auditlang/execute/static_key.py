"""A model's *static key*: what identifies its engine fingerprint without loading it.

An engine fingerprint is only known once the model is loaded (the hf engine hashes weights,
the openai engine asks the server). A rerun whose requests are all stored would still load
every model just to learn that (47 s for the quickstart at ``--limit 10``). So after each load
the runner records ``run.json["static_keys"][model] = {"key": ..., "fp": fingerprint hash}``;
on the next run, a model whose static key is unchanged and whose every request is committed
under that fingerprint is not loaded at all.

The key hashes the model's :class:`ModelConfig`, the auditlang version, the source files of the
engine module's whole auditlang import closure (every ``auditlang`` module it imports, at the top
or inside a function, transitively: read from the source with :mod:`ast`, nothing is imported), the engine packages' installed versions (package metadata, no import), the machine (host
name, architecture, ``CUDA_VISIBLE_DEVICES``) and the model files' metadata (name, size, mtime of
every file of a local checkpoint directory; the converted checkpoint of an embedded model). Models whose weights cannot be identified that way (hub ids, served models)
have no static key and are loaded as before.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import os
import platform
from pathlib import Path

from auditlang.core.capabilities import ENGINE_CLASSES
from auditlang.core.version import __version__
from auditlang.core.engine import ModelConfig
from auditlang.resolve.schema import EMBEDDED_MODELS

ENGINE_PACKAGES = {"hf": ("transformers", "torch"), "vllm": ("vllm", "torch"), "dryrun": ()}
PACKAGE_ROOT = Path(__file__).resolve().parents[1]


def _module_file(name: str, root: Path) -> Path | None:
    """The source file of auditlang module ``name`` under ``root`` (the package directory)."""
    parts = name.split(".")[1:]
    base = root.joinpath(*parts)
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.is_file():
            return p
    return None


def _imported(tree: ast.AST, name: str, is_pkg: bool) -> set[str]:
    """Every ``auditlang`` module named by an import anywhere in ``tree`` (function bodies
    included), ``from a import b`` naming submodule ``a.b`` where it is one, and
    ``importlib.import_module("auditlang...")`` with a literal name."""
    out: set[str] = set()
    here = name.split(".") if is_pkg else name.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str) and getattr(node.func, "attr", getattr(node.func, "id", ""))
              in ("import_module", "__import__")):
            out.add(node.args[0].value)
    return {m for m in out if m == "auditlang" or m.startswith("auditlang.")}


def import_closure(module: str, root: Path = PACKAGE_ROOT) -> dict[str, Path]:
    """``module`` and every auditlang module it imports, transitively, with their files."""
    seen: dict[str, Path] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = _module_file(name, root)
        if path is None:  # ``from pkg import attr``: an attribute, not a module
            continue
        seen[name] = path
        tree = ast.parse(path.read_bytes(), filename=str(path))
        todo.extend(_imported(tree, name, path.name == "__init__.py") - seen.keys())
    return seen


@functools.lru_cache(maxsize=None)
def _sources(engine: str, root: Path = PACKAGE_ROOT) -> str:
    """Hash of the source of the engine module's auditlang import closure: an edited engine, or
    anything it runs (a development checkout), may fingerprint differently, so it is loaded again."""
    h = hashlib.sha256()
    for name, path in sorted(import_closure(ENGINE_CLASSES[engine][0], root).items()):
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
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
