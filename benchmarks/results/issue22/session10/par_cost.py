import os, sys, time, resource
from pathlib import Path
from auditlang import api
from auditlang.score import stage
from auditlang.store.journal import Journal
run = api.load_run(Path('/tmp/S/fx'))
fps = run.fingerprints
mode = sys.argv[1]
with run.stdlib():
    c0 = time.process_time(); w0 = time.perf_counter(); ch0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if mode == 'serial':
        with Journal(run.run_dir) as j, j.cached_reads():
            recs = stage.score_cells(run.spec, run.plan, j, fps)
    else:
        recs = stage.score_parallel(run.spec, run.plan, run.run_dir, fps, int(mode))
    ch1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(mode, len(recs), f"wall {time.perf_counter()-w0:.2f} parent cpu {time.process_time()-c0:.2f} children cpu {ch1.ru_utime+ch1.ru_stime-ch0.ru_utime-ch0.ru_stime:.2f}", os.getloadavg())
