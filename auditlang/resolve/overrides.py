"""Command-line overrides of declared models' options: ``-M MODEL.KEY=VALUE`` and
``--model-args KEY=VALUE,...`` (``auditc run``, ``plan``, ``check``, ``show``; docs/cli.md).

Each argument is parsed as the keyword arguments of a ``with (...)`` override in the spec
language and merged into the model's declaration before resolution, so its keys and values are
validated exactly like the spec's own (an unknown key is E120 with a did-you-mean). Diagnostics
point into the pseudo-file ``command line``, whose lines are the override arguments as typed.
``--model-args`` applies to every model the spec's audits evaluate (their ``models`` lists; a
judge model is left alone); ``-M`` to the named model, and wins over ``--model-args``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from auditlang.core.diagnostics import CompileError, DiagnosticBag, SourceCache, Span, did_you_mean
from auditlang.core.errors import UsageError
from auditlang.resolve import schema as S
from auditlang.syntax import ast as A
from auditlang.syntax.parse import parse_text

CMDLINE = "command line"  # the pseudo-file of command-line diagnostics: one override argument per line
_PREFIX = "model _ = _ with ("  # the spec text an argument's KEY=VALUE,... is parsed in


@dataclass(frozen=True)
class ModelArg:
    """One override argument: ``flag`` ``-M`` (``text`` = ``MODEL.KEY=VALUE[,KEY=VALUE...]``) or
    ``--model-args`` (``text`` = ``KEY=VALUE[,...]``, every audited model)."""

    flag: str
    text: str

    @property
    def shown(self) -> str:
        return f"{self.flag} {self.text}"

    def to_json(self) -> dict[str, str]:
        return {"flag": self.flag, "text": self.text}

    @staticmethod
    def from_json(d: dict[str, str]) -> ModelArg:
        return ModelArg(str(d["flag"]), str(d["text"]))


def model_args(per_model: list[str] | None = None, every: list[str] | None = None) -> list[ModelArg]:
    """The override arguments in the order they apply: ``--model-args`` first, then ``-M`` (the
    more specific wins); a malformed one is a usage error before anything is compiled."""
    out = [ModelArg("--model-args", t) for t in every or []] + [ModelArg("-M", t) for t in per_model or []]
    for a in out:
        head = a.text.partition("=")[0]
        if "=" not in a.text or not head.strip() or (a.flag == "-M" and not head.rpartition(".")[0].strip()):
            form = "MODEL.KEY=VALUE" if a.flag == "-M" else "KEY=VALUE[,KEY=VALUE...]"
            raise UsageError(f"{a.shown!r}: expected {form}",
                             hint="e.g. -M smol.dtype=bfloat16 -M smol.max_tokens=64, or --model-args dtype=float32,batch_size=8 "
                                  "(values in spec syntax: strings in quotes, e.g. -M 'judge.base_url=\"http://h:8000/v1\"')")
    return out


def from_records(records) -> list[ModelArg]:
    """Override arguments as run.json records them (``model_args``)."""
    return [ModelArg.from_json(d) for d in records or []]


def _moved(node: Any, line: int, shift: int) -> Any:
    """``node`` with every span moved into line ``line`` of :data:`CMDLINE`, ``shift`` columns over."""
    if isinstance(node, Span):
        return Span(CMDLINE, line, node.col + shift, line, node.end_col + shift)
    if isinstance(node, tuple):
        return tuple(_moved(x, line, shift) for x in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return dataclasses.replace(node, **{f.name: _moved(getattr(node, f.name), line, shift)
                                            for f in dataclasses.fields(node) if f.init})
    return node


def _parse(a: ModelArg, line: int, text: str, start: int) -> list[A.Kwarg]:
    """The keyword arguments in ``text`` (which starts at 0-based column ``start`` of the shown
    argument), with spans on line ``line`` of the command line."""
    shift = start - len(_PREFIX)
    try:
        mod = parse_text(f"{_PREFIX}{text})\n", f"{CMDLINE} ({a.shown})")
    except CompileError as e:
        bag = DiagnosticBag()
        for d in e.diagnostics:
            bag.items.append(dataclasses.replace(d, span=_moved(d.span, line, shift) if d.span else None))
        raise CompileError(bag) from None
    decl = next(st for st in mod.statements if isinstance(st, A.Decl))
    return list(_moved(decl.value.kwargs, line, shift))


def _merged(value: A.Expr, kwargs: list[A.Kwarg]) -> A.Expr:
    """A model declaration's expression with ``kwargs`` set: a keyword (or positional argument)
    of the same name is replaced, any other one added."""
    names = {k.name for k in kwargs}
    if isinstance(value, A.Call):
        ctor = S.CONSTRUCTORS.get("model", {}).get(value.func.dotted)
        positional = list(getattr(ctor, "POSITIONAL", ()))
        args, rest = list(value.args), list(kwargs)
        for i, name in enumerate(positional[:len(args)]):
            hit = next((k for k in rest if k.name == name), None)
            if hit is not None:
                args[i] = hit.value
                rest.remove(hit)
        keep = [k for k in value.kwargs if k.name not in names]
        return dataclasses.replace(value, args=tuple(args), kwargs=tuple(keep + rest))
    if isinstance(value, A.Override):
        return dataclasses.replace(value, kwargs=tuple([k for k in value.kwargs if k.name not in names] + kwargs))
    return A.Override(base=value, kwargs=tuple(kwargs), span=value.span)


def audited_models(r, top) -> list[str]:
    """Object ids of the models the spec's audits evaluate (their ``models`` lists), in order."""
    out: list[str] = []
    for mod, st in list(r.decls.values()):
        if not (isinstance(st, A.Block) and st.kind == "audit"):
            continue
        for f in st.fields:
            if f.name == "models" and isinstance(f.value, A.ListExpr):
                for item in f.value.items:
                    target = r.lookup(mod, item) if isinstance(item, A.Ref) else None
                    if target is not None and r._kind_of(target) == "model" and target not in out:
                        out.append(target)
    return out


def apply_model_args(r, top, args: list[ModelArg], bag: DiagnosticBag) -> list[tuple[str, str, ModelArg]]:
    """Merge each argument into its models' declarations (in ``r.decls``); returns (model id,
    key, argument) per option set, in order. Unknown models are E109 with a did-you-mean."""
    SourceCache.put(CMDLINE, "".join(a.shown + "\n" for a in args))
    applied: list[tuple[str, str, ModelArg]] = []
    for line, a in enumerate(args, 1):
        if a.flag == "-M":
            name = a.text.partition("=")[0].rpartition(".")[0].strip()
            start = len(a.flag) + 1 + a.text.index(name) + len(name) + 1
            oid = r.lookup(top, A.Ref(tuple(name.split(".")), None))
            if oid is None or r._kind_of(oid) != "model":
                col = len(a.flag) + 2 + a.text.index(name)
                models = r.names_of_kind(top, "model")
                bag.error("E109", f"unknown model '{name}'", Span(CMDLINE, line, col, line, col + len(name)),
                          hint=did_you_mean(name, models, "models") or f"models: {', '.join(models) or 'none'}")
                continue
            targets = [oid]
        else:
            start, targets = len(a.flag) + 1, audited_models(r, top)
        kwargs = _parse(a, line, a.text[start - len(a.flag) - 1:], start)
        for oid in targets:
            mod, decl = r.decls[oid]
            r.decls[oid] = (mod, dataclasses.replace(decl, value=_merged(decl.value, kwargs)))
            applied += [(oid, k.name, a) for k in kwargs]
    return applied


def shown_value(v: Any) -> str:
    """A resolved option value as a sentence shows it."""
    if v is None:
        return "not set"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(shown_value(x) for x in v) + "]"
    return str(v)


def override_sentence(rec: dict[str, str]) -> str:
    """The sentence a run's notes and its checklist state for one recorded override, e.g.
    "model smol: dtype overridden from the command line (-M smol.dtype=bfloat16): float32 → bfloat16"."""
    return (f"model {rec['model']}: {rec['key']} overridden from the command line ({rec['arg']}): "
            f"{rec['from']} → {rec['to']}")
