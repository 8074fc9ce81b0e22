#!/usr/bin/env bash
# Issue 22 on the GPU machine (no internet): vLLM 0.26 + real SmolLM2 weights from the payload of
# ../shared/gpu/prepare.sh (pieces in .gpu/pN, data in .gpudata/), then tests/gpu and the benchmarks.
#   bash benchmarks/gpu_task/vllm_gpu.sh piece            copy the carried .gpu/p*/part* to /tmp/parts
#   bash benchmarks/gpu_task/vllm_gpu.sh install          reassemble, verify, install; convert SmolLM2
#   bash benchmarks/gpu_task/vllm_gpu.sh tests            pytest tests/gpu
#   bash benchmarks/gpu_task/vllm_gpu.sh vllm DTYPE       bench_vllm_gpu.py on the s000 design (float32|bfloat16)
#   bash benchmarks/gpu_task/vllm_gpu.sh vllm-eager DTYPE the same with enforce_eager=true (no torch.compile, no CUDA graphs)
#   bash benchmarks/gpu_task/vllm_gpu.sh hf DTYPE         bench_gpu_spec.py (hf engine) on the same design
# Results go to $OUT (the device tool's folder) or /tmp/out.
set -euo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/parts
export PYTHONPATH=$PWD:/tmp/site AUDITLANG_CACHE=/tmp/alcache VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 AUDITLANG_DATA_ROOT=$PWD/.gpudata
ckpt() { python3 -c "from auditlang.engines.embedded import resolve_embedded; print(resolve_embedded('smollm2-135m-instruct'))"; }
case "$1" in
  piece) cp .gpu/p*/part* /tmp/parts/ && ls -la /tmp/parts && nvidia-smi --query-gpu=name,memory.total --format=csv ;;
  install)
    bash .gpu/install.sh
    python3 -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__, torch.cuda.get_device_name(0))"
    ckpt ;;
  tests) python3 -m pytest -q -p no:cacheprovider tests/gpu 2>&1 | tee "$OUT/gpu_tests.log" ;;
  vllm|vllm-eager)
    dt=${2:-float32}
    extra=""; [ "$1" = vllm-eager ] && extra=", enforce_eager=true" && dt_tag=${dt}_eager
    sed "s|@CKPT@|$(ckpt)|; s|@DTYPE@|$dt$extra|" benchmarks/gpu_task/s000_smollm2_vllm.audit.in > /tmp/s000_vllm_$dt.audit
    dt=${dt_tag:-$dt}
    [ -n "${dt_tag:-}" ] && mv /tmp/s000_vllm_${2:-float32}.audit /tmp/s000_vllm_$dt.audit
    python3 benchmarks/bench_vllm_gpu.py /tmp/s000_vllm_$dt.audit --data-root .gpudata --out /tmp/run_vllm_$dt \
      --json-out "$OUT/vllm_$dt.json" 2>&1 | grep -v "^\[smollm2" | tail -40
    cp /tmp/run_vllm_$dt/metrics/cells.csv "$OUT/cells_vllm_$dt.csv" ;;
  hf)
    dt=${2:-float32}
    sed "s|dtype=float32|dtype=$dt|" benchmarks/gpu_task/s000_smollm2_auto.audit > /tmp/s000_hf_$dt.audit
    python3 benchmarks/bench_gpu_spec.py /tmp/s000_hf_$dt.audit --data-root .gpudata --out /tmp/run_hf_$dt \
      --json-out "$OUT/hf_$dt.json" ${HF_EXTRA:-} 2>&1 | grep -v "^\[smollm2" | tail -30
    cp /tmp/run_hf_$dt/metrics/cells.csv "$OUT/cells_hf_$dt.csv" ;;
  *) echo "unknown step $1" >&2; exit 2 ;;
esac
