"""`train.py --dry_run --target=v5litepod-16`: the recipe's real sharded train
step compiled by the TPU compiler for a named Cloud TPU slice (or by the GPU
compiler for a GPU host, `--target=a3-highgpu-8g`), on a machine without
either, and what the compiler says of it.

  report = target_dry_run(config, "v5litepod-16")   # or raises HbmExceededError
  print(report.summary()); json.dump(report.to_json(), f)

The step is the trainer's own (`dry_run.plan`: `trainer.set_up` and
`sharded_steps` with the recipe's batch, mesh, dtype, remat and FSDP) over a
mesh of the target's abstract devices (`tpu_targets`, `gpu_targets`); it is
lowered and compiled ahead of time (as MaxText's train_compile.py does) and
nothing runs. From the compiled step (per chip; per GPU on a GPU target):

- HBM per chip: the TPU compiler's memory analysis (arguments, outputs,
  temporaries, aliased = outputs written into the donated state; total =
  arguments + outputs + temporaries − aliased) against the chip's HBM. A step
  that does not fit is refused by the compiler itself (RESOURCE_EXHAUSTED,
  with what it needs and what it has); `HbmExceededError` then says so in one
  line with the largest arrays of the step and the settings that would make
  it fit, each compiled for the slice to give its own figure.
- FLOPs and bytes accessed per chip, every layer counted (`hlo_costs`: XLA
  counts a scanned encoder's body once); the collectives in the step's HLO.
  The GPU compiler gives no cost analysis and its cuBLAS calls hide their
  FLOPs from XLA's count, so on a GPU target the FLOPs are the step's matmul
  FLOPs from its jaxpr (`jaxpr_costs`, rematerialisation included) and the
  bytes XLA's count of the GPU program by the CPU client's cost analysis.
- An estimated step time: a roofline, the largest of compute (FLOPs over the
  chip's peak bf16 FLOP/s), HBM (bytes accessed over its bandwidth) and ICI
  (collective bytes over its one-way bandwidth), so a lower bound that
  assumes perfect overlap. The compiler's own `optimal_seconds` is not used:
  it counts each loop body once and comes out negative for such steps (−27 s
  for DeiT-S on v5e-16); it is reported only where positive and the step has
  no loop to add. From the step time: images/s and an MFU ceiling, the
  model's matrix FLOPs (`jaxpr_costs.matmul_flops` of the step traced with
  remat off: forward and backward, no recomputation) over what the chips
  could do in that time.

These are the compiler's estimates for a chip nobody ran on, not
measurements.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import time
from typing import Any

import jax

from vit_spectral import errors
from vit_spectral.planning import dry_run, gpu_targets, hlo_costs, jaxpr_costs, tpu_targets

GIB = 2**30
# Halvings of the batch tried for a step that does not fit.
MAX_BATCH_HALVINGS = 4
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT])i?B?\b")
_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


class HbmExceededError(errors.RunError):
  """The step does not fit the chips' HBM (a GPU's memory); the message is one
  line: needed against available, the largest arrays, and settings that
  would fit. `report` is the same as JSON."""

  def __init__(self, message: str, report: dict[str, Any]):
    super().__init__(message)
    self.report = report


@dataclasses.dataclass(frozen=True)
class Roofline:
  """A step-time estimate: the slowest of compute, HBM and ICI time."""

  compute_seconds: float
  hbm_seconds: float
  ici_seconds: float

  @property
  def seconds(self) -> float:
    return max(self.compute_seconds, self.hbm_seconds, self.ici_seconds)

  @property
  def bound(self) -> str:
    parts = {"compute": self.compute_seconds, "HBM": self.hbm_seconds, "ICI": self.ici_seconds}
    return max(parts, key=parts.get)


def roofline(flops: float, bytes_accessed: float, collective_bytes: float,
             target) -> Roofline:
  """Per-chip figures -> the time each resource of `target` (a TpuTarget or
  GpuTarget) needs (module docstring). ICI stands for NVLink on a GPU."""
  return Roofline(compute_seconds=flops / target.peak_flops,
                  hbm_seconds=bytes_accessed / target.memory_bytes_per_s,
                  ici_seconds=collective_bytes / target.interconnect_bytes_per_s)


def parse_target(name: str):
  """The TPU slice (`tpu_targets.TpuTarget`) or GPU hosts
  (`gpu_targets.GpuTarget`) `name` names.

  Raises:
    tpu_targets.UnknownTargetError: neither (one line listing the known names).
  """
  gpu = gpu_targets.parse_target(name)
  if gpu is not None:
    return gpu
  try:
    return tpu_targets.parse_target(name)
  except tpu_targets.UnknownTargetError:
    raise tpu_targets.UnknownTargetError(
        f"--target={name}: not a known TPU slice or GPU host; TPU slices: "
        f"{', '.join(tpu_targets.known_targets())} (v5e-N is v5litepod-N; KxNAME is K "
        f"slices); GPU hosts: {', '.join(gpu_targets.known_targets())} (KxNAME is K "
        "hosts)") from None


@dataclasses.dataclass(frozen=True)
class TargetReport:
  """What the TPU (GPU) compiler says of a config's train step on a target.

  Memory, FLOPs, bytes and collectives are per chip (per GPU) and per step;
  `flops_source` says where the FLOPs come from: "HLO" (the compiled step,
  every loop iteration) or "jaxpr" (its matmuls, on a GPU target).
  """

  target: str
  description: str
  chips: int
  device_word: str
  peak_flops: float
  flops_source: str
  mesh_shape: dict[str, int]
  batch_size: int
  num_params: int
  memory: dict[str, int]
  hbm_bytes: int
  flops: float
  compiled_flops: float
  bytes_accessed: float
  model_flops: float
  loop_iterations_added: int
  uncounted_loops: int
  roofline: Roofline
  compiler_seconds: float | None
  collectives: tuple[hlo_costs.Collective, ...]
  compile_seconds: float
  backend_defaults: dict[str, Any] = dataclasses.field(default_factory=dict)
  attention_kernels: dict[str, int] = dataclasses.field(default_factory=dict)

  @property
  def fits(self) -> bool:
    return self.memory["total"] <= self.hbm_bytes

  @property
  def step_seconds(self) -> float:
    return self.roofline.seconds

  @property
  def images_per_second(self) -> float:
    return self.batch_size / self.step_seconds

  @property
  def mfu_ceiling(self) -> float:
    return self.model_flops / (self.step_seconds * self.peak_flops)

  def summary(self) -> str:
    mesh = " x ".join(f"{axis} {size}" for axis, size in self.mesh_shape.items())
    parts = ", ".join(f"{name} {self.memory[key] / GIB:.2f}" for key, name in (
        ("argument", "arguments"), ("output", "outputs"), ("temp", "temporaries"),
        ("alias", "aliased")))
    line = self.roofline
    estimate = ("" if self.compiler_seconds is None
                else f"; the compiler's own estimate: {self.compiler_seconds * 1e3:.1f} ms")
    wire = ", ".join(f"{c.kind} x{c.count} {c.bytes / 2**20:.1f} MiB"
                     for c in self.collectives) or "none"
    loops = (f" ({self.compiled_flops / 1e12:.3g} as compiled, which counts each loop "
             f"body once; {self.loop_iterations_added} loop iterations added)"
             if self.loop_iterations_added and self.flops_source == "HLO" else "")
    if self.flops_source != "HLO":
      loops = f" (matmuls, from the step's {self.flops_source})"
    unknown = (f"; {self.uncounted_loops} data-dependent loops (random sampling) counted once"
               if self.uncounted_loops else "")
    word = self.device_word
    compiler = "TPU" if word == "chip" else "GPU"
    return "\n".join([
        f"{compiler} dry run for {self.description}",
        f"mesh: {mesh}; compiled by the {compiler} compiler in {self.compile_seconds:.1f} s",
        f"batch: {self.batch_size} global ({self.batch_size // max(1, self._batch_devices)} "
        f"per {word}); parameters: {self.num_params:,}",
        f"{'HBM' if word == 'chip' else 'memory'} per {word}: "
        f"{self.memory['total'] / GIB:.2f} GiB of "
        f"{self.hbm_bytes / GIB:g} GiB, {'fits' if self.fits else 'does NOT fit'} "
        f"({parts} GiB)",
        f"per step and {word}: {self.flops / 1e12:.3g} TFLOP{loops}, "
        f"{self.bytes_accessed / 1e9:.3g} GB accessed{unknown}",
        f"estimated step time: {self.step_seconds * 1e3:.1f} ms, {line.bound}-bound "
        f"(roofline: compute {line.compute_seconds * 1e3:.1f} ms, HBM "
        f"{line.hbm_seconds * 1e3:.1f} ms, {'ICI' if word == 'chip' else 'NVLink'} "
        f"{line.ici_seconds * 1e3:.1f} ms){estimate}",
        f"=> {self.images_per_second:,.0f} images/s on {self.chips} {word}"
        f"{'s' if self.chips != 1 else ''} "
        f"({self.images_per_second / self.chips:,.0f} per {word}), MFU ceiling "
        f"{100 * self.mfu_ceiling:.0f}% (model matmul FLOPs "
        f"{self.model_flops / 1e12:.3g} TFLOP per {word})",
        f"collectives per step and {word}: {wire}",
        dry_run.defaults_line(self.backend_defaults, self.attention_kernels),
        f"(the {compiler} compiler's estimates, not measurements)",
    ])

  @property
  def _batch_devices(self) -> int:
    return self.mesh_shape.get("data", 1) * self.mesh_shape.get("fsdp", 1)

  def to_json(self) -> dict[str, Any]:
    return {
        "target": self.target, "description": self.description, "chips": self.chips,
        "device": self.device_word, "peak_flops": self.peak_flops,
        "flops_source": self.flops_source,
        "mesh": self.mesh_shape, "batch_size": self.batch_size, "num_params": self.num_params,
        "fits": self.fits, "hbm_per_chip_bytes": self.memory, "hbm_capacity_bytes": self.hbm_bytes,
        "flops_per_chip": self.flops, "flops_as_compiled": self.compiled_flops,
        "bytes_accessed_per_chip": self.bytes_accessed,
        "model_flops_per_chip": self.model_flops,
        "loop_iterations_added": self.loop_iterations_added,
        "data_dependent_loops": self.uncounted_loops,
        "step_seconds": self.step_seconds, "step_time_source": "roofline",
        "bound": self.roofline.bound, "roofline_seconds": dataclasses.asdict(self.roofline),
        "compiler_seconds": self.compiler_seconds,
        "images_per_second": self.images_per_second, "mfu_ceiling": self.mfu_ceiling,
        "collectives": [dataclasses.asdict(c) for c in self.collectives],
        "compile_seconds": self.compile_seconds,
        "backend_defaults": self.backend_defaults,
        "attention_kernels": self.attention_kernels,
        "estimates_not_measurements": True,
    }


class _OutOfMemory(Exception):
  """The compiler's RESOURCE_EXHAUSTED: what it needs and has, in bytes, and
  the planned step it was compiling (`step`, None where not given)."""

  def __init__(self, message: str, step: dry_run.Plan | None = None):
    super().__init__(message)
    sizes = [float(n) * _UNITS[u] for n, u in _SIZE.findall(message)]
    self.needed = sizes[0] if sizes else None
    self.available = sizes[1] if len(sizes) > 1 else None
    self.step = step


def _compile(config, target, devices):
  """(plan, compiled, seconds) for `config` on `devices` of `target`;
  _OutOfMemory where the compiler finds the step too large."""
  step = dry_run.plan(config, devices)
  start = time.perf_counter()
  try:
    compiled = step.lower().compile(compiler_options=dict(target.compiler_options) or None)
  except Exception as e:  # pylint: disable=broad-except  # jax's XlaRuntimeError
    if "RESOURCE_EXHAUSTED" in str(e):
      raise _OutOfMemory(str(e).strip().splitlines()[0], step) from e
    raise
  return step, compiled, time.perf_counter() - start


def _step_matmul_flops(step, devices) -> float:
  """The step's matrix FLOPs per device, as traced (remat included)."""
  jaxpr = jaxpr_costs.trace(step.steps.train_step, step.state, step.batch)
  return jaxpr_costs.matmul_flops(jaxpr) / len(devices)


def _flops_without_remat(config, devices) -> float:
  """The matrix FLOPs per chip of `config`'s step with remat off (no
  recomputation): the model FLOPs of a remat config."""
  config = copy.deepcopy(config)
  config.model.remat = False
  return _step_matmul_flops(dry_run.plan(config, devices), devices)


def target_dry_run(config, target_name: str, *, suggest_fixes: bool = True) -> TargetReport:
  """Compiles `config`'s train step for the TPU slice or GPU hosts `target_name`.

  Raises:
    tpu_targets.UnknownTargetError: not a known slice or host.
    tpu_targets.LibtpuMissingError: no libtpu (a TPU target).
    gpu_targets.CudaPluginMissingError: no CUDA plugin (a GPU target).
    HbmExceededError: the step does not fit (one line; with `suggest_fixes`,
      the settings that would fit, each compiled for the slice).
    errors.ConfigError: as `dry_run.plan` (e.g. a batch the mesh cannot split).
  """
  target = parse_target(target_name)
  devices = list(target.devices())
  try:
    step, compiled, seconds = _compile(config, target, devices)
  except _OutOfMemory as oom:
    raise _refusal(config, target, devices, oom, suggest_fixes) from None
  memory = dry_run.memory_of(compiled)
  if memory["total"] > target.memory_bytes:
    raise _refusal(config, target, devices, _OutOfMemory(
        f"the step needs {memory['total'] / GIB:.2f}G of "
        f"{target.memory_bytes / GIB:g}G", step), suggest_fixes)
  costs = hlo_costs.step_costs(compiled)
  on_tpu = isinstance(target, tpu_targets.TpuTarget)
  remat = bool(config.model.get("remat", False))
  # The step as traced: the GPU target's FLOPs, and the model FLOPs without remat.
  traced = None if on_tpu and remat else _step_matmul_flops(step, devices)
  flops = costs.flops if on_tpu else traced
  line = roofline(flops, costs.bytes_accessed, costs.collective_bytes, target)
  compiler = hlo_costs.compiler_seconds(compiled)
  valid = compiler is not None and compiler > 0 and not costs.loops
  return TargetReport(
      target=target.name, description=target.describe(), chips=target.num_chips,
      device_word=target.device_word, peak_flops=target.peak_flops,
      flops_source="HLO" if on_tpu else "jaxpr",
      # Images per step: every seed's batch (config.num_seeds).
      mesh_shape=dict(step.mesh.shape),
      batch_size=step.sections.input.batch_size * step.steps.num_seeds,
      num_params=step.num_params, memory=memory, hbm_bytes=target.memory_bytes,
      flops=flops, compiled_flops=costs.compiled_flops,
      bytes_accessed=costs.bytes_accessed,
      model_flops=_flops_without_remat(config, devices) if remat else traced,
      loop_iterations_added=sum(loop.runs - 1 for loop in costs.loops),
      uncounted_loops=len(costs.uncounted_loops), roofline=line,
      compiler_seconds=compiler if valid else None, collectives=costs.collectives,
      compile_seconds=seconds, backend_defaults=step.backend_defaults,
      attention_kernels=hlo_costs.attention_kernels(compiled.as_text()))


# --- A step that does not fit -----------------------------------------------------

def _fix_candidates(config, num_chips: int) -> list[tuple[str, Any]]:
  """(flags, config) for each setting that may make the step fit: FSDP over
  every batch device, remat, and (tried separately) smaller batches."""
  candidates = []
  if config.mesh.fsdp == 1 and config.mesh.model == 1 and num_chips > 1:
    fixed = copy.deepcopy(config)
    fixed.mesh.data, fixed.mesh.fsdp = 1, num_chips
    candidates.append((f"--config.mesh.data=1 --config.mesh.fsdp={num_chips}", fixed))
  if not config.model.get("remat", False):
    fixed = copy.deepcopy(config)
    fixed.model.remat = True
    if "encoder_residuals" in fixed.model:
      fixed.model.encoder_residuals = None
    candidates.append(("--config.model.remat=True", fixed))
  return candidates


def _try(config, target, devices) -> tuple[bool, float | None]:
  """(fits, HBM per chip it needs) of `config` on `devices`."""
  try:
    _, compiled, _ = _compile(config, target, devices)
  except _OutOfMemory as oom:
    return False, oom.needed
  except (errors.RunError, ValueError):
    return False, None
  total = float(dry_run.memory_of(compiled)["total"])
  return total <= target.memory_bytes, total


def _gib(value: float | None) -> str:
  return "?" if value is None else f"{value / GIB:.2f} GiB"


def _refusal(config, target, devices, oom: _OutOfMemory,
             suggest_fixes: bool) -> HbmExceededError:
  step = oom.step
  batch_devices = step.mesh.shape["data"] * step.mesh.shape["fsdp"]
  arrays = jaxpr_costs.largest_arrays(
      jaxpr_costs.trace(step.steps.train_step, step.state, step.batch), 3)
  batch = step.sections.input.batch_size

  def per_chip(array: jaxpr_costs.ArrayInfo) -> float:
    split = batch_devices if batch in array.shape else 1
    return array.bytes / split

  largest = "; ".join(a.describe(per_chip(a)) for a in arrays)
  fixes, report_fixes = [], []
  if suggest_fixes:
    for flags, fixed in _fix_candidates(config, target.num_chips):
      fits, needed = _try(fixed, target, devices)
      fixes.append(f"{flags} ({_gib(needed)}, {'fits' if fits else 'still too much'})")
      report_fixes.append({"flags": flags, "fits": fits, "hbm_per_chip_bytes": needed})
    smaller = batch
    for _ in range(MAX_BATCH_HALVINGS):
      smaller //= 2
      if smaller < batch_devices or smaller % batch_devices:
        break
      fixed = copy.deepcopy(config)
      fixed.input.batch_size = smaller
      fits, needed = _try(fixed, target, devices)
      if fits:
        flags = f"--config.input.batch_size={smaller}"
        fixes.append(f"{flags} ({_gib(needed)}, fits)")
        report_fixes.append({"flags": flags, "fits": True, "hbm_per_chip_bytes": needed})
        break
  available = oom.available or target.memory_bytes
  message = (
      f"--target={target.name}: the train step does not fit in "
      f"{'HBM' if target.device_word == 'chip' else 'GPU memory'}: it needs "
      f"{_gib(oom.needed)} per {target.device_word}, {_gib(available)} available "
      f"(compiler: {oom}); largest arrays: {largest}"
      + (f"; settings that change it: {'; '.join(fixes)}" if fixes else ""))
  report = {"target": target.name, "description": target.describe(), "fits": False,
            "batch_size": batch, "mesh": dict(step.mesh.shape),
            "hbm_needed_bytes": oom.needed, "hbm_available_bytes": available,
            "compiler_message": str(oom),
            "largest_arrays": [{"array": a.describe(), "per_chip_bytes": per_chip(a)}
                               for a in arrays],
            "fixes": report_fixes, "estimates_not_measurements": True}
  return HbmExceededError(message, report)
