"""Prompt templates: compile, inspect and render Jinja templates in a sandbox.

Templates are Jinja2 sources rendered by an ``ImmutableSandboxedEnvironment`` (no attribute
access to dunders or other unsafe members, no mutation of the context), bounded in the size of
what it builds and the work of one render (:mod:`auditlang.prompts.sandbox`), with
``StrictUndefined`` (a missing variable is an error, never an empty string), autoescape off
and ``keep_trailing_newline`` (the rendered text is byte-exact: a template file that ends
without a newline renders without one). ``{% include %}`` / ``{% import %}`` names resolve
relative to the stdlib's ``templates/`` folder (see :mod:`auditlang.stdlib_location`). Rendering ``None`` into a prompt is
an error too (it is always a missing value, e.g. ``gold_label`` of a free-form item).

The context convention (which variables the planner supplies) is in ``docs/prompts.md`` and
built by :func:`auditlang.prompts.context.build_context`.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import re
from functools import lru_cache
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import jinja2
from jinja2 import meta, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from auditlang.prompts.sandbox import MAX_STEPS, MAX_TEXT, BoundedSandbox, Budget, BudgetError, render_bounded

from auditlang.core.errors import UserError
from auditlang.stdlib_location import stdlib_root

STDLIB_TEMPLATES_DIR: Path = stdlib_root() / "templates"  # the default location (see templates_dir())


def templates_dir() -> Path:
    """The stdlib templates folder in force now (a run directory's copy inside ``stdlib_location.use``)."""
    return stdlib_root() / "templates"
TEMPLATE_SUFFIX = ".j2"
MAX_LETTERS = 26


class TemplateError(UserError, ValueError):
    """A template could not be compiled or rendered.

    ``line`` and ``col`` (1-based) locate the problem in the template source when known.
    ``str()`` carries the hint; ``.hint`` holds it too.
    """

    def __init__(self, message: str, *, name: str = "<inline>", line: int | None = None,
                 col: int | None = None, hint: str | None = None) -> None:
        self.name = name
        self.line = line
        self.col = col
        self.message = message
        self.hint = hint
        where = name
        if line is not None:
            where += f", line {line}"
            if col is not None:
                where += f", col {col}"
        text = f"template {where}: {message}"
        if hint:
            text += f" (hint: {hint})"
        super().__init__(text)
        self.hint = hint


class TemplateNotFoundError(TemplateError):
    """A stdlib template name does not exist."""


# ----------------------------------------------------------------------------- helpers for templates


def letters(n: int) -> list[str]:
    """Option labels ``A, B, C, ...`` for ``n`` choices (at most 26)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"letters() needs a non-negative integer, got {n!r}")
    if n > MAX_LETTERS:
        raise ValueError(f"letters() supports at most {MAX_LETTERS} choices, got {n}")
    return list(_LETTERS[:n])


_LETTERS = tuple(chr(ord("A") + i) for i in range(26))


_PLACEHOLDER = re.compile(r"\{(label|text)\}")


def options(choices: Sequence[str] | None, fmt: str = "{label}. {text}", sep: str = "\n",
            labels: Sequence[str] | None = None) -> str:
    """Render a lettered choice list: ``A. text\\nB. text`` by default.

    ``fmt`` may contain the placeholders ``{label}`` and ``{text}`` (only those two; this is
    plain substitution, not ``str.format``, so a template cannot reach object attributes).
    ``labels`` defaults to ``letters(len(choices))``.
    """
    if choices is None or isinstance(choices, str) or not isinstance(choices, Sequence):
        raise ValueError(f"options needs a list of choice texts, got {type(choices).__name__}"
                         " (is this a free-form item without choices?)")
    labs = list(labels) if labels is not None else letters(len(choices))
    if len(labs) != len(choices):
        raise ValueError(f"options got {len(choices)} choices but {len(labs)} labels")

    one = _format_parts(fmt).format
    return sep.join([one(str(lab), str(txt)) for lab, txt in zip(labs, choices)])


@lru_cache(maxsize=256)
def _format_parts(fmt: str) -> str:
    """``fmt`` as a ``str.format`` pattern of two positional fields, {0} the label and {1} the
    text, every other brace escaped (the pattern is built here, never taken from a template)."""
    parts = _PLACEHOLDER.split(fmt)  # literal, name, literal, ..., literal (odd items are names)
    return "".join(("{0}" if p == "label" else "{1}") if i % 2 else p.replace("{", "{{").replace("}", "}}")
                   for i, p in enumerate(parts))


def _finalize(value: Any) -> Any:
    if value is None:
        raise ValueError("an expression rendered None into the prompt (a missing value, e.g. "
                         "gold_label or choices of a free-form item)")
    return value


FILTERS: dict[str, Callable[..., Any]] = {"options": options, "letters": letters}
GLOBALS: dict[str, Any] = {"letters": letters}


# ----------------------------------------------------------------------------- environment


class _StdlibLoader(jinja2.BaseLoader):
    """Loads ``<study>/<name>.j2`` from ``STDLIB_TEMPLATES_DIR`` (suffix optional)."""

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Callable[[], bool]]:
        path = _stdlib_path(template)
        if path is None:
            raise jinja2.TemplateNotFound(template)
        source = path.read_text(encoding="utf-8")
        mtime = path.stat().st_mtime
        return source, str(path), lambda: path.exists() and path.stat().st_mtime == mtime


def _stdlib_path(name: str) -> Path | None:
    rel = name if name.endswith(TEMPLATE_SUFFIX) else name + TEMPLATE_SUFFIX
    root = templates_dir().resolve()
    path = (root / rel).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        return None
    return path


def _make_env() -> ImmutableSandboxedEnvironment:
    env = BoundedSandbox(
        loader=_StdlibLoader(),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        finalize=_finalize,
    )
    env.add_filters(FILTERS)
    env.globals.update(GLOBALS)
    return env


_ENV = _make_env()


# ----------------------------------------------------------------------------- compiled templates


@dataclass(frozen=True)
class CompiledTemplate:
    """A compiled template. Build with :func:`compile_template` or :func:`compile_stdlib_template`."""

    name: str
    source: str
    hash: str
    _template: jinja2.Template = field(repr=False, compare=False)
    _ast: nodes.Template = field(repr=False, compare=False)

    @functools.cached_property
    def variables(self) -> frozenset[str]:
        """Context variables the template reads (including those of included stdlib templates)."""
        return _variables(self._ast, frozenset())

    @functools.cached_property
    def inlined_source(self) -> str:
        """The source with every literal ``{% include 'study/name' %}`` of a stdlib template
        replaced by that template's own source (recursively): the text the prompt is made of,
        for describing it (methods prose)."""
        return _inline_includes(self.source, frozenset())

    @functools.cached_property
    def static(self) -> bool:
        """Only literal text (no variable, tag, include or expression; comments are gone after
        parsing): the output is the same in every context."""
        return all(isinstance(n, nodes.Output) and all(isinstance(c, nodes.TemplateData) for c in n.nodes)
                   for n in self._ast.body)

    def render(self, context: dict[str, Any]) -> str:
        """Render with ``context``; raises :class:`TemplateError` naming any missing variable."""
        if not isinstance(context, dict):
            raise TemplateError(f"render() needs a dict context, got {type(context).__name__}", name=self.name)
        if self.static:  # rendered once (a follow-up phrasing is rendered for every item)
            text = self.__dict__.get("_static_text")
            if text is None:
                text = self.__dict__["_static_text"] = self._render(context)
            return text
        return self._render(context)

    def _render(self, context: dict[str, Any]) -> str:
        try:
            Budget.start()
            return render_bounded(self._template.generate(context))
        except BudgetError as exc:
            raise TemplateError(f"over the sandbox's bounds: {exc}", name=self.name, line=_render_line(exc, self.name),
                                hint=f"a prompt template formats item fields; bounds per prompt: {MAX_TEXT:,} characters "
                                     f"built, {MAX_STEPS:,} steps (docs/security.md)") from None
        except SecurityError as exc:
            raise TemplateError(f"unsafe operation blocked by the sandbox: {exc}", name=self.name,
                                line=_render_line(exc, self.name),
                                hint="templates may only read context values, not Python internals") from None
        except jinja2.UndefinedError as exc:
            missing = _missing_name(str(exc))
            have = ", ".join(sorted(context)) or "none"
            msg = f"variable {missing!r} is undefined" if missing else str(exc)
            raise TemplateError(msg, name=self.name, line=_render_line(exc, self.name),
                                hint=f"context variables: {have}") from None
        except jinja2.TemplateError as exc:
            raise TemplateError(str(exc), name=self.name, line=_render_line(exc, self.name)) from None
        except (ValueError, TypeError, ArithmeticError) as exc:  # 1/0, float overflow, sandbox range limit
            raise TemplateError(f"{exc} ({type(exc).__name__})", name=self.name,
                                line=_render_line(exc, self.name),
                                hint="a template should format item fields; this computation fails for this item") from None
        except RecursionError as exc:
            raise TemplateError("recursion too deep (a macro or include that calls itself?)", name=self.name,
                                line=_render_line(exc, self.name),
                                hint="give recursive macros a stopping condition") from None


def template_hash(source: str) -> str:
    """First 16 hex digits of the SHA-256 of the template source (UTF-8)."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]


def compile_template(source: str, name: str = "<inline>") -> CompiledTemplate:
    """Compile an inline template source; syntax errors raise :class:`TemplateError` with line/col.

    Compiled templates are cached by (source, name); they are immutable, so sharing is safe.
    """
    if not isinstance(source, str):
        raise TemplateError(f"template source must be a string, got {type(source).__name__}", name=name)
    return _compile(source, str(name))


@functools.lru_cache(maxsize=512)
def _compile(source: str, name: str) -> CompiledTemplate:
    try:
        ast = _ENV.parse(source, name=name)
        code = _ENV.compile(ast, name=name, filename=name)
        template = _ENV.template_class.from_code(_ENV, code, _ENV.make_globals(None), None)
    except jinja2.TemplateSyntaxError as exc:
        line = exc.lineno
        raise TemplateError(exc.message or "syntax error", name=name, line=line,
                            col=_tag_col(source, line)) from None
    except (RecursionError, SyntaxError, MemoryError) as exc:  # 2,000 nested {% if %}, 30 nested loops
        why = exc.msg if isinstance(exc, SyntaxError) and exc.msg else "nested too deeply"
        raise TemplateError(f"the template cannot be compiled: {why}", name=name, line=1, col=1,
                            hint="templates nest at most a few dozen tags and brackets deep") from None
    compiled = CompiledTemplate(name=name, source=source, hash=template_hash(source), _template=template, _ast=ast)
    try:
        _check_includes(compiled)
        compiled.variables, compiled.static  # noqa: B018 (walked once here, where a too deep tree is reported)
    except RecursionError:
        raise TemplateError("the template cannot be compiled: nested too deeply", name=name, line=1, col=1,
                            hint="templates nest at most a few dozen tags and brackets deep") from None
    return compiled


def list_stdlib_templates() -> list[str]:
    """Names (without ``.j2``) of all templates under ``stdlib/templates/``, sorted."""
    root = templates_dir()
    if not root.is_dir():
        return []
    return sorted(p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*" + TEMPLATE_SUFFIX))


def load_stdlib_template(name: str) -> str:
    """Source text of a stdlib template, e.g. ``"s000/reasoning/surface_paraphrase"``."""
    path = _stdlib_path(name)
    if path is None:
        known = list_stdlib_templates()
        close = difflib.get_close_matches(name.removesuffix(TEMPLATE_SUFFIX), known, n=3)
        hint = f"did you mean {', '.join(close)}?" if close else f"see {templates_dir() / 'INDEX.md'}"
        raise TemplateNotFoundError(f"no stdlib template {name!r}", name=name, hint=hint)
    return path.read_text(encoding="utf-8")


def compile_stdlib_template(name: str) -> CompiledTemplate:
    """Compile a stdlib template by name (``.j2`` optional)."""
    canonical = name.removesuffix(TEMPLATE_SUFFIX)
    return compile_template(load_stdlib_template(canonical), name=canonical)


# ----------------------------------------------------------------------------- internals


_INCLUDE = re.compile(r"""\{%-?\s*include\s+(['"])([^'"]+)\1\s*-?%\}""")


def _inline_includes(source: str, seen: frozenset[str]) -> str:
    """As :func:`_variables` follows includes: through the stdlib loader, each name once."""
    def sub(m: re.Match[str]) -> str:
        name = m.group(2)
        return m.group(0) if name in seen else _inline_includes(load_stdlib_template(name), seen | {name})

    return _INCLUDE.sub(sub, source)


def _variables(ast: nodes.Template, seen: frozenset[str]) -> frozenset[str]:
    found = set(meta.find_undeclared_variables(ast)) - set(_ENV.globals)
    for ref in meta.find_referenced_templates(ast):
        if ref is None or ref in seen:
            continue
        sub = _ENV.parse(load_stdlib_template(ref), name=ref)
        found |= _variables(sub, seen | {ref})
    return frozenset(found)


def _check_includes(compiled: CompiledTemplate) -> None:
    for ref in meta.find_referenced_templates(compiled._ast):
        if ref is None:
            raise TemplateError("include/import names must be string literals", name=compiled.name)
        if _stdlib_path(ref) is None:
            load_stdlib_template(ref)  # raises TemplateNotFoundError with a suggestion


_UNDEF_PATTERNS = (
    re.compile(r"^'([^']+)' is undefined$"),
    re.compile(r"has no attribute '([^']+)'$"),
    re.compile(r"^'[^']+' object has no element (.+)$"),
)


def _missing_name(message: str) -> str | None:
    for pat in _UNDEF_PATTERNS:
        m = pat.search(message)
        if m:
            return m.group(1)
    return None


def _render_line(exc: BaseException, name: str) -> int | None:
    """Template line of the innermost traceback frame that belongs to the template ``name``."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == name:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


_TAG_OPEN = re.compile(r"\{[{%#]")


def _tag_col(source: str, line: int | None) -> int | None:
    """1-based column of the last tag opener on ``line`` (Jinja reports only the line)."""
    if line is None:
        return None
    lines = source.splitlines()
    if not 1 <= line <= len(lines):
        return None
    opens = [m.start() for m in _TAG_OPEN.finditer(lines[line - 1])]
    return opens[-1] + 1 if opens else 1
