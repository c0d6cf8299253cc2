#!/usr/bin/env bash
# The headline experiments (benchmarks/claims/headline.py) at ten times the CPU
# budget (10 epochs of Fashion-MNIST where the CPU runs 1), each arm's seeds as
# one program (headline.run_pieces_together), in one call of at most 9 minutes
# on one H100. The lent machine has jax, flax and optax but no TensorFlow, clu,
# ml_collections or Debian's Fashion-MNIST, so they travel (git-ignored). Here, once:
#
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --implementation cp --platform any -d .whl \
#       $(grep -E '^(clu|ml-collections)==' constraints.txt)
#   mkdir -p .data/downloads/manual/fashion_mnist
#   cp /usr/share/datasets/fashion-mnist/*.gz .data/downloads/manual/fashion_mnist/
#
# There, from the repository root, with .whl and .data carried (31 MB):
#
#   bash benchmarks/claims/run_on_gpu.sh [--small]
#
# Each arm's pieces land in $OUT/headline_gpu/ (benchmarks/results/claims/
# headline_gpu where $OUT is unset) as soon as the arm finishes, so the 510 s
# limit below cuts only the arm in flight; headline_gpu.log beside them. A
# session here then judges them like the CPU pieces. --small: the tiny form
# (the tests: tiny models, ten steps, two seeds of the two skip-free arms).
set -euo pipefail
cd "$(dirname "$0")/../.."

shopt -s nullglob
wheels=(.whl/*.whl)
if (( ${#wheels[@]} > 0 )); then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site "${wheels[@]}"
  export PYTHONPATH=/tmp/site:.
fi
export PYTHONUNBUFFERED=1
export TFDS_DATA_DIR=${TFDS_DATA_DIR:-$PWD/.data}

out=${OUT:-benchmarks/results/claims}/headline_gpu
mkdir -p "$out"
seeds=0,1,2,3,4
scale=10
small=()
arms=sa_skip_free,mha_skip_free,plain,attn_scale,feat_scale,lipsformer,vit_no_warmup
if [ "${1:-}" = "--small" ]; then
  small=(--small); seeds=0,1; scale=1; arms=sa_skip_free,mha_skip_free
fi
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
  python3 -c "import jax; print('jax', jax.__version__, jax.devices())"
  timeout 510 python3 -m benchmarks.claims.headline --arms=$arms --seeds=$seeds --scale=$scale \
      --together --pieces_dir="$out" "${small[@]}"
} 2>&1 | tee "$out/headline_gpu.log"
