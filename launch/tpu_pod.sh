#!/usr/bin/env bash
# Starts `train.py --distributed ARGS...` on every worker of a Cloud TPU VM (a
# single host or a pod slice), from a virtual environment on each worker.
# `launch/tpu_pod.sh --help` prints the usage, every option with its default,
# and an example: `usage` below is the one place they are written, and it reads
# each default from the variable that holds it.
#
# Every worker runs the same command; `--distributed` makes train.py call
# jax.distributed.initialize(), which finds the other workers through the TPU
# metadata. Each worker reads its own rows of every global batch and the trainer
# assembles the global batch from them. Checkpoints are written collectively,
# hence a workdir all workers see. A worker command that ends with 75 (gcloud
# passes the workers' status on) is a stop at a saved step, which a rerun
# resumes.
set -euo pipefail

TPU="" ZONE="" PROJECT="" SETUP=0 PYTHON="3.11" REPO_DIR="vit_spectral" VENV=".venv"
LOG="train.log" PRINT_ONLY=0 ACCELERATOR_TYPE="" DRY_RUN=1 MAX_RESTARTS=10

usage() {
  cat <<EOF
Usage: launch/tpu_pod.sh --tpu=NAME --zone=ZONE [OPTIONS] -- TRAIN_ARGS...

Runs train.py --distributed TRAIN_ARGS on every worker of a Cloud TPU VM (one
host or a pod slice) through gcloud, from a virtual environment on each worker.
TRAIN_ARGS go to train.py unchanged (python train.py --help lists them); the
workdir must be storage all workers see (gs://), and rerunning the same command
resumes from its latest checkpoint.

Options:
  --tpu=NAME              the TPU VM to run on (required)
  --zone=ZONE             its zone (required)
  --project=PROJECT       its Google Cloud project (default: gcloud's own)
  --setup                 first, on every worker: unpack this checkout into
                          --repo_dir, install uv with the system pip (pip
                          install --user), make --venv with uv venv --python
                          VERSION --seed (stock TPU VM images ship Python 3.10;
                          uv downloads a standalone CPython, no root needed),
                          then one pip install -c constraints.txt -e .[tpu]
                          (jax with libtpu). Later launches leave it out.
                          (default: off)
  --python=VERSION        the Python that --setup puts in the environment; the
                          dependencies need 3.11 or later (default: $PYTHON)
  --repo_dir=DIR          the checkout on each worker, relative to its home
                          directory (default: $REPO_DIR)
  --venv=DIR              the virtual environment, relative to --repo_dir
                          (default: $VENV)
  --log=FILE              each worker appends train.py's output to this file,
                          relative to --repo_dir (default: $LOG)
  --accelerator_type=TYPE the slice the dry run compiles for, e.g. v4-8
                          (default: the TPU VM's own, from gcloud compute tpus
                          tpu-vm describe)
  --no_dry_run            skip the dry run. Before the workers start, worker 0
                          compiles the run's train step for the slice on its CPU
                          (train.py --dry_run --target=TYPE TRAIN_ARGS) and the
                          launch stops there, exit 1, if the step does not fit
                          the chips' memory (default: the dry run runs)
  --max_restarts=N        while the workers exit with 75 (SIGTERM stopped every
                          worker at one saved step: preemption, maintenance),
                          rerun the same command, which resumes from that step,
                          at most N times; not after Ctrl-C or a signal to this
                          launcher (default: $MAX_RESTARTS)
  --print_only            print every command (tar, gcloud) instead of running
                          it (default: off)
  -h, --help              print this help and exit

Example:
  launch/tpu_pod.sh --tpu=deit --zone=us-central2-b --setup -- \\
      --config=imagenet_deit \\
      --config.input.data_dir=gs://BUCKET/tfds --workdir=gs://BUCKET/deit_s
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
    *) echo "launch/tpu_pod.sh: unknown option $1 (launch/tpu_pod.sh --help lists" \
            "the options; train.py's arguments go after --)" >&2
       exit 2 ;;
  esac
  shift
done
if [[ -z "$TPU" || -z "$ZONE" ]]; then
  echo "launch/tpu_pod.sh: --tpu=NAME and --zone=ZONE are required (launch/tpu_pod.sh" \
       "--help prints the usage)" >&2
  exit 2
fi
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
GCLOUD=(gcloud compute tpus tpu-vm)
COMMON=(--zone="$ZONE")
[[ -n "$PROJECT" ]] && COMMON+=(--project="$PROJECT")

# run (prints instead with --print_only) and UV_SETUP.

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
