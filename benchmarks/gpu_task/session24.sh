#!/usr/bin/env bash
# Issue 36 sessions 23-24: A/B runs at 1.07 B / 200 items (S=.stage23: writer thread af3e053 vs 182f8bc; S=.stage24: samples fork 40aaed2 vs af3e053); steps compile, vllm:SHAPE:LIMIT:TAG:CODE (CODE = old|new under $S)
set -uo pipefail
S=${S:-.stage23}; OUT=${OUT:-/tmp/out}; R=${R:-/tmp/s24}; mkdir -p "$OUT" "$R"
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
  AUDITLANG_CACHE=/tmp/alcache AUDITLANG_DATA_ROOT=$PWD/$S/data
sed "s|@CKPT@|/nonexistent|; s|@DTYPE@|bfloat16|" "$S/new/benchmarks/gpu_task/s000_smollm2_vllm.audit.in" > /tmp/s000_vllm_base.audit
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
  esac
  pack
done
