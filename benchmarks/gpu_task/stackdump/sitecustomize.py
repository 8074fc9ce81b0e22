"""Stack sampler for start-up probes (issue 22): every process started with this folder first on
PYTHONPATH and ``AL_STACKDUMP_DIR`` set writes every thread's Python stack to
``$AL_STACKDUMP_DIR/stacks-<pid>.txt`` every ``AL_STACKDUMP_EVERY`` seconds (default 2) for its
first ``AL_STACKDUMP_FOR`` seconds (default 180), forked children included (vLLM's engine core).
Each dump starts with ``== <unix time>``. A Python thread takes the samples, so C code that holds
the GIL delays them (faulthandler's C watchdog would not, but it hangs in a forked child).
Inductor's compile workers are skipped. Not used by auditlang itself. Time nothing under it: its
thread makes auditlang's scoring see a live thread and score in this process instead of forked
workers (a warm s000 run scored in 12.3 s instead of 4 s on the H200).
"""

import os
import sys
import threading
import time
import traceback


def _sample(path: str, every: float, until: float) -> None:
    me = threading.get_ident()
    with open(path, "w") as f:
        f.write(f"start {time.time():.3f} pid {os.getpid()} ppid {os.getppid()} argv {sys.argv}\n")
        while time.time() < until:
            time.sleep(every)
            names = {t.ident: t.name for t in threading.enumerate()}
            f.write(f"== {time.time():.3f}\n")
            for ident, frame in sys._current_frames().items():
                if ident != me:
                    f.write(f"-- thread {names.get(ident, ident)}\n{''.join(traceback.format_stack(frame))}")
            f.flush()


def _start() -> None:
    d = os.environ.get("AL_STACKDUMP_DIR")
    if not d or any("compile_worker" in a for a in sys.argv):
        return
    os.makedirs(d, exist_ok=True)
    every = float(os.environ.get("AL_STACKDUMP_EVERY", "2"))
    until = time.time() + float(os.environ.get("AL_STACKDUMP_FOR", "180"))
    t = threading.Thread(target=_sample, args=(os.path.join(d, f"stacks-{os.getpid()}.txt"), every, until),
                         name="al-stackdump", daemon=True)
    t.start()


_start()
os.register_at_fork(after_in_child=_start)
