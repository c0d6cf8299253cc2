"""Stochastic depth (DropPath) with a rate that may be a traced scalar.

The rate is an argument, not an attribute, so that a scanned encoder can feed each
layer its own rate from the linear depth schedule (the rates are scanned over).

Two forms, with m ~ Bernoulli(1 − p) per example:

                                                   training        evaluation
  rescale=True  (default; timm, DeiT, Swin):       m·f(x)/(1 − p)  f(x)
  rescale=False (LipsFormer, paper 001, App. J):   m·f(x)          (1 − p)·f(x)

Either way the evaluation output is the training output's expectation over the
drop mask, E[m] = 1 − p, so evaluation sees the branch at the size training
saw it on average. rescale=False's training branch is App. J's droppath(α·Lip(f),
p): 0 with probability p and α·Lip(f) otherwise, never more, so it only lowers
the bound of eq. (21), where 1/(1 − p) would raise the kept branch's constant
above α·Lip(f). The paper does not say what evaluation does; that is decided by
the authors' code, which drops paths with timm's DropPath (timm 0.3.2, the
version IDEA-Research/LipsFormer's get_started.md installs: x.div(keep_prob)
times the mask in training, x at evaluation), i.e. evaluation = the training
expectation. Without the 1/(1 − p) in training that expectation is (1 − p)·f(x),
so rescale=False multiplies by 1 − p at evaluation, as Huang et al.'s original
stochastic depth does (it scales each block by its survival probability at
test time). rescale=True is timm's form: the authors' code exactly.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp


class DropPath(nn.Module):
  """Drops the whole residual branch per example with probability `rate`.

  Draws from the "dropout" RNG stream.

  Attributes:
    rescale: in training scale the surviving branches by 1 / (1 - rate) and
      pass the branch as it is at evaluation (True), or leave the surviving
      branches as they are in training and scale the branch by 1 - rate at
      evaluation (False, LipsFormer App. J). Both keep evaluation = the mean
      of training over the drop mask.
  """
  rescale: bool = True

  @nn.compact
  def __call__(self, x, rate, deterministic: bool):
    """x: (B, ...); rate: scalar in [0, 1) (Python float or traced)."""
    if isinstance(rate, (int, float)) and rate == 0.0:
      return x
    if deterministic and self.rescale:
      return x
    keep = 1.0 - jnp.asarray(rate, jnp.float32)
    # The scale by keep (evaluation) or 1/keep (training) is applied in float32
    # and rounded once to x's dtype (in bf16 a rounded keep, e.g. 0.9 -> 0.8984,
    # would bias every branch). A traced rate of 0 gives keep = 1: x unchanged.
    if deterministic:
      return (x.astype(jnp.float32) * keep).astype(x.dtype)
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    mask = jax.random.bernoulli(self.make_rng("dropout"), keep, shape)
    kept = (x.astype(jnp.float32) / keep).astype(x.dtype) if self.rescale else x
    return jnp.where(mask, kept, jnp.zeros_like(x))


def linear_drop_path_rates(max_rate: float, depth: int) -> list[float]:
  """Rates growing linearly from 0 (first block) to `max_rate` (last block)."""
  if depth == 1:
    return [float(max_rate)]
  return [float(max_rate) * i / (depth - 1) for i in range(depth)]
