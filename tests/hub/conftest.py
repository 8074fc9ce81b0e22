"""A Hugging Face ``datasets`` cache prepared locally, as a first online load would leave it.

``allenai/ai2_arc`` (config ARC-Challenge, split test) is built from the first rows of the public
ARC copy in ../shared/data, in ARC's Hub schema (``choices: {text, label}``, ``answerKey``), by
the same packaged parquet builder the Hub path uses, into
``HF_HOME/datasets/allenai___ai2_arc/ARC-Challenge/0.0.0/<commit>/`` (the folder is named after
the Hub commit). Tests then run with ``HF_DATASETS_OFFLINE=1``: no network is touched.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

COMMIT = "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"
N_ROWS = 60


def arc_rows(shared: Path) -> list[dict]:
    rows = []
    with (shared / "arc_challenge.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            labels = ["A", "B", "C", "D", "E"][: len(r["choices"])]
            rows.append({"id": r["id"], "question": r["question"],
                         "choices": {"text": r["choices"], "label": labels},
                         "answerKey": labels[r["answer_index"]]})
            if len(rows) == N_ROWS:
                break
    return rows


@pytest.fixture(scope="session")
def hub_cache(tmp_path_factory, shared_data) -> dict:
    datasets = pytest.importorskip("datasets")
    import pyarrow as pa
    import pyarrow.parquet as pq
    from datasets.packaged_modules.parquet.parquet import Parquet

    root = tmp_path_factory.mktemp("hf")
    rows = arc_rows(shared_data)
    src = root / "src" / "test.parquet"
    src.parent.mkdir()
    pq.write_table(pa.Table.from_pylist(rows), src)
    cache = root / "home" / "datasets"
    b = Parquet(cache_dir=str(cache), dataset_name="ai2_arc", config_name="ARC-Challenge", config_id="ARC-Challenge",
                data_files={"test": str(src)}, hash=COMMIT)
    b.download_and_prepare()
    shutil.move(str(cache / "ai2_arc"), str(cache / "allenai___ai2_arc"))  # the Hub namespace folder
    assert datasets.__version__
    return {"home": root / "home", "cache": cache, "rows": rows, "commit": COMMIT}


@pytest.fixture
def offline_hub(hub_cache, monkeypatch) -> dict:
    """HF_HOME at the prepared cache, offline (also for a `datasets` imported earlier in the session)."""
    import datasets

    monkeypatch.setenv("HF_HOME", str(hub_cache["home"]))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", hub_cache["cache"])
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    return hub_cache
