#!/usr/bin/env bash
# Issue 36 sessions 23-26: A/B runs at 1.07 B / 200 items of two staged commits S/old and S/new (benchmarks/README.md).
#   S=.stage23 R=/tmp/s24: writer thread af3e053 vs 182f8bc; S=.stage24 R=/tmp/s24: samples fork 40aaed2 vs af3e053;
#   S=.stage25 (R=/tmp/s25, /tmp/s25b on the second machine): the world-size-1 engine core killed at close vs ec7615d.
#   S=.stage27 R=/tmp/s27: gc.freeze around forks + finer, heaviest-first score shares (96c688a) vs 1eca2a1.
# Steps: compile; vllm:SHAPE:LIMIT:TAG:CODE (CODE = old|new under $S); two:TAG:CODE (session 26);
#   hf:SHAPE:LIMIT:TAG:CODE (session 27: the hf engine on the same design, bench_gpu_spec.py, no plain loop);
#   report:TAG:CODE:RUN (session 33: bench_phases.py -- report /tmp/run_RUN, the figures redrawn).
set -uo pipefail
S=${S:-.stage25}; OUT=${OUT:-/tmp/out}; R=${R:-/tmp/s25}; mkdir -p "$OUT" "$R"
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
  AUDITLANG_CACHE=/tmp/alcache AUDITLANG_DATA_ROOT=$PWD/$S/data
sed "s|@CKPT@|/nonexistent|; s|@DTYPE@|bfloat16|" "$S/new/benchmarks/gpu_task/s000_smollm2_vllm.audit.in" > /tmp/s000_vllm_base.audit
sed "s|dtype=float32|dtype=bfloat16|" "$S/new/benchmarks/gpu_task/s000_smollm2_auto.audit" > /tmp/s000_hf_bf16.audit
pack() { tar -czf "$OUT/raw.tgz" -C "$R" .; }
for step in "$@"; do
  echo "=== $(date -u +%H:%M:%S) $step" | tee -a "$R/all.log"
  case "$step" in
    compile)
      t=$(date +%s.%N); SP=$(python3 -c "import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))")
      python3 -m compileall -q -j 16 /tmp/site "$SP" "$S" > "$R/compileall.log" 2>&1
      echo "compileall: exit $? in $(python3 -c "import time; print(round(time.time() - $t, 1))") s" | tee -a "$R/all.log" ;;
    vllm:*)
      IFS=: read -r _ shape lim tag code <<<"$step"
      python3 "$S/$code/benchmarks/bench_vllm_gpu.py" /tmp/s000_vllm_base.audit --random-init "$shape" --tokenizer "$S/data/tok" \
        --data-root "$S/data" --limit "$lim" --out "/tmp/run_$tag" --json-out "$R/$tag.json" >"$R/$tag.log" 2>&1
      echo "=== $(date -u +%H:%M:%S) $tag exit $?" | tee -a "$R/all.log"
      grep -E "^auditc run wall|engine ready|^  phase (journal|execute|score |report )" "$R/$tag.log" | tail -8 | tee -a "$R/all.log" ;;
    hf:*)
      IFS=: read -r _ shape lim tag code <<<"$step"
      python3 "$S/$code/benchmarks/bench_gpu_spec.py" /tmp/s000_hf_bf16.audit --random-init "$shape" --tokenizer "$S/data/tok" \
        --data-root "$S/data" --limit "$lim" --no-plain --out "/tmp/run_$tag" --json-out "$R/$tag.json" >"$R/$tag.log" 2>&1
      echo "=== $(date -u +%H:%M:%S) $tag exit $?" | tee -a "$R/all.log"
      grep -E "wall|requests:|error" "$R/$tag.log" | tail -6 | tee -a "$R/all.log"
      python3 -c "import json; i=json.load(open('/tmp/run_$tag/run.json')); print('last_run', i.get('last_run')); print('batch_sizing', json.dumps(i.get('batch_sizing')))" \
        2>&1 | tee -a "$R/all.log" ;;
    two:*)  # two models of one checkpoint (the 1.07 B the vllm steps built), in turn: how long the second load waits for the first core
      IFS=: read -r _ tag code <<<"$step"
      cat > /tmp/two.audit <<'EOS'
import "stdlib/s000"
settings { seed = 42 }
dataset sst2 = jsonl("sst2.jsonl", task=classification, sample=300, seed=42)
model a = vllm("/tmp/random-init/1b-bfloat16", dtype=bfloat16, max_tokens=32, size=1.07)
model b = vllm("/tmp/random-init/1b-bfloat16", dtype=bfloat16, max_tokens=24, size=1.07)
audit main {
  models = [a, b]
  datasets = [sst2]
  variants = [s000.surface_paraphrase]
  protocols = [s000.token_norm, s000.verbal_decimal]
  evaluators = [s000.first_char]
  metrics = [accuracy]
}
report cells
EOS
      t=$(date +%s.%N)
      AUDITLANG_CACHE=/tmp/alcache_$tag PYTHONPATH=$PWD/$S/$code:/tmp/site python3 -m auditlang.cli run /tmp/two.audit \
        --data-root "$S/data" --limit 100 --out "/tmp/run_$tag" --display plain > "$R/$tag.log" 2>&1
      echo "=== $(date -u +%H:%M:%S) $tag exit $? wall $(python3 -c "import time; print(round(time.time() - $t, 1))") s" | tee -a "$R/all.log"
      grep -E "engine ready|loading the|requests:" "$R/$tag.log" | tee -a "$R/all.log" ;;
    report:*)  # session 33: `auditc report` of a stored run (/tmp/run_RUN) by CODE, figure cache removed first
      IFS=: read -r _ tag code run <<<"$step"
      rm -rf "/tmp/run_$run/report/.figures-cache"
      PYTHONPATH=$PWD/$S/$code:/tmp/site python3 "$S/$code/benchmarks/bench_phases.py" --json "$R/$tag.json" -- report "/tmp/run_$run" \
        > "$R/$tag.log" 2>&1
      echo "=== $(date -u +%H:%M:%S) $tag exit $?" | tee -a "$R/all.log"
      grep -E "^report( |: figures)|^command total" "$R/$tag.log" | tee -a "$R/all.log" ;;
  esac
  pack
done
