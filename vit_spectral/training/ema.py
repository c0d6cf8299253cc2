"""Exponential moving average of the parameters (DeiT's `ModelEma`, timm).

After every optimizer step t (params p_t):

  ema_t = d * ema_{t-1} + (1 - d) * p_t,      ema_0 = p_0 (the initial params),

so ema_n = d^n p_0 + (1 - d) * sum_{t=1..n} d^(n-t) p_t. No bias correction
and no warmup of d, as in DeiT (decay 0.99996 at batch 1024). The EMA lives in
`TrainState.ema_params`, is sharded like the params, checkpointed with them and
evaluated beside them (metrics `eval_ema_*`). The decay is
`RunSettings.ema_decay` (`sections.run`; 0 = no EMA).
"""

from __future__ import annotations

from typing import Any

import jax


def update(ema_params: Any, params: Any, decay: float) -> Any:
  """One EMA step: decay * ema + (1 - decay) * params, leaf by leaf, in the
  parameters' dtype."""
  return jax.tree_util.tree_map(
      lambda e, p: (decay * e + (1.0 - decay) * p).astype(e.dtype),
      ema_params, params)
