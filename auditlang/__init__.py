"""auditlang: a declarative language and compiler for reliability audits of language models."""

__version__ = "0.1.0"
