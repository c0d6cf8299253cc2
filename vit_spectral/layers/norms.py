"""Token-wise normalization layers, chosen by name (`config.model.norm`)."""

from __future__ import annotations

import functools

from typing import Any

import flax.linen as nn
import jax.numpy as jnp

_NORMS: dict[str, type[nn.Module]] = {}


def register_norm(name: str):
  """Class decorator that registers a norm module.

  The block calls it as `cls(dtype=..., param_dtype=..., name=...)(x)` with x of
  shape (B, T, D), normalising over D. A norm computes its statistics in
  float32 and returns `dtype` (the mixed-precision policy, `models.vit.ViT`).
  """

  def decorator(cls):
    if name in _NORMS and _NORMS[name] is not cls:
      raise ValueError(f"norm {name!r} is already registered")
    _NORMS[name] = cls
    return cls

  return decorator


def registered_norms() -> tuple[str, ...]:
  return tuple(sorted(_NORMS))


def takes_epsilon(name: str) -> bool:
  """Whether the registered norm `name` has an `epsilon` field (LayerNorm does;
  CenterNorm, which divides by nothing, does not)."""
  cls = get_norm(name)
  cls = getattr(cls, "func", cls)          # a functools.partial of a module class
  return "epsilon" in getattr(cls, "__dataclass_fields__", {})


def make_norm(norm: str, epsilon: float, **kwargs) -> nn.Module:
  """The registered norm `norm` built with `kwargs` (dtype, param_dtype, name)
  and, when it has one, `epsilon`.

  Raises:
    ValueError: `epsilon` differs from LAYER_NORM_EPSILON for a norm without one
      (it would be ignored), or is not positive.
  """
  if not epsilon > 0:
    raise ValueError(f"model.block.norm_epsilon={epsilon} must be positive")
  if takes_epsilon(norm):
    return get_norm(norm)(epsilon=epsilon, **kwargs)
  if epsilon != LAYER_NORM_EPSILON:
    raise ValueError(f"model.block.norm_epsilon={epsilon} is set but model.norm={norm!r} "
                     "has no epsilon; leave norm_epsilon at its default "
                     f"{LAYER_NORM_EPSILON}")
  return get_norm(norm)(**kwargs)


def get_norm(name: str) -> type[nn.Module]:
  try:
    return _NORMS[name]
  except KeyError:
    raise ValueError(
        f"model.norm={name!r} is not a registered norm; choose one of "
        f"{list(registered_norms())}") from None


# The ViT epsilon: big_vision's and timm's ViT and DeiT LayerNorms use 1e-6
# (`Block.norm_epsilon` changes it, e.g. to PyTorch's default 1e-5).
LAYER_NORM_EPSILON = 1e-6

# LayerNorm with the ViT epsilon; flax's own module keeps the standard parameter
# names ("scale", "bias") so published ViT checkpoints map one to one. Its mean
# and variance are float32 whatever `dtype` (stated here, not left to flax's
# default); the output is in `dtype`.
LayerNorm = functools.partial(nn.LayerNorm, epsilon=LAYER_NORM_EPSILON,
                              force_float32_reductions=True)
_NORMS["layer_norm"] = LayerNorm


@register_norm("none")
class NoNorm(nn.Module):
  """No normalisation: x in `dtype` (LipsFormer Table 3's "No Norm", as in
  ReZero; a block without its pre-norm, paper 004 Table 8's open reading)."""
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  def __call__(self, x):
    return x.astype(self.dtype)
