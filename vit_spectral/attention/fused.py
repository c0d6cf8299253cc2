"""The fused attention call: softmax(scale·q kᵀ + bias, masked)·v, map not returned.

Every variant with a fused path (`Attention.supports_fused`, chosen per call by
`Attention.use_fused`) mixes its values through `fused_attention`, a thin call
of `jax.nn.dot_product_attention` in our layout (B, T, H, Dh).

What that call computes (read from jax 0.10.2, `jax._src.nn.functions`):

* Backend: `implementation=None`, which in this JAX version is always XLA's
  path (`_dot_product_attention_xla`), on CPU, GPU and TPU alike; cuDNN flash
  attention is only taken when asked for by name (`implementation="cudnn"`,
  bf16/fp16 only, with its own shape limits). XLA's path still builds the
  (B, H, T, S) scores inside the compiled step, so on CPU the fused call saves
  the sown map and its bookkeeping, not the n² memory.
* Precision: the scores q·kᵀ accumulate into float32 (for bf16 inputs with
  `DotAlgorithmPreset.BF16_BF16_F32`), are multiplied by `scale` in float32,
  `bias` is added in float32, the softmax runs in float32, and the
  probabilities are cast to the inputs' dtype before the product with v, which
  runs in that dtype. That is the explicit path's policy (`attention.base`):
  float32 scores and softmax, value mixing in `dtype`. (The explicit path
  scales q before the product, in q's dtype; here the scale is applied to the
  float32 scores, which in bf16 rounds no worse.)
* Masks: masked scores are replaced by −0.7·(largest float32) before the
  softmax, so a query whose keys are all masked gets the uniform row over all
  keys, as the explicit path's −1e30 gives; both paths agree on such rows.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def fused_attention(q, k, v, *, dtype: Any, scale: float | None = None, bias=None,
                    mask=None):
  """softmax(scale·q kᵀ + bias, where mask) v per head, without returning the map.

  Args:
    q: (B, T, H, Dh) queries.
    k, v: (B, S, H, Dh) keys and values (same head width as q).
    scale: multiplies the float32 scores q·kᵀ (a Python number); None =
      1/√Dh, the scaling of `base.scaled_dot_logits`.
    dtype: the compute dtype q, k and v are cast to (the module's `dtype`).
    bias: optional float scores added after scaling, broadcastable to
      (B, H, T, S) (any rank ≤ 4, heads axis 1 or H); added in float32.
    mask: optional bool broadcastable to (B, H, T, S) (any rank ≤ 4, heads axis
      1 or H); True = may attend.

  Returns:
    (B, T, H, Dh) in `dtype`.
  """
  if scale is None:
    scale = 1.0 / np.sqrt(q.shape[-1])
  q, k, v = (jnp.asarray(t).astype(dtype) for t in (q, k, v))
  if bias is not None:
    bias = jnp.asarray(bias, jnp.float32)
  if mask is not None:
    mask = jnp.asarray(mask, bool)
  # Looked up at call time: tests spy on it to see which path ran.
  return jax.nn.dot_product_attention(q, k, v, bias=bias, mask=mask, scale=scale,
                                      implementation=None)
