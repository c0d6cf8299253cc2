"""The Transformer's position-wise MLP."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from vit_spectral.layers.initializers import get_initializer


# GELU forms: "gelu_tanh" is the tanh approximation (flax's default, big_vision's
# and the original ViT's), "gelu_erf" the exact x·Φ(x) (PyTorch's default, so
# timm's ViT and DeiT). They differ by up to ~1e-3 per activation.
MLP_ACTIVATIONS = ("gelu_tanh", "gelu_erf")


def check_activation(name: str, field: str = "model.block.mlp_activation") -> None:
  if name not in MLP_ACTIVATIONS:
    raise ValueError(f"{field}={name!r}; choose one of {list(MLP_ACTIVATIONS)}")


class MlpBlock(nn.Module):
  """Dense(mlp_dim) -> GELU -> Dropout -> Dense(width) -> Dropout.

  Attributes:
    mlp_dim: hidden width.
    activation: one of MLP_ACTIVATIONS ("gelu_tanh" or the exact "gelu_erf").
    dropout_rate: dropout after each Dense.
    deterministic: disables dropout.
    kernel_init: initializer name (see `layers.initializers`).
  """
  mlp_dim: int
  dropout_rate: float = 0.0
  deterministic: bool = True
  kernel_init: str = "xavier_uniform"
  activation: str = "gelu_tanh"
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
    check_activation(self.activation)
    x = nn.gelu(x, approximate=self.activation == "gelu_tanh")
    x = nn.Dropout(self.dropout_rate)(x, deterministic=self.deterministic)
    x = nn.Dense(width, dtype=self.dtype, param_dtype=self.param_dtype,
                 kernel_init=init, bias_init=bias_init, name="fc2")(x)
    return nn.Dropout(self.dropout_rate)(x, deterministic=self.deterministic)
