"""Request execution: run a stage's requests on an engine, journaling results batch by batch."""

from auditlang.execute.executor import ExecStats, default_batch_size, execute
from auditlang.execute.progress import ExecProgress

__all__ = ["ExecProgress", "ExecStats", "default_batch_size", "execute"]
