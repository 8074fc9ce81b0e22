"""Golden tests: parse trees of the stdlib, the examples and the study specs."""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from pathlib import Path

import pytest

from auditlang.core.diagnostics import Span
from auditlang.syntax import parse_file
from auditlang.syntax.fmt import format_text

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "goldens" / "parse"
SPEC_FILES = sorted([*REPO.glob("stdlib/*.audit"), *REPO.glob("examples/*.audit"), *REPO.glob("specs/*.audit")])


def dump(node, indent: int = 0) -> str:
    pad = "  " * indent
    if isinstance(node, Span):
        return f"@{node.line}:{node.col}"
    if is_dataclass(node):
        parts = [f"{pad}{type(node).__name__}"]
        for f in fields(node):
            if f.name in ("span", "name_span"):
                continue
            v = getattr(node, f.name)
            if isinstance(v, tuple) and v and is_dataclass(v[0]):
                parts.append(f"{pad}  {f.name}:")
                parts.extend(dump(x, indent + 2) for x in v)
            elif is_dataclass(v):
                parts.append(f"{pad}  {f.name}:")
                parts.append(dump(v, indent + 2))
            else:
                parts.append(f"{pad}  {f.name} = {v!r}")
        span = getattr(node, "span", None)
        if span is not None:
            parts[0] += f" @{span.line}:{span.col}"
        return "\n".join(parts)
    return f"{pad}{node!r}"


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_parse_golden(path: Path, golden) -> None:
    mod = parse_file(path)
    text = "\n".join(dump(s) for s in mod.statements) + "\n"
    golden(GOLDEN / (str(path.relative_to(REPO)).replace("/", "__") + ".txt"), text)


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_fmt_idempotent_and_meaning_preserving(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    once = format_text(text, str(path))
    assert format_text(once, str(path)) == once
    from auditlang.syntax.parse import parse_text

    a = [dump(s) for s in parse_text(text, "a").statements]
    b = [dump(s) for s in parse_text(once, "a").statements]
    strip = lambda xs: [ln.split(" @")[0] for x in xs for ln in x.splitlines()]  # noqa: E731
    assert strip(a) == strip(b)


def test_fmt_keeps_comments() -> None:
    src = '# head\nmodel m = embedded("gemma3-270m")  # tail\naudit a { # open\n  # lead\n  models = [m]\n}\n'
    out = format_text(src)
    for c in ("# head", "# tail", "# open", "# lead"):
        assert c in out
    assert format_text(out) == out


def test_long_strings_keep_backslashes_and_newlines() -> None:
    from auditlang.syntax.parse import parse_text

    mod = parse_text('template t = template("""a\\nb\n{{ x }} "q" \\"""")')
    assert mod.statements[0].value.args[0].value == 'a\\nb\n{{ x }} "q" "'
