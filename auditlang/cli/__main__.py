"""``python -m auditlang.cli``: the same as the ``auditc`` command."""

from auditlang.cli import entry

entry()
