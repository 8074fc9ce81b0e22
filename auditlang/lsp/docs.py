"""What the editor shows about a name: constructor, parameter, metric and keyword docs (Markdown).

Everything comes from the compiler's own tables: the constructor schemas
(:mod:`auditlang.resolve.schema`: ``DOC``, field types, defaults and the comment written beside
each field), the metric registry (:mod:`auditlang.metrics.registry`) and, when the repository's
``docs/`` folder is present, the first paragraph of the section that documents a constructor.
"""

from __future__ import annotations

import inspect
import json
import re
import typing
import types
from functools import lru_cache
from pathlib import Path
from typing import Any

from auditlang.core.registry import REGISTRY
from auditlang.resolve import schema as S
from auditlang.metrics.registry import METRICS

DOCS_DIR = Path(__file__).resolve().parents[2] / "docs"

KIND_DOCS = {
    "dataset": "A dataset: a JSON-lines or CSV file, or a Hugging Face Hub split.",
    "model": "A model and the engine that serves it.",
    "template": "A Jinja2 prompt template (inline text or a stdlib/project file).",
    "variant": "A prompt variant: templates per task type, few-shot examples, perturbations.",
    "perturbation": "A study-004 input perturbation applied to the question.",
    "protocol": "A confidence protocol: how a confidence is elicited and read out.",
    "evaluator": "An evaluator: turns a generation into a label and a correctness.",
    "metric": "A metric with its parameters, e.g. `ece(bins=10, binning=equal_width)`.",
    "audit": "A crossed design: every model x dataset x variant x protocol x evaluator is a cell.",
    "compare": "A comparison across the cells of an audit (spreads, gaps, robustness, ...).",
    "settings": "Global settings: seed, data_root, vpr_threshold.",
    "import": "`import \"stdlib/NAME\"` or `import \"path\" as NS`: names become `NS.name`.",
    "report": "`report checklist, disclosure(format=latex), ...`: the outputs of a run.",
}

# Block kinds whose fields are the parameters of one schema.
BLOCK_SCHEMAS: dict[str, type[S.Obj]] = {"audit": S.Audit, "settings": S.Settings}


def ctor_class(kind: str | None, name: str) -> type[S.Obj] | None:
    """The schema of constructor ``name`` for ``kind`` (any kind when ``kind`` is None)."""
    if kind in BLOCK_SCHEMAS and name == kind:
        return BLOCK_SCHEMAS[kind]
    kinds = [kind] if kind else list(S.CONSTRUCTORS)
    for k in kinds:
        cls = S.CONSTRUCTORS.get(k or "", {}).get(name)
        if cls is not None:
            return cls
    return None


def metrics() -> dict[str, Any]:

    return METRICS


def type_str(ann: Any) -> str:
    """``Literal['raw', 'label_set'] | None`` -> ``raw | label_set | none``."""
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Literal:
        return " | ".join(str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_str(a) for a in args)
    if origin is list:
        return f"list[{type_str(args[0])}]" if args else "list"
    if ann is type(None):
        return "none"
    return getattr(ann, "__name__", str(ann))


def literal_choices(ann: Any) -> list[str]:
    """The allowed bare names of a Literal-typed parameter (also inside ``| None`` and lists)."""
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Literal:
        return [str(a) for a in args]
    out: list[str] = []
    for a in args:
        out += literal_choices(a)
    return out


def is_bool(ann: Any) -> bool:
    return ann is bool or bool in typing.get_args(ann)


@lru_cache(maxsize=None)
def field_comments(cls: type[S.Obj]) -> dict[str, str]:
    """Parameter name -> the comment written beside (or just above) its declaration in schema.py."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not (isinstance(klass, type) and issubclass(klass, S.Obj)) or klass is S.Obj:
            continue
        try:
            lines = inspect.getsourcelines(klass)[0]
        except (OSError, TypeError):
            continue
        above: list[str] = []
        for ln in lines[1:]:
            s = ln.strip()
            if s.startswith("#"):
                above.append(s.lstrip("# ").rstrip())
                continue
            m = re.match(r"\s+([A-Za-z_]\w*)\s*:\s*[^=]+(?:=.*?)?(?:#\s*(.*))?$", ln.rstrip("\n"))
            if m and m.group(1).isidentifier() and not m.group(1).isupper():
                note = " ".join(above + ([m.group(2).strip()] if m.group(2) else []))
                if note:
                    out[m.group(1)] = note
            above = []
    return out


def params(cls: type[S.Obj]) -> dict[str, Any]:
    """Spec-level parameter name -> pydantic FieldInfo."""
    return {(f.alias or n): f for n, f in cls.model_fields.items()}


def _default(f) -> str:
    if f.is_required():
        return "required"
    d = f.default
    if d is None:
        return "default none"
    if isinstance(d, bool):
        return f"default {'true' if d else 'false'}"
    if isinstance(d, str):
        return f'default "{d}"' if not d.isidentifier() else f"default {d}"
    return f"default {d!r}"


def param_doc(cls: type[S.Obj], name: str) -> str | None:
    f = params(cls).get(name)
    if f is None:
        return None
    note = f.description or field_comments(cls).get(name, "")
    ref = cls.REFS.get(name)
    lines = [f"**{name}**: `{type_str(f.annotation)}` ({_default(f)})"]
    if name in cls.INLINE:
        lines.append(f"takes {cls.INLINE[name]}")
    elif ref:
        lines.append(f"refers to a declared {ref}")
    if note:
        lines.append(note)
    return "\n\n".join(lines)


def signature(ctor: str, cls: type[S.Obj]) -> str:
    ps = []
    pos = [cls.model_fields[n].alias or n for n in cls.POSITIONAL if n in cls.model_fields]
    items = sorted(params(cls).items(), key=lambda kv: (
        kv[0] not in pos, pos.index(kv[0]) if kv[0] in pos else 0, not kv[1].is_required()))
    for name, f in items:
        ps.append(name if f.is_required() else f"{name}={_default(f).removeprefix('default ')}")
    return f"{ctor}(" + ", ".join(ps) + ")"


@lru_cache(maxsize=None)
def _doc_sections() -> list[tuple[str, str, str]]:
    """(file name, heading, first paragraph) for every heading of docs/*.md."""
    out = []
    if not DOCS_DIR.is_dir():
        return out
    for p in sorted(DOCS_DIR.glob("*.md")):
        lines = p.read_text(encoding="utf-8").splitlines()
        for i, ln in enumerate(lines):
            if ln.startswith("#"):
                para: list[str] = []
                for nxt in lines[i + 1:]:
                    if nxt.startswith("#") or (not nxt.strip() and para):
                        break
                    if nxt.strip() and not nxt.startswith(("|", "```")):
                        para.append(nxt.strip())
                    elif nxt.startswith(("|", "```")) and not para:
                        break
                out.append((p.name, ln.lstrip("# ").strip(), " ".join(para)))
    return out


def docs_section(name: str) -> tuple[str, str, str] | None:
    """The first docs/ section whose heading names ``name`` in backticks."""
    pat = re.compile(r"`[^`]*\b" + re.escape(name) + r"\b[^`]*`")
    for fname, heading, para in _doc_sections():
        if pat.search(heading):
            return fname, heading, para
    return None


def ctor_doc(kind: str | None, ctor: str) -> str | None:
    cls = ctor_class(kind, ctor)
    if cls is None:
        return None
    doc = cls.DOC or (cls.__doc__ or "").strip()
    out = [f"```audit\n{signature(ctor, cls)}\n```", doc]
    sec = docs_section(ctor)
    if sec and sec[2]:
        out.append(f"{sec[2][:600]}\n\n*docs/{sec[0]}: {sec[1]}*")
    return "\n\n".join(x for x in out if x)


def metric_doc(name: str) -> str | None:
    m = metrics().get(name)
    if m is None:
        return None
    lines = [f"```audit\n{signature(name, m.schema)}\n```", m.doc or "", f"inputs: {m.inputs}"]
    lines += [f"- {param_doc(m.schema, p)}".replace("\n\n", ": ", 1).replace("\n\n", "; ") for p in params(m.schema)]
    return "\n\n".join(x for x in lines if x)


def metric_param_doc(metric: str, name: str) -> str | None:
    m = metrics().get(metric)
    return param_doc(m.schema, name) if m is not None else None


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table_default(f) -> str:
    if f.is_required():
        return "required"
    d = f.default
    if isinstance(d, str):
        return d if re.fullmatch(r"[\w+.-]+", d) else "`" + json.dumps(d).replace("|", "\\|") + "`"
    return _default(f).removeprefix("default ")


def params_summary(cls: type[S.Obj]) -> str:
    """``tail`` (150), ``occurrence`` (last; `last` \\| `first`): a docs table cell."""
    out = []
    for name, f in params(cls).items():
        choices = literal_choices(f.annotation)
        allowed = "; " + " \\| ".join(f"`{c}`" for c in choices) if len(choices) > 1 else ""
        out.append(f"`{name}` ({_table_default(f)}{allowed})")
    return ", ".join(out) or "none"


def registry_table(kind: str) -> str:
    """The docs table of a component kind (docs/evaluators.md), derived from the registry: one row
    per registered component with its parameters (its schema), its rule (``DOC``) and its
    source (the class's ``source``, or the plugin that registered it). scripts/registry_docs.py
    writes it into the docs; a test checks that the docs hold it."""
    if kind == "engine":
        return engine_options_table()
    if kind == "metric":
        return metrics_table()
    rows = ["| name | parameters (default; allowed values) | rule | source |", "|---|---|---|---|"]
    for e in REGISTRY.entries(kind):
        impl = e.load()
        source = e.meta.get("plugin") and f"plugin {e.meta['plugin']}" or getattr(impl, "source", "")
        doc = (getattr(e.schema, "DOC", "") or e.doc).strip()
        rows.append(f"| `{e.name}` | {params_summary(e.schema)} | {_cell(doc)} | {_cell(source)} |")
    return "\n".join(rows) + "\n"


def metrics_table() -> str:
    """The docs table of every metric (docs/metrics.md), from the registry: its parameters (its
    ``Params``), what it reads, where it is computed and its doc; the plugin that registered it."""
    rows = ["| metric | parameters (default; allowed values) | inputs | computed | what it is |", "|---|---|---|---|---|"]
    for name, m in metrics().items():
        entry = REGISTRY.get("metric", name)
        where = "cell (cells.csv)" if m.level == "cell" else f"{m.level}, by `{m.shown_by}`" if m.shown_by else m.level
        plugin = f" (plugin {entry.meta['plugin']})" if entry.meta.get("plugin") else ""
        rows.append(f"| `{name}` | {params_summary(m.schema)} | {_cell(m.inputs)} | {_cell(where)} | "
                    f"{_cell(m.doc)}{_cell(plugin)} |")
    return "\n".join(rows) + "\n"


def engine_options_table() -> str:
    """The docs table of every engine's options (docs/engines.md), from each engine entry's option
    model (core/engine_options.py): the option, its engine default, the spec parameter that sets
    it (if any, with the spec's default), its doc and whether it can change results (the key the
    engine's fingerprint records it under, declared on the field)."""
    rows = ["| engine | option (engine default) | spec parameter (default) | what it does | changes results |",
            "|---|---|---|---|---|"]
    for e in REGISTRY.entries("engine"):
        schema = e.schema
        if not (isinstance(schema, type) and hasattr(schema, "spec_fields")):
            continue
        spec = {opt: name for name, opt in schema.spec_params().items()}
        spec_fields, keys = schema.spec_fields(), schema.fingerprint_keys()
        for name, f in schema.model_fields.items():
            written = spec.get(name)
            sp = f"`{written}` ({_table_default(spec_fields[written][1])})" if written else "—"
            fp = f"yes: fingerprint `{keys[name]}`" if keys.get(name) else "no"
            rows.append(f"| `{e.name}` | `{name}` ({_table_default(f)}) | {sp} | {_cell(f.description or '')} | {fp} |")
    return "\n".join(rows) + "\n"
