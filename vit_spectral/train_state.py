"""The train state: what a checkpoint holds."""

from __future__ import annotations

from typing import Any

import flax.struct
import jax


@flax.struct.dataclass
class TrainState:
  """step: completed optimizer steps; params; opt_state (optax)."""
  step: jax.Array
  params: Any
  opt_state: Any
