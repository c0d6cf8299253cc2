"""Stochastic depth (DropPath) with a rate that may be a traced scalar.

The rate is an argument, not an attribute, so that a scanned encoder can feed each
layer its own rate from the linear depth schedule (the rates are scanned over).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp


class DropPath(nn.Module):
  """Drops the whole residual branch per example with probability `rate`.

  Surviving branches are scaled by 1 / (1 - rate), so the expectation is kept.
  Draws from the "dropout" RNG stream.
  """

  @nn.compact
  def __call__(self, x, rate, deterministic: bool):
    """x: (B, ...); rate: scalar in [0, 1) (Python float or traced)."""
    if deterministic:
      return x
    if isinstance(rate, (int, float)) and rate == 0.0:
      return x
    keep = 1.0 - jnp.asarray(rate, jnp.float32)
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    mask = jax.random.bernoulli(self.make_rng("dropout"), keep, shape)
    return jnp.where(mask, x / keep.astype(x.dtype), jnp.zeros_like(x))


def linear_drop_path_rates(max_rate: float, depth: int) -> list[float]:
  """Rates growing linearly from 0 (first block) to `max_rate` (last block)."""
  if depth == 1:
    return [float(max_rate)]
  return [float(max_rate) * i / (depth - 1) for i in range(depth)]
