#!/usr/bin/env bash
# Issue 22 on the GPU machine (no internet): vLLM 0.26 + real SmolLM2 weights from the payload of
# ../shared/gpu/prepare.sh (pieces in .gpu/pN, data in .gpudata/), then tests/gpu and the benchmarks.
#   bash benchmarks/gpu_task/vllm_gpu.sh piece            copy the carried .gpu/p*/part* to /tmp/parts, and
#                                                         .gpu/install.sh + payload.sha256 to /tmp/gpuinst
#                                                         (one call per piece: each call carries .gpu/pN; carry
#                                                         the installer with the last piece, not .gpudata: the
#                                                         tree + a piece + .gpudata pass the 64 MiB carry limit)
#   bash benchmarks/gpu_task/vllm_gpu.sh install          reassemble, verify, install; convert SmolLM2
#                                                         (carry .gpudata from here on, on every call)
#   bash benchmarks/gpu_task/vllm_gpu.sh tests            pytest tests/gpu
#   bash benchmarks/gpu_task/vllm_gpu.sh vllm DTYPE       bench_vllm_gpu.py on the s000 design (float32|bfloat16)
#   bash benchmarks/gpu_task/vllm_gpu.sh vllm-eager DTYPE the same with enforce_eager=true (no torch.compile, no CUDA graphs)
#   bash benchmarks/gpu_task/vllm_gpu.sh auditc DTYPE     plain `auditc run` of the vLLM spec, timed (no plain batch)
#   bash benchmarks/gpu_task/vllm_gpu.sh hf DTYPE         bench_gpu_spec.py (hf engine) on the same design
#   bash benchmarks/gpu_task/vllm_gpu.sh probe DTYPE [FRACTION] [CONFIGS]
#                                                         probe_vllm_start.py on the jobs the last `vllm DTYPE` recorded
#   bash benchmarks/gpu_task/vllm_gpu.sh hfsetup          hf only (no vLLM payload): install the carried .whl/*.whl into /tmp/site
#   bash benchmarks/gpu_task/vllm_gpu.sh hf-rnd SHAPE LIMIT   bench_gpu_spec.py --random-init SHAPE (1b|8b, bf16,
#                                                         tokenizer .gpudata/tok) on s000_smollm2_auto.audit, --limit LIMIT
#   bash benchmarks/gpu_task/vllm_gpu.sh vllm-rnd SHAPE LIMIT [TAG]  bench_vllm_gpu.py --random-init SHAPE on the vLLM
#                                                         design, --limit LIMIT (VLLM_EXTRA=", enforce_eager=true" adds options)
# Every step's whole log goes to $OUT/<step>_<dtype>.log (vLLM's own start-up lines included).
# STACKS=1 samples every process's Python stacks every 2 s into $OUT/stacks_<step>/ (stackdump/sitecustomize.py).
# Results go to $OUT (the device tool's folder) or /tmp/out.
set -euo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/parts
export PYTHONPATH=$PWD:/tmp/site AUDITLANG_CACHE=/tmp/alcache VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 AUDITLANG_DATA_ROOT=$PWD/.gpudata
if [ "${STACKS:-0}" = 1 ]; then
  export PYTHONPATH=$PWD/benchmarks/gpu_task/stackdump:$PYTHONPATH AL_STACKDUMP_DIR=$OUT/stacks_$1_${2:-float32}
fi
ckpt() { python3 -c "from auditlang.engines.embedded import resolve_embedded; print(resolve_embedded('smollm2-135m-instruct'))"; }
case "$1" in
  piece)  # GPU_PIECES=.gpu36: the lean payload (vllm-slim + deps, 3 pieces of 46 MiB; README "Issue 36, session 15")
    pd=${GPU_PIECES:-.gpu}
    cp "$pd"/*/part* /tmp/parts/ && ls -la /tmp/parts && nvidia-smi --query-gpu=name,memory.total --format=csv
    for f in "$pd"/install.sh "$pd"/*/install.sh; do
      [ -e "$f" ] && mkdir -p /tmp/gpuinst && cp "$f" "$(dirname "$f")/payload.sha256" /tmp/gpuinst/
    done; true ;;
  install)
    bash /tmp/gpuinst/install.sh
    python3 -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__, torch.cuda.get_device_name(0))"
    ckpt || echo "no embedded SmolLM2 (lean payload): random-init steps only" ;;
  tests) python3 -m pytest -q -p no:cacheprovider tests/gpu 2>&1 | tee "$OUT/gpu_tests.log" | tail -30 ;;
  vllm|vllm-eager)
    dt=${2:-float32}
    extra=""; [ "$1" = vllm-eager ] && extra=", enforce_eager=true" && dt_tag=${dt}_eager
    sed "s|@CKPT@|$(ckpt)|; s|@DTYPE@|$dt$extra|" benchmarks/gpu_task/s000_smollm2_vllm.audit.in > /tmp/s000_vllm_$dt.audit
    dt=${dt_tag:-$dt}
    [ -n "${dt_tag:-}" ] && mv /tmp/s000_vllm_${2:-float32}.audit /tmp/s000_vllm_$dt.audit
    n=1; while [ -e "$OUT/vllm_${dt}_run$n.json" ] || [ -e "/tmp/vllm_${dt}_run$n.done" ]; do n=$((n+1)); done
    set -o pipefail
    python3 benchmarks/bench_vllm_gpu.py /tmp/s000_vllm_$dt.audit --data-root .gpudata --out /tmp/run_vllm_$dt \
      --json-out "$OUT/vllm_${dt}_run$n.json" --dump-jobs /tmp/jobs_$dt.pkl 2>&1 | tee "$OUT/vllm_${dt}_run$n.log" \
      | grep -v "^\[smollm2" | tail -40
    touch /tmp/vllm_${dt}_run$n.done
    cp /tmp/run_vllm_$dt/metrics/cells.csv "$OUT/cells_vllm_$dt.csv" ;;
  auditc)
    dt=${2:-float32}
    sed "s|@CKPT@|$(ckpt)|; s|@DTYPE@|$dt|" benchmarks/gpu_task/s000_smollm2_vllm.audit.in > /tmp/s000_vllm_$dt.audit
    t0=$(date +%s.%N)
    python3 -m auditlang.cli run /tmp/s000_vllm_$dt.audit --data-root .gpudata --out /tmp/auditc_vllm_$dt --display plain \
      2>&1 | tee "$OUT/auditc_$dt.log" | grep -v "^\[smollm2\] *[0-9]" | grep -E "engine ready|requests:|scored|done|error|spawn" 
    echo "auditc run wall $(python3 -c "import time; print(round(time.time() - $t0, 1))") s" | tee -a "$OUT/auditc_$dt.log" ;;
  hf)
    dt=${2:-float32}
    sed "s|dtype=float32|dtype=$dt|" benchmarks/gpu_task/s000_smollm2_auto.audit > /tmp/s000_hf_$dt.audit
    python3 benchmarks/bench_gpu_spec.py /tmp/s000_hf_$dt.audit --data-root .gpudata --out /tmp/run_hf_$dt \
      --json-out "$OUT/hf_$dt.json" ${HF_EXTRA:-} 2>&1 | tee "$OUT/hf_$dt.log" | grep -v "^\[smollm2" | tail -30
    cp /tmp/run_hf_$dt/metrics/cells.csv "$OUT/cells_hf_$dt.csv" ;;
  hfsetup)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name(0))" ;;
  hf-rnd)
    shape=$2; lim=$3; tag=hf_${shape}_${lim}${4:+_$4}
    sed "s|dtype=float32|dtype=bfloat16|" benchmarks/gpu_task/s000_smollm2_auto.audit > /tmp/s000_hf_bf16.audit
    python3 benchmarks/bench_gpu_spec.py /tmp/s000_hf_bf16.audit --random-init "$shape" --tokenizer .gpudata/tok \
      --data-root .gpudata --limit "$lim" --no-plain --out /tmp/run_$tag --json-out "$OUT/$tag.json" 2>&1 \
      | tee "$OUT/$tag.log" | grep -v "^\[smollm2\] *[0-9]" | tail -25
    python3 -c "import json; i=json.load(open('/tmp/run_$tag/run.json')); print('last_run', i['last_run']); print('batch_sizing', json.dumps(i.get('batch_sizing')))" \
      | tee -a "$OUT/$tag.log" ;;
  vllm-rnd)
    shape=$2; lim=$3; tag=vllm_${shape}_${lim}${4:+_$4}
    sed "s|@CKPT@|/nonexistent|; s|@DTYPE@|bfloat16${VLLM_EXTRA:-}|" benchmarks/gpu_task/s000_smollm2_vllm.audit.in > /tmp/s000_vllm_base.audit
    python3 benchmarks/bench_vllm_gpu.py /tmp/s000_vllm_base.audit --random-init "$shape" --tokenizer .gpudata/tok \
      --data-root .gpudata --limit "$lim" --out /tmp/run_$tag --json-out "$OUT/$tag.json" 2>&1 | tee "$OUT/$tag.log" \
      | grep -v "^\[smollm2" | tail -25 ;;
  probe)
    dt=${2:-float32}
    python3 benchmarks/probe_vllm_start.py --model "$(ckpt)" --dtype "$dt" --jobs /tmp/jobs_$dt.pkl \
      --fraction "${3:-1.0}" --configs "${4:-default,inproc,eager,eager-inproc}" --json-out "$OUT/probe_$dt.json" ;;
  *) echo "unknown step $1" >&2; exit 2 ;;
esac
