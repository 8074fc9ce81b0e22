"""The per-example records table: schema, Parquet/JSONL round trip, validation, atomicity."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from store_fake_engine import arc_items

from auditlang.store import RECORDS_SCHEMA, ExampleRecord, read_records, write_records
from auditlang.store import records as records_mod


def _records(n: int = 40) -> list[ExampleRecord]:
    """Records for ARC items scored by a made-up evaluator (every 5th unparsed)."""
    out = []
    for i, item in enumerate(arc_items(n)):
        letters = "ABCDE"[: len(item["choices"])]
        gold = letters[item["answer_index"]]
        parsed = i % 5 != 0
        pred = letters[i % len(letters)] if parsed else None
        out.append(ExampleRecord(
            cell_id="cell.smol.arc.plain.verbal", model="smol", dataset="arc_challenge", variant="plain",
            protocol="verbal", evaluator="letter", item_id=item["id"], item_index=i, gold=gold, pred=pred,
            parsed=parsed, parse_rule="answer_is" if parsed else "", correct=float(pred == gold) if parsed else math.nan,
            confidence=(i % 10) / 10 if parsed else math.nan, confidence_parsed=parsed, confidence_kind="verbal",
            extras={"raw_prob": 0.25 * (i % 4), "span": [3, 7], "note": "ünïcode"},
            request_ids={"answer": f"r{i:020x}"}, generation=f"The answer is {pred}. Confidence: {(i % 10) * 10}%",
        ))
    return out


def test_parquet_and_jsonl_round_trip_to_the_same_frame(tmp_path: Path) -> None:
    recs = _records()
    pq_path, jsonl_path = write_records(tmp_path / "records.parquet", recs)
    assert jsonl_path == tmp_path / "records.jsonl"
    df = read_records(pq_path)
    assert list(df.columns) == [f.name for f in RECORDS_SCHEMA]
    assert len(df) == len(recs)
    pd.testing.assert_frame_equal(df, read_records(jsonl_path))
    assert df["correct"].dtype == "float64" and df["item_index"].dtype == "int64" and df["parsed"].dtype == bool
    assert df["correct"].isna().sum() == 8 and df["pred"].isna().sum() == 8
    row = df.iloc[1]
    assert row["item_id"] == recs[1].item_id and row["confidence"] == pytest.approx(0.1)
    assert json.loads(row["extras"]) == {"note": "ünïcode", "raw_prob": 0.25, "span": [3, 7]}
    assert json.loads(row["request_ids"]) == {"answer": f"r{1:020x}"}
    first = json.loads(jsonl_path.read_text(encoding="utf-8").splitlines()[0])
    assert first["correct"] is None and first["pred"] is None  # NaN -> null in the mirror
    assert pq.read_schema(pq_path).metadata[b"auditlang.records.schema_version"] == b"2"


def test_records_validate_their_fields() -> None:
    base = _records(1)[0].to_dict()
    for change, msg in [
        ({"correct": 0.5}, "correct must be 0, 1 or NaN"),
        ({"extras": "{not json"}, "extras is not valid JSON"),
        ({"extras": "[1, 2]"}, "extras must be a JSON object"),
        ({"request_ids": {"answer": 3}}, "request_ids must map each role"),
        ({"item_index": -1}, "item_index must be an int >= 0"),
        ({"parsed": 1}, "parsed must be a bool"),
        ({"gold": None}, "gold must be a str"),
        ({"confidence": math.inf}, "confidence must be finite or NaN"),
        ({"confidence": "high"}, "confidence must be a number"),
    ]:
        with pytest.raises(ValueError, match=msg):
            ExampleRecord(**{**base, **change})
    ok = ExampleRecord(**{**base, "correct": True, "confidence": None})
    assert ok.correct == 1.0 and math.isnan(ok.confidence)


def test_write_is_atomic_and_leaves_no_temp_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "out" / "records.parquet"
    write_records(path, _records(10))
    before_pq, before_jsonl = path.read_bytes(), path.with_suffix(".jsonl").read_bytes()

    def crash(*args: object, **kwargs: object) -> None:
        Path(args[1]).write_bytes(b"PAR1 half written")
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(records_mod.pq, "write_table", crash)
    with pytest.raises(OSError, match="disk full"):
        write_records(path, _records(20))
    assert path.read_bytes() == before_pq  # the old table is intact
    assert len(read_records(path)) == 10
    assert sorted(p.name for p in path.parent.iterdir()) == ["records.jsonl", "records.parquet"]
    assert before_jsonl != path.with_suffix(".jsonl").read_bytes()  # mirror went first; rewrite fixes it
    monkeypatch.undo()
    write_records(path, _records(20))
    assert len(read_records(path)) == 20 and len(read_records(path.with_suffix(".jsonl"))) == 20


def test_empty_table_and_path_errors(tmp_path: Path) -> None:
    p, _ = write_records(tmp_path / "records.parquet", [])
    df = read_records(p)
    assert len(df) == 0 and list(df.columns) == [f.name for f in RECORDS_SCHEMA]
    with pytest.raises(ValueError, match="must end in .parquet"):
        write_records(tmp_path / "records.csv", [])
    with pytest.raises(FileNotFoundError, match="no records file"):
        read_records(tmp_path / "missing.parquet")
    with pytest.raises(TypeError, match="ExampleRecord rows"):
        write_records(tmp_path / "records.parquet", [{"cell_id": "x"}])  # type: ignore[list-item]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"cell_id": "x"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="bad.jsonl:1: not a valid record"):
        read_records(bad)


def test_status_round_trips_and_a_schema_1_table_reads_as_answered(tmp_path: Path) -> None:
    """Schema 2 adds status/error (issue 22 item 3); a table written before reads back all ``ok``."""
    import dataclasses

    recs = _records(4)
    recs[1] = dataclasses.replace(recs[1], status="error", error="answer: HTTP 500", pred=None, parsed=False,
                                  correct=math.nan, confidence=math.nan, confidence_parsed=False)
    write_records(tmp_path / "records.parquet", recs)
    for path in (tmp_path / "records.parquet", tmp_path / "records.jsonl"):
        df = read_records(path)
        assert list(df["status"]) == ["ok", "error", "ok", "ok"] and df["error"].iat[1] == "answer: HTTP 500"
    assert len(records_mod.answered(df)) == 3
    with pytest.raises(ValueError, match="status"):
        dataclasses.replace(recs[0], status="failed")

    old = pq.read_table(tmp_path / "records.parquet").drop(["status", "error"])
    old = old.replace_schema_metadata({b"auditlang.records.schema_version": b"1"})
    pq.write_table(old, tmp_path / "old.parquet")
    df = read_records(tmp_path / "old.parquet")
    assert list(df.columns) == [f.name for f in RECORDS_SCHEMA] and set(df["status"]) == {"ok"} and set(df["error"]) == {""}
