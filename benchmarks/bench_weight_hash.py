"""Issue 36: the weights' sha256 (the engine fingerprint's ``weights_sha256``) on a local checkpoint.

A cold 8 B vLLM run spent 13.5 s after ``LLM()`` hashing 15 GB of safetensors shards one after
another (session 27). ``engines/weight_hash.py`` hashes the files on
:data:`~auditlang.engines.weight_hash.HASH_THREADS` threads (session 29), since session 30 in a child
process that the engine starts before its stack import (:class:`WeightHash`). This script measures,
on shards it writes itself (page-cached, as a checkpoint just written or just loaded is):

- ``sequential``: each shard's ``sha256_file`` in turn (the code before session 29);
- ``threaded``: ``_cached_file_sha256s`` with an empty cache, in this process;
- ``child``: ``WeightHash(...).get()`` with an empty cache (the child process, start to answer);
- ``cached``: the same call again (every later run on the same checkpoint);
- ``beside``: a simulated load of ``--load-s`` seconds (GIL released, as vLLM's forked engine core
  leaves the parent waiting) with the hash in the :class:`WeightHash` child beside it, against the
  load followed by the sequential hash.

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

from auditlang.core.hashing import sha256_file  # noqa: E402
from auditlang.engines import weight_hash as wh  # noqa: E402
from auditlang.engines.hf import ResolvedModel  # noqa: E402


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
        resolved = ResolvedModel(Path(tmp), None, "local")
        cache = Path(tmp) / "cache" / "file-sha256.json"
        for p in shards:  # page-cache them, as a just-written checkpoint is
            sha256_file(p)
        seq = _timed(lambda: [sha256_file(p) for p in shards])
        thr = _timed(lambda: wh._cached_file_sha256s(shards))
        assert wh._cached_file_sha256s(shards) == [sha256_file(p) for p in shards]
        cache.unlink()
        child = _timed(lambda: wh.WeightHash(resolved).get())
        cached = _timed(lambda: wh.WeightHash(resolved).get())
        assert wh.WeightHash(resolved).get() == wh.weights_sha256(resolved)
        cache.unlink()
        after = _timed(lambda: (time.sleep(a.load_s), [sha256_file(p) for p in shards]))

        def beside():
            load = wh.WeightHash(resolved)
            time.sleep(a.load_s)
            load.get()

        bes = _timed(beside)
    figures = {"shards": a.shards, "gb_each": a.gb, "cpus": os.cpu_count(), "hash_threads": wh.HASH_THREADS,
               "sequential_s": round(seq, 3), "threaded_s": round(thr, 3), "child_s": round(child, 3),
               "cached_s": round(cached, 5), "threaded_over_sequential": round(thr / seq, 3),
               "child_over_sequential": round(child / seq, 3), "load_s": a.load_s,
               "load_then_hash_s": round(after, 3), "load_with_hash_beside_s": round(bes, 3),
               "beside_over_after": round(bes / after, 3)}
    print(json.dumps(figures, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
