"""`config.mesh`: the size of each mesh axis (`MeshSettings`), without JAX.

`training.sharding` builds the mesh and re-exports these names; the command
line checks a config with this module before JAX is imported.
"""

from __future__ import annotations

import dataclasses
import math

from vit_spectral import settings as settings_lib

MESH_AXES = ("data", "fsdp", "model")
# The axes a batch is split over.
BATCH_AXES = ("data", "fsdp")


@dataclasses.dataclass(frozen=True)
class MeshSettings:
  """`config.mesh`: the size of each mesh axis; -1 = all remaining devices.

  Attributes:
    data: batch-parallel axis size (default: every device).
    fsdp: batch-parallel axis size over which parameters, optimizer state and
      EMA are also sharded (module docstring); 1 = off.
    model: tensor-parallel axis size (heads and MLP hidden units).
  """

  SECTION = "mesh"

  data: int = -1
  fsdp: int = 1
  model: int = 1

  def __post_init__(self):
    sizes = self.sizes()
    for axis, size in sizes.items():
      valid = isinstance(size, int) and not isinstance(size, bool) and (size >= 1 or size == -1)
      settings_lib.require(valid, f"mesh.{axis}={size!r} must be positive or -1 "
                           "(an integer number of devices)")
    free = [f"mesh.{axis}" for axis, size in sizes.items() if size == -1]
    settings_lib.require(len(free) <= 1,
                         f"config.mesh={sizes}: at most one axis may be -1, got "
                         f"{' and '.join(free)}")

  def sizes(self) -> dict[str, int]:
    return {axis: getattr(self, axis) for axis in MESH_AXES}

  def batch_parallel(self, num_devices: int) -> int:
    """The devices a batch is split over: data × fsdp on `num_devices` devices."""
    shape = dict(zip(MESH_AXES, self.shape(num_devices)))
    return int(math.prod([shape[axis] for axis in BATCH_AXES]))

  def shape(self, num_devices: int) -> tuple[int, ...]:
    """The axis sizes over `num_devices` devices (the -1 filled in)."""
    sizes = self.sizes()
    fixed = int(math.prod([s for s in sizes.values() if s != -1]))
    free = [a for a, s in sizes.items() if s == -1]
    if free:
      settings_lib.require(num_devices % fixed == 0,
                           f"config.mesh={sizes}: {num_devices} devices are not "
                           f"divisible by {fixed}")
      sizes[free[0]] = num_devices // fixed
    shape = tuple(sizes[a] for a in MESH_AXES)
    settings_lib.require(int(math.prod(shape)) == num_devices,
                         f"config.mesh={sizes} needs {int(math.prod(shape))} "
                         f"devices, there are {num_devices}")
    return shape
