#!/usr/bin/env bash
# Issue 36, session 22 (benchmarks/README.md "Issue 36, session 22"): repeated warm vLLM starts on the 7.38 B
# shape with cached bytecode (the whole image venv and the payload compiled, as a default pip install leaves
# them), GPU-path parity at 200 items, and vLLM against hf at 1.07 B / 200 items, on one H200 machine.
# Staged in an ignored folder S of the device's checkout (as session21.sh): S/new main's auditlang/, stdlib/,
# benchmarks/; S/data the five s000 datasets and SmolLM2's tokenizer files (tok/).
# After the lean payload's piece calls (lean_payload.sh; vllm_gpu.sh piece) and `bash /tmp/gpuinst/install.sh`:
#   S=.stage22 bash S/new/benchmarks/gpu_task/session22.sh STEP...
# STEP: pyc                   pyc_check.py: start-path modules without cached bytecode, per sys.path entry
#       compile               python -m compileall the payload and the image venv's whole site-packages
#       vllm:SHAPE:LIMIT:TAG  bench_vllm_gpu.py --random-init SHAPE on the s000 vLLM design (auditc run, then the
#                             plain vLLM script of the same generate work in the same process), JSON to R/TAG.json
#       hf:SHAPE:LIMIT:TAG    bench_gpu_spec.py --random-init SHAPE on the same design, hf engine, batch_size=auto
# Raw logs go to R=/tmp/s22, packed after every step into $OUT/raw.tgz.
set -uo pipefail
S=${S:-.stage22}; OUT=${OUT:-/tmp/out}; R=${R:-/tmp/s22}; mkdir -p "$OUT" "$R"
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
  AUDITLANG_CACHE=/tmp/alcache AUDITLANG_DATA_ROOT=$PWD/$S/data
B=$S/new/benchmarks
sed "s|@CKPT@|/nonexistent|; s|@DTYPE@|bfloat16|" "$B/gpu_task/s000_smollm2_vllm.audit.in" > /tmp/s000_vllm_base.audit
sed "s|dtype=float32|dtype=bfloat16|" "$B/gpu_task/s000_smollm2_auto.audit" > /tmp/s000_hf_bf16.audit
pack() { tar -czf "$OUT/raw.tgz" -C "$R" .; }
for step in "$@"; do
  echo "=== $(date -u +%H:%M:%S) $step" | tee -a "$R/all.log"
  case "$step" in
    pyc) python3 "$B/gpu_task/pyc_check.py" 2>&1 | tee "$R/pyc_check_$(date +%s).txt" | grep -E "^(pyc|dont)" ;;
    compile)
      t=$(date +%s.%N); SP=$(python3 -c "import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))")
      python3 -m compileall -q -j 16 /tmp/site "$SP" > "$R/compileall.log" 2>&1
      echo "compileall /tmp/site $SP: exit $? in $(python3 -c "import time; print(round(time.time() - $t, 1))") s" | tee -a "$R/all.log" ;;
    vllm:*)
      IFS=: read -r _ shape lim tag <<<"$step"
      python3 "$B/bench_vllm_gpu.py" /tmp/s000_vllm_base.audit --random-init "$shape" --tokenizer "$S/data/tok" \
        --data-root "$S/data" --limit "$lim" --out "/tmp/run_$tag" --json-out "$R/$tag.json" >>"$R/all.log" 2>&1
      echo "=== $(date -u +%H:%M:%S) $tag exit $?" | tee -a "$R/all.log"
      grep -E "^auditc run wall|engine ready|phase (import vllm|vllm|compile|plan|read data|store inputs|engine load)" \
        "$R/all.log" | tail -10 ;;
    hf:*)
      IFS=: read -r _ shape lim tag <<<"$step"
      python3 "$B/bench_gpu_spec.py" /tmp/s000_hf_bf16.audit --random-init "$shape" --tokenizer "$S/data/tok" \
        --data-root "$S/data" --limit "$lim" --no-plain --out "/tmp/run_$tag" --json-out "$R/$tag.json" >>"$R/all.log" 2>&1
      echo "=== $(date -u +%H:%M:%S) $tag exit $?" | tee -a "$R/all.log"
      python3 -c "import json; i=json.load(open('/tmp/run_$tag/run.json')); print('last_run', i['last_run']); print('batch_sizing', json.dumps(i.get('batch_sizing')))" \
        | tee -a "$R/all.log"; tail -5 "$R/all.log" ;;
    *) echo "unknown step $step" >&2 ;;
  esac
  pack
done
