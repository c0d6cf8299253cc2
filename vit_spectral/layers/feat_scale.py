"""FeatScale: per-channel re-weighting of the DC and high-frequency parts (paper 000, §3.2).

Applied once to the output Y = MSA(X) of a block's attention, before the residual
add (eqs. 10–12):

    X_DC = DC[Y]·(diag(s) + I)        (10)
    X_HC = HC[Y]·(diag(t) + I)        (11)
    X'   = X_DC + X_HC                (12)

with DC[Y] the token mean broadcast to every token and HC[Y] = Y − DC[Y]
(Definition 1). s, t ∈ ℝ^d start at zero. X' is computed as Y + DC[Y]·s + HC[Y]·t,
which equals eq. 12 and is Y bit for bit when s = t = 0.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax.numpy as jnp


class FeatScale(nn.Module):
  """Re-weights DC and HC of the tokens, channel by channel (eqs. 10–12).

  Parameters "dc_scale" (s) and "hc_scale" (t), each (D,) zeros: 1-D, so the
  optimizer never weight-decays them.

  Attributes:
    dtype: output dtype; param_dtype: parameter dtype.
  """
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, y):
    """y: (B, T, D) -> (B, T, D) in `dtype`; the token mean and the re-weighting
    run in float32 (in bf16, s and t would be rounded away while |s|, |t| < 2⁻⁸)."""
    width = y.shape[-1]
    s = self.param("dc_scale", nn.initializers.zeros, (width,), self.param_dtype)
    t = self.param("hc_scale", nn.initializers.zeros, (width,), self.param_dtype)
    y32 = y.astype(jnp.promote_types(y.dtype, jnp.float32))
    dc = jnp.mean(y32, axis=-2, keepdims=True)                  # (B, 1, D)
    out = y32 + dc * s.astype(y32.dtype) + (y32 - dc) * t.astype(y32.dtype)
    return out.astype(self.dtype)
