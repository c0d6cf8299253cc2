"""Exponential moving average of the parameters (DeiT's `ModelEma`, timm).

After every optimizer step t (params p_t):

  ema_t = d * ema_{t-1} + (1 - d) * p_t,      ema_0 = p_0 (the initial params),

so ema_n = d^n p_0 + (1 - d) * sum_{t=1..n} d^(n-t) p_t. No bias correction
and no warmup of d, as in DeiT (decay 0.99996 at batch 1024). The EMA lives in
`TrainState.ema_params`, is sharded like the params, checkpointed with them and
evaluated beside them (metrics `eval_ema_*`).
"""

from __future__ import annotations

from typing import Any

import jax


def check_decay(decay: float) -> float:
  """Returns decay as a float; 0 means "no EMA"; else it must be in (0, 1)."""
  decay = float(decay or 0.0)
  if not 0.0 <= decay < 1.0:
    raise ValueError(f"config.ema_decay={decay} must be in [0, 1) (0 = no EMA)")
  return decay


def update(ema_params: Any, params: Any, decay: float) -> Any:
  """One EMA step: decay * ema + (1 - decay) * params, leaf by leaf, in the
  parameters' dtype."""
  return jax.tree_util.tree_map(
      lambda e, p: (decay * e + (1.0 - decay) * p).astype(e.dtype),
      ema_params, params)
