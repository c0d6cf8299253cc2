"""Stochastic depth (DropPath) with a rate that may be a traced scalar.

The rate is an argument, not an attribute, so that a scanned encoder can feed each
layer its own rate from the linear depth schedule (the rates are scanned over).

Two forms of the kept branch:

  rescale=True  (default, Huang et al. / timm):  y = m·f(x) / (1 − p)
  rescale=False (LipsFormer, paper 001, App. J):  y = m·f(x)

with m ~ Bernoulli(1 − p) per example. The first keeps the expectation of the
branch, so training and evaluation see the same mean; the second is App. J's
droppath(α·Lip(f), p), which is 0 with probability p and α·Lip(f) otherwise,
never more: it only lowers the bound of eq. (21), while 1/(1 − p) would raise
the kept branch's constant above α·Lip(f).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp


class DropPath(nn.Module):
  """Drops the whole residual branch per example with probability `rate`.

  Draws from the "dropout" RNG stream.

  Attributes:
    rescale: scale the surviving branches by 1 / (1 - rate), keeping the
      expectation (True), or leave them as they are (False, LipsFormer App. J).
  """
  rescale: bool = True

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
    # 1/(1 − p) applied in float32, rounded once to x's dtype (in bf16 a rounded
    # keep, e.g. 0.9 -> 0.8984, would bias every kept branch).
    kept = (x.astype(jnp.float32) / keep).astype(x.dtype) if self.rescale else x
    return jnp.where(mask, kept, jnp.zeros_like(x))


def linear_drop_path_rates(max_rate: float, depth: int) -> list[float]:
  """Rates growing linearly from 0 (first block) to `max_rate` (last block)."""
  if depth == 1:
    return [float(max_rate)]
  return [float(max_rate) * i / (depth - 1) for i in range(depth)]
