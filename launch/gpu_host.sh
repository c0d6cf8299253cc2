#!/usr/bin/env bash
# Trains a config on one host with NVIDIA GPUs, from a virtual environment in
# this checkout: one JAX process drives every GPU (config.mesh =
# dict(data=-1, model=1) spreads the batch over them).
#
#   launch/gpu_host.sh [--setup] [--python=3.11] [--venv=.venv] [--gpus=0,1,2,3]
#       [--max_restarts=10] [--print_only] -- TRAIN_ARGS...
#
# e.g.
#   launch/gpu_host.sh --setup -- --config=cifar100_vit \
#       --config.input.data_dir=$HOME/tensorflow_datasets --workdir=workdir/c100
#
# --setup installs `uv` with the system pip (`pip install --user`, with
# --break-system-packages where the system Python is externally managed,
# PEP 668: Ubuntu 24.04, Debian 12; uv alone goes to ~/.local) unless
# `python3 -m uv` already works, makes the virtual environment --venv (relative
# to the checkout) with `uv venv --python 3.11 --seed` (uv downloads a
# standalone CPython when the host has no 3.11: the dependencies need >= 3.11),
# and runs ONE `pip install -c constraints.txt -e .[cuda12]`: the tested set
# with jax's CUDA 12 build and the CUDA libraries as wheels (only an NVIDIA
# driver is needed on the host). Later launches skip --setup.
#
# TensorFlow (the input pipeline) is kept off the GPUs by train.py. Several GPU
# hosts: run the same command on each with `--distributed` among the train.py
# arguments, and a workdir all hosts share (see the README).
# Preemption: when train.py exits with 75 (SIGTERM stopped it at a saved
# step: a spot or preemptible host, a maintenance event, `kill`), the launcher
# reruns the same command, which resumes from that step, up to
# --max_restarts times; not when the launcher itself was signalled (Ctrl-C in
# its terminal, the host shutting down).
# --print_only prints every command instead of running it.
set -euo pipefail

SETUP=0 PYTHON="3.11" VENV=".venv" GPUS="" PRINT_ONLY=0 MAX_RESTARTS=10
while [[ $# -gt 0 ]]; do
  case "$1" in
    --setup) SETUP=1 ;;
    --python=*) PYTHON="${1#*=}" ;;
    --venv=*) VENV="${1#*=}" ;;
    --gpus=*) GPUS="${1#*=}" ;;
    --max_restarts=*) MAX_RESTARTS="${1#*=}" ;;
    --print_only) PRINT_ONLY=1 ;;
    --) shift; break ;;
    *) echo "unknown option $1 (put train.py's arguments after --)" >&2; exit 2 ;;
  esac
  shift
done
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
[[ "$VENV" == /* ]] || VENV="$ROOT/$VENV"

# run (prints instead with --print_only) and UV_SETUP.
source "$(dirname "$0")/print_or_run.sh"

if [[ "$SETUP" == 1 ]]; then
  run bash -c "$UV_SETUP"
  run python3 -m uv venv --python "$PYTHON" --seed --allow-existing "$VENV"
  run "$VENV/bin/python" -m pip install --quiet -c "$ROOT/constraints.txt" -e "$ROOT[cuda12]"
elif [[ "$PRINT_ONLY" == 0 && ! -x "$VENV/bin/python" ]]; then
  echo "no virtual environment at $VENV: run $0 --setup first" >&2
  exit 2
fi

if [[ -n "$GPUS" ]]; then
  run export CUDA_VISIBLE_DEVICES="$GPUS"
fi
# Let XLA take most of the GPU memory up front, as it is the only user.
run export XLA_PYTHON_CLIENT_MEM_FRACTION="${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.9}"
run "$VENV/bin/python" -c "import jax; d = jax.devices(); assert d[0].platform == 'gpu', d; print(len(d), 'GPUs:', d)"
run_resuming "$MAX_RESTARTS" "$VENV/bin/python" "$ROOT/train.py" "$@"
