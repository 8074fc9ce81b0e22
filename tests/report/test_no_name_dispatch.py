"""Layer rule of issue 34: `report/` says what components declare, not what it guesses from their
names. A comparison of a constructor name (``o.ctor == "x"``, ``ctor in ("x", "y")``,
``rd.protocol_ctor(p) == "x"``, ``ctor in VERBAL_CTORS``) or a lookup keyed by one
(``WORDS.get(o.ctor)``, ``AXES[ctor]``) is name dispatch, and `report/` has none: protocols declare
their facts (``Program.facts``) and class-level roles (``verbal_parse``, ``reliability_diagram``),
constructors their report roles next to their parameters (resolve/schema.py: a comparison's
``DISCLOSES``, ``CONTRASTED``, ``contrast()``, ``CROSS_STAGE``, ``FIGURES``, ...; a protocol's
``PHRASING``, ``CALLS``, ``sampled_runs()``; a dataset's ``REMOTE``; a model's ``catalogue()``),
evaluators theirs (``GROUPS_SAMPLES``, ``PROSE``), and a comparison's outcome its ``shape``. The one
lookup by name is a component's own registry entry (``REGISTRY.get(kind, name)``), whose
declarations are what the report renders."""

from __future__ import annotations

import ast
from pathlib import Path

REPORT = Path(__file__).resolve().parents[2] / "auditlang" / "report"

# functions that render declared facts: no name dispatch at all
FACT_RENDERERS = {
    "checklist.py": ("_protocol_entries", "_run_fact_lines"), "methods.py": ("protocol_text",),
    "disclosure.py": ("applicable", "_signals"), "facts.py": None,
}


def _is_ctor(n: ast.AST) -> bool:
    return ((isinstance(n, ast.Attribute) and n.attr == "ctor") or (isinstance(n, ast.Name) and n.id == "ctor")
            or (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "protocol_ctor"))


def _is_names(n: ast.AST) -> bool:
    """A string literal, a collection of them, or a module constant (``VERBAL_CTORS``, ``A + B``)."""
    if isinstance(n, ast.Constant) and isinstance(n.value, str):
        return True
    if isinstance(n, ast.Name) and n.id.lstrip("_").isupper():
        return True
    if isinstance(n, ast.BinOp):
        return _is_names(n.left) or _is_names(n.right)
    return (isinstance(n, (ast.Tuple, ast.List, ast.Set)) and bool(n.elts)
            and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in n.elts))


def name_dispatch(tree: ast.AST) -> list[int]:
    """Line numbers of constructor-name comparisons and lookups keyed by a constructor name."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_ctor(x) for x in sides) and any(_is_names(x) for x in sides):
                out.append(node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and _is_ctor(node.args[0])):
            out.append(node.lineno)
        elif isinstance(node, ast.Subscript) and _is_ctor(node.slice):
            out.append(node.lineno)
    return out


def test_the_detector_sees_each_form_of_name_dispatch() -> None:
    src = ('if o.ctor == "token_prob": pass\nif ctor in ("verbalized", "p_true"): pass\n'
           'if rd.protocol_ctor(p) != "platt": pass\nx = WORDS.get(o.ctor, "")\ny = AXES[ctor]\n'
           'ok = o.ctor != engine\nif rd.protocol_ctor(p) in TOKEN_CTORS + VERBAL_CTORS: pass\n'
           'fn = REGISTRY.get("comparison", o.ctor).load()\n')
    assert name_dispatch(ast.parse(src)) == [1, 2, 3, 4, 5, 7]


def test_report_has_no_name_dispatch() -> None:
    found = {}
    for f in sorted(REPORT.rglob("*.py")):
        lines = name_dispatch(ast.parse(f.read_text(encoding="utf-8")))
        if lines:
            found[f.relative_to(REPORT).as_posix()] = sorted(set(lines))
    assert not found, f"name dispatch in report/ (module: lines): {found}; declare the fact on the component"


def test_fact_renderers_never_dispatch_on_a_name() -> None:
    for module, funcs in FACT_RENDERERS.items():
        tree = ast.parse((REPORT / module).read_text(encoding="utf-8"))
        if funcs is None:
            assert name_dispatch(tree) == [], module
            continue
        defs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        for fn in funcs:
            assert name_dispatch(defs[fn]) == [], f"{module}:{fn}"
    assert not hasattr(__import__("auditlang.report.disclosure", fromlist=["x"]), "AXES")
