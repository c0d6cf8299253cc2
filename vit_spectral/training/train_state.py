"""The train state: what a checkpoint holds."""

from __future__ import annotations

from typing import Any

import flax.struct
import jax


@flax.struct.dataclass
class TrainState:
  """step: completed optimizer steps; params; opt_state (optax);
  ema_params: the EMA of params (`vit_spectral.training.ema`), or None without EMA (an
  empty subtree: the checkpoint then holds exactly what it held before)."""
  step: jax.Array
  params: Any
  opt_state: Any
  ema_params: Any = None
