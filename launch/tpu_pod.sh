#!/usr/bin/env bash
# Starts `python train.py --distributed ARGS...` on every worker of a Cloud TPU
# VM (a single host or a pod slice), optionally copying this checkout there and
# installing it first.
#
#   launch/tpu_pod.sh --tpu=NAME --zone=ZONE [--project=P] [--setup] \
#       [--repo_dir=vit_spectral] [--log=train.log] -- TRAIN_ARGS...
#
# e.g.
#   launch/tpu_pod.sh --tpu=deit --zone=us-central2-b --setup -- \
#       --config=configs/imagenet_deit.py \
#       --config.input.data_dir=gs://BUCKET/tfds --workdir=gs://BUCKET/deit_s
#
# Every worker runs the same command; `--distributed` makes train.py call
# jax.distributed.initialize(), which finds the other workers through the TPU
# metadata. Each worker reads its own slice of the data (per-process input)
# and the trainer assembles the global batch from the slices. The workdir
# must be on storage all workers see (gs://): checkpoints are written
# collectively, and a rerun of the same command resumes from the latest one
# (also after a preemption: orbax saves a checkpoint on the signal).
set -euo pipefail

TPU="" ZONE="" PROJECT="" SETUP=0 REPO_DIR="vit_spectral" LOG="train.log"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tpu=*) TPU="${1#*=}" ;;
    --zone=*) ZONE="${1#*=}" ;;
    --project=*) PROJECT="${1#*=}" ;;
    --setup) SETUP=1 ;;
    --repo_dir=*) REPO_DIR="${1#*=}" ;;
    --log=*) LOG="${1#*=}" ;;
    --) shift; break ;;
    *) echo "unknown option $1 (put train.py's arguments after --)" >&2; exit 2 ;;
  esac
  shift
done
if [[ -z "$TPU" || -z "$ZONE" ]]; then
  echo "usage: $0 --tpu=NAME --zone=ZONE [--project=P] [--setup] -- TRAIN_ARGS..." >&2
  exit 2
fi
GCLOUD=(gcloud compute tpus tpu-vm)
COMMON=(--zone="$ZONE")
[[ -n "$PROJECT" ]] && COMMON+=(--project="$PROJECT")
ROOT="$(cd "$(dirname "$0")/.." && pwd)"

if [[ "$SETUP" == 1 ]]; then
  # Ship the checkout (without workdirs and caches) to every worker, install it
  # with the TPU build of jax.
  ARCHIVE="$(mktemp -d)/vit_spectral.tar.gz"
  tar -C "$ROOT" --exclude=.git --exclude=workdir --exclude='__pycache__' \
      -czf "$ARCHIVE" .
  "${GCLOUD[@]}" scp "$ARCHIVE" "$TPU:/tmp/vit_spectral.tar.gz" --worker=all "${COMMON[@]}"
  "${GCLOUD[@]}" ssh "$TPU" --worker=all "${COMMON[@]}" --command="
    set -e; mkdir -p $REPO_DIR && tar -xzf /tmp/vit_spectral.tar.gz -C $REPO_DIR
    cd $REPO_DIR && python3 -m pip install -q -U 'jax[tpu]' && python3 -m pip install -q -e ."
fi

# Quote each train.py argument for the remote shell.
ARGS=""
for arg in "$@"; do ARGS+=" $(printf '%q' "$arg")"; done
"${GCLOUD[@]}" ssh "$TPU" --worker=all "${COMMON[@]}" --command="
  cd $REPO_DIR && python3 train.py --distributed$ARGS 2>&1 | tee $LOG"
