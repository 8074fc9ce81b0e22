"""Issue 17's two-GPU measurement: one spec, the local executor on one GPU vs Ray on all GPUs.

Runs the same ``auditc run SPEC`` twice as whole commands (a fresh interpreter each, as a user
types them) and times each one's wall clock:

1. ``local``: the default executor with ``CUDA_VISIBLE_DEVICES`` set to one GPU, so the spec's
   models run one after another on that GPU;
2. ``ray``: ``--executor ray --ray-shards 1`` with every GPU visible, so a local Ray instance
   starts one worker per model, each holding one GPU, and the models run concurrently.

``--ray-shards 1`` keeps each model's requests in one unit, so a worker batches exactly the
requests the local run batches: float32 results do not depend on batch composition and the
records must be identical (compared column by column). Embedded models are converted before
either run (``--prepare``), so neither timing includes the one-time conversion.

Usage (repository root):
    python benchmarks/bench_ray_gpus.py SPEC --data-root DIR --out DIR [--limit N] [--json-out F]
        [--phase both|local|ray]
    python benchmarks/bench_ray_gpus.py --compare LOCAL/records.parquet RAY/records.parquet
Prints one JSON line: walls, ratio ray/local, per-unit seconds, identical records.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


def _auditc(args: list[str], env: dict[str, str], log: Path) -> float:
    t0 = time.perf_counter()
    with log.open("w") as fh:
        proc = subprocess.run([sys.executable, "-m", "auditlang.cli", "run", *args], env=env, stdout=fh,
                              stderr=subprocess.STDOUT, cwd=ROOT)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.stdout.write(log.read_text()[-6000:])
        raise SystemExit(f"auditc run exited {proc.returncode} ({log})")
    return wall


def _records(path: Path) -> pd.DataFrame:
    df = pd.read_parquet(path)
    return df.sort_values(["cell_id", "item_index"]).reset_index(drop=True)


def compare(a: Path, b: Path) -> dict:
    """Two records.parquet files, column by column (after sorting by cell and item)."""
    a_df, b_df = _records(a), _records(b)
    differing = [c for c in a_df.columns if c in b_df.columns and not a_df[c].equals(b_df[c])]
    return {"records": len(a_df), "identical_records": a_df.shape == b_df.shape and not differing,
            "differing_columns": differing}


def _gpus() -> list[str]:
    try:
        import torch  # lazy: a benchmark script; torch only where a GPU is asked about
    except ImportError:
        return []
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--compare"]:  # --compare LOCAL_RECORDS RAY_RECORDS: runs made on two machines
        result = compare(Path(argv[1]), Path(argv[2]))
        print(json.dumps(result, sort_keys=True))
        return 0 if result["identical_records"] else 1
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec")
    ap.add_argument("--data-root", required=True)
    ap.add_argument("--out", required=True, help="a new folder: runs land in OUT/local and OUT/ray")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--prepare", nargs="*", default=["smollm2-135m-instruct"],
                    help="embedded models to convert before timing (default: smollm2-135m-instruct)")
    ap.add_argument("--engine", help="passed to auditc run (e.g. dryrun, to check this script without a model)")
    ap.add_argument("--phase", choices=["both", "local", "ray"], default="both",
                    help="run one half only (a GPU machine's 10-minute call limit): `local` first, then `ray` "
                         "into the same OUT, which compares")
    ap.add_argument("--json-out")
    a = ap.parse_args(argv)
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=a.phase == "ray")
    from auditlang.engines.embedded import resolve_embedded

    for name in a.prepare:
        resolve_embedded(name)
    common = [a.spec, "--data-root", a.data_root, "--display", "plain"] + (["--limit", str(a.limit)] if a.limit else [])
    common += ["--engine", a.engine] if a.engine else []
    env = dict(os.environ)
    gpus = _gpus()
    local_env = {**env, "CUDA_VISIBLE_DEVICES": "0"} if gpus else env
    if a.phase != "ray":
        local = _auditc([*common, "--out", str(out / "local")], local_env, out / "local.log")
        (out / "local.wall").write_text(f"{local}\n")
        if a.phase == "local":
            print(json.dumps({"local_wall_s": round(local, 1), "gpus": gpus}))
            return 0
    local = float((out / "local.wall").read_text())
    ray = _auditc([*common, "--out", str(out / "ray"), "--executor", "ray", "--ray-shards", "1"], env, out / "ray.log")
    units = {m.group(1): float(m.group(2)) for m in re.finditer(r"\[ray\] unit (\S+) merged: .* in ([\d.]+)s",
                                                                 (out / "ray.log").read_text())}
    info = json.loads((out / "ray" / "run.json").read_text())
    result = {
        "spec": a.spec, "limit": a.limit, "gpus": gpus,
        "local_wall_s": round(local, 1), "ray_wall_s": round(ray, 1), "ratio_ray_over_local": round(ray / local, 3),
        "ray_unit_seconds": units, "executor": info.get("executor"), "executed_ray": info.get("last_run"),
    }
    if (out / "local" / "records.parquet").exists():  # else (local run on another machine): --compare later
        result.update(compare(out / "local" / "records.parquet", out / "ray" / "records.parquet"))
        identical = result["identical_records"]
    else:
        identical = True
    line = json.dumps(result, sort_keys=True)
    print(line)
    if a.json_out:
        Path(a.json_out).write_text(line + "\n")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
