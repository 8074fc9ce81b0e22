"""Shared by the Ray executor tests: a project folder with a spec and a slice of ARC."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data"


def make_project(root: Path, spec: str, rows: int = 60) -> Path:
    if not (DATA / "arc_challenge.jsonl").exists():
        pytest.skip("../shared/data is not available")
    proj = root / "proj"
    (proj / "data").mkdir(parents=True)
    lines = (DATA / "arc_challenge.jsonl").read_text(encoding="utf-8").splitlines()[:rows]
    (proj / "data" / "arc.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (proj / "audit.audit").write_text(spec, encoding="utf-8")
    return proj


def records(run_dir: Path) -> pd.DataFrame:
    df = pd.read_parquet(run_dir / "records.parquet")
    return df.sort_values(["cell_id", "item_index"]).reset_index(drop=True)


def start_ray(**env: str):
    """A local Ray cluster of 2 CPUs whose workers see ``env`` (and the model cache)."""
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'auditlang[ray]'")
    os.environ.setdefault("AUDITLANG_CACHE", str(REPO / ".cache" / "auditlang"))
    env_vars = {"AUDITLANG_CACHE": os.environ["AUDITLANG_CACHE"], "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                "OMP_NUM_THREADS": "1", **env}
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", runtime_env={"env_vars": env_vars})
    return ray
