"""The Transformer's position-wise MLP."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from vit_spectral.layers.initializers import get_initializer


class MlpBlock(nn.Module):
  """Dense(mlp_dim) -> GELU -> Dropout -> Dense(width) -> Dropout.

  Attributes:
    mlp_dim: hidden width.
    dropout_rate: dropout after each Dense.
    deterministic: disables dropout.
    kernel_init: initializer name (see `layers.initializers`).
  """
  mlp_dim: int
  dropout_rate: float = 0.0
  deterministic: bool = True
  kernel_init: str = "xavier_uniform"
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x):
    """x: (B, T, D) -> (B, T, D)."""
    width = x.shape[-1]
    init = get_initializer(self.kernel_init)
    bias_init = nn.initializers.normal(stddev=1e-6)
    x = nn.Dense(self.mlp_dim, dtype=self.dtype, param_dtype=self.param_dtype,
                 kernel_init=init, bias_init=bias_init, name="fc1")(x)
    x = nn.gelu(x)
    x = nn.Dropout(self.dropout_rate)(x, deterministic=self.deterministic)
    x = nn.Dense(width, dtype=self.dtype, param_dtype=self.param_dtype,
                 kernel_init=init, bias_init=bias_init, name="fc2")(x)
    return nn.Dropout(self.dropout_rate)(x, deterministic=self.deterministic)
