"""The device mesh and how the train state and batches are laid out on it.

`config.mesh` (`MeshSettings`) names the axis sizes of a ("data", "fsdp",
"model") mesh; one of them may be -1 (all the remaining devices):

  data   batch parallel: parameters replicated.
  fsdp   batch parallel too (batches split over data × fsdp), and parameters,
         optimizer state and EMA are sharded over it (fully sharded data
         parallel, ZeRO-3): each leaf along its largest dimension divisible by
         the fsdp size (`fsdp_spec`: never the scanned encoder's leading depth
         axis, a dimension already on "model" only when no other fits; a leaf
         with no such dimension stays replicated). XLA gathers a layer's
         weights where the layer runs, inside the scanned encoder's loop, and
         reduces and re-shards its gradients there (`blocks_split_by_batch`).
         E.g. ViT-L/16 on 8 devices: `config.mesh = dict(data=-1, fsdp=8)`.
  model  tensor parallel over heads and the MLP's hidden units (Megatron).

Tensor-parallel placement follows `config.sharding_rules`: a list of (regex on
the parameter path, partition spec of the *trailing* dimensions); leading
dimensions (the scanned encoder's depth axis) are not sharded, and leaves no
rule matches are replicated over "model". The default (None) is
`tensor_parallel_rules()`, derived when the shardings are made: the attention
parameters' rules from the logical axes each registered variant declares
(`Attention.param_axes()`, mapped to mesh axes by `LOGICAL_AXIS_RULES`: heads
and MLP units on "model"), so a variant registered in its own file gets its
rules without an edit here, then `LAYER_RULES` for the block's other layers.
Optimizer moments and EMA parameters match the same rules because their paths
end with the parameter path.
"""

from __future__ import annotations

import contextlib
import functools
import re
from typing import Any, Callable, Iterator, Sequence

import flax.linen as nn
import jax
import numpy as np
from jax.experimental import mesh_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from vit_spectral import settings as settings_lib
from vit_spectral.attention import get_attention, registered_attentions
from vit_spectral.models.segments import is_scanned_path
from vit_spectral.models.token_layouts import ATTENTION_MODULE
from vit_spectral.models.vit import Block
from vit_spectral.training.optim import param_path

# The mesh axes and the batch-parallel ones, in mesh order (`sections.mesh`).
from vit_spectral.sections.mesh import BATCH_AXES, MESH_AXES  # noqa: E402,F401
FSDP_AXIS = "fsdp"

# Megatron-style tensor parallelism: heads and MLP hidden units on "model".
# Logical axis (the names `Attention.PARAM_AXES` uses) -> mesh axis, as Flax's
# `logical_axis_rules`; "head_channels" are the heads' H·Dh channels, head
# major, so they split with the heads.
LOGICAL_AXIS_RULES = (
    ("heads", "model"),
    ("head_channels", "model"),
    ("mlp", "model"),
    ("embed", None),
    ("head_dim", None),
)

# The blocks' other layers. Shapes are of one layer (D width, M MLP units).
LAYER_RULES = (
    (r"mlp/fc1/kernel$", (None, "model")),
    (r"mlp/fc1/bias$", ("model",)),
    (r"mlp/fc2/kernel$", ("model", None)),
    # LipsFormer's conv branch as a Megatron pair: the depth-wise conv works per
    # channel, so its kernel (k, k, 1, D) and bias split the channels like fc1;
    # the point-wise kernel (1, 1, D, D) then takes them on its input axis like
    # fc2 (one all-reduce after it); its bias is added after that sum.
    (r"conv_dw/conv/kernel$", (None, None, None, "model")),
    (r"conv_dw/conv/bias$", ("model",)),
    (r"conv_pw/conv/kernel$", (None, None, "model", None)),
    (r"conv_pw/conv/bias$", (None,)),
    # On the token stream, which every "model" device holds whole: the
    # residual weights α (D,) and FeatScale's s, t (D,).
    (r"(^|/)alpha(1|2|_conv)$", (None,)),
    (r"feat_scale/(dc_scale|hc_scale)$", (None,)),
)


def mesh_axes(logical: Sequence[str | None], where: str = "") -> tuple[str | None, ...]:
  """Logical axis names -> mesh axes (`LOGICAL_AXIS_RULES`; None stays None).

  Raises:
    ValueError: a name the table does not know (`where` says whose).
  """
  table = dict(LOGICAL_AXIS_RULES)
  unknown = [name for name in logical if name is not None and name not in table]
  if unknown:
    raise ValueError(f"{where}: logical axes {unknown} are not in "
                     f"sharding.LOGICAL_AXIS_RULES (known: {sorted(table)}, or None)")
  return tuple(None if name is None else table[name] for name in logical)


def attention_rules() -> tuple[tuple[str, tuple[str | None, ...]], ...]:
  """One rule per parameter of every registered attention variant, from the
  logical axes it declares (`Attention.param_axes()`), in registry order.

  Raises:
    ValueError: two variants declare one path with different mesh axes, or
      a declaration names an unknown logical axis.
  """
  specs, owners = {}, {}
  for name in registered_attentions():
    for path, logical in get_attention(name).param_axes().items():
      spec = mesh_axes(logical, f"{get_attention(name).__name__}.PARAM_AXES[{path!r}]")
      if path in specs and specs[path] != spec:
        raise ValueError(f"attention parameter {path!r} is declared {spec} by {name!r} "
                         f"but {specs[path]} by {owners[path]!r}")
      specs.setdefault(path, spec)
      owners.setdefault(path, name)
  return tuple((f"{ATTENTION_MODULE}/{re.escape(path)}$", spec) for path, spec in specs.items())


def tensor_parallel_rules() -> tuple[tuple[str, tuple[str | None, ...]], ...]:
  """The default tensor-parallel rules: `attention_rules()` (the variants
  registered now), then `LAYER_RULES`."""
  return attention_rules() + LAYER_RULES


# The default rules of the variants registered at import (the built-in ones);
# `tree_shardings` derives them again at use, so later registrations count.
TENSOR_PARALLEL_RULES = tensor_parallel_rules()


from vit_spectral.sections.mesh import MeshSettings  # noqa: E402,F401  (re-exported)


def make_mesh(mesh: MeshSettings | Any, devices: Sequence[jax.Device] | None = None) -> Mesh:
  """A ("data", "fsdp", "model") mesh over `devices` (default: all devices, all hosts).

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


def batch_axes(mesh: Mesh) -> tuple[str, ...]:
  """The batch-parallel axes of `mesh` ("data", "fsdp"; those it has)."""
  return tuple(axis for axis in BATCH_AXES if axis in mesh.axis_names)


def batch_sharding(mesh: Mesh, replica_axis: bool = False) -> NamedSharding:
  """Leading (batch) dimension split over "data" × "fsdp", the rest replicated;
  with `replica_axis`, the batch dimension is the second, after an unsharded
  seed axis (`replicas`)."""
  return NamedSharding(mesh, P(*(None,) * replica_axis, batch_axes(mesh)))


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


def _spec_axes(entry) -> tuple[str, ...]:
  """The mesh axes of one PartitionSpec entry (None, a name or a tuple of names)."""
  if entry is None:
    return ()
  return tuple(entry) if isinstance(entry, (tuple, list)) else (entry,)


def fsdp_spec(name: str, shape: tuple[int, ...], spec: P, mesh: Mesh) -> P:
  """`spec` with the "fsdp" axis added on the largest dimension of `shape`
  that `spec` leaves unsharded and the fsdp size divides (the first such, on
  a tie).

  Never the leading depth axis of a scanned encoder's parameter (`name`
  under "encoderblock" or "encoderblock_segment{k}": the scan takes one
  layer per step, and each step gathers that layer). Only where no
  unsharded dimension fits (e.g. fc1's bias, (depth, M) with M on "model")
  does "fsdp" join a dimension's "model" entry, ("model", "fsdp"), if that
  dimension divides by both sizes. A leaf with neither (scalars, odd sizes)
  stays replicated over "fsdp"; so does every leaf when the mesh has no
  "fsdp" axis or it has size 1, or when `spec` already names "fsdp" (a
  custom rule placed it).
  """
  size = dict(mesh.shape).get(FSDP_AXIS, 1)
  if size == 1 or any(FSDP_AXIS in _spec_axes(entry) for entry in spec):
    return spec
  entries = list(spec) + [None] * (len(shape) - len(spec))
  dims = range(1 if is_scanned_path(name) else 0, len(shape))
  split = {d: int(np.prod([mesh.shape[a] for a in _spec_axes(entries[d])])) for d in dims}
  free = [d for d in dims if entries[d] is None and shape[d] % size == 0]
  shared = [d for d in dims if entries[d] is not None and shape[d] % (split[d] * size) == 0]
  if not free and not shared:
    return spec
  largest = lambda d: (shape[d], -d)  # noqa: E731
  if free:
    entries[max(free, key=largest)] = FSDP_AXIS
  else:
    d = max(shared, key=largest)
    entries[d] = (*_spec_axes(entries[d]), FSDP_AXIS)
  return P(*entries)


def tree_shardings(tree: Any, mesh: Mesh,
                   rules: Sequence[tuple[str, Sequence[str | None]]] | None = None) -> Any:
  """NamedShardings for every leaf of `tree` (arrays or ShapeDtypeStructs):
  the tensor-parallel `rules` (`partition_spec`; None = `tensor_parallel_rules()`),
  then "fsdp" (`fsdp_spec`)."""
  if rules is None:
    rules = tensor_parallel_rules()

  def leaf_sharding(path, leaf):
    shape = tuple(getattr(leaf, "shape", ()))
    name = param_path(path)
    spec = partition_spec(name, shape, mesh, rules)
    return NamedSharding(mesh, fsdp_spec(name, shape, spec, mesh))

  return jax.tree_util.tree_map_with_path(leaf_sharding, tree)


def place(host_tree: Any, shardings: Any) -> Any:
  """Host arrays (whole, on every process) laid out with `shardings` (a tree of
  the same structure): each process fills its own shards."""
  return jax.tree_util.tree_map(
      lambda value, where: jax.make_array_from_callback(
          value.shape, where, lambda index: value[index]),
      host_tree, shardings)


@contextlib.contextmanager
def blocks_split_by_batch(mesh: Mesh) -> Iterator[None]:
  """While a model is traced in this context, every encoder `Block` pins the
  batch dimension of its carry, the token stream (B, T, D) and any attention
  state (B, ...), to "data" × "fsdp" on the way in and out, leaving the other
  dimensions to XLA (a sharding constraint, through
  `flax.linen.intercept_methods`; the model itself knows no mesh), and the
  mesh is the trace's context mesh (`jax.sharding.use_abstract_mesh`).

  This is what makes "fsdp" fully sharded data parallel: with the stream
  split by batch, XLA gathers each layer's weights where the layer runs,
  inside the scanned encoder's loop (forward and backward), and reduces its
  gradient there (an all-reduce and a slice on CPU, a reduce-scatter where
  XLA forms one). Without it XLA's propagation reads the weights' "fsdp"
  split as a split of the width: it gathers the batch over "fsdp" and sums
  partial matmuls (tensor parallel over the width, the input batch gathered
  whole). On a data/model mesh the pinned layout is the one XLA picks anyway
  (the same compiled collectives and memory).
  """

  def pin_batch(a):  # the batch dimension split; the others left to XLA
    spec = P(batch_axes(mesh), *[P.UNCONSTRAINED] * (a.ndim - 1))
    return jax.lax.with_sharding_constraint(a, NamedSharding(mesh, spec))

  def pin(carry):
    return jax.tree_util.tree_map(pin_batch, carry)

  def interceptor(next_fun, args, kwargs, context):
    if not (isinstance(context.module, Block) and context.method_name == "__call__"):
      return next_fun(*args, **kwargs)
    carry, *rest = args        # Block.__call__(carry, drop_path_rate, mask)
    (x, state), ys = next_fun(pin(carry), *rest, **kwargs)
    return pin((x, state)), ys

  # The mesh is also the trace's abstract mesh: a kernel XLA cannot partition
  # (splash attention, `attention.fused`) is mapped over it with shard_map.
  with nn.intercept_methods(interceptor), jax.sharding.use_abstract_mesh(mesh.abstract_mesh):
    yield


def split_blocks_by_batch(fn: Callable, mesh: Mesh) -> Callable:
  """`fn` (a train or eval step) traced in `blocks_split_by_batch(mesh)`."""

  @functools.wraps(fn)
  def step(*args, **kwargs):
    with blocks_split_by_batch(mesh):
      return fn(*args, **kwargs)

  return step


def global_batch(local_batch: dict[str, np.ndarray], mesh: Mesh,
                 replica_axis: bool = False) -> dict[str, jax.Array]:
  """Assembles each host's slice of the batch into global arrays split over
  "data" × "fsdp" (`batch_sharding`; (K, B_local, ...) with `replica_axis`)."""
  sharding = batch_sharding(mesh, replica_axis)
  return {k: jax.make_array_from_process_local_data(sharding, np.asarray(v))
          for k, v in local_batch.items()}
