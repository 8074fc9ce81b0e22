"""The template sandbox with a work and size budget per render (docs/security.md).

A spec from a stranger may hold any template, so besides Jinja's ``ImmutableSandboxedEnvironment``
(no dunders, no mutation) every render is bounded:

- every string or list a template builds (``*``, ``+``, ``~``, ``%``, ``str.format``, the string
  methods and filters that pad, repeat or join) holds at most ``MAX_TEXT`` items, checked *before*
  it is built; a format width or precision is at most ``MAX_TEXT``;
- one render takes at most ``MAX_STEPS`` steps: each loop iteration, call, filter and intercepted
  operator is one step, and building text costs one step per ``STEP_CHARS`` characters;
- the rendered prompt is at most ``MAX_TEXT`` characters.

Exceeding a bound raises :class:`BudgetError` (a ``SecurityError``), which rendering reports as a
``TemplateError`` at the template's line.
"""

from __future__ import annotations

import functools
import re
import threading
from typing import Any, Iterable, Iterator

from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedFormatter, SecurityError

MAX_TEXT = 4_000_000  # longest string or list a template may build, and longest rendered prompt
MAX_REPEAT = 1_000_000  # longest string or list a template may build with * (a prompt, not a memory bomb)
MAX_EXPONENT = 1_000  # largest exponent of ** in a template
MAX_STEPS = 1_000_000  # loop iterations, calls, filters and operators in one render
STEP_CHARS = 64  # building this many characters costs one step


class BudgetError(SecurityError):
    """A render went over one of the sandbox's bounds."""


_state = threading.local()


class Budget:
    """The steps left to the render in progress on this thread (one render at a time per thread)."""

    @staticmethod
    def start() -> None:
        _state.left = MAX_STEPS

    @staticmethod
    def charge(steps: int = 1) -> None:
        left = getattr(_state, "left", MAX_STEPS) - steps
        _state.left = left
        if left < 0:
            raise BudgetError(f"the template takes more than {MAX_STEPS:,} steps (loop iterations, calls and "
                              "filters) for one prompt")


def _size(n: int, what: str) -> None:
    if n > MAX_TEXT:
        raise BudgetError(f"{what} builds {n:,} characters or items, more than {MAX_TEXT:,}")
    Budget.charge(1 + n // STEP_CHARS)


def _length(x: Any) -> int:
    return len(x) if isinstance(x, (str, list, tuple)) else 0


def _int(x: Any, default: int = 0) -> int:
    return x if isinstance(x, int) and not isinstance(x, bool) else default


# ---------------------------------------------------------------------------------- format widths

_PRINTF = re.compile(r"%(?:\([^)]*\))?[-+ #0]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?[a-zA-Z%]")
_SPEC = re.compile(r"^(?:.?[<>=^])?[-+ ]?z?#?0?(\d+)?[,_]?(?:\.(\d+))?")


def _width(digits: str | None, where: str) -> int:
    if digits == "*":
        raise BudgetError(f"{where}: a '*' width or precision is not allowed in a template; write the number")
    n = int(digits) if digits and len(digits) < 12 else (0 if not digits else MAX_TEXT + 1)
    if n > MAX_TEXT:
        raise BudgetError(f"{where}: width or precision {digits} is larger than {MAX_TEXT:,}")
    return n


def check_printf(fmt: str, where: str = "%-format") -> int:
    """The widths of a printf-style format, each checked; returns their sum."""
    return sum(_width(w, where) + _width(p, where) for w, p in _PRINTF.findall(fmt))


def _check_spec(spec: str) -> None:
    m = _SPEC.match(spec)
    if m:
        _width(m.group(1), "format spec") + _width(m.group(2), "format spec")


class _BoundedFormatter(SandboxedFormatter):
    def format_field(self, value: Any, format_spec: str) -> Any:
        _check_spec(format_spec)
        out = super().format_field(value, format_spec)
        _size(len(out), "a format field")
        return out


def _percent(left: str, right: Any) -> str:
    widths = check_printf(left)
    args = right if isinstance(right, tuple) else (right,)
    _size(len(left) + widths + sum(len(a) for a in args if isinstance(a, str)), "a %-format")
    out = left % right
    _size(len(out), "a %-format")
    return out


# ---------------------------------------------------------------------------------- bounded filters and methods

def _join_parts(items: Iterable[Any], sep: str) -> list[str]:
    parts: list[str] = []
    total = 0
    for x in items:
        Budget.charge()
        s = x if isinstance(x, str) else _bounded_str(x)
        total += len(s) + (len(sep) if parts else 0)
        if total > MAX_TEXT:
            raise BudgetError(f"join builds more than {MAX_TEXT:,} characters")
        parts.append(s)
    return parts


def _bounded_str(x: Any) -> str:
    if isinstance(x, (list, tuple)) and len(x) > MAX_TEXT // 2:
        raise BudgetError(f"converting a sequence of {len(x):,} items to text builds more than {MAX_TEXT:,} characters")
    s = str(x)
    _size(len(s), "str()")
    return s


def _replace_size(s: str, old: str, new: str, count: Any = None) -> int:
    hits = (len(s) + 1) if old == "" else s.count(old)
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    return len(s) + hits * (len(new) - len(old))


def _prechecks(name: str, args: tuple, kwargs: dict) -> None:
    """Reject, before any work, a filter call whose output would be over the bounds."""
    a = list(args) + [None] * 4
    s = a[0]
    if name == "center":
        _size(max(_int(a[1] if args[1:] else kwargs.get("width", 80)), _length(s)), "center")
    elif name == "indent" and isinstance(s, str):
        w = a[1] if args[1:] else kwargs.get("width", 4)
        _size(len(s) + (s.count("\n") + 1) * (len(w) if isinstance(w, str) else _int(w)), "indent")
    elif name == "replace" and isinstance(s, str):
        old = a[1] if args[1:] else kwargs.get("old")
        new = a[2] if args[2:] else kwargs.get("new")
        if isinstance(old, str) and isinstance(new, str):
            _size(_replace_size(s, old, new, a[3] if args[3:] else kwargs.get("count")), "replace")
    elif name == "wordwrap" and isinstance(s, str):
        wrap = a[3] if args[3:] else kwargs.get("wrapstring")
        _size(len(s) * (1 + (len(wrap) if isinstance(wrap, str) else 1)), "wordwrap")
    elif name == "format" and isinstance(s, str):
        _size(len(s) + check_printf(s, "format"), "format")
    elif name in ("batch", "slice"):
        _size(_int(a[1] if args[1:] else kwargs.get("linecount" if name == "batch" else "slices")), name)
    elif name == "truncate":
        _size(_int(a[1] if args[1:] else kwargs.get("length", 255)), "truncate")
    elif name == "sum":
        start = a[2] if args[2:] else kwargs.get("start", 0)
        if not isinstance(start, (int, float)):
            raise BudgetError("sum adds numbers; give a number as start=")


def _bounded_filter(name: str, func: Any) -> Any:
    pass_arg = getattr(func, "jinja_pass_arg", None)

    @functools.wraps(func)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        Budget.charge()
        lead = args[1:] if pass_arg is not None else args  # the context, eval context or environment first
        _prechecks(name, lead, kwargs)
        if name == "join" and lead:
            seq = lead[0]
            sep = lead[1] if lead[1:] else kwargs.get("d", "")
            attr = lead[2] if lead[2:] else kwargs.get("attribute")
            if attr is None and isinstance(sep, str):
                return sep.join(_join_parts(seq, sep))
        out = func(*args, **kwargs)
        _size(_length(out), name)
        return out

    return bounded


_PAD = {"center", "ljust", "rjust", "zfill"}


def _check_method(obj: Any, args: tuple, kwargs: dict) -> Any:
    """A bound str method called from a template: a checked result, or ``NotImplemented`` to call it."""
    s = getattr(obj, "__self__", None)
    name = getattr(obj, "__name__", "")
    if not isinstance(s, str):
        return NotImplemented
    if name in _PAD:
        _size(max(_int(args[0] if args else kwargs.get("width")), len(s)), name)
    elif name == "expandtabs":
        _size(len(s) * max(1, _int(args[0] if args else kwargs.get("tabsize", 8))), name)
    elif name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        _size(_replace_size(s, args[0], args[1], args[2] if len(args) > 2 else kwargs.get("count")), name)
    elif name == "join" and args:
        return s.join(_join_parts(args[0], s))
    return NotImplemented


# ---------------------------------------------------------------------------------- the environment

class BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox with the bounds above; its filters are the bounded versions."""

    intercepted_binops = frozenset(["*", "**", "+", "%"])

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.filters = {name: _bounded_filter(name, f) for name, f in self.filters.items()}

    def add_filters(self, filters: dict[str, Any]) -> None:
        self.filters.update({name: _bounded_filter(name, f) for name, f in filters.items()})

    def call_binop(self, context, operator, left, right):  # noqa: ANN001 (jinja2 signature)
        Budget.charge()
        if operator == "**":
            if isinstance(right, (int, float)) and abs(right) > MAX_EXPONENT:
                raise BudgetError(f"exponent {right} is larger than {MAX_EXPONENT}")
            return left ** right
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > MAX_REPEAT:
                    raise BudgetError(f"repeating a sequence {n} times builds more than {MAX_REPEAT} items")
                if isinstance(seq, (str, list, tuple)) and isinstance(n, int):
                    _size(len(seq) * max(n, 0), "*")
            return left * right
        if operator == "%" and isinstance(left, str):
            return _percent(left, right)
        if operator == "+":
            _size(_length(left) + _length(right), "+")
        return super().call_binop(context, operator, left, right)

    def call(__self, __context, __obj, *args, **kwargs):  # noqa: ANN001, N805 (jinja2 signature)
        Budget.charge()
        checked = _check_method(__obj, args, kwargs)
        if checked is not NotImplemented:
            return checked
        out = super().call(__context, __obj, *args, **kwargs)
        if isinstance(out, (str, list)):
            _size(len(out), getattr(__obj, "__name__", "a call"))
        return out

    def wrap_str_format(self, value: Any) -> Any:
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        f_self, is_map = value.__self__, value.__name__ == "format_map"
        vformat = _BoundedFormatter(self).vformat

        def bounded(*args: Any, **kwargs: Any) -> str:
            if is_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument")
                args, kwargs = (), args[0]
            return str(vformat(f_self, args, kwargs))

        return functools.update_wrapper(bounded, value)

    def budget_iter(self, iterable: Any) -> Iterable[Any]:
        """What a ``{% for %}`` loops over: a sized iterable charged up front, any other counted item by item."""
        try:
            n = len(iterable)
        except TypeError:
            return _counted(iterable)
        Budget.charge(n)
        return iterable

    def budget_concat(self, parts: tuple) -> str:
        """``a ~ b``, with the length checked before the string is built."""
        texts = [p if isinstance(p, str) else _bounded_str(p) for p in parts]
        _size(sum(map(len, texts)), "~")
        return "".join(texts)

    def _parse(self, source, name, filename):  # noqa: ANN001 (jinja2 signature)
        return bound_template_ast(super()._parse(source, name, filename))


def _counted(iterable: Iterable[Any]) -> Iterator[Any]:
    for x in iterable:
        Budget.charge()
        yield x


def bound_template_ast(ast: nodes.Template) -> nodes.Template:
    """Every loop iterates through ``environment.budget_iter`` and every ``~`` joins through
    ``environment.budget_concat`` (both charge the render's budget)."""
    for loop in ast.find_all(nodes.For):
        loop.iter = nodes.Call(nodes.EnvironmentAttribute("budget_iter"), [loop.iter], [], None, None,
                               lineno=loop.iter.lineno)
    for parent in list(ast.find_all(nodes.Node)):
        for field in parent.fields:
            child = getattr(parent, field, None)
            if isinstance(child, nodes.Concat):
                setattr(parent, field, _concat_call(child))
            elif isinstance(child, list):  # in place: a Tuple made above may share this list
                child[:] = [_concat_call(c) if isinstance(c, nodes.Concat) else c for c in child]
    return ast


def _concat_call(node: nodes.Concat) -> nodes.Call:
    return nodes.Call(nodes.EnvironmentAttribute("budget_concat"), [nodes.Tuple(node.nodes, "load", lineno=node.lineno)],
                      [], None, None, lineno=node.lineno)


def render_bounded(generate: Iterator[str]) -> str:
    """Join a template's output chunks, stopping as soon as the prompt is over ``MAX_TEXT``."""
    out: list[str] = []
    total = 0
    for chunk in generate:
        total += len(chunk)
        if total > MAX_TEXT:
            raise BudgetError(f"the rendered prompt is longer than {MAX_TEXT:,} characters")
        out.append(chunk)
    return "".join(out)


__all__ = ["MAX_EXPONENT", "MAX_REPEAT", "MAX_STEPS", "MAX_TEXT", "Budget", "BudgetError", "BoundedSandbox",
           "check_printf", "render_bounded"]
