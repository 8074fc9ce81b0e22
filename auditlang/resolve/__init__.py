"""Resolution: AST modules (with imports) -> a validated, typed :class:`~auditlang.resolve.spec.Spec`."""

from pathlib import Path

from auditlang.resolve.resolver import compile_spec  # noqa: F401


def compile_source(source, path=None, model_args=None):
    """A ``Spec`` from a spec file (a ``Path``, or a string ending in ``.audit`` with no newline)
    or from a spec's text, compiled as if it were the file ``path`` (default ``./<spec>.audit``).
    ``model_args``: option overrides (``resolve/overrides.py`` ``ModelArg``s)."""
    if isinstance(source, Path) or ("\n" not in source and str(source).endswith(".audit") and path is None):
        return compile_spec(source, model_args=model_args)
    return compile_spec(path or Path.cwd() / "<spec>.audit", text=source, model_args=model_args)
