"""Cross-token cosine similarity of attention and feature maps (paper 000, App. F.3).

Both metrics average |cos| over pairs of distinct tokens (self-pairs excluded) at
one layer: columns of the attention maps, averaged over heads too (eq. 75,
after Zhou et al., 2021), and rows (tokens) of a feature map (eq. 76, after Gong
et al., 2021). Values near 1 mean collapsed attention / uniform patches.
A zero column or row counts as orthogonal to every other (cos = 0).
"""

from __future__ import annotations

import jax.numpy as jnp

# Norms below this count as zero (e.g. a fully masked key column).
_TINY = 1e-12


def cosine_gram(x, eps: float = _TINY):
  """x: (..., n, d) -> (..., n, n) cosines between rows (a zero row gets 0)."""
  norm = jnp.sqrt(jnp.sum(jnp.square(x), axis=-1, keepdims=True))
  unit = x / jnp.maximum(norm, eps)
  return jnp.einsum("...id,...jd->...ij", unit, unit)


def _mean_abs_cos_between_rows(x):
  """x: (..., n, d) -> mean over i ≠ j of |cos(x_i, x_j)|, (...)."""
  n = x.shape[-2]
  if n < 2:
    raise ValueError(f"cosine similarity needs at least 2 tokens; got {n}")
  gram = jnp.abs(cosine_gram(x))
  # The diagonal is |cos(x_i, x_i)| (1, or 0 for a zero row): remove it.
  off_diagonal = jnp.sum(gram, axis=(-2, -1)) - jnp.trace(gram, axis1=-2, axis2=-1)
  return off_diagonal / (n * (n - 1))


def attention_cosine_similarity(a):
  """M_attn, eq. 75: mean over heads and pairs of distinct columns of |cos|.

  Args:
    a: (..., H, n, n) attention maps of one layer (the head axis is required;
      use a[None] for a single map).

  Returns:
    (...) similarity in [0, 1].
  """
  if a.ndim < 3 or a.shape[-1] != a.shape[-2]:
    raise ValueError("attention_cosine_similarity needs maps of shape (..., heads, n, n); "
                     f"got shape {a.shape}")
  columns = jnp.swapaxes(a, -1, -2)                 # row i = column i of A
  return jnp.mean(_mean_abs_cos_between_rows(columns), axis=-1)


def token_cosine_similarity(x):
  """M_feat, eq. 76: mean over pairs of distinct tokens of |cos(x_i, x_j)|.

  Args:
    x: (..., n, d) token features (any leading batch/head axes).

  Returns:
    (...) similarity in [0, 1].
  """
  if x.ndim < 2:
    raise ValueError(f"token_cosine_similarity needs tokens of shape (..., n, d); got {x.shape}")
  return _mean_abs_cos_between_rows(x)
