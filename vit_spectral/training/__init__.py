"""Training machinery: the trainer and what it is built from.

  trainer         the loop (`train_and_evaluate`), evaluation, corruption evals
  steps           pure train and eval steps
  train_state     the checkpointed state (step, params, optimizer state, EMA)
  optim           optax optimizer and learning-rate schedule from `config.optim`
  ema             parameter EMA
  mixing          on-device Mixup / CutMix
  durations       epochs -> steps for durations and cadences
  robustness      corruption-robustness evaluation
  init_from       fine-tuning: pretrained weights into a run's first state
  sharding        mesh, parameter and batch shardings
  run_log         the run's log file; on a terminal, INFO lines go only there
  progress        the terminal's progress line (step, loss, accuracy, steps/s, ETA)
  wandb_writer    the metric writers: clu's default, and W&B with `config.logging.wandb`
  config_checks   builds every section, cross-section checks, eval_shape of init
  distributed     jax.distributed.initialize from the command line's cluster flags
  device_prefetch keeps the next global batches transferred ahead of the step

A config's sections (fields, defaults, checks) are declared in
`vit_spectral.sections`; what makes a run durable (checkpoints, the workdir
lock, resume checks, the stream's position, preemption) is
`vit_spectral.durability`; what plans a run without running it (dry runs, TPU
and GPU targets, HLO and jaxpr costs) is `vit_spectral.planning`. Submodules
are imported on use (`from vit_spectral.training import trainer`).
"""

__all__ = [
    "config_checks", "device_prefetch", "distributed", "durations", "ema", "init_from",
    "mixing", "optim", "progress", "robustness", "run_log", "sharding", "steps",
    "train_state", "trainer", "wandb_writer",
]
