#!/usr/bin/env bash
# Trains a config on one host with several GPUs: one JAX process drives all of
# them (config.mesh = dict(data=-1, model=1) spreads the batch over every GPU).
#
#   launch/gpu_host.sh [--gpus=0,1,2,3] -- TRAIN_ARGS...
#
# e.g.
#   launch/gpu_host.sh -- --config=configs/cifar100_vit.py \
#       --config.input.data_dir=$HOME/tensorflow_datasets --workdir=workdir/c100
#
# Needs the CUDA build of jax (pip install -U "jax[cuda12]"). TensorFlow (the
# input pipeline) is kept off the GPUs by train.py. Several GPU hosts: run the
# same command on each with `--distributed` among the train.py arguments
# (jax.distributed.initialize() finds the cluster under SLURM, Open MPI,
# mpi4py or Kubernetes), with a workdir all hosts share.
set -euo pipefail

GPUS=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --gpus=*) GPUS="${1#*=}" ;;
    --) shift; break ;;
    *) echo "unknown option $1 (put train.py's arguments after --)" >&2; exit 2 ;;
  esac
  shift
done
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
[[ -n "$GPUS" ]] && export CUDA_VISIBLE_DEVICES="$GPUS"
# Let XLA take most of the GPU memory up front, as it is the only user.
export XLA_PYTHON_CLIENT_MEM_FRACTION="${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.9}"
python -c "import jax; d = jax.devices(); assert d[0].platform == 'gpu', d; print(len(d), 'GPUs:', d)"
exec python "$ROOT/train.py" "$@"
