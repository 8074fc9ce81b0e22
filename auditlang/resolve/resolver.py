"""Name resolution and validation: AST modules -> :class:`Spec`.

Every declaration is evaluated once (memoised, with cycle detection), its parameters are
validated by the constructor's pydantic model, and references to other objects are checked
for existence and kind. All problems are collected as diagnostics and reported together.
"""

from __future__ import annotations

import difflib
import typing

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from auditlang.core.diagnostics import CompileError, DiagnosticBag, Span, did_you_mean
from auditlang.core.registry import REGISTRY, missing_plugin_note
from auditlang.resolve import schema as S
from auditlang.resolve.fallback import fallback_base, fallback_id
from auditlang.resolve.modules import LoadedModule, load_modules, project_root
from auditlang.resolve.overrides import ModelArg, apply_model_args, shown_value
from auditlang.resolve.spec import MetricRef, Resolved, Spec
from auditlang.syntax import ast as A
from auditlang.metrics.registry import METRICS
from auditlang.metrics.registry import CELL, literal_values, validate_params
from auditlang.core.errors import UsageError
from auditlang.syntax.parse import parse_text
from auditlang.resolve.checks import check_spec

_FAIL = object()


def _metric_registry() -> dict[str, Any]:

    return METRICS


MAX_CHAIN = 100  # objects defined in terms of each other (`a = b with (...)`), deepest allowed


class _Resolver:
    def __init__(self, top: LoadedModule, bag: DiagnosticBag, spec: Spec) -> None:
        self.bag = bag
        self.spec = spec
        self.decls: dict[str, tuple[LoadedModule, A.Decl | A.Block]] = {}
        self.scopes: dict[Path, dict[str, str]] = {}
        self.modules: dict[Path, LoadedModule] = {}
        self.raw: dict[str, tuple[str, dict[str, Any], dict[str, Span]]] = {}  # id -> (ctor, raw params, spans)
        self.active: list[str] = []
        self.failed: set[str] = set()  # objects whose resolution failed (diagnostics already given)
        self._names_memo: dict[tuple, list[str]] = {}  # names_of_kind
        self.chain_reported = False
        self.depth: dict[str, int] = {}  # objects in the derivation chain ending at an object (E103)
        self.fallbacks: dict[str, tuple[LoadedModule, A.Expr]] = {}  # fallback id -> its module and expression
        self._collect(top)

    # -------------------------------------------------------------- symbol table
    def _collect(self, mod: LoadedModule) -> None:
        if mod.path in self.scopes:
            return
        scope: dict[str, str] = {}
        self.scopes[mod.path] = scope
        self.modules[mod.path] = mod
        first: dict[str, Span] = {}
        for st in mod.ast.statements:
            if isinstance(st, (A.Decl, A.Block)):
                if st.name in first:
                    self.bag.error("E101", f"duplicate name '{st.name}'", st.name_span,
                                   hint=f"first declared at {first[st.name]}; every object needs its own name")
                    continue
                if st.name in mod.imports:
                    self.bag.error("E102", f"'{st.name}' is both a declaration and an imported namespace", st.name_span,
                                   hint="rename the declaration, or import the module `as` another name")
                    continue
                first[st.name] = st.name_span
                oid = f"{mod.key}.{st.name}" if mod.key else st.name
                scope[st.name] = oid
                self.decls[oid] = (mod, st)
        for sub in mod.imports.values():
            self._collect(sub)

    def lookup(self, mod: LoadedModule, ref: A.Ref) -> str | None:
        parts = list(ref.parts)
        cur = mod
        while len(parts) > 1:
            ns = cur.imports.get(parts[0])
            if ns is None:
                return None
            cur, parts = ns, parts[1:]
        return self.scopes.get(cur.path, {}).get(parts[0])

    def names_of_kind(self, mod: LoadedModule, kind: str) -> list[str]:
        """Names of ``kind`` visible in ``mod`` (for hints); memoized while the scopes do not change,
        so a spec with thousands of mistakes stays linear."""
        key = (mod.path, kind, len(self.decls), len(self.scopes.get(mod.path, {})))
        memo = self._names_memo
        if key not in memo:
            out = [n for n, oid in self.scopes[mod.path].items() if self._kind_of(oid) == kind]
            for ns, sub in mod.imports.items():
                out += [f"{ns}.{n}" for n, oid in self.scopes.get(sub.path, {}).items() if self._kind_of(oid) == kind]
            memo[key] = out
        return list(memo[key])

    def _kind_of(self, oid: str) -> str | None:
        d = self.decls.get(oid)
        return d[1].kind if d else None

    # -------------------------------------------------------------- declarations
    def resolve_all(self) -> None:
        for oid in list(self.decls):
            self.resolve_id(oid)

    def resolve_id(self, oid: str) -> bool:
        if oid in self.spec.objects or oid in self.spec.metrics:
            return True
        if oid in self.active:
            mod, st = self.decls[oid]
            chain = " -> ".join(self.active[self.active.index(oid):] + [oid])
            self.bag.error("E103", f"circular definition: {chain}", st.name_span,
                           hint="an object cannot be defined in terms of itself")
            return False
        if oid not in self.decls or oid in self.failed:
            return False
        mod, st = self.decls[oid]
        if len(self.active) >= MAX_CHAIN:
            if not self.chain_reported:  # once: every longer chain would repeat it
                self.bag.error("E103", f"definition chain deeper than {MAX_CHAIN} objects ({self.active[0]} -> "
                               f"{self.active[1]} -> ... -> {oid})", st.name_span,
                               hint="define objects from constructors, or from a short chain of `with` overrides")
                self.chain_reported = True
            self.failed.add(oid)
            return False
        self.active.append(oid)
        try:
            ok = self._resolve_block(oid, mod, st) if isinstance(st, A.Block) else self._resolve_decl(oid, mod, st)
            if not ok:
                self.failed.add(oid)  # resolved once: its diagnostics are in the bag
            return ok
        finally:
            self.active.pop()

    def _resolve_block(self, oid: str, mod: LoadedModule, st: A.Block) -> bool:
        if st.kind not in ("audit", "settings", "compare") and st.kind not in S.CONSTRUCTORS:
            self.bag.error("E104", f"a {st.kind} cannot be declared with a block", st.span,
                           hint=f"write `{st.kind} {st.name} = constructor(...)`")
            return False
        ctor = st.kind if st.kind in ("audit", "settings") else None
        if ctor is None:
            self.bag.error("E104", f"a {st.kind} cannot be declared with a block", st.span,
                           hint=f"write `{st.kind} {st.name} = {S.constructor_names(st.kind)[0]}(...)`")
            return False
        kwargs = [A.Kwarg(f.name, f.value, f.span) for f in st.fields]
        return self._build(oid, mod, st.kind, ctor, {}, {}, kwargs, [], st.span)

    def _resolve_decl(self, oid: str, mod: LoadedModule, st: A.Decl) -> bool:
        if st.kind == "metric":
            m = self._metric_expr(mod, st.value, oid)
            if m is None:
                return False
            self.spec.metrics[oid] = m
            return True
        return self._eval_object(oid, mod, st.kind, st.value, st.span)

    def _eval_object(self, oid: str, mod: LoadedModule, kind: str, expr: A.Expr, span: Span) -> bool:
        """Evaluate ``expr`` as an object of ``kind`` and store it under ``oid``."""
        base_ctor, base_raw, base_spans = None, {}, {}
        kwargs: list[A.Kwarg] = []
        args: list[A.Expr] = []
        node = expr
        if isinstance(node, A.Override):
            kwargs = list(node.kwargs)
            node = node.base
        if isinstance(node, A.Call):
            target = self.lookup(mod, node.func)
            if target == oid and node.func.dotted in S.CONSTRUCTORS.get(kind, {}):
                target = None  # `evaluator first_char = first_char()`: the constructor, not itself
            if target is not None and self._kind_of(target) == kind:
                if node.args:
                    self.bag.error("E105", "positional arguments are not allowed when deriving from an object",
                                   node.args[0].span, hint=f"use named parameters, or `{node.func.dotted} with (...)`")
                    return False
                if not self.resolve_id(target) or not self._deeper(oid, target, st_span=span):
                    return False
                base_ctor, base_raw, base_spans = self.raw[target]
                kwargs = list(node.kwargs) + kwargs
            elif node.func.dotted in S.CONSTRUCTORS.get(kind, {}):
                base_ctor = node.func.dotted
                args = list(node.args)
                kwargs = list(node.kwargs) + kwargs
            else:
                self._unknown_ctor(mod, kind, node.func)
                return False
        elif isinstance(node, A.Ref):
            target = self.lookup(mod, node)
            if target == oid and node.dotted in S.CONSTRUCTORS.get(kind, {}):
                target = None
            if target is None or self._kind_of(target) != kind:
                if node.dotted in S.CONSTRUCTORS.get(kind, {}):
                    base_ctor = node.dotted
                else:
                    self._unknown_ref(mod, kind, node)
                    return False
            else:
                if not self.resolve_id(target) or not self._deeper(oid, target, st_span=span):
                    return False
                base_ctor, base_raw, base_spans = self.raw[target]
        elif kind == "template" and isinstance(node, A.Literal) and isinstance(node.value, str):
            base_ctor, args = "template", [node]
        else:
            self.bag.error("E106", f"expected a {kind} constructor call, e.g. {self._example(kind)}", expr.span,
                           hint=f"{kind} constructors: {', '.join(S.constructor_names(kind)) or 'none'}")
            return False
        return self._build(oid, mod, kind, base_ctor, dict(base_raw), dict(base_spans), kwargs, args, span)

    def _deeper(self, oid: str, base: str, st_span: Span) -> bool:
        """Record ``oid`` as derived from ``base`` (``oid = base with (...)``); E103 once the chain of
        derivations is deeper than MAX_CHAIN objects, however the declarations are ordered."""
        depth = self.depth.get(base, 1) + 1
        self.depth[oid] = depth
        if depth <= MAX_CHAIN:
            return True
        if not self.chain_reported:
            self.bag.error("E103", f"definition chain deeper than {MAX_CHAIN} objects ({oid} is derived from {base}, "
                           f"{depth - 1} derivations deep)", st_span,
                           hint="define objects from constructors, or from a short chain of `with` overrides")
            self.chain_reported = True
        self.failed.add(oid)
        return False

    def _example(self, kind: str) -> str:
        names = S.constructor_names(kind)
        return f"`{names[0]}(...)`" if names else "`...`"

    def _unknown_ctor(self, mod: LoadedModule, kind: str, ref: A.Ref) -> None:
        cands = S.constructor_names(kind) + self.names_of_kind(mod, kind)
        target = self.lookup(mod, ref)
        if target is not None:
            msg = f"'{ref.dotted}' is a {self._kind_of(target)}, not a {kind} constructor"
        else:
            msg = f"unknown {kind} constructor '{ref.dotted}'"
        hint = did_you_mean(ref.dotted, cands, f"{kind} constructors and {kind}s")
        if target is None and "." not in ref.dotted and kind in REGISTRY.kinds:
            hint = _with_plugin_note(hint, kind, ref.dotted, cands)
        self.bag.error("E107", msg, ref.span, hint=hint)

    def _unknown_ref(self, mod: LoadedModule, kind: str, ref: A.Ref) -> None:
        target = self.lookup(mod, ref)
        if target is not None:
            self.bag.error("E108", f"'{ref.dotted}' is a {self._kind_of(target)}, expected a {kind}", ref.span,
                           hint=did_you_mean(ref.dotted, self.names_of_kind(mod, kind), f"{kind}s"))
        else:
            self.bag.error("E109", f"unknown {kind} '{ref.dotted}'", ref.span,
                           hint=did_you_mean(ref.dotted, self.names_of_kind(mod, kind), f"{kind}s"))

    # -------------------------------------------------------------- parameters
    def _build(self, oid: str, mod: LoadedModule, kind: str, ctor: str, raw: dict[str, Any], spans: dict[str, Span],
               kwargs: list[A.Kwarg], args: list[A.Expr], span: Span) -> bool:
        cls = S.CONSTRUCTORS[kind][ctor]
        ok = True
        positional = list(cls.POSITIONAL)
        if len(args) > len(positional):
            extra = args[len(positional)]
            self.bag.error("E114", f"{ctor}() takes {len(positional)} positional argument(s), got {len(args)}", extra.span,
                           hint=f"name the parameters: {', '.join(S.describe_params(cls))}")
            ok = False
        named: list[tuple[str, A.Expr, Span]] = [(positional[i], a, a.span) for i, a in enumerate(args[: len(positional)])]
        named += [(k.name, k.value, k.span) for k in kwargs]
        seen: set[str] = set()
        fallback: tuple[LoadedModule, A.Expr, Span] | None = None  # built last: it inherits from the others
        for name, expr, nspan in named:
            if name in seen:
                self.bag.error("E115", f"parameter '{name}' given twice", nspan,
                               hint=f"keep one '{name}' (a repeated value would silently replace the first)")
                ok = False
                continue
            seen.add(name)
            field_name = self._field_name(cls, name)
            if field_name is None:
                hint = did_you_mean(name, S.describe_params(cls), "parameters")
                if name == "top_k" and "sample_top_k" in cls.model_fields:
                    hint = "the sampling top-k is 'sample_top_k' ('top_k' is the logprob window of token protocols)"
                self.bag.error("E120", f"unknown parameter '{name}' for {ctor}()", nspan, hint=hint)
                ok = False
                continue
            if kind == "dataset" and field_name == "fallback":
                fallback = (mod, expr, nspan)
                continue
            val = self._param_value(oid, mod, cls, field_name, expr)
            if val is _FAIL:
                ok = False
                continue
            if isinstance(val, bool) and not _accepts_bool(cls.model_fields[field_name].annotation):
                self.bag.error("E123", f"invalid value for '{name}' of {ctor}(): expected "
                               f"{_type_name(cls.model_fields[field_name].annotation)}, got {str(val).lower()}", nspan,
                               hint="true/false are only accepted by on/off parameters")
                ok = False
                continue
            raw[name] = val
            spans[name] = nspan
        if not ok:
            return False
        if fallback is None and raw.get("fallback") in self.fallbacks:  # derived with `with`: rebuilt for its own sampling
            fmod, fexpr = self.fallbacks[raw["fallback"]]
            fallback = (fmod, fexpr, spans["fallback"])
        if fallback is not None:
            fmod, fexpr, fspan = fallback
            base = fallback_base(fexpr, raw, spans, self.bag)
            fid = fallback_id(oid)
            if base is None or not self._build(fid, fmod, "dataset", base[0], base[1], base[2], list(fexpr.kwargs),
                                               list(fexpr.args), fexpr.span):
                return False
            self.fallbacks[fid] = (fmod, fexpr)
            raw["fallback"], spans["fallback"] = fid, fspan
        try:
            value = cls.model_validate(raw)
        except ValidationError as e:
            self._validation_diags(e, cls, ctor, spans, span)
            return False
        self.raw[oid] = (ctor, raw, spans)
        self.spec.objects[oid] = Resolved(oid, kind, ctor, value, span, tuple(spans.items()))
        return True

    @staticmethod
    def _field_name(cls: type[S.Obj], name: str) -> str | None:
        for fname, f in cls.model_fields.items():
            if name == fname or name == f.alias:
                return fname
        return None

    def _param_value(self, oid: str, mod: LoadedModule, cls: type[S.Obj], fname: str, expr: A.Expr) -> Any:
        ref_kind = cls.REFS.get(fname)
        if isinstance(expr, A.ListExpr):
            vals = [self._one_value(f"{oid}.{fname}[{i}]", mod, ref_kind, item) for i, item in enumerate(expr.items)]
            if ref_kind == "metric" and cls in (S.Audit, S.Contrast):  # both list per-cell metrics
                vals = [self._cell_metric(v, item.span, cls) for v, item in zip(vals, expr.items)]
            return _FAIL if any(v is _FAIL for v in vals) else vals  # every item checked: all errors reported
        value = self._one_value(f"{oid}.{fname}", mod, ref_kind, expr)
        if ref_kind == "metric" and fname == "metric" and issubclass(cls, S._Compare):
            value = self._cell_metric(value, expr.span, cls)  # spread/aligned/...: a metric of each cell
        return value

    def _one_value(self, inline_id: str, mod: LoadedModule, ref_kind: str | None, expr: A.Expr) -> Any:
        if ref_kind is None:
            return self._plain(mod, expr)
        if ref_kind == "metric":
            m = self._metric_expr(mod, expr, inline_id)
            if m is None:
                return _FAIL
            self.spec.metrics.setdefault(inline_id, m)
            return inline_id
        if ref_kind in ("bootstrap",) and isinstance(expr, A.Call) and expr.func.dotted == "bootstrap":
            return inline_id if self._build(inline_id, mod, "bootstrap", "bootstrap", {}, {}, list(expr.kwargs), list(expr.args), expr.span) else _FAIL
        if isinstance(expr, A.ListExpr) and ref_kind == "model":  # pairs = [[a, b], ...]
            out = []
            for i, it in enumerate(expr.items):
                v = self._one_value(f"{inline_id}[{i}]", mod, ref_kind, it)
                if v is _FAIL:
                    return _FAIL
                out.append(v)
            return out
        if isinstance(expr, A.Ref):
            target = self.lookup(mod, expr)
            if target is not None and self._kind_of(target) == ref_kind:
                return target if self.resolve_id(target) else _FAIL
            if expr.dotted in S.CONSTRUCTORS.get(ref_kind, {}):
                # A bare constructor name (``regex_reparse``) is one shared default object named after it.
                if expr.dotted in self.spec.objects:
                    return expr.dotted
                return expr.dotted if self._eval_object(expr.dotted, mod, ref_kind, expr, expr.span) else _FAIL
            self._unknown_ref(mod, ref_kind, expr)
            return _FAIL
        if isinstance(expr, (A.Call, A.Override)) or (ref_kind == "template" and isinstance(expr, A.Literal) and isinstance(expr.value, str)):
            return inline_id if self._eval_object(inline_id, mod, ref_kind, expr, expr.span) else _FAIL
        self.bag.error("E116", f"expected a {ref_kind} (a name or a constructor call)", expr.span,
                       hint=did_you_mean("", self.names_of_kind(mod, ref_kind), f"{ref_kind}s"))
        return _FAIL

    def _plain(self, mod: LoadedModule, expr: A.Expr) -> Any:
        if isinstance(expr, A.Literal):
            return expr.value
        if isinstance(expr, A.Ref):
            return expr.dotted
        if isinstance(expr, A.ListExpr):
            vals = [self._plain(mod, x) for x in expr.items]
            return _FAIL if any(v is _FAIL for v in vals) else vals
        self.bag.error("E117", "a constructor call is not allowed here; expected a value", expr.span,
                       hint="values are strings, numbers, true/false, names or lists")
        return _FAIL

    def _validation_diags(self, e: ValidationError, cls: type[S.Obj], ctor: str, spans: dict[str, Span], span: Span) -> None:
        for err in e.errors():
            loc = err.get("loc") or ()
            pname = str(loc[0]) if loc else None
            alias_map = {f: (fi.alias or f) for f, fi in cls.model_fields.items()}
            shown = alias_map.get(pname, pname) if pname else None
            where = spans.get(shown or "", span)
            typ = err.get("type", "")
            if typ == "missing":
                self.bag.error("E121", f"{ctor}() is missing the required parameter '{shown}'", span,
                               hint=f"parameters: {', '.join(S.describe_params(cls))}")
            elif typ == "literal_error":
                allowed = err.get("ctx", {}).get("expected", "")
                got = err.get("input")
                choices = [c.strip().strip("'") for c in str(allowed).replace(" or ", ",").split(",") if c.strip()]
                hint = did_you_mean(str(got), choices, "values")
                self.bag.error("E122", f"invalid value {got!r} for '{shown}' of {ctor}()", where, hint=hint)
            elif typ == "extra_forbidden":
                self.bag.error("E120", f"unknown parameter '{shown}' for {ctor}()", where,
                               hint=did_you_mean(str(shown), S.describe_params(cls), "parameters"))
            elif typ == "value_error":  # a field validator's own sentence (schema.VALUE_HINTS: an example)
                why = str(err.get("ctx", {}).get("error") or err.get("msg"))
                self.bag.error("E123", f"invalid value for '{shown}' of {ctor}(): {why}", where, hint=S.VALUE_HINTS.get(shown or ""))
            else:
                hint = None
                if typ == "list_type":  # a bare value where a list is expected: wrong_from=m2
                    got = err.get("input")
                    shown_got = got if isinstance(got, str) else repr(got)
                    hint = f"'{shown}' takes a list; write {shown}=[{shown_got}]"
                if hint is None and typ in ("less_than_equal", "less_than"):  # over a bound of schema.MAX_*
                    hint = S.VALUE_HINTS.get(shown or "")
                if hint is None and pname in cls.model_fields:
                    hint = f"'{shown}' takes {_type_name(cls.model_fields[pname].annotation)}"
                self.bag.error("E123", f"invalid value for '{shown}' of {ctor}(): {err.get('msg')}", where, hint=hint)

    # -------------------------------------------------------------- metrics
    def _cell_metric(self, mid: Any, span: Span, cls: type = S.Audit) -> Any:
        """``mid`` if its metric is computed per cell (an audit's ``metrics = [...]`` are columns of
        metrics/cells.csv; a comparison's ``metric``/``metrics`` are computed on each cell it compares),
        else E134 naming the level it is computed at and the comparison that shows it."""
        if mid is _FAIL or mid not in self.spec.metrics:
            return mid
        ref = self.spec.metrics[mid]
        m = _metric_registry().get(ref.name)
        level = getattr(m, "level", CELL)
        if m is None or level == CELL:
            return mid
        by = getattr(m, "shown_by", None)
        hint = (f"remove it from the audit's metrics; a `compare NAME = {by}(AUDIT, ...)` computes it and the report "
                f"shows it (docs/metrics.md)" if by else "remove it from the audit's metrics: they are per-cell metrics")
        where = ("an audit's metrics are the columns of metrics/cells.csv" if cls is S.Audit else
                 f"{cls.__name__.lower()}() computes its metrics on each cell it compares")
        if cls is not S.Audit:
            hint = (f"use a per-cell metric here (accuracy, ece, brier, ...); a `compare NAME = {by}(AUDIT, ...)` "
                    f"computes '{ref.name}' (docs/metrics.md)" if by else "use a per-cell metric here (accuracy, ece, brier, ...)")
        self.bag.error("E134", f"metric '{ref.name}' is computed per {level}, not per cell: {where}", span, hint=hint)
        return _FAIL

    def _metric_expr(self, mod: LoadedModule, expr: A.Expr, oid: str) -> MetricRef | None:
        if isinstance(expr, A.Ref):
            target = self.lookup(mod, expr)
            if target is not None and self._kind_of(target) == "metric":
                return self.spec.metrics[target] if self.resolve_id(target) else None
            name, kwargs = expr.dotted, ()
        elif isinstance(expr, A.Call):
            name, kwargs = expr.func.dotted, expr.kwargs
            if expr.args:
                self.bag.error("E114", "metric parameters must be named", expr.args[0].span, hint=f"e.g. {name}(bins=10)")
                return None
        else:
            self.bag.error("E116", "expected a metric, e.g. ece(bins=10)", expr.span,
                           hint="a metric is a name (accuracy, brier) or a call with named parameters (docs/metrics.md)")
            return None
        reg = _metric_registry()
        if name not in reg:
            hint = did_you_mean(name, reg, "metrics")
            self.bag.error("E130", f"unknown metric '{name}'", expr.span,
                           hint=_with_plugin_note(hint, "metric", name, reg))
            return None
        params: dict[str, Any] = {}
        spans: dict[str, Span] = {}
        for k in kwargs:
            v = self._plain(mod, k.value)
            if v is _FAIL:
                return None
            params[k.name] = v
            spans[k.name] = k.span

        try:
            validate_params(name, params)
        except ValueError as e:
            msg = str(e)
            bad = next((p for p in params if f" {p} " in msg or f"{p!r}" in msg or f"parameter {p}" in msg), None)
            schema = reg[name].schema
            allowed = [f.alias or n for n, f in schema.model_fields.items()]
            choices = literal_values(schema, bad) if bad in schema.model_fields else None
            if bad and bad not in allowed:
                hint = did_you_mean(bad, allowed, "parameters")
            elif choices:
                hint = did_you_mean(str(params[bad]), [str(c) for c in choices], "values")
            else:
                hint = f"parameters of {name}: {', '.join(allowed) or 'none'}"
            self.bag.error("E131", msg, spans.get(bad or "", expr.span), hint=hint)
            return None
        return MetricRef(name, tuple(sorted(params.items())))

    # -------------------------------------------------------------- report
    def report(self, mod: LoadedModule) -> None:
        for st in mod.ast.statements:
            if not isinstance(st, A.Report):
                continue
            for out in st.outputs:
                if isinstance(out, A.Ref):
                    name, params = out.dotted, {}
                elif isinstance(out, A.Call):
                    name = out.func.dotted
                    params = {k.name: self._plain(mod, k.value) for k in out.kwargs}
                else:
                    self.bag.error("E140", "expected a report output name", out.span, hint=f"available: {', '.join(S.REPORT_OUTPUTS)}")
                    continue
                if name not in S.REPORT_OUTPUTS:
                    self.bag.error("E140", f"unknown report output '{name}'", out.span, hint=did_you_mean(name, S.REPORT_OUTPUTS, "outputs"))
                    continue
                unknown = [k for k in (out.kwargs if isinstance(out, A.Call) else []) if k.name != "format"]
                if unknown or (isinstance(out, A.Call) and out.args):
                    bad = unknown[0] if unknown else None
                    self.bag.error("E120", f"unknown parameter '{bad.name}' for report output {name}" if bad else
                                   f"report output {name} takes no positional arguments", bad.span if bad else out.span,
                                   hint=(did_you_mean(bad.name, ["format"], "parameters") if bad else None)
                                   or "a report output takes one parameter: format=latex, markdown or both")
                    continue
                fmt = params.get("format")
                if fmt is not None and fmt not in ("latex", "markdown", "both"):
                    self.bag.error("E141", f"unknown format '{fmt}' for {name}", out.span, hint="formats: latex, markdown, both")
                    continue
                self.spec.report.append((name, params))


def _apply_swaps(r: _Resolver, top: LoadedModule, swaps: dict[str, str]) -> None:
    """``--swap-model NAME=EXPR``: the declaration of model NAME (a name of the entry spec, or
    ``ns.name`` of an import) is replaced by ``model NAME = EXPR`` before resolution, so every
    use of NAME (audits, judges) gets the swapped model. Unknown names are usage errors."""
    models = r.names_of_kind(top, "model")
    for name, expr in swaps.items():
        oid = r.lookup(top, A.Ref(tuple(name.split(".")), None)) if name else None
        if oid is None or r._kind_of(oid) != "model":
            raise UsageError(f"--swap-model: the spec declares no model '{name}'",
                             hint=did_you_mean(name, models, "models") or f"models: {', '.join(models) or 'none'}")
        mod, _ = r.decls[oid]
        parsed = parse_text(f"model {name.split('.')[-1]} = {expr}\n", f"--swap-model {name}")
        decl = next(st for st in parsed.statements if isinstance(st, A.Decl))
        r.decls[oid] = (mod, decl)


def _add_evaluators(r: _Resolver, top: LoadedModule, evaluators: dict[str, str]) -> None:
    """``auditc rescore --evaluator [LABEL=]EXPR``: each expression becomes the declaration
    ``evaluator LABEL = EXPR`` of the entry spec, resolved like any other (its diagnostics quote
    the expression as given, in a source named ``--evaluator``)."""
    scope = r.scopes[top.path]
    for label, expr in evaluators.items():
        if label in scope:
            raise UsageError(f"--evaluator {label}={expr}: the spec already declares '{label}'",
                             hint="choose another LABEL for the rescore (LABEL=EXPR), or pass the spec's name alone")
        parsed = parse_text(f"evaluator {label} = {expr}\n", "--evaluator")
        decl = next(st for st in parsed.statements if isinstance(st, A.Decl))
        oid = f"{top.key}.{label}" if top.key else label
        scope[label] = oid
        r.decls[oid] = (top, decl)


def compile_spec(path: str | Path, text: str | None = None, swaps: dict[str, str] | None = None,
                 max_import_chars: int | None = None, *, confine_models: bool = True,
                 evaluators: dict[str, str] | None = None, model_args: list[ModelArg] | None = None) -> Spec:
    """Parse, load imports, resolve and validate. Raises :class:`CompileError` with all diagnostics.

    ``text``: compile this source instead of reading ``path`` (an editor buffer, a notebook
    string); ``path`` still names it in diagnostics and anchors relative imports and data paths.
    ``swaps``: model name -> model expression in spec syntax (``auditc run --swap-model``).
    ``confine_models=False``: a run directory's stored spec read back (``api.load_run``), whose
    local checkpoints were confined when it ran and are not read again (no model is loaded).
    ``max_import_chars``: imported files larger than this are an E111 instead of being parsed (editors).
    ``evaluators``: label -> evaluator expression declared as ``evaluator LABEL = EXPR`` in the
    entry spec (``auditc rescore``).
    ``model_args``: option overrides of declared models (``-M``, ``--model-args``;
    :mod:`auditlang.resolve.overrides`), applied after the swaps; ``spec.model_overrides`` then
    says what each changed (old and new resolved value).
    """
    entry = Path(path)
    bag = DiagnosticBag()
    if text is None and not entry.is_file():
        what = "is a directory, not a spec file" if entry.is_dir() else "not found"
        bag.error("E100", f"spec file {what}: {entry}", None,
                  hint=did_you_mean(entry.name, [p.name for p in entry.parent.glob('*.audit')] if entry.parent.exists() else [], "specs here"))
        raise CompileError(bag)
    top, hashes = load_modules(entry, bag, text, max_import_chars)
    spec = Spec(entry=entry.resolve(), root=project_root(entry.resolve()), files=hashes, entry_text=text)
    r = _Resolver(top, bag, spec)
    if swaps and top is not None:
        _apply_swaps(r, top, swaps)
        spec.model_swaps = dict(swaps)
    applied: list = []
    before = dict(r.decls)
    if model_args and top is not None:
        applied = apply_model_args(r, top, list(model_args), bag)
        spec.model_args = [a.to_json() for a in model_args]
    if evaluators and top is not None:
        _add_evaluators(r, top, evaluators)
    r.resolve_all()
    r.report(top)

    check_spec(spec, bag, confine_models)
    bag.raise_if_errors()
    spec.warnings = bag.warnings
    if applied:
        spec.model_overrides = _override_records(top, spec, before, applied)
    return spec


def _override_records(top: LoadedModule, spec: Spec, before: dict, applied: list) -> list[dict[str, str]]:
    """What each command-line option override changed: the model's option resolved without the
    overrides (a second resolver over the declarations as they were) and with them."""
    old = _Resolver(top, DiagnosticBag(), Spec(entry=spec.entry, root=spec.root))
    old.decls = before
    out: list[dict[str, str]] = []
    for oid, key, arg in applied:
        was = getattr(old.spec.get(oid).value, key, None) if old.resolve_id(oid) else None
        rec = {"model": oid, "key": key, "from": shown_value(was),
               "to": shown_value(getattr(spec.get(oid).value, key, None)), "arg": arg.shown}
        out = [o for o in out if (o["model"], o["key"]) != (oid, key)] + [rec]  # the last one set wins
    return out


def _accepts_bool(annotation: Any) -> bool:
    """Whether a field's type admits true/false (pydantic would turn ``true`` into 1 for an int)."""
    if annotation is bool or annotation is Any:
        return True
    return any(_accepts_bool(a) for a in typing.get_args(annotation))


def _type_name(annotation: Any) -> str:
    """A field type as a user reads it: 'an integer', 'a number', 'a list', ..."""
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
    if annotation in names:
        return names[annotation]
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return "one of " + ", ".join(str(a) for a in args)
    if origin in (list, tuple):
        return "a list"
    if args:
        return " or ".join(dict.fromkeys(_type_name(a) for a in args))
    return getattr(annotation, "__name__", str(annotation))


def _with_plugin_note(hint: str | None, kind: str, name: str, candidates) -> str | None:
    """A did-you-mean hint for an unknown component name, followed by what a missing plugin means
    unless the name is a plain typo of a known one (similarity 0.8 or more)."""
    if difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.8):
        return hint
    note = missing_plugin_note(kind, name)
    if not hint:
        return note
    return f"{hint} Or {note}" if hint.endswith("?") else f"{hint}; {note}"
