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
features and the shipped split sizes, nothing read, prepared or downloaded,
and TFDS not asked whether the data set is prepared unless its split sizes
are not shipped;
`config.init_from`'s weights are neither read nor looked for; the sharded
steps), then its train step lowered and compiled on abstract
inputs: ShapeDtypeStructs that carry their shardings. The report holds the
parameter count, the FLOPs of one step and each device's memory.

FLOPs per step and device count every layer whatever model.encoder_mode: a
scanned encoder (one compiled loop over its blocks; one per stage of Swin
and CSwin, per kind of layer of CaiT) counts as often as it runs, as a
Python loop of blocks does. Two counts:

- `flops`: the matrix products, every dot_general and convolution at 2 per
  multiply-add, of the step's jaxpr with a scan's body counted `length`
  times (`jaxpr_costs.matmul_flops`), over the devices. Forward, backward
  and whatever the backward recomputes (model.remat; a scan's
  model.encoder_residuals="dots", the CPU default, recomputes attention's
  batched products). The same on every backend, and in both modes for the
  same remat and residuals: the figure to compare. (Model FLOPs for MFU
  leave the recomputation out: `target_dry_run` traces the step with remat
  off for them.)
- `xla_flops`: XLA's count of everything the compiled step does (also
  elementwise work, reductions and, on CPU, dropout's random bits), with
  each loop body's cost added again for every further iteration
  (`hlo_costs.step_costs`: XLA's own cost analysis visits a loop's body
  once, which made a scanned encoder count as one block). It depends on the
  backend and on how each mode compiles (a scan computes per iteration what
  a loop of blocks may fold into constants). None on a GPU, whose cuBLAS
  calls hide their FLOPs from XLA's count.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Sequence

import jax
import jax.numpy as jnp

from vit_spectral import backends
from vit_spectral.data import input_pipeline
from vit_spectral.planning import hlo_costs, jaxpr_costs
from vit_spectral.sections.run import TrainingSettings
from vit_spectral.training import sharding, trainer

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
    num_params: parameters of the model (one seed's; not counting optimizer
      state or EMA).
    flops: matmul FLOPs of one train step per device, every layer (module
      docstring).
    xla_flops: XLA's count of all the compiled step's FLOPs per device,
      every loop iteration (module docstring); None on a GPU.
    uncounted_loops: loops in the compiled step whose trip count depends on
      the data, which `xla_flops` counts once (none in the recipes).
    memory: bytes per device of the compiled step: argument, output, temp,
      alias (outputs written into donated arguments) and total = argument +
      output + temp - alias.
    compile_seconds: wall time of tracing, lowering and compiling the step.
    backend_defaults: the backend-dependent defaults the step was built with
      (`resolved_defaults`).
    attention_kernels: fused attention custom calls in the compiled step, by
      kernel (`hlo_costs.attention_kernels`; empty = XLA's ops).
  """

  mesh_shape: dict[str, int]
  batch_size: int
  eval_batch_size: int
  meta: input_pipeline.DatasetMeta
  total_steps: int
  num_params: int
  flops: float
  xla_flops: float | None
  uncounted_loops: int
  memory: dict[str, int]
  compile_seconds: float
  backend_defaults: dict[str, Any] = dataclasses.field(default_factory=dict)
  attention_kernels: dict[str, int] = dataclasses.field(default_factory=dict)

  def summary(self) -> str:
    """A few lines for the terminal."""
    mesh = " x ".join(f"{axis} {size}" for axis, size in self.mesh_shape.items())
    flops = f"{self.flops:.4g} in matmuls, every layer"
    if self.xla_flops is not None:
      once = (f"; {self.uncounted_loops} data-dependent loop(s) counted once"
              if self.uncounted_loops else "")
      flops += f" (all operations, XLA's count: {self.xla_flops:.4g}{once})"
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
        defaults_line(self.backend_defaults, self.attention_kernels),
    ])


def defaults_line(defaults: dict[str, Any], kernels: dict[str, int]) -> str:
  """One line: the backend defaults a step was built with and the attention
  kernel it compiled."""
  compiled = (", ".join(f"{kernel} x{n}" for kernel, n in kernels.items())
              if kernels else "xla (no fused kernel in the step)")
  settings = ", ".join(f"{k}={v}" for k, v in defaults.items()
                       if k not in ("platform", "device_kind"))
  return (f"defaults for {defaults.get('platform')} ({defaults.get('device_kind') or 'any'}):"
          f" {settings}; attention compiled: {compiled}")


def resolved_defaults(model: Any, backend: backends.Backend) -> dict[str, Any]:
  """The backend-dependent settings `model` was built with (`ModelSpec.build`
  writes `backend`'s in): platform, device kind, encoder mode, residuals
  ("remat" with model.remat) and unroll (scan), the fused attention kernel."""
  encoder = getattr(model, "encoder", None)
  defaults = backend.defaults(encoder.mode if encoder else "scan")
  if encoder is not None:
    defaults.pop("encoder_unrolled")
    defaults["encoder_mode"] = encoder.mode
    defaults["encoder_residuals"] = "remat" if encoder.remat else encoder.residual_policy()
    if encoder.mode == "scan" and encoder.unroll is not None:
      defaults["encoder_unroll"] = encoder.unroll
  return defaults


def _gib(num_bytes: int) -> str:
  return f"{num_bytes / 2**30:.3f} GiB"


def abstract_batch(batch_size: int, image_shape: tuple[int, ...],
                   mesh: jax.sharding.Mesh, num_seeds: int = 1
                   ) -> dict[str, jax.ShapeDtypeStruct]:
  """The train batch as ShapeDtypeStructs split over "data" × "fsdp": {"image":
  (B, H, W, C) float32, "label": (B,) int32}; (K, B, ...) for K seeds
  (`training.replicas`)."""
  data = sharding.batch_sharding(mesh, replica_axis=num_seeds > 1)
  lead = (num_seeds,) if num_seeds > 1 else ()
  return {"image": jax.ShapeDtypeStruct((*lead, batch_size, *image_shape), jnp.float32,
                                        sharding=data),
          "label": jax.ShapeDtypeStruct((*lead, batch_size), jnp.int32, sharding=data)}


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

  sections: TrainingSettings
  mesh: jax.sharding.Mesh
  meta: input_pipeline.DatasetMeta
  total_steps: int
  steps: trainer.ShardedSteps
  state: Any
  batch: dict[str, jax.ShapeDtypeStruct]

  @property
  def num_params(self) -> int:
    return trainer.count_params(self.state.params) // self.steps.num_seeds

  @property
  def backend_defaults(self) -> dict[str, Any]:
    """The defaults the step was built with for its devices (`resolved_defaults`)."""
    return resolved_defaults(self.steps.model, backends.for_devices(self.mesh.devices.flat))

  def trace(self):
    """The train step traced on the abstract inputs (`.jaxpr`, `.lower()`)."""
    return self.steps.train_step.trace(self.state, self.batch)

  def lower(self):
    """The train step lowered to StableHLO with its shardings (`.compile()`)."""
    return self.trace().lower()


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
  batch = abstract_batch(setup.sections.input.batch_size, setup.meta.image_shape, setup.mesh,
                         setup.run.num_seeds)
  return Plan(setup.sections, setup.mesh, setup.meta, setup.run.total_steps, setup.steps,
              state, batch)


def dry_run(config: Any, devices: Sequence[jax.Device] | None = None) -> DryRunReport:
  """`plan`, then lowers and compiles the step: what `train.py --dry_run` prints.

  Raises:
    ValueError: as `plan`.
  """
  step = plan(config, devices)
  start = time.perf_counter()
  traced = step.trace()
  compiled = traced.lower().compile()
  compile_seconds = time.perf_counter() - start
  xla_flops, uncounted = None, 0
  if step.mesh.devices.flat[0].platform != "gpu":   # cuBLAS calls hide their FLOPs from XLA
    costs = hlo_costs.step_costs(compiled)
    xla_flops, uncounted = costs.flops, len(costs.uncounted_loops)
  return DryRunReport(
      mesh_shape=dict(step.mesh.shape), batch_size=step.sections.input.batch_size,
      eval_batch_size=step.sections.input.eval_batch_size, meta=step.meta,
      total_steps=step.total_steps, num_params=step.num_params,
      flops=matmul_flops(step, traced), xla_flops=xla_flops, uncounted_loops=uncounted,
      memory=memory_of(compiled), compile_seconds=compile_seconds,
      backend_defaults=step.backend_defaults,
      attention_kernels=hlo_costs.attention_kernels(compiled.as_text()))


def matmul_flops(step: Plan, traced=None) -> float:
  """The matmul FLOPs of one step per device, every layer (module docstring),
  from `traced` (`step.trace()`, traced here where not given)."""
  traced = step.trace() if traced is None else traced
  return jaxpr_costs.matmul_flops(traced.jaxpr) / step.mesh.devices.size


def memory_of(compiled) -> dict[str, int]:
  """Bytes per device of a compiled step: MEMORY_FIELDS and their total."""
  stats = compiled.memory_analysis()
  memory = {k: int(getattr(stats, f"{k}_size_in_bytes")) for k in MEMORY_FIELDS}
  memory["total"] = memory["argument"] + memory["output"] + memory["temp"] - memory["alias"]
  return memory
