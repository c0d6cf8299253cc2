#!/usr/bin/env bash
# Starts `train.py --distributed ARGS...` on every worker of a Cloud TPU VM (a
# single host or a pod slice), from a virtual environment on each worker;
# `--setup` first copies this checkout there and makes that environment.
#
#   launch/tpu_pod.sh --tpu=NAME --zone=ZONE [--project=P] [--setup]
#       [--python=3.11] [--repo_dir=vit_spectral] [--venv=.venv] [--log=train.log]
#       [--accelerator_type=TYPE] [--no_dry_run] [--max_restarts=10] [--print_only]
#       -- TRAIN_ARGS...
#
# e.g.
#   launch/tpu_pod.sh --tpu=deit --zone=us-central2-b --setup -- \
#       --config=imagenet_deit \
#       --config.input.data_dir=gs://BUCKET/tfds --workdir=gs://BUCKET/deit_s
#
# --setup, on every worker: unpacks the checkout into --repo_dir (relative to
# the home directory), installs `uv` with the system pip (`pip install --user`)
# and makes the virtual environment --venv (relative to --repo_dir) with
# `uv venv --python 3.11 --seed`. Stock TPU VM images ship Python 3.10, older
# than the dependencies accept (jax, flax, orbax: >= 3.11); uv downloads a
# standalone CPython build into ~/.local/share/uv, needing no root and no
# apt repository, the same on every image. Then ONE `pip install -c
# constraints.txt -e .[tpu]` installs the package with the tested set,
# jax's TPU build (libtpu) included. Later launches skip --setup.
#
# Every worker runs the same command; `--distributed` makes train.py call
# jax.distributed.initialize(), which finds the other workers through the TPU
# metadata. Each worker reads its own rows of every global batch and the trainer
# assembles the global batch from them. The workdir must be on storage
# all workers see (gs://): checkpoints are written collectively, and a rerun of
# the same command resumes from the latest one (also after a preemption).
# SIGTERM to any worker (a maintenance event, preemption) stops every worker
# at one saved step with exit code 75; when the worker command ends with 75
# (as gcloud passes the workers' status on), the launcher reruns it, which
# resumes from that step, up to --max_restarts times; not when the launcher
# itself was signalled (Ctrl-C in its terminal).
#
# Before the workers start, worker 0 compiles the run's train step for the
# slice with the TPU compiler (`train.py --dry_run --target=TYPE` with the same
# TRAIN_ARGS, JAX_PLATFORMS=cpu: nothing runs on the TPU) and the launch stops
# there, exit 1, if the step does not fit the chips' HBM (the dry run's one
# line says what would). TYPE is --accelerator_type, else the slice's own
# (`gcloud compute tpus tpu-vm describe`). --no_dry_run skips this check.
# --print_only prints every command (local and gcloud) instead of running it.
set -euo pipefail

TPU="" ZONE="" PROJECT="" SETUP=0 PYTHON="3.11" REPO_DIR="vit_spectral" VENV=".venv"
LOG="train.log" PRINT_ONLY=0 ACCELERATOR_TYPE="" DRY_RUN=1 MAX_RESTARTS=10
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tpu=*) TPU="${1#*=}" ;;
    --zone=*) ZONE="${1#*=}" ;;
    --project=*) PROJECT="${1#*=}" ;;
    --setup) SETUP=1 ;;
    --python=*) PYTHON="${1#*=}" ;;
    --repo_dir=*) REPO_DIR="${1#*=}" ;;
    --venv=*) VENV="${1#*=}" ;;
    --log=*) LOG="${1#*=}" ;;
    --accelerator_type=*) ACCELERATOR_TYPE="${1#*=}" ;;
    --no_dry_run) DRY_RUN=0 ;;
    --max_restarts=*) MAX_RESTARTS="${1#*=}" ;;
    --print_only) PRINT_ONLY=1 ;;
    --) shift; break ;;
    *) echo "unknown option $1 (put train.py's arguments after --)" >&2; exit 2 ;;
  esac
  shift
done
if [[ -z "$TPU" || -z "$ZONE" ]]; then
  echo "usage: $0 --tpu=NAME --zone=ZONE [--project=P] [--setup] [--print_only] -- TRAIN_ARGS..." >&2
  exit 2
fi
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
GCLOUD=(gcloud compute tpus tpu-vm)
COMMON=(--zone="$ZONE")
[[ -n "$PROJECT" ]] && COMMON+=(--project="$PROJECT")

# run (prints instead with --print_only) and UV_SETUP.
source "$(dirname "$0")/print_or_run.sh"

# One word for the remote shell.
quote() { printf '%q' "$1"; }

REPO_Q="$(quote "$REPO_DIR")"
VENV_PYTHON="$(quote "$VENV")/bin/python"

if [[ "$SETUP" == 1 ]]; then
  if [[ "$PRINT_ONLY" == 1 ]]; then
    ARCHIVE_DIR="${TMPDIR:-/tmp}/vit_spectral_launch"
    run mkdir -p "$ARCHIVE_DIR"
  else
    ARCHIVE_DIR="$(mktemp -d)"
    trap 'rm -rf "$ARCHIVE_DIR"' EXIT
  fi
  ARCHIVE="$ARCHIVE_DIR/vit_spectral.tar.gz"
  run tar -C "$ROOT" --exclude=.git --exclude=workdir --exclude=__pycache__ \
      --exclude=.ci/libtpu --exclude=.ci/cuda \
      --exclude=.venv --exclude='*.egg-info' --exclude=build -czf "$ARCHIVE" .
  run "${GCLOUD[@]}" scp "$ARCHIVE" "$TPU:/tmp/vit_spectral.tar.gz" --worker=all "${COMMON[@]}"
  run "${GCLOUD[@]}" ssh "$TPU" --worker=all "${COMMON[@]}" --command="set -e
mkdir -p $REPO_Q && tar -xzf /tmp/vit_spectral.tar.gz -C $REPO_Q && cd $REPO_Q
$UV_SETUP
python3 -m uv venv --python $(quote "$PYTHON") --seed --allow-existing $(quote "$VENV")
$VENV_PYTHON -m pip install --quiet -c constraints.txt -e '.[tpu]'"
fi

ARGS=""
for arg in "$@"; do ARGS+=" $(quote "$arg")"; done

if [[ "$DRY_RUN" == 1 ]]; then
  if [[ -z "$ACCELERATOR_TYPE" ]]; then
    if [[ "$PRINT_ONLY" == 1 ]]; then
      run "${GCLOUD[@]}" describe "$TPU" "${COMMON[@]}" --format='value(acceleratorType)'
      ACCELERATOR_TYPE='$ACCELERATOR_TYPE'
    else
      ACCELERATOR_TYPE="$("${GCLOUD[@]}" describe "$TPU" "${COMMON[@]}" --format='value(acceleratorType)')"
    fi
  fi
  if [[ -z "$ACCELERATOR_TYPE" ]]; then
    echo "could not read the accelerator type of $TPU; pass --accelerator_type=TYPE (or --no_dry_run)" >&2
    exit 2
  fi
  TARGET_Q="$(quote "$ACCELERATOR_TYPE")"
  [[ "$PRINT_ONLY" == 1 ]] && TARGET_Q="$ACCELERATOR_TYPE"
  if ! run "${GCLOUD[@]}" ssh "$TPU" --worker=0 "${COMMON[@]}" --command="cd $REPO_Q && \
JAX_PLATFORMS=cpu $VENV_PYTHON train.py --dry_run --target=$TARGET_Q$ARGS"; then
    echo "the dry run for $ACCELERATOR_TYPE failed (above): the workers were not started" >&2
    exit 1
  fi
fi
run_resuming "$MAX_RESTARTS" "${GCLOUD[@]}" ssh "$TPU" --worker=all "${COMMON[@]}" \
    --command="set -o pipefail
cd $REPO_Q && $VENV_PYTHON train.py --distributed$ARGS 2>&1 | tee -a $(quote "$LOG")"
