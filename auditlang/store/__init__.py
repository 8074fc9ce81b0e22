"""The durable run store: the request journal (SQLite), shards and merge, per-example records."""

from auditlang.store.codec import fingerprint_hash
from auditlang.store.journal import JOURNAL_FILE, EngineRecord, Journal, JournalCounts, JournalError
from auditlang.store.records import RECORDS_SCHEMA, ExampleRecord, read_records, write_records
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
