"""Cloud TPU slices by the accelerator type a user passes to gcloud, and
their devices for an ahead-of-time compile on a machine without a TPU.

  target = parse_target("v5litepod-16")      # also "v5e-16", "v4-32", "2xv5e-256"
  devices = topology_devices(target)         # 16 abstract TPU v5 lite devices
  jax.jit(step).lower(...).compile()         # over a Mesh of `devices`

Names. The number in a v4 or v5p name counts TensorCores, two per chip
("v4-8" is 4 chips, 2x2x1); in a v5e ("v5litepod-N", also "v5e-N") or v6e
name it counts chips. "KxNAME" is K slices of NAME joined over the data
center network (multislice); its devices are all K·chips. An unknown name is
one line listing the known ones (`UnknownTargetError`).

Chips (`CHIPS`): peak dense bf16 FLOP/s, HBM capacity and bandwidth and
ICI bandwidth per chip, from Google Cloud's TPU system-architecture pages
(docs.cloud.google.com/tpu/docs/v4, v5e, v5p, v6e): v4 275 TFLOP/s, 32 GiB,
1200 GB/s, 2400 Gbps ICI; v5e 197 TFLOP/s, 16 GiB, 819 GB/s, 1600 Gbps;
v5p 459 TFLOP/s, 95 GiB, 2765 GB/s, 4800 Gbps; v6e 918 TFLOP/s, 32 GiB,
1640 GB/s, 3200 Gbps (the page gives 800 GB/s both ways). The ICI figure is
the one-way rate, used only for a rough time on the wire.

Topologies (the chip grid of a slice, the `topology_name` libtpu takes):
v5e and v6e slices are 2-D (1x1 … 16x16, the 16-long sides wrap around as
a torus); v4 and v5p slices are 3-D (2x2x1 … 16x16x16), full 4x4x4 cubes
and larger wrap on every side. Hosts hold 2x2x1 chips (v5e/v6e: a 2x4
single host for the 8-chip slice); that only numbers the processes.

Devices need libtpu (`pip install -e .[tpu]`, or libtpu alone), which is
loaded without a TPU: `topology_devices` sets the environment that keeps
libtpu from asking a metadata server for a TPU it would run on.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os
import re
from typing import Sequence

from vit_spectral import errors

GIB = 2**30


class UnknownTargetError(errors.ConfigError):
  """`--target` names no known TPU slice; the message lists the known ones."""


class LibtpuMissingError(errors.RunError):
  """A TPU compile was asked for but libtpu is not importable."""


@dataclasses.dataclass(frozen=True)
class TpuChip:
  """One TPU chip generation.

  Attributes:
    generation: "v4", "v5e", "v5p" or "v6e".
    topology_prefix: libtpu's name for the generation in a topology
      ("v4", "v5e", "v5", "v6e").
    cores_per_chip: TensorCores per chip (2 for v4/v5p: a megacore).
    name_counts_cores: whether the number in a slice name counts
      TensorCores (v4, v5p) rather than chips (v5e, v6e).
    peak_bf16_flops: peak dense bf16 FLOP/s per chip.
    hbm_bytes: HBM capacity per chip.
    hbm_bytes_per_s: HBM bandwidth per chip.
    ici_bytes_per_s: inter-chip interconnect bandwidth per chip, one way.
    device_kind: what jax's `Device.device_kind` says for the chip.
  """

  generation: str
  topology_prefix: str
  cores_per_chip: int
  name_counts_cores: bool
  peak_bf16_flops: float
  hbm_bytes: int
  hbm_bytes_per_s: float
  ici_bytes_per_s: float
  device_kind: str


CHIPS = {
    "v4": TpuChip("v4", "v4", 2, True, 275e12, 32 * GIB, 1200e9, 2400e9 / 8, "TPU v4"),
    "v5e": TpuChip("v5e", "v5e", 1, False, 197e12, 16 * GIB, 819e9, 1600e9 / 8,
                   "TPU v5 lite"),
    "v5p": TpuChip("v5p", "v5", 2, True, 459e12, 95 * GIB, 2765e9, 4800e9 / 8, "TPU v5"),
    "v6e": TpuChip("v6e", "v6e", 1, False, 918e12, 32 * GIB, 1640e9, 3200e9 / 8,
                   "TPU v6 lite"),
}
# The user-facing spellings of each generation in an accelerator type.
_GENERATION_ALIASES = {"v4": "v4", "v5p": "v5p", "v5e": "v5e", "v5litepod": "v5e",
                       "v6e": "v6e"}
# Chip grids by chip count: 2-D for v5e/v6e, 3-D for v4/v5p.
_GRIDS_2D = {1: (1, 1), 4: (2, 2), 8: (2, 4), 16: (4, 4), 32: (4, 8), 64: (8, 8),
             128: (8, 16), 256: (16, 16)}
_GRIDS_3D = {4: (2, 2, 1), 8: (2, 2, 2), 16: (2, 2, 4), 32: (2, 4, 4), 64: (4, 4, 4),
             128: (4, 4, 8), 256: (4, 8, 8), 512: (8, 8, 8), 1024: (8, 8, 16),
             2048: (8, 16, 16), 4096: (16, 16, 16), 6144: (16, 16, 24)}
# A v4 pod has 4096 chips; a v5p slice goes to 6144 (16x16x24).
_GRIDS = {"v4": {c: g for c, g in _GRIDS_3D.items() if c <= 4096}, "v5p": _GRIDS_3D,
          "v5e": _GRIDS_2D, "v6e": _GRIDS_2D}
_NAME = re.compile(r"^(?:(?P<slices>\d+)x)?(?P<generation>[a-z0-9]+)-(?P<count>\d+)$")


@dataclasses.dataclass(frozen=True)
class TpuTarget:
  """A TPU slice (or several, multislice) to compile for.

  Attributes:
    name: the accelerator type as given, e.g. "v5litepod-16" or "2xv5e-256".
    chip: the chip generation.
    grid: the chip grid of one slice, e.g. (4, 4) or (2, 2, 4).
    num_slices: slices joined over the data center network (1: one slice).
  """

  name: str
  chip: TpuChip
  grid: tuple[int, ...]
  num_slices: int = 1
  device_word = "chip"
  compiler_options = {}

  @property
  def peak_flops(self) -> float:
    return self.chip.peak_bf16_flops

  @property
  def memory_bytes(self) -> int:
    return self.chip.hbm_bytes

  @property
  def memory_bytes_per_s(self) -> float:
    return self.chip.hbm_bytes_per_s

  @property
  def interconnect_bytes_per_s(self) -> float:
    return self.chip.ici_bytes_per_s

  def devices(self) -> Sequence:
    return topology_devices(self)

  @property
  def chips_per_slice(self) -> int:
    return math.prod(self.grid)

  @property
  def num_chips(self) -> int:
    return self.chips_per_slice * self.num_slices

  @property
  def topology_name(self) -> str:
    """libtpu's topology, e.g. "v5e:4x4" or "v4:2x2x4"."""
    return f"{self.chip.topology_prefix}:{'x'.join(map(str, self.grid))}"

  @property
  def wrap(self) -> tuple[bool, bool, bool]:
    """Which sides of the grid close into a torus."""
    if len(self.grid) == 3:
      full_cube = self.chips_per_slice >= 64
      return (full_cube,) * 3
    return tuple(side == 16 for side in self.grid) + (False,)

  @property
  def chips_per_host(self) -> tuple[int, int, int]:
    if self.chips_per_slice == 1:
      return (1, 1, 1)
    if len(self.grid) == 2 and self.chips_per_slice == 8:
      return (2, 4, 1)
    return (2, 2, 1)

  def describe(self) -> str:
    """e.g. "v5litepod-16: 16 TPU v5e chips (4x4), 16 GiB HBM each"."""
    slices = f"{self.num_slices} slices of " if self.num_slices > 1 else ""
    return (f"{self.name}: {slices}{self.chips_per_slice} TPU {self.chip.generation} "
            f"chips ({'x'.join(map(str, self.grid))}), "
            f"{self.chip.hbm_bytes / GIB:g} GiB HBM each")


def known_targets() -> list[str]:
  """Every single-slice accelerator type `parse_target` knows, by generation
  and size (a "KxNAME" multislice of any of them is known too)."""
  names = []
  for generation, spelling in (("v4", "v4"), ("v5p", "v5p"), ("v5e", "v5litepod"),
                               ("v6e", "v6e")):
    per_chip = CHIPS[generation].cores_per_chip if CHIPS[generation].name_counts_cores else 1
    names += [f"{spelling}-{chips * per_chip}" for chips in _GRIDS[generation]]
  return names


def parse_target(name: str) -> TpuTarget:
  """The slice an accelerator type names.

  Raises:
    UnknownTargetError: not a known name (one line listing the known ones).
  """
  match = _NAME.match(name.strip().lower())
  generation = _GENERATION_ALIASES.get(match["generation"]) if match else None
  if generation is not None:
    chip = CHIPS[generation]
    count = int(match["count"])
    chips, rest = divmod(count, chip.cores_per_chip) if chip.name_counts_cores else (count, 0)
    slices = int(match["slices"] or 1)
    if rest == 0 and chips in _GRIDS[generation] and slices >= 1:
      return TpuTarget(name, chip, _GRIDS[generation][chips], slices)
  raise UnknownTargetError(
      f"--target={name}: not a known TPU slice; known: {', '.join(known_targets())} "
      "(v5e-N is v5litepod-N; KxNAME is K slices, e.g. 2xv5litepod-256)")


def libtpu_available() -> bool:
  return importlib.util.find_spec("libtpu") is not None


# What libtpu would ask the TPU VM's metadata server; a compile-only process
# has no TPU, so these keep it from waiting for one and from warning. Nor does
# it hold the chips, so several may load libtpu at once (by default the first
# takes /tmp/libtpu_lockfile and the others stop).
def _compile_only_environment(target: TpuTarget) -> dict[str, str]:
  return {"TPU_SKIP_MDS_QUERY": "1", "TPU_WORKER_HOSTNAMES": "localhost",
          "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
          "TPU_ACCELERATOR_TYPE": target.name.split("x", 1)[-1] if target.num_slices > 1
          else target.name}


def topology_devices(target: TpuTarget) -> Sequence:
  """The abstract devices of `target` (every slice's), for `jax.jit(...).lower(...)
  .compile()` over a Mesh of them: nothing runs, the TPU compiler only compiles.

  Raises:
    LibtpuMissingError: libtpu is not installed.
  """
  if not libtpu_available():
    raise LibtpuMissingError(
        f"--target={target.name} compiles with the TPU compiler, which comes with "
        "libtpu: pip install -c constraints.txt -e '.[tpu]' (or only libtpu, the "
        "version constraints.txt pins)")
  for key, value in _compile_only_environment(target).items():
    os.environ.setdefault(key, value)
  from jax.experimental import topologies  # pylint: disable=import-outside-toplevel
  topology = topologies.get_topology_desc(
      platform="tpu", topology_name=target.topology_name,
      chip_config_name="megacore" if target.chip.cores_per_chip == 2 else "default",
      chips_per_host_bounds=target.chips_per_host, num_slices=target.num_slices,
      wrap=target.wrap)
  return topology.devices
