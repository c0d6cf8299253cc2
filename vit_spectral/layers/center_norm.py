"""CenterNorm (LipsFormer, paper 001, §4.1.1, eq. 2): a Lipschitz LayerNorm.

    CN(x) = γ ⊙ D/(D−1) · (I − 11ᵀ/D) x + β

Centring without the division by the standard deviation: LayerNorm's Jacobian
carries 1/Std(y), which is unbounded as the variance goes to 0, while CenterNorm
is linear, with Lipschitz constant exactly D/(D−1)·max|γ| (the centring
projector has spectral norm 1; D/(D−1) undoes the shrinkage of its trace).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from vit_spectral.layers.norms import register_norm


@register_norm("center_norm")
class CenterNorm(nn.Module):
  """γ ⊙ D/(D−1)·(x − mean(x)) + β over the last axis (eq. 2).

  Parameter names follow flax's LayerNorm ("scale" = γ, "bias" = β), so a
  checkpoint's norms can be swapped between the two.

  Attributes:
    use_scale: learn γ (initialised to 1).
    use_bias: learn β (initialised to 0).
    dtype: output dtype (the mean and the affine map run in float32 at least);
      param_dtype: parameter dtype.
  """
  use_scale: bool = True
  use_bias: bool = True
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x):
    """x: (..., D) -> (..., D); needs D >= 2."""
    width = x.shape[-1]
    if width < 2:
      raise ValueError(f"CenterNorm needs a feature width of at least 2, got {width}")
    x = x.astype(jnp.promote_types(self.dtype, jnp.float32))
    y = (x - x.mean(axis=-1, keepdims=True)) * (width / (width - 1))
    if self.use_scale:
      y = y * self.param("scale", nn.initializers.ones, (width,), self.param_dtype)
    if self.use_bias:
      y = y + self.param("bias", nn.initializers.zeros, (width,), self.param_dtype)
    return y.astype(self.dtype)
