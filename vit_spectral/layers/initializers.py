"""Kernel initializers chosen by name in configs.

`get_initializer("xavier_uniform")` returns a `jax.nn.initializers` function. Layers
take the name (a string is hashable and survives config files), not the function.
"""

from __future__ import annotations

from typing import Callable

import jax

Initializer = Callable[..., jax.Array]

# timm's ViT init: trunc_normal_(std=.02), cut at ±2 (absolute, i.e. ±100σ), no
# variance correction (timm/layers/weight_init.py).
TIMM_TRUNC_NORMAL_STD = 0.02
TIMM_TRUNC_NORMAL_BOUND = 2.0


def timm_trunc_normal() -> Initializer:
  """N(0, 0.02²) truncated to [−2, 2]: timm's `trunc_normal_(std=.02)`."""
  def init(key, shape, dtype=jax.numpy.float32):
    cut = TIMM_TRUNC_NORMAL_BOUND / TIMM_TRUNC_NORMAL_STD
    return (jax.random.truncated_normal(key, -cut, cut, shape, dtype)
            * jax.numpy.asarray(TIMM_TRUNC_NORMAL_STD, dtype))
  return init


_INITIALIZERS: dict[str, Callable[[], Initializer]] = {
    "xavier_uniform": jax.nn.initializers.xavier_uniform,
    "xavier_normal": jax.nn.initializers.xavier_normal,
    "lecun_normal": jax.nn.initializers.lecun_normal,
    # PyTorch's nn.Linear default, kaiming_uniform_(a=√5): U(±1/√fan_in).
    "torch_linear": lambda: jax.nn.initializers.variance_scaling(1 / 3, "fan_in", "uniform"),
    "timm_trunc_normal": timm_trunc_normal,
    "zeros": lambda: jax.nn.initializers.zeros,
}


def register_initializer(name: str, factory: Callable[[], Initializer]) -> None:
  """Registers `factory()` -> initializer under `name` (e.g. spectral init)."""
  if name in _INITIALIZERS:
    raise ValueError(f"initializer {name!r} is already registered")
  _INITIALIZERS[name] = factory


def registered_initializers() -> tuple[str, ...]:
  return tuple(sorted(_INITIALIZERS))


def get_initializer(name: str) -> Initializer:
  """Returns the initializer registered under `name`; unknown names raise."""
  try:
    return _INITIALIZERS[name]()
  except KeyError:
    raise ValueError(
        f"kernel_init={name!r} is not a registered initializer; choose one of "
        f"{list(registered_initializers())}") from None
