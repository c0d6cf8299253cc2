"""Kernel initializers chosen by name in configs.

`get_initializer("xavier_uniform")` returns a `jax.nn.initializers` function. Layers
take the name (a string is hashable and survives config files), not the function.
"""

from __future__ import annotations

from typing import Callable

import jax

Initializer = Callable[..., jax.Array]

_INITIALIZERS: dict[str, Callable[[], Initializer]] = {
    "xavier_uniform": jax.nn.initializers.xavier_uniform,
    "xavier_normal": jax.nn.initializers.xavier_normal,
    "lecun_normal": jax.nn.initializers.lecun_normal,
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
