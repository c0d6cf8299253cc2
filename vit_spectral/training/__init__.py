"""Training machinery: the trainer and what it is built from.

  trainer         the loop (`train_and_evaluate`), evaluation, corruption evals
  run_settings    the trainer's top-level settings; every training section at once
  steps           pure train and eval steps
  train_state     the checkpointed state (step, params, optimizer state, EMA)
  optim           optax optimizer and learning-rate schedule from `config.optim`
  ema             parameter EMA
  mixing          on-device Mixup / CutMix
  durations       epochs -> steps for durations and cadences
  robustness      corruption-robustness evaluation
  init_from       fine-tuning: pretrained weights into a run's first state
  sharding        mesh, parameter and batch shardings
  checkpointing   orbax CheckpointManager wrapper, `latest_params`
  state_fingerprint  per-array fingerprints that catch damaged checkpoint bytes
  workdir_lock    one run per workdir
  resume          resume checks against config.json and checkpoints; config history
  stream_state    the input stream's position saved with each checkpoint; rollbacks
  preemption      SIGTERM/SIGINT: stop at a step all processes agree on (exit 75)
  run_log         the run's log file; on a terminal, INFO lines go only there
  progress        the terminal's progress line (step, loss, accuracy, steps/s, ETA)
  config_checks   builds every section, cross-section checks, eval_shape of init
  distributed     jax.distributed.initialize from the command line's cluster flags
  dry_run         compiles the sharded train step on abstract inputs (--dry_run)
  device_prefetch keeps the next global batches transferred ahead of the step

Submodules are imported on use (`from vit_spectral.training import trainer`).
"""

__all__ = [
    "checkpointing", "config_checks", "device_prefetch", "distributed", "dry_run", "durations",
    "ema", "init_from", "mixing", "optim", "preemption", "progress",
    "resume", "robustness", "run_log", "run_settings", "sharding", "state_fingerprint", "steps", "stream_state",
    "train_state", "trainer", "workdir_lock",
]
