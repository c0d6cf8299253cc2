"""The one attention registry: variant names -> attention module classes.

Every attention variant is a `flax.linen.Module` that follows the call contract of
`vit_spectral.attention.base.Attention`:

    y, new_state = module(x, state, mask=None)

with `x` of shape (batch, tokens, width) and `y` of the same shape. `state` is the
per-variant memory carried from block to block by the encoder (the scan carry);
it is `None` for every variant whose class returns `None` from
`initial_state(...)`, so plain attention never pays for it; a variant that
carries one treats `None` as that initial state.

For a module of one's own, every variant also has the plain call (the same
parameters and numbers):

    y = module_class(..., return_state=False)(x, mask=None)

Stateless variants simply return y. A call that carries a state (`carries_state()`:
"hopfield" with alpha_hidden > 0, whose score memory the next layer reads) raises
a ValueError that names the carry form above instead of dropping the memory.

Variants are chosen by config (`config.model.attention = dict(name="dot_product",
...)`), never by subclassing the model.
"""

from __future__ import annotations

from typing import Callable, TypeVar

from vit_spectral.names import did_you_mean

_REGISTRY: dict[str, type] = {}

T = TypeVar("T", bound=type)


def register_attention(name: str) -> Callable[[T], T]:
  """Class decorator that registers an attention module under `name`."""

  def decorator(cls: T) -> T:
    if name in _REGISTRY and _REGISTRY[name] is not cls:
      raise ValueError(
          f"attention name {name!r} is already registered to "
          f"{_REGISTRY[name].__module__}.{_REGISTRY[name].__qualname__}")
    _REGISTRY[name] = cls
    return cls

  return decorator


def registered_attentions() -> tuple[str, ...]:
  """Sorted names of every registered attention variant."""
  return tuple(sorted(_REGISTRY))


def token_attentions() -> tuple[str, ...]:
  """Sorted names of the variants with one output per token: those a
  `models.vit.Block` runs (all but `updates_prefix_only` ones, e.g.
  "class_attention")."""
  return tuple(n for n in registered_attentions()
               if not getattr(_REGISTRY[n], "updates_prefix_only", False))


def get_attention(name: str) -> type:
  """Returns the attention module class registered under `name`.

  Raises:
    ValueError: `name` is not registered; the message lists the registered names.
  """
  try:
    return _REGISTRY[name]
  except KeyError:
    raise ValueError(
        f"model.attention.name={name!r} is not a registered attention variant"
        f"{did_you_mean(name, _REGISTRY)}; choose one of {list(registered_attentions())}"
    ) from None
