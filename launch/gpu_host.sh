#!/usr/bin/env bash
# Trains a config on one host with NVIDIA GPUs, from a virtual environment in
# this checkout. `launch/gpu_host.sh --help` prints the usage, every option with
# its default, and an example: `usage` below is the one place they are written,
# and it reads each default from the variable that holds it.
#
# TensorFlow (the input pipeline) is kept off the GPUs by train.py.
set -euo pipefail

SETUP=0 PYTHON="3.11" VENV=".venv" GPUS="" PRINT_ONLY=0 MAX_RESTARTS=10

usage() {
  cat <<EOF
Usage: launch/gpu_host.sh [OPTIONS] -- TRAIN_ARGS...

Runs train.py TRAIN_ARGS on this host's NVIDIA GPUs, from a virtual environment
in this checkout: one JAX process drives every GPU (config.mesh = dict(data=-1,
model=1) spreads the batch over them). TRAIN_ARGS go to train.py unchanged
(python train.py --help lists them); add --dry_run to them to check a config on
these GPUs first.

Options:
  --setup             make the virtual environment first: uv from the system pip
                      (pip install --user; --break-system-packages where the
                      system Python is externally managed) unless python3 -m uv
                      works, then uv venv --python VERSION --seed (uv downloads a
                      CPython where the host has none), then one pip install -c
                      constraints.txt -e .[cuda12]: jax's CUDA 12 build with the
                      CUDA libraries as wheels, so the host needs only an NVIDIA
                      driver. Later launches leave it out. (default: off)
  --python=VERSION    the Python that --setup puts in the environment; the
                      dependencies need 3.11 or later (default: $PYTHON)
  --venv=DIR          the virtual environment, relative to the checkout unless
                      absolute (default: $VENV)
  --gpus=LIST         the GPUs to use, as CUDA_VISIBLE_DEVICES, e.g. 0,1
                      (default: all)
  --max_restarts=N    while train.py exits with 75 (SIGTERM stopped it at a saved
                      step: a spot host, maintenance, kill), rerun the same
                      command, which resumes from that step, at most N times;
                      not after Ctrl-C or a signal to this launcher
                      (default: $MAX_RESTARTS)
  --print_only        print every command instead of running it (default: off)
  -h, --help          print this help and exit

Example:
  launch/gpu_host.sh --setup -- --config=cifar100_vit \\
      --config.input.data_dir=\$HOME/tensorflow_datasets --workdir=workdir/c100

Several GPU hosts: run the same command on each with --distributed among
TRAIN_ARGS and a workdir all hosts share (docs/running.md).
EOF
}

source "$(dirname "$0")/print_or_run.sh"

# --help wins wherever it stands among the launcher's options (after --, it is
# train.py's), and shows the defaults, not values given before it.
if help_requested "$@"; then
  usage
  exit 0
fi

while [[ $# -gt 0 ]]; do
  case "$1" in
    --setup) SETUP=1 ;;
    --python=*) PYTHON="${1#*=}" ;;
    --venv=*) VENV="${1#*=}" ;;
    --gpus=*) GPUS="${1#*=}" ;;
    --max_restarts=*) MAX_RESTARTS="${1#*=}" ;;
    --print_only) PRINT_ONLY=1 ;;
    --) shift; break ;;
    *) echo "launch/gpu_host.sh: unknown option $1 (launch/gpu_host.sh --help lists" \
            "the options; train.py's arguments go after --)" >&2
       exit 2 ;;
  esac
  shift
done
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
[[ "$VENV" == /* ]] || VENV="$ROOT/$VENV"

# run (prints instead with --print_only) and UV_SETUP.

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
