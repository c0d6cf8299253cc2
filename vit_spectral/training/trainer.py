"""The train loop, read top to bottom: logging, mesh, input, model, shardings,
steps, checkpoint restore, evaluation, loop.

`train_and_evaluate(settings, workdir)` is what `train.py` calls. A run killed at any
point resumes from the workdir's latest checkpoint and ends with exactly the
parameters of an uninterrupted run: the input stream restarts where the
checkpoint saved it (`stream_state`; `data.create_train_dataset(start_example=...)`,
on any device or process count) and the dropout RNG is folded with the step, as
is the Mixup/CutMix RNG; the EMA parameters live in the checkpointed TrainState.
SIGTERM/SIGINT stop the loop at a saved step all processes agree on
(`preemption`); `config.on_nonfinite="rollback"` goes back to the newest
checkpoint and skips batches instead of stopping (`_roll_back`).

Each config section is converted once, at the top, into its typed settings
(`sections.run.training_settings`, `models.build`), which everything below
reads. Recipe options (all off by default): `config.mixup` (`mixing`),
`config.ema_decay` (`ema`; evaluated beside the params as `eval_ema_*`),
`config.robustness` (`robustness`; corruption accuracies at the end),
`config.init_from` (`init_from`; a run without checkpoints of its own starts
from pretrained weights, `initial_state`), `config.diagnostics` (`diagnostics`;
per-layer scalars of the papers on fixed eval images), `config.logging`
(`wandb_writer`; a Weights & Biases run beside TensorBoard, continued on a
resume), epoch-valued cadences (`durations`), `config.num_seeds` (`replicas`:
K seeds in one program over a leading replica axis; each metric then a list
of K values in seed order, logged as `<name>_seed<seed>`).

Output: the metric writer's lines (absl INFO) and the run's log file
(`run_log`); on a terminal, INFO goes to the log file only and process 0
draws a progress line with the eval results above it (`progress`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import json
import os
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging
from clu import periodic_actions
from etils import epath
from jax.experimental import multihost_utils

from vit_spectral.durability import checkpointing
from vit_spectral.training import config_checks, optim, sharding, steps
from vit_spectral.training import durations, init_from, mixing, robustness, run_log
from vit_spectral.durability import resume
from vit_spectral.training import device_prefetch, diagnostics
from vit_spectral.durability import preemption, stream_state
from vit_spectral.training import progress, replicas, wandb_writer
from vit_spectral.durability import workdir_lock
from vit_spectral import backends, errors
from vit_spectral.data import input_pipeline
from vit_spectral.models.build import ModelSpec
from vit_spectral.sections.run import RunSettings, TrainingSettings, run_settings
from vit_spectral.training.train_state import TrainState


class NonFiniteLossError(errors.RunError, FloatingPointError):
  """The training loss or gradient norm became NaN or Inf at `step` (the
  command line prints its message as one `error:` line)."""

  def __init__(self, message: str, step: int):
    super().__init__(message)
    self.step = step


def total_train_steps(config, num_train_examples: int) -> int:
  """`config.total_steps`, or `config.num_epochs` converted to steps."""
  return durations.total_steps(run_settings(config), config.input.batch_size,
                               num_train_examples)


def _check_finite(step: int, values: Any, last_checkpoint: int | None,
                  seeds: tuple[int, ...] = ()) -> None:
  """Raises NonFiniteLossError when the loss or the gradient norm of `step`
  (`values`: (loss, grad_norm), device scalars, or (K,) over `seeds`) is NaN
  or Inf."""
  loss, grad_norm = (np.atleast_1d(np.asarray(v, np.float64)) for v in values)
  bad = ~(np.isfinite(loss) & np.isfinite(grad_norm))
  if bad.any():
    k = int(np.argmax(bad))
    which = f" of seed {seeds[k]}" if len(loss) > 1 else ""
    # config.num_seeds > 1 refuses rollback (config_checks.check_num_seeds).
    rollback = "" if len(loss) > 1 else ", or set config.on_nonfinite='rollback'"
    raise NonFiniteLossError(
        f"training loss{which} is {loss[k]} (gradient norm {grad_norm[k]}) at step {step}; the last "
        f"checkpoint is at step {last_checkpoint}. Lower optim.learning_rate, add warmup "
        f"or clipping (optim.grad_clip_norm){rollback}, "
        f"then rerun: it resumes from that checkpoint.", step=step)


def evaluate(eval_step, params, input_config, mesh, *,
             prefix: str = "eval_") -> dict[str, float | list[float]]:
  """One full pass over the eval split of `input_config`; padded examples are
  masked out. Each metric a float, or a list of K (`replicas.value`)."""
  dataset, num_batches = input_pipeline.create_eval_dataset(input_config)
  total = None
  for batch in dataset.take(num_batches).as_numpy_iterator():
    batch_metrics = eval_step(params, sharding.global_batch(batch, mesh))
    total = batch_metrics if total is None else total.merge(batch_metrics)
  return {f"{prefix}{k}": replicas.value(v) for k, v in total.compute().items()}


def evaluate_all(eval_step, state, input_config, mesh) -> dict[str, Any]:
  """Clean eval of the params, and of the EMA params beside them (`eval_ema_*`)."""
  metrics = evaluate(eval_step, state.params, input_config, mesh)
  if state.ema_params is not None:
    metrics.update(evaluate(eval_step, state.ema_params, input_config, mesh,
                            prefix="eval_ema_"))
  return metrics


def evaluate_corruptions(eval_step, state, settings: robustness.RobustnessSettings,
                         input_config, mesh) -> dict[str, Any]:
  """Accuracy on every corruption × severity of `settings`, summarised per
  severity (`vit_spectral.training.robustness`)."""
  params = state.ema_params if settings.use_ema else state.params
  accuracies = {}
  for corrupted in robustness.corrupted_sets(settings, input_config):
    metrics = evaluate(eval_step, params, corrupted.input_config, mesh, prefix="")
    accuracies[(corrupted.corruption, corrupted.severity)] = metrics["accuracy"]
  return replicas.per_seed(robustness.summarize, accuracies)


def corruption_due(settings: robustness.RobustnessSettings, step: int,
                   total_steps: int) -> bool:
  """Whether the corruption sets are evaluated after `step`: every
  `settings.every` steps (None = only at the end) and at the last step."""
  if not settings.enabled:
    return False
  return step == total_steps or (settings.every is not None and step % settings.every == 0)


@dataclasses.dataclass(frozen=True)
class ShardedSteps:
  """The model's state and steps, laid out on a mesh (`sharded_steps`).

  Attributes:
    model: the model (`TrainingSettings.model` built with the data set's classes).
    init: rng -> TrainState (params, optimizer state, EMA copy).
    state_from_params: params -> the step-0 TrainState holding them (fresh
      optimizer state, EMA = params): fine-tuning's start (`initial_state`;
      one seed only).
    init_rng: the key `init` takes (from config.seed; (K,) keys for K seeds).
    abstract_state: jax.eval_shape of init: ShapeDtypeStructs, no memory.
    state_sharding: NamedShardings of the TrainState (config.sharding_rules).
    train_step: jitted (state, batch) -> (state, TrainMetrics), the state
      donated; batch = {"image": (B, H, W, C) float32, "label": (B,) int32},
      split over "data" × "fsdp" (`batch_sharding`).
    eval_step: jitted (params, batch + "mask": (B,) bool) -> EvalMetrics.
    num_seeds: K; with K > 1 the state, the train batch and the metrics have
      a leading replica axis of K (`replicas`); the eval batch does not.
    batch_sharding: the train batch's NamedSharding.
  """

  model: Any
  init: Callable[[jax.Array], TrainState]
  state_from_params: Callable[[Any], TrainState]
  init_rng: jax.Array
  abstract_state: TrainState
  state_sharding: Any
  train_step: Callable
  eval_step: Callable
  num_seeds: int = 1
  batch_sharding: Any = None


def count_params(params: Any) -> int:
  return sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(params))


def sharded_steps(model_spec: ModelSpec, run: RunSettings, optim_settings: optim.OptimSettings,
                  mix_settings: mixing.MixSettings, mesh, meta: input_pipeline.DatasetMeta,
                  *, batch_size: int) -> ShardedSteps:
  """Builds the model and optimizer and jits the steps with explicit shardings.

  `run` and `optim_settings` have their durations in steps
  (`durations.resolve`); `meta` gives the classes and image shape.
  """
  # The mesh's devices say what the program is compiled for (a dry run's target).
  model = model_spec.build(meta.num_classes, backends.for_devices(mesh.devices.flat))
  tx, schedule = optim.make_optimizer(optim_settings, run.total_steps,
                                      batch_size=batch_size)
  # Per seed the keys of a one-seed run; K seeds: (K,) keys, a replica axis.
  init_rng, dropout_rng, mix_rng = replicas.seed_keys(run.seeds)
  mix_fn = mixing.make_mix_fn(mix_settings, meta.num_classes)
  k = run.num_seeds

  def init_one(rng):
    dummy = jnp.zeros((1, *meta.image_shape), jnp.float32)
    params = model.init({"params": rng}, dummy, train=False)["params"]
    return TrainState(step=jnp.zeros((), jnp.int32), params=params,
                      opt_state=tx.init(params),
                      ema_params=params if run.uses_ema else None)

  def state_from_params(params):
    # Copies: the state is donated to the train step, so it must never share
    # a buffer with the caller's arrays or params with ema_params.
    copy = lambda tree: jax.tree_util.tree_map(jnp.copy, tree)  # noqa: E731
    return TrainState(step=jnp.zeros((), jnp.int32), params=copy(params),
                      opt_state=tx.init(params),
                      ema_params=copy(params) if run.uses_ema else None)

  init = replicas.over_seeds(init_one, k, in_axes=0, out_axes=replicas.STATE_AXES)
  abstract_state = jax.eval_shape(init, init_rng)
  # One seed's layout; K seeds add an unsharded leading axis.
  state_sharding = replicas.with_replica_axis(sharding.tree_shardings(
      jax.eval_shape(init_one, jax.random.key(0)), mesh, run.sharding_rules), k)
  data_sharding = sharding.batch_sharding(mesh, replica_axis=k > 1)
  repl = sharding.replicated(mesh)
  def seed_step(state, batch, base_rng, mix_rng):
    return steps.train_step(state, batch, model=model, tx=tx, schedule=schedule,
                            base_rng=base_rng, label_smoothing=run.label_smoothing,
                            ema_decay=run.ema_decay, mix_fn=mix_fn, mix_rng=mix_rng)

  one_step = replicas.over_seeds(seed_step, k, in_axes=(replicas.STATE_AXES, 0, 0, 0),
                                 out_axes=(replicas.STATE_AXES, 0))
  # The blocks' token stream split by batch: "fsdp" gathers weights per layer.
  train_step = jax.jit(
      sharding.split_blocks_by_batch(
          lambda state, batch: one_step(state, batch, dropout_rng, mix_rng), mesh),
      in_shardings=(state_sharding, data_sharding), out_shardings=(state_sharding, repl),
      donate_argnums=0)
  # Every seed's params on the same eval batch.
  eval_step = jax.jit(
      sharding.split_blocks_by_batch(replicas.over_seeds(
          functools.partial(steps.eval_step, model=model), k, in_axes=(0, None)), mesh),
      in_shardings=(state_sharding.params, sharding.batch_sharding(mesh)), out_shardings=repl)
  return ShardedSteps(model, init, state_from_params, init_rng, abstract_state,
                      state_sharding, train_step, eval_step, k, data_sharding)


def initial_state(settings: init_from.InitFromSettings, jitted: ShardedSteps) -> TrainState:
  """The step-0 state of a run without checkpoints: the initialisation, or,
  with `config.init_from`, the pretrained weights fitted to the model
  (`init_from.load`; the head and the parameters the source lacks at their
  initial values) with a fresh optimizer state and EMA = params, laid out
  with the state's shardings. Every process reads the source itself. The
  `LoadReport` is logged.

  Raises:
    errors.WeightsMismatchError: the source does not fit (nothing is loaded).
  """
  state = jax.jit(jitted.init, out_shardings=jitted.state_sharding)(jitted.init_rng)
  if not settings.enabled:
    return state
  # Host copies of the initial values (whole arrays on every process).
  init_params = multihost_utils.process_allgather(state.params, tiled=True)
  params, report = init_from.load(settings, jitted.model, init_params)
  for line in report.lines():
    (logging.warning if line.startswith("unused") else logging.info)(
        "init_from %s (%s): %s", settings.path, settings.format, line)
  placed = sharding.place(params, jitted.state_sharding.params)
  return jax.jit(jitted.state_from_params, out_shardings=jitted.state_sharding)(placed)


@dataclasses.dataclass(frozen=True)
class RunSetup:
  """What a run is built from before it reads data or writes anything (`set_up`).

  Attributes:
    sections: the config's typed sections (eval batch rounded to the mesh).
    mesh: the device mesh.
    meta: the data set as the model sees it.
    run: the run settings with durations in steps (epochs converted).
    steps: the model's state and jitted steps on the mesh (`sharded_steps`).
  """

  sections: TrainingSettings
  mesh: jax.sharding.Mesh
  meta: input_pipeline.DatasetMeta
  run: RunSettings
  steps: ShardedSteps


def set_up(settings: TrainingSettings | Any, devices=None,
           meta_fn: Callable[[Any], input_pipeline.DatasetMeta] = input_pipeline.dataset_meta,
           *, check_init_source: bool = True) -> RunSetup:
  """Checks `settings` (typed by `config_checks.check_config`; a ConfigDict
  is converted here, once) on the devices, builds the mesh over `devices`
  (default: all), reads
  the data set's facts with `meta_fn` (the dry run passes
  `input_pipeline.planned_meta`: no data needed), checks that
  `config.init_from.path` exists (unless `check_init_source` is False: the
  dry run plans without the pretrained weights, as without the data),
  converts epochs to steps and jits the sharded steps. Shared by
  `train_and_evaluate` and `dry_run.plan`.

  Raises:
    errors.ConfigError: an invalid field (one line naming it); a ValueError.
    errors.RunError: e.g. the data set is not prepared.
  """
  devices = list(jax.devices() if devices is None else devices)
  try:
    sections = config_checks.validate_config(settings, num_devices=len(devices))
    if check_init_source:
      init_from.check_source_exists(sections.init_from)
    mesh = sharding.make_mesh(sections.mesh, devices)
    meta = meta_fn(sections.input)
    # Epoch-valued cadences (eval/checkpoint/warmup/cooldown) -> steps.
    run, optim_settings = durations.resolve(
        sections.run, sections.optim, batch_size=sections.input.batch_size,
        num_train_examples=meta.num_train_examples)
    optim.check_schedule_length(optim_settings, run.total_steps)  # now in steps
  except errors.RunError:
    raise
  except ValueError as e:  # the sections' checks: one line naming the field
    raise errors.ConfigError(str(e)) from e
  # Outside the checks: an error here is the code's, and keeps its traceback.
  steps_on_mesh = sharded_steps(sections.model, run, optim_settings, sections.mixup, mesh,
                                meta, batch_size=sections.input.batch_size)
  return RunSetup(sections, mesh, meta, run, steps_on_mesh)


def train_and_evaluate(settings: TrainingSettings | Any, workdir: str,
                       devices=None) -> dict[str, Any]:
  """Trains `settings` in `workdir` (resuming if it holds a checkpoint) on
  `devices` (default: all; a resume may use other devices than the run it
  resumes, `stream_state`). `settings` are the config's typed sections as
  `config_checks.check_config` made them (`main` does, once); a ConfigDict
  is converted here, once.

  Order of business: everything that can be checked without the workdir
  (config, mesh, data set, durations: `set_up`; wandb installed, with
  `config.logging.wandb`), then the workdir's lock (one
  run per workdir), then the resume checks against the workdir's checkpoints
  and `config.json` (`resume`), and only then writes.

  Returns:
    The final evaluation metrics ({"eval_loss", "eval_accuracy"}, plus
    "eval_ema_*" with EMA and the "corrupt_*" metrics with config.robustness);
    with config.num_seeds = K > 1 each a list of K values in seed order.

  Raises:
    errors.RunError: a failure with a message meant for the user (invalid
      config, data set not prepared, workdir locked, a resume config that does
      not fit, no readable checkpoint, a checkpoint that could not be saved).
    errors.RunPreempted: SIGTERM or SIGINT stopped the run after saving the
      step all processes agreed on (`preemption`).
    NonFiniteLossError: a non-finite loss with `config.on_nonfinite="stop"`,
      or after `config.max_rollbacks` rollbacks.
  """
  workdir_lock.check_not_held(workdir)  # a second run stops here, in seconds
  # On a terminal from here on: INFO to the log file only, a progress line.
  with run_log.terminal() as line:
    setup = set_up(settings, devices)
    wandb_writer.check_installed(setup.sections.logging)
    # Leaving, in this order: a checkpoint save still in flight completes, the
    # log file gets any traceback, the lock is released, the progress line ends.
    with (workdir_lock.hold(workdir), run_log.to_file(workdir),
          contextlib.ExitStack() as leaving):
      return _train(setup, workdir, leaving, line)


def _train(setup: RunSetup, workdir: str, leaving: contextlib.ExitStack,
           line: progress.ProgressLine | None = None) -> dict[str, Any]:
  """The loop of `train_and_evaluate`, run while holding the workdir;
  `leaving` closes the checkpointer however the loop ends; `line` is the
  terminal's progress line (None: not a terminal, or not process 0)."""
  sections, mesh, meta, run = setup.sections, setup.mesh, setup.meta, setup.run
  config, input_config = sections.config, sections.input
  total_steps = run.total_steps
  logging.info("mesh %s; data set %s; %d train steps", dict(mesh.shape), meta, total_steps)

  jitted = setup.steps
  abstract_state, state_sharding = jitted.abstract_state, jitted.state_sharding
  train_step, eval_step = jitted.train_step, jitted.eval_step
  seeds = run.seeds  # K > 1: every metric a list of K values in this order
  num_params = count_params(abstract_state.params) // len(seeds)
  logging.info("model: %d parameters; seeds %s", num_params, list(seeds))

  # SIGTERM/SIGINT from here on: the loop saves an agreed step and stops.
  signals = leaving.enter_context(preemption.StopSignals())
  # Restore the newest readable checkpoint (one whose structure fits this
  # config) and where its stream stood, or initialise.
  previous_config = resume.previous_config(workdir)
  _check_same_seeds(previous_config, run)
  ckpt = leaving.enter_context(checkpointing.Checkpointer(
      os.path.join(workdir, "checkpoints"), save_every=run.checkpoint_every,
      keep=run.keep_checkpoints, async_save=run.async_checkpointing))
  restore = functools.partial(
      _restore_or_initialise, ckpt, jitted, sections, run,
      check=functools.partial(resume.check_structure, abstract_state=abstract_state,
                              config=config, previous_config=previous_config))
  state, stream = restore()
  start_step = int(state.step)
  if start_step:  # never init_from: the run's own progress wins
    logging.info("resumed from the checkpoint at step %d (stream at example %d of each "
                 "of its %d shards)", start_step, stream.examples, stream.shards)
  # The rows of every global batch this process reads (its devices' rows).
  rows = stream_state.process_rows(sharding.batch_sharding(mesh), input_config.batch_size)
  shards_read = stream_state.shards_of(rows, stream)
  logging.info("input: rows [%d, %d) of each global batch of %d, from shard streams %s of %d",
               *rows, stream.batch_size, list(shards_read), stream.shards)
  if stream.shards % jax.process_count():
    logging.warning("the stream's %d shards do not split over %d processes: each reads "
                    "the records of %d shards for its rows (set input.stream_shards to a "
                    "multiple of every process count a workdir will run on)",
                    stream.shards, jax.process_count(), len(shards_read))
  # The workdir records the config once it has passed every check and run a
  # step (an out-of-memory first step must not replace config.json).
  record_config = functools.partial(resume.record_config, config, workdir, previous_config,
                                    start_step=start_step)
  # TensorBoard and logging, and W&B with config.logging.wandb (process 0);
  # leaving closes them (a W&B run left by an exception is marked failed).
  writer = leaving.enter_context(wandb_writer.run_writer(sections.logging, workdir, config))

  def batches_after(step: int, position: stream_state.StreamState):
    """The batches of steps step + 1 ... total_steps from `position`, each on
    the devices `input.device_prefetch` steps before its step (none read
    past the last); K seeds: each seed's own stream, stacked (`replicas`)."""
    streams = [input_pipeline.create_train_dataset(
        input_config, seed=seed, stream_shards=position.shards,
        start_example=position.examples, rows=rows).as_numpy_iterator() for seed in seeds]
    return device_prefetch.prefetch_to_device(
        itertools.islice(replicas.stacked(streams), max(total_steps - step, 0)),
        mesh, input_config.device_prefetch, replica_axis=len(seeds) > 1)

  train_iter = batches_after(start_step, stream)
  report = periodic_actions.ReportProgress(num_train_steps=total_steps, writer=writer)
  shown = progress.TrainProgress(line, total_steps, start_step)
  shown.note(f"log: {run_log.log_path(workdir)}")
  if start_step:
    shown.note(f"resumed from the checkpoint at step {start_step}")
  shown.show()
  if start_step == 0:
    writer.write_hparams({"num_params": num_params, "total_steps": total_steps,
                          "num_seeds": len(seeds)})
  diagnose = None
  if sections.diagnostics.enabled:
    diagnose = diagnostics.Diagnostics(sections.diagnostics, jitted.model, input_config,
                                       state_sharding.params, mesh)
    if start_step == 0:
      writer.write_scalars(0, diagnose(state.params))

  train_metrics = None
  pending = None  # (step, (loss, grad norm)) of the previous step, checked one step late
  eval_metrics: dict[str, Any] = {}
  stream_step = start_step  # `stream` is the position after this step
  step = start_step
  stopped = False
  # Every jitted function carries explicit shardings: no ambient mesh needed.
  while step < total_steps and not stopped:
    step += 1
    try:
      batch = next(train_iter)
      state, step_metrics = train_step(state, batch)
      if step == start_step + 1:
        jax.block_until_ready(step_metrics)
        record_config()
      # Checking the previous step's values keeps the device one step ahead.
      if pending is not None:
        _check_finite(*pending, ckpt.latest_step(), seeds)
      pending = (step, (step_metrics.loss.compute(), step_metrics.grad_norm.compute()))
      train_metrics = (step_metrics if train_metrics is None
                       else train_metrics.merge(step_metrics))
      report(step, time.time())
      shown.step(step)
      ckpt.check_for_errors()  # a failed background save surfaces at once

      is_last = step == total_steps
      if step % run.log_every == 0 or is_last:
        _check_finite(*pending, ckpt.latest_step(), seeds)
        # Python floats: the metrics line shows 6 significant digits, not 16.
        logged = {f"train_{k}": replicas.value(v) for k, v in train_metrics.compute().items()}
        writer.write_scalars(step, replicas.scalars(logged, seeds))
        shown.metrics(loss=replicas.mean(logged["train_loss"]),
                      accuracy=replicas.mean(logged["train_accuracy"]))
        train_metrics = None
      if step % run.eval_every == 0 or is_last:
        with report.timed("eval"):
          eval_metrics = evaluate_all(eval_step, state, input_config, mesh)
        writer.write_scalars(step, replicas.scalars(eval_metrics, seeds))
        shown.results(step, eval_metrics)
      if diagnose is not None and sections.diagnostics.due(step, total_steps):
        with report.timed("diagnostics"):
          writer.write_scalars(step, diagnose(state.params))
      if corruption_due(sections.robustness, step, total_steps):
        with report.timed("corruption_eval"):
          corrupt_metrics = evaluate_corruptions(eval_step, state, sections.robustness,
                                                 input_config, mesh)
        writer.write_scalars(step, replicas.scalars(corrupt_metrics, seeds))
        shown.results(step, corrupt_metrics)
        eval_metrics.update(corrupt_metrics)
      stopped = signals.should_stop(step)  # every process, every step
      if step % run.checkpoint_every == 0 or is_last or stopped:
        _check_finite(*pending, ckpt.latest_step(), seeds)
        ckpt.save(step, state, force=is_last or stopped,
                  stream=stream.advanced(step - stream_step).to_json())
    except NonFiniteLossError as error:
      if run.on_nonfinite != "rollback":
        raise
      failed_at = stream.advanced(error.step - stream_step)  # through the failed batch
      state, stream = _roll_back(error, restore, failed_at, run, ckpt)
      step = stream_step = int(state.step)
      train_iter = batches_after(step, stream)
      pending = train_metrics = None
      stopped = False  # a stop asked for meanwhile is asked again by the next step

  shown.close()  # the last state stays as a normal line
  if stopped:
    ckpt.close()  # the stop step's checkpoint is complete before the run says so
    writer.flush()
    raise errors.RunPreempted(
        f"stopped at step {step} on {signals.received}: its checkpoint is saved; resume "
        "with the same command", step=step)
  if start_step >= total_steps:  # resumed at the end: nothing to train
    record_config()
  if not eval_metrics:  # resumed at the end: nothing trained, still report
    eval_metrics = evaluate_all(eval_step, state, input_config, mesh)
    if sections.robustness.enabled:
      eval_metrics.update(evaluate_corruptions(eval_step, state, sections.robustness,
                                               input_config, mesh))
    writer.write_scalars(int(state.step), replicas.scalars(eval_metrics, seeds))
  ckpt.close()  # waits for the last save: final_metrics.json follows a finished checkpoint
  writer.flush()
  if jax.process_index() == 0:
    final = dict(eval_metrics, step=int(state.step))
    if len(seeds) > 1:
      final["seeds"] = list(seeds)
    (epath.Path(workdir) / "final_metrics.json").write_text(json.dumps(final, indent=2))
  shown.note(f"final (step {int(state.step)}): {progress.format_metrics(eval_metrics)}")
  return eval_metrics


def _check_same_seeds(previous_config: dict | None, run: RunSettings) -> None:
  """Stops a resume whose config.num_seeds differs from the workdir's."""
  if previous_config is None:
    return
  before = previous_config.get("num_seeds", 1)
  if before != run.num_seeds:
    raise errors.ConfigMismatchError(
        f"config.num_seeds={run.num_seeds}, but this workdir trains {before} seed(s) "
        f"(its config.json): resume with --config.num_seeds={before}, or pass a new --workdir")


def _restore_or_initialise(ckpt: checkpointing.Checkpointer, jitted: ShardedSteps,
                           sections: TrainingSettings, run: RunSettings, *,
                           check: Callable[[int, Any], None]
                           ) -> tuple[TrainState, stream_state.StreamState]:
  """The newest readable checkpoint and where its stream stood
  (`stream_state.resumed`), or the initial state (`initial_state`) at the
  start of a fresh stream (`input.stream_shards`, default the process count)."""
  batch_size = sections.input.batch_size
  state, latest = ckpt.restore_latest(jitted.abstract_state, jitted.state_sharding,
                                      check=check)
  if latest is None:
    shards = sections.input.stream_shards or jax.process_count()
    return initial_state(sections.init_from, jitted), stream_state.fresh(
        batch_size=batch_size, shards=shards)
  saved = ckpt.saved_stream(latest)
  stored = None if saved is None else stream_state.StreamState.from_json(saved)
  stream = stream_state.resumed(
      stored, step=latest, batch_size=batch_size, process_count=jax.process_count(),
      allow_batch_size_change=run.allow_batch_size_change)
  if stored is not None and stream.batch_size != stored.batch_size:
    logging.warning("config.input.batch_size changed from %d to %d "
                    "(config.allow_batch_size_change): the stream goes on at example %d "
                    "of each of its %d shards, the first not yet seen", stored.batch_size,
                    batch_size, stream.examples, stream.shards)
  return state, stream


def _roll_back(error: NonFiniteLossError, restore: Callable[[], Any],
               failed_at: stream_state.StreamState, run: RunSettings,
               ckpt: checkpointing.Checkpointer
               ) -> tuple[TrainState, stream_state.StreamState]:
  """`config.on_nonfinite = "rollback"`: the newest good checkpoint (or the
  initialisation) with the next global batches of its stream skipped: at
  least `run.rollback_skip_batches`, and through the batch of the step that
  failed (`failed_at`: the stream's position after it). The rollbacks so far
  (`failed_at.rollbacks`, this run's included) stay recorded, so checkpoints
  saved later carry them.

  Raises:
    NonFiniteLossError: `error`, once `run.max_rollbacks` rollbacks were made.
  """
  done = failed_at.rollbacks
  if len(done) >= run.max_rollbacks:
    raise NonFiniteLossError(
        f"{error} Gave up after {len(done)} rollbacks (config.max_rollbacks="
        f"{run.max_rollbacks}) at steps {[r.step for r in done]}.", step=error.step) from error
  ckpt.wait_until_finished()  # a save in flight is the newest good checkpoint
  state, restored = restore()
  restored_step = int(state.step)
  failed_batch = failed_at.examples // failed_at.per_shard
  batches = max(run.rollback_skip_batches,
                failed_batch - restored.examples // restored.per_shard)
  rolled = dataclasses.replace(restored, rollbacks=done).skipping(
      batches, step=error.step, restored_step=restored_step)
  skip = rolled.rollbacks[-1]
  logging.warning(
      "non-finite loss at step %d: rolled back to step %d and skipped the stream's global "
      "batches %d-%d (%d batches); rollback %d of at most %d", error.step, restored_step,
      skip.first_batch, skip.first_batch + skip.batches - 1, skip.batches, len(rolled.rollbacks),
      run.max_rollbacks)
  return state, rolled
