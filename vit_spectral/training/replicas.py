"""Seeds as one program: `config.num_seeds` = K trains seeds seed ... seed + K - 1
in one jitted step, `jax.vmap` over a leading replica axis.

Per seed, exactly what a run with `num_seeds=1` and that seed has: its init,
dropout and Mixup/CutMix keys (`seed_keys`), its parameters, optimizer state
and EMA, and its data stream (`stacked`: row k of a batch is the batch of
seed + k). Shared: the step count and the program. Shapes with K > 1:

  state   params, opt_state, ema_params (K, ...); step () (`STATE_AXES`)
  batch   {"image": (K, B, H, W, C), "label": (K, B)}: K unsharded, B split
          over "data" × "fsdp" as with one seed (`sharding.batch_sharding`)
  metrics each a (K,) array; `value` makes it a list of K floats, seed order

With K = 1 every function here is the identity: no axis, the program and the
checkpoints of a one-seed run.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from clu import metrics
from jax.sharding import NamedSharding, PartitionSpec as P

from vit_spectral.training.train_state import TrainState

# Stream id folded into the seed's key for Mixup/CutMix; the init and dropout
# keys come from splitting the same key, so this stream is independent of them.
MIX_STREAM = 3

# The TrainState's replica axis: every leaf but the shared step count.
STATE_AXES = TrainState(step=None, params=0, opt_state=0, ema_params=0)


def seed_keys(seeds: Sequence[int]) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(init, dropout, mix) keys of `seeds`: scalars for one seed, (K,) stacked
  for K."""
  keys = []
  for seed in seeds:
    init_rng, dropout_rng = jax.random.split(jax.random.key(seed))
    keys.append((init_rng, dropout_rng, jax.random.fold_in(jax.random.key(seed), MIX_STREAM)))
  if len(keys) == 1:
    return keys[0]
  return tuple(jnp.stack(column) for column in zip(*keys))


def over_seeds(fn: Callable, num_seeds: int, in_axes: Any, out_axes: Any = 0) -> Callable:
  """`fn` mapped over the replica axis (`jax.vmap`); `fn` itself for one seed.
  A clu metrics Collection it returns holds (K,) values per metric."""
  if num_seeds == 1:
    return fn
  mapped = jax.vmap(fn, in_axes=in_axes, out_axes=out_axes)

  def call(*args):
    return jax.tree_util.tree_map(_seed_metrics, mapped(*args),
                                  is_leaf=lambda x: isinstance(x, metrics.Collection))

  return call


def _seed_metrics(x: Any) -> Any:
  """A Collection out of vmap with its merge counter back to a scalar: clu
  reads a (K,) counter as pmap replicas not yet reduced and refuses
  `compute()`; the metrics' own (K,) values are the seeds'."""
  if not isinstance(x, metrics.Collection):
    return x
  counter = x._reduction_counter  # pylint: disable=protected-access
  return x.replace(_reduction_counter=type(counter)(counter.value[0]))


def with_replica_axis(shardings: TrainState, num_seeds: int) -> TrainState:
  """One seed's TrainState shardings with an unsharded leading axis on every
  leaf of the replica axis (`STATE_AXES`: all but the step)."""
  if num_seeds == 1:
    return shardings
  add = lambda tree: jax.tree_util.tree_map(  # noqa: E731
      lambda s: NamedSharding(s.mesh, P(None, *s.spec)), tree)
  return shardings.replace(params=add(shardings.params), opt_state=add(shardings.opt_state),
                           ema_params=add(shardings.ema_params))


def stacked(streams: Sequence[Iterable[dict[str, np.ndarray]]]) -> Iterator[dict[str, np.ndarray]]:
  """One seed's host batches as they are; K seeds' stacked on a new leading axis."""
  if len(streams) == 1:
    yield from streams[0]
    return
  for batches in zip(*streams):
    yield {k: np.stack([b[k] for b in batches]) for k in batches[0]}


def value(v: Any) -> float | list[float]:
  """A metric as a float (one seed) or a list of K floats in seed order."""
  array = np.asarray(v)
  return float(array) if array.ndim == 0 else [float(x) for x in array]


def mean(v: float | Sequence[float]) -> float:
  """A metric's value, or its mean over the seeds (the progress line)."""
  return float(np.mean(v))


def scalars(metrics: Mapping[str, Any], seeds: Sequence[int]) -> dict[str, float]:
  """Metrics for a metric writer: a list becomes one scalar per seed,
  `<name>_seed<seed>`."""
  out = {}
  for name, v in metrics.items():
    if isinstance(v, (list, tuple)):
      out.update({f"{name}_seed{seed}": float(x) for seed, x in zip(seeds, v, strict=True)})
    else:
      out[name] = float(v)
  return out


def per_seed(fn: Callable[[dict[Any, float]], dict[str, float]],
             values: Mapping[Any, float | Sequence[float]]) -> dict[str, float | list[float]]:
  """`fn` (a dict of floats -> a dict of floats) applied to each seed's values
  of `values`, the results as lists in seed order; `fn(values)` for one seed."""
  lists = [v for v in values.values() if isinstance(v, (list, tuple))]
  if not lists:
    return fn(dict(values))
  results = [fn({k: v[i] for k, v in values.items()}) for i in range(len(lists[0]))]
  return {k: [r[k] for r in results] for k in results[0]}
