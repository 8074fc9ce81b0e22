"""Subprocess worker for the kill -9 and concurrent-writer tests (run as a script).

usage: store_worker.py RUN_DIR N_ITEMS SLEEP BATCH [SHARD|-] [STALL_AFTER] [followups]
Executes the ARC requests of N_ITEMS items with HashEngine(sleep=SLEEP) into RUN_DIR, as shard
SHARD ("i/n") if given; the engine hangs after STALL_AFTER results if given. ``followups``: a
streaming engine that takes each answer's follow-up from its feed while it runs
(test_executor_followups.py's FeedEngine and Builder).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from store_fake_engine import HashEngine, arc_requests  # noqa: E402

from auditlang.execute import execute  # noqa: E402
from auditlang.store import Journal, Shard  # noqa: E402


def main(argv: list[str]) -> int:
    run_dir, n_items, sleep, batch = argv[0], int(argv[1]), float(argv[2]), int(argv[3])
    shard = Shard.parse(argv[4]) if len(argv) > 4 and argv[4] != "-" else None
    stall = int(argv[5]) if len(argv) > 5 else None
    with Journal(run_dir) as journal:
        if len(argv) > 6 and argv[6] == "followups":
            from test_executor_followups import Builder, FeedEngine

            engine, build = FeedEngine(sleep=sleep, stall_after=stall), Builder(journal)
        else:
            engine, build = HashEngine(sleep=sleep, stall_after=stall), None
        stats = execute(engine, arc_requests(n_items), journal, batch_size=batch, progress=False, shard=shard,
                        followups=build)
    print(stats.summary(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
