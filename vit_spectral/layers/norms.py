"""Token-wise normalization layers, chosen by name (`config.model.norm`)."""

from __future__ import annotations

import functools

import flax.linen as nn

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


def get_norm(name: str) -> type[nn.Module]:
  try:
    return _NORMS[name]
  except KeyError:
    raise ValueError(
        f"model.norm={name!r} is not a registered norm; choose one of "
        f"{list(registered_norms())}") from None


# LayerNorm with the ViT epsilon; flax's own module keeps the standard parameter
# names ("scale", "bias") so published ViT checkpoints map one to one. Its mean
# and variance are float32 whatever `dtype` (stated here, not left to flax's
# default); the output is in `dtype`.
LayerNorm = functools.partial(nn.LayerNorm, epsilon=1e-6, force_float32_reductions=True)
_NORMS["layer_norm"] = LayerNorm
