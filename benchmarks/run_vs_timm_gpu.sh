#!/usr/bin/env bash
# benchmarks/vs_timm_gpu.py on a lent GPU machine: its image has jax, flax, optax,
# orbax, chex, torch and timm but no TensorFlow, clu or ml_collections, so the two
# pure-Python wheels travel in .whl/ (git-ignored). Here, once:
#
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --implementation cp --platform any -d .whl \
#       $(grep -E '^(clu|ml-collections)==' constraints.txt)
#
# There, from the repository root, with .whl carried:
#
#   bash benchmarks/run_vs_timm_gpu.sh [vs_timm_gpu.py flags]
#
# Writes vs_timm_gpu.json, vs_timm_gpu.md and vs_timm_gpu.log to $OUT
# (benchmarks/results where $OUT is unset).
set -euo pipefail
cd "$(dirname "$0")/.."

shopt -s nullglob
wheels=(.whl/*.whl)
if (( ${#wheels[@]} == 0 )); then
  echo "error: no wheels in .whl/; fetch clu and ml_collections first (see the top of $0)" >&2
  exit 2
fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "${wheels[@]}"
export PYTHONPATH=/tmp/site:.
export PYTHONUNBUFFERED=1

out=${OUT:-benchmarks/results}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
start=$SECONDS
python3 benchmarks/vs_timm_gpu.py --out="$out/vs_timm_gpu.json" "$@" 2>&1 \
    | tee "$out/vs_timm_gpu.log"
echo "run_vs_timm_gpu.sh: $((SECONDS - start)) s wall" | tee -a "$out/vs_timm_gpu.log"
