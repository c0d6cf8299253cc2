"""The Transformer's position-wise MLP."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from vit_spectral.layers.initializers import get_initializer


# GELU forms: "gelu_tanh" is the tanh approximation (flax's default, big_vision's
# and the original ViT's), "gelu_erf" the exact x·Φ(x) (PyTorch's default, so
# timm's ViT and DeiT). They differ by up to ~1e-3 per activation.
# "quick_gelu" is x·σ(1.702·x), OpenAI CLIP's activation (timm's
# `layers.activations.quick_gelu`, the act_layer of timm's `*_clip_quickgelu_*`
# models). "swiglu" is a gated MLP, timm's `SwiGLUPacked` (`layers.mlp.GluMlp`
# with gate_last=False; DINOv2's ViT-g): fc1 has mlp_dim outputs, split into
# halves (a, b), SiLU(a)·b goes to fc2, whose input is mlp_dim / 2 wide.
MLP_ACTIVATIONS = ("gelu_tanh", "gelu_erf", "quick_gelu", "swiglu")


def check_activation(name: str, field: str = "model.block.mlp_activation") -> None:
  if name not in MLP_ACTIVATIONS:
    raise ValueError(f"{field}={name!r}; choose one of {list(MLP_ACTIVATIONS)}")


def activate(x, name: str):
  """The MLP's hidden activation `name` (one of MLP_ACTIVATIONS) of fc1's output x;
  "swiglu" halves the last axis."""
  check_activation(name)
  if name == "quick_gelu":
    return x * nn.sigmoid(1.702 * x)
  if name == "swiglu":
    gate, value = jnp.split(x, 2, axis=-1)
    return nn.silu(gate) * value
  return nn.gelu(x, approximate=name == "gelu_tanh")


class MlpBlock(nn.Module):
  """Dense(mlp_dim) -> activation -> Dropout -> Dense(width) -> Dropout.

  Attributes:
    mlp_dim: hidden width.
    activation: one of MLP_ACTIVATIONS ("gelu_tanh", the exact "gelu_erf",
      CLIP's "quick_gelu", the gated "swiglu", whose mlp_dim must be even).
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
    x = activate(x, self.activation)
    x = nn.Dropout(self.dropout_rate)(x, deterministic=self.deterministic)
    x = nn.Dense(width, dtype=self.dtype, param_dtype=self.param_dtype,
                 kernel_init=init, bias_init=bias_init, name="fc2")(x)
    return nn.Dropout(self.dropout_rate)(x, deterministic=self.deterministic)
