"""The durable run store: the request journal (SQLite), shards and merge, per-example records."""

from auditlang.store.codec import fingerprint_hash
from auditlang.store.journal import JOURNAL_FILE, EngineRecord, Journal, JournalCounts, JournalError
from auditlang.store.shards import MergeConflict, MergeReport, Shard, merge_journals, shard_of, shard_requests

__all__ = [
    "JOURNAL_FILE",
    "RECORDS_SCHEMA",
    "EngineRecord",
    "ExampleRecord",
    "Journal",
    "JournalCounts",
    "JournalError",
    "MergeConflict",
    "MergeReport",
    "Shard",
    "fingerprint_hash",
    "merge_journals",
    "read_records",
    "shard_of",
    "shard_requests",
    "write_records",
]

_RECORDS = ("RECORDS_SCHEMA", "ExampleRecord", "read_records", "write_records")


def __getattr__(name: str):
    """The records names on first use (PEP 562), so the journal and the run directory's layout
    (``auditc status``, ``check``, ``plan``) load no pandas or pyarrow."""
    if name in _RECORDS:
        from auditlang.store import records  # lazy: pandas and pyarrow only for code that reads or writes records

        return getattr(records, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
