"""The per-example results table: one row per cell x item, as Parquet plus a JSONL mirror.

Input: :class:`ExampleRecord` rows built by the scorer. Output: ``records.parquet`` (the
authoritative copy, read by metrics) and ``records.jsonl`` (the same rows, one JSON object per
line, for grep and eyeballs; NaN is written ``null``). See docs/outputs.md for the schema.

Both files are replaced atomically (written to a temporary file in the same directory, fsynced,
then renamed), so a reader never sees a half-written table. The mirror is written first and
the Parquet file last; after a crash between the two renames, rewriting brings them in line.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from auditlang.core.errors import UserError
from auditlang.store.rundir import RUN_FILE, damaged_hint, file_mode
from auditlang.store.codec import json_default

__all__ = ["RECORDS_SCHEMA", "RECORDS_SCHEMA_VERSION", "STATUSES", "ExampleRecord", "answered", "read_records",
           "write_records"]

RECORDS_SCHEMA_VERSION = 2  # 2: status and error columns (a version-1 table reads back with status "ok")
_NAN = float("nan")
# ok: every request the row reads has a result; error: one of them failed in the engine (the row
# is missing from every metric, never an incorrect answer); missing: one of them has no stored result
STATUSES = ("ok", "error", "missing")


@dataclass(frozen=True)
class ExampleRecord:
    """One scored example: what one cell's evaluator concluded about one dataset item.

    ``correct`` is 1.0 / 0.0, or NaN when correctness is unknown (e.g. unparsed answers under a
    protocol that does not count them wrong). ``confidence`` is NaN when no confidence was
    obtained. ``extras`` and ``request_ids`` are JSON object strings (a dict is accepted and
    encoded): ``extras`` holds protocol details such as ``raw_prob``, ``norm_prob``,
    ``label_coverage`` or the verbal confidence span; ``request_ids`` maps a role
    (``"answer"``, ``"confidence"``, ...) to the journal's request id.
    """

    cell_id: str
    model: str
    dataset: str
    variant: str
    protocol: str
    evaluator: str
    item_id: str
    item_index: int
    gold: str
    pred: str | None = None  # None when nothing could be parsed
    parsed: bool = False
    parse_rule: str = ""  # which parser rule matched (e.g. "answer_is", "first_letter"), "" if none
    correct: float = _NAN
    confidence: float = _NAN
    confidence_parsed: bool = False
    confidence_kind: str = ""  # e.g. "verbal", "choice_prob", "seq_prob", "p_true", "consistency"
    extras: str = "{}"
    request_ids: str = "{}"
    generation: str = ""  # the raw text the evaluator read ("" for logprob-only protocols)
    status: str = "ok"  # one of STATUSES; only "ok" rows enter metrics
    error: str = ""  # status error/missing: the first failed request's role and message

    def __post_init__(self) -> None:
        def fail(name: str, why: str) -> None:
            raise ValueError(f"ExampleRecord {self.cell_id!r} item {self.item_id!r}: {name} {why}")

        for name in ("cell_id", "model", "dataset", "variant", "protocol", "evaluator", "item_id", "gold",
                     "parse_rule", "confidence_kind", "generation", "error"):
            if not isinstance(getattr(self, name), str):
                fail(name, f"must be a str, got {type(getattr(self, name)).__name__}")
        if self.status not in STATUSES:
            fail("status", f"must be one of {STATUSES}, got {self.status!r}")
        if self.pred is not None and not isinstance(self.pred, str):
            fail("pred", f"must be a str or None, got {type(self.pred).__name__}")
        if isinstance(self.item_index, bool) or not isinstance(self.item_index, int) or self.item_index < 0:
            fail("item_index", f"must be an int >= 0, got {self.item_index!r}")
        for name in ("parsed", "confidence_parsed"):
            if not isinstance(getattr(self, name), bool):
                fail(name, f"must be a bool, got {getattr(self, name)!r}")
        correct = _as_float(self.correct, "correct", fail)
        if not (math.isnan(correct) or correct in (0.0, 1.0)):
            fail("correct", f"must be 0, 1 or NaN (unknown), got {self.correct!r}")
        object.__setattr__(self, "correct", correct)
        confidence = _as_float(self.confidence, "confidence", fail)
        if math.isinf(confidence):
            fail("confidence", "must be finite or NaN")
        object.__setattr__(self, "confidence", confidence)
        object.__setattr__(self, "extras", _json_object(self.extras, "extras", fail))
        ids = _json_object(self.request_ids, "request_ids", fail)
        if not all(isinstance(v, str) for v in json.loads(ids).values()):
            fail("request_ids", "must map each role to a request id string")
        object.__setattr__(self, "request_ids", ids)

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _FIELDS}  # every field is a scalar: no deep copy


def _as_float(value: Any, name: str, fail: Any) -> float:
    if value is None:
        return _NAN
    if isinstance(value, bool | int | float):
        return float(value)
    if hasattr(value, "item"):  # numpy scalar
        return float(value.item())
    fail(name, f"must be a number or NaN, got {type(value).__name__}")
    raise AssertionError  # unreachable: fail raises


def _json_object(value: Any, name: str, fail: Any) -> str:
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=json_default)
    if not isinstance(value, str):
        fail(name, f"must be a JSON object string or a dict, got {type(value).__name__}")
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as e:
        fail(name, f"is not valid JSON ({e})")
    if not isinstance(parsed, dict):
        fail(name, "must be a JSON object")
    return value


_ARROW_TYPES: dict[str, pa.DataType] = {
    "cell_id": pa.string(), "model": pa.string(), "dataset": pa.string(), "variant": pa.string(),
    "protocol": pa.string(), "evaluator": pa.string(), "item_id": pa.string(), "item_index": pa.int64(),
    "gold": pa.string(), "pred": pa.string(), "parsed": pa.bool_(), "parse_rule": pa.string(),
    "correct": pa.float64(), "confidence": pa.float64(), "confidence_parsed": pa.bool_(),
    "confidence_kind": pa.string(), "extras": pa.string(), "request_ids": pa.string(), "generation": pa.string(),
    "status": pa.string(), "error": pa.string(),
}
_FIELDS = [f.name for f in fields(ExampleRecord)]
assert list(_ARROW_TYPES) == _FIELDS, "RECORDS_SCHEMA must list ExampleRecord's fields in order"

RECORDS_SCHEMA = pa.schema(
    [pa.field(name, typ, nullable=(name == "pred")) for name, typ in _ARROW_TYPES.items()],
    metadata={b"auditlang.records.schema_version": str(RECORDS_SCHEMA_VERSION).encode()},
)


def _to_table(records: list[ExampleRecord]) -> pa.Table:
    columns = {name: [getattr(r, name) for r in records] for name in _FIELDS}
    return pa.Table.from_pydict(columns, schema=RECORDS_SCHEMA)


def _mirror_path(path: Path) -> Path:
    return path.with_suffix(".jsonl")


def _atomic_write(path: Path, write: Any) -> None:
    """Call ``write(tmp_path)``, fsync, rename over ``path``, fsync the directory."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, file_mode())  # mkstemp makes 0600; outputs get the umask's mode like every other file
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _jsonl_lines(records: list[ExampleRecord]) -> Iterator[str]:
    for r in records:
        row = r.to_dict()
        for name in ("correct", "confidence"):
            if math.isnan(row[name]):
                row[name] = None
        yield json.dumps(row, ensure_ascii=False) + "\n"


def write_records(path: str | Path, records: Iterable[ExampleRecord]) -> tuple[Path, Path]:
    """Write ``path`` (``*.parquet``) and its mirror ``*.jsonl`` atomically; returns both paths."""
    path = Path(path)
    if path.suffix != ".parquet":
        raise ValueError(f"records path must end in .parquet (the JSONL mirror is written beside it), got {path}")
    rows = list(records)
    for r in rows:
        if not isinstance(r, ExampleRecord):
            raise TypeError(f"write_records takes ExampleRecord rows, got {type(r).__name__}")
    table = _to_table(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    mirror = _mirror_path(path)

    def write_jsonl(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            fh.writelines(_jsonl_lines(rows))

    _atomic_write(mirror, write_jsonl)
    _atomic_write(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))
    return path, mirror


def read_records(path: str | Path) -> pd.DataFrame:
    """Read a records table (``*.parquet``, or the ``*.jsonl`` mirror) into a DataFrame.

    Both give the same frame: the columns of :class:`ExampleRecord` in order, ``correct`` and
    ``confidence`` as float64 with NaN, ``pred`` missing where nothing was parsed.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no records file at {path}")
    if path.suffix == ".parquet":
        try:
            table = pq.read_table(path)
        except (pa.ArrowException, OSError) as e:  # truncated or overwritten: say which file, and what to do
            raise UserError(f"{path} is damaged and cannot be read ({type(e).__name__}: {str(e)[:200]})",
                            hint=damaged_hint(path.parent, path.name) if (path.parent / RUN_FILE).exists()
                            else "delete it and rerun the command that wrote it (`auditc rescore` for rescore/)") from None
        version = (table.schema.metadata or {}).get(b"auditlang.records.schema_version", b"0")
        if int(version) > RECORDS_SCHEMA_VERSION:
            raise ValueError(f"{path} has records schema version {version.decode()}; upgrade auditlang to read it")
        if int(version) < 2:  # written before the status column: every row was scored as answered
            for name, value in (("status", "ok"), ("error", "")):
                if name not in table.column_names:
                    table = table.append_column(name, pa.array([value] * table.num_rows, pa.string()))
        missing = [n for n in _FIELDS if n not in table.column_names]
        if missing:
            raise ValueError(f"{path} is not an auditlang records table (missing columns {missing})")
        table = table.select(_FIELDS).cast(RECORDS_SCHEMA)
    elif path.suffix == ".jsonl":
        rows = []
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        rows.append(ExampleRecord(**json.loads(line)))
                    except (json.JSONDecodeError, TypeError, ValueError) as e:
                        raise ValueError(f"{path}:{n}: not a valid record: {e}") from e
        table = _to_table(rows)
    else:
        raise ValueError(f"records path must end in .parquet or .jsonl, got {path}")
    return table.to_pandas()


def answered(records: pd.DataFrame) -> pd.DataFrame:
    """The rows whose requests all succeeded (``status == "ok"``): the only rows metrics use.
    A frame without a ``status`` column (built by hand) is returned as is."""
    if "status" not in records.columns:
        return records
    return records[records["status"] == "ok"]
