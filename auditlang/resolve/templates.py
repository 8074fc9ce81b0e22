"""Compile the spec's template objects (inline text, stdlib names or project files), cached.

A project template file must resolve (symlinks followed) inside the project root
(docs/security.md); anything else is a ``TemplateError`` here and E118 at ``auditc check``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from auditlang.core.confine import inside, outside_hint
from auditlang.core.diagnostics import SourceCache
from auditlang.prompts.render import CompiledTemplate, TemplateError, compile_stdlib_template, compile_template
from auditlang.resolve.spec import Resolved, Spec
from auditlang.stdlib_location import stdlib_root

STDLIB_PREFIX = "stdlib:"


def compile_obj(spec: Spec, obj: Resolved) -> CompiledTemplate:
    """Compile one template object; raises ``TemplateError`` on bad templates, missing files or a
    file outside the project root."""
    file = obj.value.file
    # keyed by the stdlib in force too: a run directory's stored stdlib may differ from this one
    stdlib = str(stdlib_root()) if isinstance(file, str) and file.startswith(STDLIB_PREFIX) else ""
    return _compile(str(spec.entry), str(spec.root), obj.id, obj.value.text, file, stdlib)


@lru_cache(maxsize=4096)
def _compile(entry: str, root: str, oid: str, text: str | None, file: str | None, stdlib: str = "") -> CompiledTemplate:
    if text is not None and file is not None:
        raise TemplateError("give either inline text or file=, not both", name=oid)
    if text is not None:
        return compile_template(text, name=oid)
    if file is None:
        raise TemplateError("template needs inline text or file=", name=oid)
    if file.startswith(STDLIB_PREFIX):
        return compile_stdlib_template(file[len(STDLIB_PREFIX):])
    path = inside(Path(entry).parent / file, [Path(root)])
    if path is None:
        raise TemplateError(f"template file '{file}' resolves outside the project root {root}", name=oid,
                            hint=outside_hint([Path(root)]))
    try:
        raw = path.read_bytes()
        src = raw.decode("utf-8-sig")  # a UTF-8 byte-order mark is accepted and dropped
    except OSError as e:
        raise TemplateError(f"cannot read template file {path}: {e.strerror}", name=oid) from None
    except UnicodeDecodeError as e:
        start = raw.rfind(b"\n", 0, e.start) + 1
        SourceCache.put(str(path), raw.decode("utf-8", "replace"))  # quoted with the bad byte as U+FFFD
        raise TemplateError(f"template file is not valid UTF-8 ({e.reason}, byte 0x{raw[e.start]:02x})", name=str(path),
                            line=raw.count(b"\n", 0, e.start) + 1, col=len(raw[start:e.start].decode("utf-8", "replace")) + 1,
                            hint="save the file as UTF-8") from None
    return compile_template(src, name=str(path))
