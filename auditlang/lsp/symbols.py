"""Declared names an editor can offer: the open document's, its imports' and the stdlib's.

Declarations are found line by line (``KIND NAME =`` / ``KIND NAME {``), so a document that
does not parse while it is being typed still offers its names. Each declaration keeps the
comment block above it and its own first line, which hover shows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from auditlang.resolve.modules import stdlib_root
from auditlang.syntax.parse import KINDS

_DECL = re.compile(r"^(" + "|".join(KINDS) + r")\s+([A-Za-z_]\w*)\s*(=|\{)\s*([A-Za-z_][\w.]*)?")
_IMPORT = re.compile(r'^\s*import\s+"([^"]+)"(?:\s+as\s+([A-Za-z_]\w*))?', re.M)


@dataclass(frozen=True)
class Decl:
    kind: str
    name: str
    ctor: str | None  # the callee or base name after "=", if any
    line: int  # 0-based
    source: str  # the declaration's first line
    comment: str  # the comment block just above it


def declarations(text: str) -> list[Decl]:
    out: list[Decl] = []
    lines = text.splitlines()
    for i, ln in enumerate(lines):
        m = _DECL.match(ln)
        if not m:
            continue
        above: list[str] = []
        j = i - 1
        while j >= 0 and lines[j].lstrip().startswith("#"):
            above.insert(0, lines[j].lstrip().lstrip("#").strip())
            j -= 1
        ctor = m.group(4) if m.group(3) == "=" else m.group(1)
        out.append(Decl(m.group(1), m.group(2), ctor, i, ln.rstrip(), " ".join(above)))
    return out


def imports(text: str) -> dict[str, str]:
    """Namespace -> import path written in the document."""
    out = {}
    for m in _IMPORT.finditer(text):
        path = m.group(1)
        stem = path.rstrip("/").rsplit("/", 1)[-1]
        out[m.group(2) or stem.removesuffix(".audit")] = path
    return out


def import_file(path: str, doc_path: Path | None) -> Path | None:
    """The file an import path names (as the compiler resolves it), if it exists."""
    if path.startswith("stdlib/"):
        cand = stdlib_root() / path[len("stdlib/"):]
    elif doc_path is not None:
        cand = doc_path.parent / path
    else:
        return None
    if not cand.name.endswith(".audit"):
        cand = cand.with_name(cand.name + ".audit")
    return cand if cand.is_file() else None


@lru_cache(maxsize=64)
def _file_decls(path: str, mtime: float) -> tuple[Decl, ...]:
    return tuple(declarations(Path(path).read_text(encoding="utf-8")))


def file_declarations(p: Path) -> tuple[Decl, ...]:
    try:
        return _file_decls(str(p), p.stat().st_mtime)
    except (OSError, UnicodeDecodeError):
        return ()


def stdlib_modules() -> list[str]:
    """Stdlib fragment names (``s000``, ``protocols``, ...)."""
    return sorted(p.stem for p in stdlib_root().glob("*.audit"))


@dataclass(frozen=True)
class Named:
    """A name usable in the document: ``token_norm`` or ``s000.token_norm``."""

    label: str
    decl: Decl
    file: Path | None  # None: the document itself
    import_needed: str | None = None  # an import statement to add for it (stdlib not yet imported)


def visible(text: str, doc_path: Path | None, kind: str | None = None, with_stdlib: bool = True) -> list[Named]:
    """Names of ``kind`` (every kind if None) the document can use, plus, with ``with_stdlib``,
    every stdlib name under the namespace its import would give (with the import to add)."""
    out = [Named(d.name, d, None) for d in declarations(text) if kind in (None, d.kind)]
    imported = imports(text)
    seen_files: set[Path] = set()
    for ns, path in imported.items():
        f = import_file(path, doc_path)
        if f is None:
            continue
        seen_files.add(f.resolve())
        out += [Named(f"{ns}.{d.name}", d, f) for d in file_declarations(f) if kind in (None, d.kind)]
    if with_stdlib:
        for mod in stdlib_modules():
            f = (stdlib_root() / f"{mod}.audit")
            if f.resolve() in seen_files or mod in imported:
                continue
            out += [Named(f"{mod}.{d.name}", d, f, f'import "stdlib/{mod}"')
                    for d in file_declarations(f) if kind in (None, d.kind)]
    return out


def lookup(text: str, doc_path: Path | None, dotted: str) -> Named | None:
    """The declaration a (dotted) name refers to, the stdlib included."""
    for n in visible(text, doc_path):
        if n.label == dotted:
            return n
    return None
