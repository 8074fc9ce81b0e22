#!/usr/bin/env bash
# Issue 36, session 19 (benchmarks/README.md "Issue 36, session 19"): the warm vLLM start with the
# tokenizer beside LLM(), config.json read directly and `import vllm` on a thread while auditc plans,
# against main's code, on one H200 machine. Staged in an ignored folder S of the device's checkout:
#   S/new   this branch's auditlang/, stdlib/, benchmarks/ (the code measured)
#   S/base  main's, the same folders (`git archive`)
#   S/data  the five s000 datasets and SmolLM2's tokenizer files (tok/)
# After the lean payload's piece calls (lean_payload.sh; vllm_gpu.sh piece) and `bash /tmp/gpuinst/install.sh`:
#   S=.stage19 bash S/new/benchmarks/gpu_task/session19.sh STEP...     STEP = CODE:SHAPE:LIMIT:TAG
# Each step: bench_vllm_gpu.py --random-init SHAPE on the s000 vLLM design at --limit LIMIT with the
# CODE checkout, JSON to $OUT/TAG.json, every log line appended to $OUT/all.log.
set -uo pipefail
S=${S:-.stage19}; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
  AUDITLANG_CACHE=/tmp/alcache AUDITLANG_DATA_ROOT=$PWD/$S/data
sed "s|@CKPT@|/nonexistent|; s|@DTYPE@|bfloat16|" "$S/new/benchmarks/gpu_task/s000_smollm2_vllm.audit.in" > /tmp/s000_vllm_base.audit
for step in "$@"; do
  IFS=: read -r code shape lim tag <<<"$step"
  echo "=== $(date -u +%H:%M:%S) $tag: $code code, $shape, --limit $lim" | tee -a "$OUT/all.log"
  python3 "$S/$code/benchmarks/bench_vllm_gpu.py" /tmp/s000_vllm_base.audit --random-init "$shape" \
    --tokenizer "$S/data/tok" --data-root "$S/data" --limit "$lim" --out "/tmp/run_$tag" --json-out "$OUT/$tag.json" \
    >>"$OUT/all.log" 2>&1
  echo "=== $(date -u +%H:%M:%S) $tag exit $?" | tee -a "$OUT/all.log"
  grep -E "^auditc run wall|phase (import vllm|vllm|compile|plan|read data|store inputs)" "$OUT/all.log" | tail -12
done
