"""Resolution: AST modules (with imports) -> a validated, typed :class:`~auditlang.resolve.spec.Spec`."""

from auditlang.resolve.resolver import compile_spec  # noqa: F401
