"""Whether an engine option can change results is declared on its field (``option(...,
fingerprint=...)``, issue 37): every option declared to change results is recorded by its engine's
``fingerprint()`` under the declared key (results are keyed by the fingerprint, so a changed value
is a new cache key and a new line of the checklist's engine fingerprint), and no option declared
not to is. Read from the engines' source, so no model is loaded."""

from __future__ import annotations

import ast
import importlib.util

from auditlang.core.engine_options import EngineOptions
from auditlang.core.registry import REGISTRY


def _fingerprint_keys(module: str, cls: str) -> set[str]:
    """The string constants used as dict keys or subscripts in ``cls.fingerprint``."""
    path = importlib.util.find_spec(module).origin
    tree = ast.parse(open(path, encoding="utf-8").read())
    klass = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls)
    fn = next(n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == "fingerprint")
    keys: set[str] = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Dict):
            keys |= {k.value for k in n.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        elif isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
            keys.add(n.slice.value)
    return keys


def test_every_option_that_changes_results_is_in_its_engines_fingerprint() -> None:
    checked = 0
    for e in REGISTRY.entries("engine"):
        schema = e.schema
        if e.meta.get("plugin") or not (isinstance(schema, type) and issubclass(schema, EngineOptions)):
            continue
        module, cls = e.impl_path.split(":")
        recorded = _fingerprint_keys(module, cls)
        for option, key in schema.fingerprint_keys().items():
            if key is not None:
                assert key in recorded, f"{e.name} option {option!r}: declared fingerprint key {key!r} is not recorded"
            else:
                assert option not in recorded, f"{e.name} option {option!r} is declared not to change results"
            checked += 1
    assert checked >= 20  # hf, vllm and openai options


def test_an_option_must_say_whether_it_changes_results() -> None:
    import pytest

    from auditlang.core.engine_options import option

    with pytest.raises(TypeError, match="fingerprint"):
        option(1, "an option that does not say")
