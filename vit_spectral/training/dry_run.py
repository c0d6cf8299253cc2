"""`train.py --dry_run`: will this config run on these devices? Answered
without data, without writing anything, in the time of one compile.

  report = dry_run(config)                        # all devices
  report = dry_run(config, jax.devices()[:4])     # a mesh on the first 4
  print(report.summary())
  plan(config, devices)                           # device-count checks only

Steps: the trainer's own `trainer.set_up` (`config_checks.validate_config`:
every field, the train batch must split over the batch-parallel devices, the
eval batch is rounded up; the mesh on the devices; the data set's classes,
channels and split sizes from `input_pipeline.planned_meta`: TFDS builder
features and the shipped split sizes, nothing read, prepared or downloaded;
`config.init_from`'s weights are neither read nor looked for; the sharded
steps), then its train step lowered and compiled on abstract
inputs: ShapeDtypeStructs that carry their shardings. The report holds the
parameter count, XLA's FLOP count of one step and each device's memory.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Sequence

import jax
import jax.numpy as jnp

from vit_spectral.data import input_pipeline
from vit_spectral.training import hlo_costs, run_settings, sharding, trainer

# Per-device buffers of the compiled step (jax's CompiledMemoryStats fields).
MEMORY_FIELDS = ("argument", "output", "temp", "alias")


@dataclasses.dataclass(frozen=True)
class DryRunReport:
  """What one compile of the sharded train step tells about a config.

  Attributes:
    mesh_shape: {"data": d, "fsdp": f, "model": m}.
    batch_size: global train batch B (rows per device: B / (d·f)).
    eval_batch_size: global eval batch, rounded up to fit the mesh.
    meta: the data set as the model sees it (`input_pipeline.planned_meta`).
    total_steps: the run's optimizer steps (epochs converted).
    num_params: parameters of the model (not counting optimizer state or EMA).
    flops: XLA's estimate of the FLOPs of one train step on one device (None
      where the backend gives no cost analysis). XLA counts a loop's body
      once: with a scanned encoder, that is one block of `scanned_depth`.
    scanned_depth: the encoder's depth when it is a scan over >1 blocks
      (model.encoder.mode="scan"), else None.
    memory: bytes per device of the compiled step: argument, output, temp,
      alias (outputs written into donated arguments) and total = argument +
      output + temp - alias.
    compile_seconds: wall time of lowering and compiling the step.
  """

  mesh_shape: dict[str, int]
  batch_size: int
  eval_batch_size: int
  meta: input_pipeline.DatasetMeta
  total_steps: int
  num_params: int
  flops: float | None
  scanned_depth: int | None
  memory: dict[str, int]
  compile_seconds: float

  def summary(self) -> str:
    """A few lines for the terminal."""
    mesh = " x ".join(f"{axis} {size}" for axis, size in self.mesh_shape.items())
    flops = "unknown (no cost analysis)" if self.flops is None else f"{self.flops:.4g}"
    if self.flops is not None and self.scanned_depth:
      flops += (f" (XLA counts the scanned encoder's body once: 1 of its "
                f"{self.scanned_depth} blocks; --config.model.encoder_mode=loop "
                "counts all)")
    memory = ", ".join(f"{k} {_gib(v)}" for k, v in self.memory.items() if k != "total")
    return "\n".join([
        f"dry run: the config compiles on a mesh of {mesh} (devices: "
        f"{math.prod(self.mesh_shape.values())}) in {self.compile_seconds:.1f} s",
        f"data: {self.meta.name}, {self.meta.num_classes} classes, images "
        f"{'x'.join(map(str, self.meta.image_shape))}, {self.total_steps} train steps",
        f"batch: {self.batch_size} train, {self.eval_batch_size} eval (global)",
        f"parameters: {self.num_params:,}",
        f"FLOPs per step and device: {flops}",
        f"memory per device: {_gib(self.memory['total'])} ({memory})",
    ])


def _gib(num_bytes: int) -> str:
  return f"{num_bytes / 2**30:.3f} GiB"


def abstract_batch(batch_size: int, image_shape: tuple[int, ...],
                   mesh: jax.sharding.Mesh) -> dict[str, jax.ShapeDtypeStruct]:
  """The train batch as ShapeDtypeStructs split over "data" × "fsdp": {"image":
  (B, H, W, C) float32, "label": (B,) int32}."""
  data = sharding.batch_sharding(mesh)
  return {"image": jax.ShapeDtypeStruct((batch_size, *image_shape), jnp.float32,
                                        sharding=data),
          "label": jax.ShapeDtypeStruct((batch_size,), jnp.int32, sharding=data)}


@dataclasses.dataclass(frozen=True)
class Plan:
  """A config's sharded train step on a mesh, ready to lower (`plan`).

  Attributes:
    sections: the config's typed sections (eval batch rounded to the mesh).
    mesh: the device mesh.
    meta: the data set as the model sees it (`input_pipeline.planned_meta`).
    total_steps: the run's optimizer steps (epochs converted).
    steps: the trainer's jitted steps and abstract state (`trainer.sharded_steps`).
    state: the TrainState as ShapeDtypeStructs with their shardings.
    batch: the train batch likewise (`abstract_batch`).
  """

  sections: run_settings.TrainingSettings
  mesh: jax.sharding.Mesh
  meta: input_pipeline.DatasetMeta
  total_steps: int
  steps: trainer.ShardedSteps
  state: Any
  batch: dict[str, jax.ShapeDtypeStruct]

  @property
  def num_params(self) -> int:
    return trainer.count_params(self.state.params)

  def lower(self):
    """The train step lowered to StableHLO with its shardings (`.compile()`)."""
    return self.steps.train_step.lower(self.state, self.batch)


def plan(config: Any, devices: Sequence[jax.Device] | None = None) -> Plan:
  """Validates `config` and lays its train step out on a mesh over `devices`
  (default: all): every check that depends on the device count (batches,
  mesh, parameter shardings), without tracing the step.

  Raises:
    ValueError: an invalid field (one line naming it), including a train
      batch the mesh cannot split.
    DatasetNotPreparedError: the data set's split sizes are unknown without it.
  """
  setup = trainer.set_up(config, devices, meta_fn=input_pipeline.planned_meta,
                         check_init_source=False)
  state = jax.tree_util.tree_map(
      lambda leaf, s: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=s),
      setup.steps.abstract_state, setup.steps.state_sharding)
  batch = abstract_batch(setup.sections.input.batch_size, setup.meta.image_shape, setup.mesh)
  return Plan(setup.sections, setup.mesh, setup.meta, setup.run.total_steps, setup.steps,
              state, batch)


def dry_run(config: Any, devices: Sequence[jax.Device] | None = None) -> DryRunReport:
  """`plan`, then lowers and compiles the step: what `train.py --dry_run` prints.

  Raises:
    as `plan`.
  """
  step = plan(config, devices)
  start = time.perf_counter()
  compiled = step.lower().compile()
  compile_seconds = time.perf_counter() - start
  return DryRunReport(
      mesh_shape=dict(step.mesh.shape), batch_size=step.sections.input.batch_size,
      eval_batch_size=step.sections.input.eval_batch_size, meta=step.meta,
      total_steps=step.total_steps, num_params=step.num_params,
      flops=_flops(compiled), scanned_depth=_scanned_depth(step.steps.model),
      memory=memory_of(compiled),
      compile_seconds=compile_seconds)


def _scanned_depth(model) -> int | None:
  depth = getattr(model, "depth", None)    # None: a backbone of stages (Swin), no one depth
  scanned = depth is not None and model.encoder.mode == "scan" and depth > 1
  return depth if scanned else None


def _flops(compiled) -> float | None:
  cost = hlo_costs.xla_cost(compiled)
  return float(cost["flops"]) if "flops" in cost else None


def memory_of(compiled) -> dict[str, int]:
  """Bytes per device of a compiled step: MEMORY_FIELDS and their total."""
  stats = compiled.memory_analysis()
  memory = {k: int(getattr(stats, f"{k}_size_in_bytes")) for k in MEMORY_FIELDS}
  memory["total"] = memory["argument"] + memory["output"] + memory["temp"] - memory["alias"]
  return memory
