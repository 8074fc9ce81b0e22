"""Loading a spec and its imports: path rules, stdlib lookup, cycle detection."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from auditlang import stdlib_location
from auditlang.core.confine import path_problem
from auditlang.core.diagnostics import CompileError, DiagnosticBag, SourceCache, Span
from auditlang.syntax import ast as A
from auditlang.syntax.parse import parse_text
from auditlang.core.diagnostics import did_you_mean

ROOT_MARKERS = ("auditlang.toml", "pyproject.toml", ".git")


def stdlib_root() -> Path:
    """The standard library of spec fragments (repository ``stdlib/`` first, else the installed copy)."""
    return stdlib_location.stdlib_root()


def project_root(entry: Path) -> Path:
    """Nearest ancestor of the entry spec holding a root marker; else the spec's folder."""
    for d in [entry.parent, *entry.parent.parents]:
        if any((d / m).exists() for m in ROOT_MARKERS):
            return d
    return entry.parent


@dataclass
class LoadedModule:
    path: Path
    key: str  # canonical module key used as an id prefix ("" for the entry spec)
    ast: A.Module
    imports: dict[str, "LoadedModule"] = field(default_factory=dict)  # namespace -> module


def _resolve_import(imp: A.Import, importer: Path, root: Path) -> tuple[Path | None, str | None, str | None]:
    """The imported file, or why not with a hint (E112)."""
    raw = imp.path
    shown = raw if len(raw) <= 80 else raw[:80] + "..."
    why = path_problem(raw)
    if why:
        return None, f"import '{shown}' cannot name a file: {why}", "import a spec by its path relative to this file"
    if raw.startswith("stdlib/") or raw == "stdlib":
        rel = raw[len("stdlib/"):]
        cand = stdlib_root() / rel
        base = stdlib_root()
    else:
        cand = (importer.parent / raw)
        base = root
    if cand.suffix != ".audit":
        cand = cand.with_suffix(".audit") if not cand.name.endswith(".audit") else cand
    why = path_problem(cand.name)
    if why:
        return None, f"import '{shown}' cannot name a file: {why}", "import a spec by its path relative to this file"
    try:
        cand = cand.resolve()
        cand.relative_to(base.resolve())
    except ValueError:
        where = "the standard library" if base == stdlib_root() else "the project root"
        return None, f"import '{shown}' leaves {where} ({base})", (
            "a spec imports files under its project root (the folder holding auditlang.toml, pyproject.toml "
            "or .git) or stdlib/...; move the file there (docs/security.md)")
    except (OSError, RuntimeError) as e:  # a symlink loop
        return None, f"import '{shown}' cannot be resolved: {getattr(e, 'strerror', None) or e}", \
            "check the file and the symlinks on its path"
    if raw.startswith("stdlib/") or raw == "stdlib":
        avail = sorted(x.stem for x in stdlib_root().glob("*.audit"))
        hint = did_you_mean(raw[len("stdlib/"):], avail, "stdlib modules") if not cand.exists() else None
    else:
        near = [x.stem for x in cand.parent.glob("*.audit") if x != importer.resolve()] if cand.parent.is_dir() else []
        close = did_you_mean(Path(raw).stem, near) if near else None
        hint = close if close and close.startswith("did you mean") else None
    try:
        exists, is_file = cand.exists(), cand.is_file()
    except OSError as e:
        return None, f"import '{shown}' cannot be read: {e.strerror}", "check the file and the folders on its path"
    if not exists:
        return None, f"cannot find '{shown}' (looked for {cand})", hint or (
            "the import path is relative to the importing file, with or without .audit")
    if not is_file:
        return None, f"import '{shown}' names a folder, not a spec file ({cand})", \
            "import the .audit file inside it, e.g. import \"folder/name\""
    return cand, None, None


def load_modules(entry: Path, bag: DiagnosticBag, text: str | None = None,
                 max_import_chars: int | None = None) -> tuple[LoadedModule, dict[str, str]]:
    """Parse the entry spec and, recursively, everything it imports. ``text``: the entry's source
    (not read from disk; ``entry`` then only locates it for relative imports and the project root).
    ``max_import_chars``: an imported file larger than this is not parsed (E111 at the import; the
    language server's bound on the work of one document)."""
    entry = entry.resolve()
    entry_text = text
    root = project_root(entry)
    loaded: dict[Path, LoadedModule] = {}
    hashes: dict[str, str] = {}
    stack: list[Path] = []

    def key_for(p: Path) -> str:
        if p == entry:
            return ""
        try:
            rel = p.relative_to(stdlib_root().resolve())
            return ".".join(rel.with_suffix("").parts)
        except ValueError:
            pass
        try:
            rel = p.relative_to(root)
        except ValueError:
            rel = Path(p.name)
        return ".".join(rel.with_suffix("").parts)

    def load(p: Path, via: A.Import | None) -> LoadedModule | None:
        if p in stack:
            cyc = " -> ".join(x.name for x in stack[stack.index(p):] + [p])
            bag.error("E110", f"import cycle: {cyc}", via.span if via else None,
                      hint="break the cycle by moving the shared declarations into a third file")
            return None
        if p in loaded:
            return loaded[p]
        try:
            if p == entry and entry_text is not None:
                src = entry_text[1:] if entry_text.startswith("\ufeff") else entry_text
            else:
                size = p.stat().st_size
                if max_import_chars is not None and via is not None and size > max_import_chars:
                    bag.error("E111", f"'{p.name}' has {size:,} bytes, more than the {max_import_chars:,} the editor "
                              "reads for an import", via.span, hint="run `auditc check` for its diagnostics")
                    return None
                raw = p.read_bytes()
                src = raw.decode("utf-8-sig")  # a UTF-8 byte-order mark is accepted and dropped
        except OSError as e:
            bag.error("E111", f"cannot read '{p}': {e.strerror}", via.span if via else None,
                      hint="check that the file exists and is readable")
            return None
        except UnicodeDecodeError as e:
            line = raw.count(b"\n", 0, e.start) + 1
            start = raw.rfind(b"\n", 0, e.start) + 1
            col = len(raw[start:e.start].decode("utf-8", "replace")) + 1  # characters, as the caret is drawn
            SourceCache.put(str(p), raw.decode("utf-8", "replace"))  # the line is quoted, the bad byte shown as U+FFFD
            bag.error("E111", f"'{p.name}' is not valid UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start})",
                      Span.point(str(p), line, col), hint="save the spec as UTF-8")
            return None
        hashes[str(p)] = hashlib.sha256(src.encode()).hexdigest()
        try:
            mod_ast = parse_text(src, str(p))
        except CompileError as e:
            for d in e.diagnostics:
                bag.add(d)
            return None
        mod = LoadedModule(p, key_for(p), mod_ast)
        loaded[p] = mod
        stack.append(p)
        for imp in mod_ast.imports:
            target, err, hint = _resolve_import(imp, p, root)
            if err:
                bag.error("E112", err, imp.span, hint=hint)
                continue
            sub = load(target, imp)
            if sub is None:
                continue
            if imp.namespace in mod.imports:
                bag.error("E113", f"namespace '{imp.namespace}' is imported twice", imp.span,
                          hint="give one of the imports a different name with `as`")
                continue
            mod.imports[imp.namespace] = sub
        stack.pop()
        return mod

    top = load(entry, None)
    if top is None:
        bag.raise_if_errors()
        raise CompileError(bag)
    return top, hashes
