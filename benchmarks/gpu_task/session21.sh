#!/usr/bin/env bash
# Issue 36, session 21 (benchmarks/README.md "Issue 36, session 21"): where the warm vLLM start goes, and
# this branch's engine start against main's, on one H200 machine. Staged in an ignored folder S of the
# device's checkout (as session19.sh): S/new this branch's auditlang/, stdlib/, benchmarks/; S/base main's;
# S/data the five s000 datasets and SmolLM2's tokenizer files (tok/).
# After the lean payload's piece calls (lean_payload.sh; vllm_gpu.sh piece) and `bash /tmp/gpuinst/install.sh`:
#   S=.stage21 bash S/new/benchmarks/gpu_task/session21.sh STEP...
# STEP: pyc                pyc_check.py: start-path modules without cached bytecode, per sys.path entry
#       compile            python -m compileall the payload (/tmp/site), as a default pip install does
#       profile            `-X importtime` of `import vllm` (twice) and of the engine's start path
#                          (start_profile.py --no-llm), summarised by importtime_top.py
#       llmprof:SHAPE      start_profile.py with LLM() under cProfile on the SHAPE checkpoint (built by a run
#                          step before), and vLLM's tokenizer against ours
#       CODE:SHAPE:LIMIT:TAG  bench_vllm_gpu.py --random-init SHAPE on the s000 vLLM design at --limit LIMIT
#                          with the CODE checkout (new|base), JSON to R/TAG.json
# Raw logs go to R=/tmp/s21, packed after every step into $OUT/raw.tgz (the device returns 8 files at most).
set -uo pipefail
S=${S:-.stage21}; OUT=${OUT:-/tmp/out}; R=${R:-/tmp/s21}; mkdir -p "$OUT" "$R"
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
  AUDITLANG_CACHE=/tmp/alcache AUDITLANG_DATA_ROOT=$PWD/$S/data
B=$S/new/benchmarks
sed "s|@CKPT@|/nonexistent|; s|@DTYPE@|bfloat16|" "$B/gpu_task/s000_smollm2_vllm.audit.in" > /tmp/s000_vllm_base.audit
pack() { tar -czf "$OUT/raw.tgz" -C "$R" .; }
for step in "$@"; do
  echo "=== $(date -u +%H:%M:%S) $step" | tee -a "$R/all.log"
  case "$step" in
    profile)
      for i in 1 2; do
        python3 -X importtime -c "import vllm" 2> "$R/imp_vllm_$i.log"
        python3 "$B/importtime_top.py" "$R/imp_vllm_$i.log" --json "$R/imp_vllm_$i.json" --top 40 > "$R/imp_vllm_$i.txt"
        head -22 "$R/imp_vllm_$i.txt"
      done
      python3 -X importtime "$B/gpu_task/start_profile.py" --model "$S/data/tok" --no-llm --json "$R/path_steps.json" \
        2> "$R/imp_path.log" | tee -a "$R/all.log"
      python3 "$B/importtime_top.py" "$R/imp_path.log" --json "$R/imp_path.json" --top 40 > "$R/imp_path.txt"
      head -30 "$R/imp_path.txt"; sed -n '/modules by cumulative/,$p' "$R/imp_path.txt" | head -25 ;;
    pyc)  # modules of the start path without cached bytecode (the lean payload installs with --no-compile)
      python3 "$B/gpu_task/pyc_check.py" 2>&1 | tee "$R/pyc_check.txt" | grep -E "^(pyc|dont)" ;;
    compile)  # byte-compile as a default pip install does: the payload (install.sh passes --no-compile) and the
      # image's torch venv (PYTHONDONTWRITEBYTECODE=1 there: 2,398 of the 4,256 start-path modules had no bytecode)
      t=$(date +%s.%N); SP=/opt/torch/.venv/lib/python3.12/site-packages
      python3 -m compileall -q -j 16 /tmp/site $SP/torch $SP/transformers $SP/sympy $SP/networkx $SP/sklearn $SP/scipy \
        $SP/triton $SP/numpy > "$R/compileall.log" 2>&1
      echo "compileall: exit $? in $(python3 -c "import time; print(round(time.time() - $t, 1))") s" | tee -a "$R/all.log" ;;
    llmprof:*)
      shape=${step#llmprof:}
      python3 "$B/gpu_task/start_profile.py" --model "/tmp/random-init/$shape-bfloat16" --compare-tokenizer \
        --json "$R/llmprof_$shape.json" > "$R/llmprof_$shape.log" 2>&1
      grep -E "^step|^total|tokenizer_same|cumtime|^ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+" "$R/llmprof_$shape.log" | head -45 ;;
    *)
      IFS=: read -r code shape lim tag <<<"$step"
      python3 "$S/$code/benchmarks/bench_vllm_gpu.py" /tmp/s000_vllm_base.audit --random-init "$shape" \
        --tokenizer "$S/data/tok" --data-root "$S/data" --limit "$lim" --out "/tmp/run_$tag" --json-out "$R/$tag.json" \
        >>"$R/all.log" 2>&1
      echo "=== $(date -u +%H:%M:%S) $tag exit $?" | tee -a "$R/all.log"
      grep -E "^auditc run wall|engine ready|phase (import vllm|vllm|compile|plan|read data|store inputs|engine load)" \
        "$R/all.log" | tail -12 ;;
  esac
  pack
done
