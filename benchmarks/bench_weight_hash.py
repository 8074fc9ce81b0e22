"""Issue 36: the weights' sha256 (the engine fingerprint's ``weights_sha256``) on a local checkpoint.

A cold 8 B vLLM run spent 13.5 s after ``LLM()`` hashing 15 GB of safetensors shards one after
another (session 27). ``engines/hf.py`` now hashes the shards on :data:`~auditlang.engines.hf.HASH_THREADS`
threads, on a thread of its own beside the model load. This script measures, in one process on
shards it writes itself (page-cached, as a checkpoint just written or just loaded is):

- ``sequential``: each shard's ``sha256_file`` in turn (the code before the change);
- ``threaded``: ``_cached_file_sha256s`` with an empty cache (the change, cold);
- ``cached``: the same call again (every later run on the same checkpoint);
- ``beside``: a simulated load of ``--load-s`` seconds (GIL released, as vLLM's forked engine core
  leaves the parent waiting) with the hash on a :class:`TokenizerLoad` thread beside it, against
  the load followed by the sequential hash.

Usage (from the repository root): ``python benchmarks/bench_weight_hash.py [--shards 4] [--gb 0.5]
[--load-s 2] [--json FILE]``. Figures are ratios of one run; a 2-core CPU hashes at most 2 shards at once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from auditlang.engines import hf  # noqa: E402
from auditlang.engines.embedded import sha256_file  # noqa: E402
from auditlang.engines.vllm_tokload import TokenizerLoad  # noqa: E402


def _write_shards(d: Path, n: int, gb: float) -> list[Path]:
    size, block = int(gb * 1e9), os.urandom(1 << 20)
    out = []
    for i in range(n):
        p = d / f"model-{i + 1:05d}-of-{n:05d}.safetensors"
        with p.open("wb") as f:
            for _ in range(size // len(block)):
                f.write(block)
        out.append(p)
    return out


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--gb", type=float, default=0.5, help="size of each shard")
    ap.add_argument("--load-s", type=float, default=2.0, help="the simulated model load")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["AUDITLANG_CACHE"] = str(Path(tmp) / "cache")  # an empty hash cache
        shards = _write_shards(Path(tmp), a.shards, a.gb)
        for p in shards:  # page-cache them, as a just-written checkpoint is
            sha256_file(p)
        seq = _timed(lambda: [sha256_file(p) for p in shards])
        thr = _timed(lambda: hf._cached_file_sha256s(shards))
        cached = _timed(lambda: hf._cached_file_sha256s(shards))
        assert hf._cached_file_sha256s(shards) == [sha256_file(p) for p in shards]
        (Path(tmp) / "cache" / "file-sha256.json").unlink()
        after = _timed(lambda: (time.sleep(a.load_s), [sha256_file(p) for p in shards]))

        def beside():
            load = TokenizerLoad(lambda: hf._cached_file_sha256s(shards), name="auditlang-weights-sha256", mode="now")
            time.sleep(a.load_s)
            load.get()

        bes = _timed(beside)
    figures = {"shards": a.shards, "gb_each": a.gb, "cpus": os.cpu_count(), "hash_threads": hf.HASH_THREADS,
               "sequential_s": round(seq, 3), "threaded_s": round(thr, 3), "cached_s": round(cached, 5),
               "threaded_over_sequential": round(thr / seq, 3), "load_s": a.load_s,
               "load_then_hash_s": round(after, 3), "load_with_hash_beside_s": round(bes, 3),
               "beside_over_after": round(bes / after, 3)}
    print(json.dumps(figures, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
