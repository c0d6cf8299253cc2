"""The device mesh and how the train state and batches are laid out on it.

`config.mesh` (`MeshSettings`) names the axis sizes: `data` (batch parallel) and
`model` (tensor parallel over heads and the MLP's hidden units); one of them may
be -1 (all the remaining devices). Parameters are placed by `config.sharding_rules`: a list of
(regex on the parameter path, partition spec of the *trailing* dimensions);
leading dimensions (the scanned encoder's depth axis) are not sharded, and leaves
no rule matches are replicated. Optimizer moments match the same rules because
their paths end with the parameter path.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Sequence

import jax
import numpy as np
from jax.experimental import mesh_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from vit_spectral import settings as settings_lib
from vit_spectral.training.optim import param_path

MESH_AXES = ("data", "model")

# Megatron-style tensor parallelism: heads and MLP hidden units on "model".
TENSOR_PARALLEL_RULES = (
    (r"attention/(query|key|value)/kernel$", (None, "model", None)),
    (r"attention/(query|key|value)/bias$", ("model", None)),
    (r"attention/out/kernel$", ("model", None, None)),
    (r"mlp/fc1/kernel$", (None, "model")),
    (r"mlp/fc1/bias$", ("model",)),
    (r"mlp/fc2/kernel$", ("model", None)),
)


@dataclasses.dataclass(frozen=True)
class MeshSettings:
  """`config.mesh`: the size of each mesh axis; -1 = all remaining devices.

  Attributes:
    data: batch-parallel axis size (default: every device).
    model: tensor-parallel axis size (heads and MLP hidden units).
  """

  SECTION = "mesh"

  data: int = -1
  model: int = 1

  def __post_init__(self):
    sizes = self.sizes()
    for axis, size in sizes.items():
      settings_lib.require(size >= 1 or size == -1,
                           f"mesh.{axis}={size} must be positive or -1")
    settings_lib.require(list(sizes.values()).count(-1) <= 1,
                         f"config.mesh={sizes}: at most one axis may be -1")

  def sizes(self) -> dict[str, int]:
    return {axis: getattr(self, axis) for axis in MESH_AXES}

  def shape(self, num_devices: int) -> tuple[int, ...]:
    """The axis sizes over `num_devices` devices (the -1 filled in)."""
    sizes = self.sizes()
    fixed = int(np.prod([s for s in sizes.values() if s != -1]))
    free = [a for a, s in sizes.items() if s == -1]
    if free:
      settings_lib.require(num_devices % fixed == 0,
                           f"config.mesh={sizes}: {num_devices} devices are not "
                           f"divisible by {fixed}")
      sizes[free[0]] = num_devices // fixed
    shape = tuple(sizes[a] for a in MESH_AXES)
    settings_lib.require(int(np.prod(shape)) == num_devices,
                         f"config.mesh={sizes} needs {int(np.prod(shape))} "
                         f"devices, there are {num_devices}")
    return shape


def make_mesh(mesh: MeshSettings | Any, devices: Sequence[jax.Device] | None = None) -> Mesh:
  """A ("data", "model") mesh over `devices` (default: all devices, all hosts).

  `mesh` is MeshSettings or `config.mesh` (converted here).
  """
  devices = list(jax.devices() if devices is None else devices)
  shape = settings_lib.as_settings(MeshSettings, mesh).shape(len(devices))
  try:
    grid = mesh_utils.create_device_mesh(shape, devices=devices)
  except (ValueError, AssertionError, NotImplementedError):
    # Fake CPU devices and some topologies have no physical layout to follow.
    grid = np.asarray(devices).reshape(shape)
  return Mesh(grid, MESH_AXES)


def batch_sharding(mesh: Mesh) -> NamedSharding:
  """Leading (batch) dimension split over "data", the rest replicated."""
  return NamedSharding(mesh, P("data"))


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def partition_spec(name: str, shape: tuple[int, ...], mesh: Mesh,
                   rules: Sequence[tuple[str, Sequence[str | None]]]) -> P:
  """The spec of the first rule matching `name`, left-padded to len(shape)."""
  for pattern, trailing in rules:
    if not re.search(pattern, name):
      continue
    trailing = tuple(trailing)
    if len(trailing) > len(shape):
      raise ValueError(f"sharding rule {pattern!r} has {len(trailing)} dims but "
                       f"{name} has shape {shape}")
    spec = (None,) * (len(shape) - len(trailing)) + trailing
    for dim, axis in zip(shape, spec):
      if axis is not None and dim % mesh.shape[axis]:
        raise ValueError(
            f"cannot shard {name} {shape} with {spec}: dimension {dim} is not "
            f"divisible by mesh axis {axis!r} of size {mesh.shape[axis]}")
    return P(*spec)
  return P()


def tree_shardings(tree: Any, mesh: Mesh,
                   rules: Sequence[tuple[str, Sequence[str | None]]] = TENSOR_PARALLEL_RULES) -> Any:
  """NamedShardings for every leaf of `tree` (arrays or ShapeDtypeStructs)."""

  def leaf_sharding(path, leaf):
    shape = tuple(getattr(leaf, "shape", ()))
    return NamedSharding(mesh, partition_spec(param_path(path), shape, mesh, rules))

  return jax.tree_util.tree_map_with_path(leaf_sharding, tree)


def global_batch(local_batch: dict[str, np.ndarray], mesh: Mesh) -> dict[str, jax.Array]:
  """Assembles each host's slice of the batch into global, "data"-sharded arrays."""
  sharding = batch_sharding(mesh)
  return {k: jax.make_array_from_process_local_data(sharding, np.asarray(v))
          for k, v in local_batch.items()}
