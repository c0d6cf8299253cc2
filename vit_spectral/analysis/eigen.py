"""Eigenspectrum analysis of the attention update (paper 003, §3, §5, App. A–B).

The update of paper 003 (eq. 3) is vec(X_l) = (I + H ⊗ A) vec(X_{l−1}), i.e.
X_l = X_{l−1} + A X_{l−1} Hᵀ with H := W_projᵀ W_Vᵀ (d×d) and A the n×n attention
map. The eigenvalues of I + H ⊗ A are 1 + λ_j^H λ_i^A; the one of largest modulus
("dominating", Def. 2) decides the limit (Thm. 2) and the filtering (Thm. 3):
if it pairs with the Perron root λ^A = 1 the update is a low-pass filter,
otherwise it is not.

Readings chosen where the extracted text is ambiguous or too strong:
- Complex spectra. A (positive, row-stochastic, not symmetric) and H have complex
  eigenvalues in general. Proposition 1's "real" is read as: the Perron root 1 is
  real and simple with eigenvector 1, and every other eigenvalue lies in the open
  unit disc (it may be complex). All moduli here are complex moduli; no ordering
  of complex numbers is needed because `dominating_eigenvalue` searches all d·n
  pairs. Theorem 1's "λ_1^A" (the non-Perron side) is read as "any non-Perron
  eigenvalue"; Corollary 2 still holds: for λ^H ∈ [−1, 0) and |λ_i^A| < 1,
  |1 + λ^H_d λ_i^A| ≥ 1 − |λ^H_d||λ_i^A| > 1 + λ^H_d, so a non-Perron pair wins.
- Ties (Thm. 3, case 3). Pairs whose modulus is within `rtol` of the maximum all
  dominate; the update is *not* low-pass as soon as one of them pairs with a
  non-Perron eigenvalue of A, and is low-pass only if all of them pair with the
  Perron root.
- Multi-head ("we average over all heads", §5). Full-H reading (default): H is the
  layer's whole W_projᵀ W_Vᵀ = (Σ_h W_V,h W_proj,h)ᵀ (d×d, full rank, Cor. 2 applies
  to it) with A the head-averaged map. Per-head reading: H_h = (W_V,h W_proj,h)ᵀ
  with A_h; H_h has rank d_h, so d − d_h of its eigenvalues are exactly 0 (taken
  from the d_h×d_h matrix W_proj,h W_V,h, which has the same nonzero spectrum) and
  give |1 + 0·λ^A| = 1 for every i: when no other pair exceeds 1 these tie with
  every eigenvalue of A and, by the tie rule above, count as not low-pass.
- Theorem 4 (real spectra) as printed misses candidates in the mixed-sign case
  (λ_1^H < 0 < λ_d^H with λ_1^A < 0: e.g. λ^H = {−1, 0.1}, λ^A = {−0.9, 1} gives
  |1 + (−1)(−0.9)| = 1.9 > |1 + 0.1| = 1.1 although λ_d^H + 2 > |λ_1^H|).
  `theorem4_dominating` follows the printed case split and, in that branch,
  compares the three candidates (d, n), (1, n), (1, 1).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from vit_spectral.attention.value_output import ValueOutput, value_output_kernels
from vit_spectral.models.layouts import layer_fields, layer_trees


def _array_module(*arrays):
  """(jax.numpy, float32) when any input is a jax array (e.g. traced inside
  `jax.jit`: the training diagnostics), else (numpy, float64)."""
  if any(isinstance(a, jax.Array) for a in arrays):
    return jnp, jnp.float32
  return np, np.float64


def asymmetry(m):
  """‖(M − Mᵀ)/2‖_F / ‖(M + Mᵀ)/2‖_F (paper 003, Fig. 2): (..., d, d) -> (...).

  NumPy float64 for host arrays; jax.numpy float32 (jit-able) for jax arrays.
  """
  xp, dtype = _array_module(m)
  m = xp.asarray(m, dtype)
  mt = xp.swapaxes(m, -1, -2)
  return (xp.linalg.norm((m - mt) / 2, axis=(-2, -1))
          / xp.linalg.norm((m + mt) / 2, axis=(-2, -1)))


def h_matrix(w_v, w_proj):
  """H = W_projᵀ W_Vᵀ = (Σ_h W_V,h W_proj,h)ᵀ (eq. 3), the full-H reading.

  Args:
    w_v: (d, heads, d_h) value kernel.
    w_proj: (heads, d_h, d) output kernel.

  Returns:
    (d, d): NumPy float64 for host arrays, jax.numpy float32 (jit-able) for
    jax arrays.
  """
  xp, dtype = _array_module(w_v, w_proj)
  w_v, w_proj = xp.asarray(w_v, dtype), xp.asarray(w_proj, dtype)
  return xp.einsum("dhk,hke->de", w_v, w_proj).T


def condition_number(m):
  """σ_max / σ_min of the trailing (d, d) matrix (2-norm condition number;
  paper 003, Fig. 5 plots it for H): (..., d, d) -> (...), inf when singular.

  NumPy float64 for host arrays; jax.numpy float32 (jit-able) for jax arrays.
  """
  xp, dtype = _array_module(m)
  singular = xp.linalg.svd(xp.asarray(m, dtype), compute_uv=False)
  return singular[..., 0] / singular[..., -1]


def head_h_spectra(w_v, w_proj):
  """Eigenvalues of every per-head H_h = (W_V,h W_proj,h)ᵀ, exact zeros included.

  The nonzero spectrum of the rank-d_h matrix W_V,h W_proj,h is that of the
  d_h×d_h matrix W_proj,h W_V,h; the remaining d − d_h eigenvalues are 0.

  Args:
    w_v: (d, heads, d_h); w_proj: (heads, d_h, d).

  Returns:
    (heads, d) complex128.
  """
  w_v, w_proj = np.asarray(w_v, np.float64), np.asarray(w_proj, np.float64)
  small = np.einsum("hkd,dhl->hkl", w_proj, w_v)               # (heads, d_h, d_h)
  nonzero = np.linalg.eigvals(small)
  zeros = np.zeros((w_v.shape[1], w_v.shape[0] - w_v.shape[2]), complex)
  return np.concatenate([nonzero.astype(complex), zeros], axis=-1)


@dataclasses.dataclass(frozen=True)
class Dominating:
  """The dominating eigenvalue 1 + λ_j^H λ_i^A of I + H ⊗ A (Def. 2).

  Attributes:
    j, i: indices into the given spectra of H and A (the first maximiser).
    value: the complex eigenvalue 1 + λ_j^H λ_i^A.
    perron: whether λ_i^A is A's Perron root 1.
    tied: whether several pairs reach the maximal modulus (within rtol).
    low_pass: Theorem 3: True iff every dominating pair uses the Perron root.
  """
  j: int
  i: int
  value: complex
  perron: bool
  tied: bool
  low_pass: bool


def perron_index(lam_a, atol: float = 1e-6) -> int:
  """Index of the eigenvalue 1 of a row-stochastic matrix (Prop. 1)."""
  lam_a = np.asarray(lam_a)
  k = int(np.argmin(np.abs(lam_a - 1.0)))
  if abs(lam_a[k] - 1.0) > atol:
    raise ValueError(f"the attention spectrum has no eigenvalue 1 (closest: {lam_a[k]}); "
                     "A must be row-stochastic (Prop. 1)")
  return k


def dominating_from_spectra(lam_h, lam_a, perron: int | None = None,
                            rtol: float = 1e-9) -> Dominating:
  """Brute force over all d·n pairs: argmax_{j,i} |1 + λ_j^H λ_i^A| (Def. 2, Thm. 3).

  Args:
    lam_h: (d,) eigenvalues of H (real or complex).
    lam_a: (n,) eigenvalues of A.
    perron: index of the Perron root in lam_a (default: the eigenvalue 1).
    rtol: relative tolerance within which moduli count as tied.

  Returns:
    A `Dominating`.
  """
  lam_h = np.asarray(lam_h, complex)
  lam_a = np.asarray(lam_a, complex)
  perron = perron_index(lam_a) if perron is None else perron
  mod = np.abs(1.0 + lam_h[:, None] * lam_a[None, :])           # (d, n)
  top = mod.max()
  j, i = np.unravel_index(int(np.argmax(mod)), mod.shape)
  tied_i = np.nonzero(mod >= top * (1.0 - rtol))[1]
  return Dominating(
      j=int(j), i=int(i), value=complex(1.0 + lam_h[j] * lam_a[i]),
      perron=bool(i == perron), tied=len(tied_i) > 1,
      low_pass=bool(np.all(tied_i == perron)))


def dominating_eigenvalue(h, a, rtol: float = 1e-9) -> Dominating:
  """The dominating eigenvalue of I + H ⊗ A for matrices H (d×d) and A (n×n).

  A must be row-stochastic and nonnegative (Assumption 1: positive); its Perron
  root 1 is found among its eigenvalues.
  """
  a = np.asarray(a, np.float64)
  if np.any(a < 0) or not np.allclose(a.sum(-1), 1.0, atol=1e-4):
    raise ValueError("a must be a nonnegative row-stochastic attention map (Assumption 1)")
  return dominating_from_spectra(np.linalg.eigvals(np.asarray(h, np.float64)),
                                 np.linalg.eigvals(a), rtol=rtol)


def theorem4_dominating(lam_h, lam_a) -> tuple[int, int]:
  """Theorem 4's case analysis for real spectra: the (j, i) that dominates.

  Indices refer to the ascending orders λ_1^H ≤ … ≤ λ_d^H and λ_1^A ≤ … ≤ λ_n^A
  (1-based in the paper, 0-based here: 1 -> 0, d -> d−1, n -> n−1). See the
  module docstring for the completed mixed-sign branch.

  Args:
    lam_h: (d,) real eigenvalues of H; lam_a: (n,) real eigenvalues of A with
      max 1 and min > −1 (Prop. 1).

  Returns:
    (j, i) into the sorted spectra.
  """
  h = np.sort(np.asarray(lam_h, np.float64))
  a = np.sort(np.asarray(lam_a, np.float64))
  first, last_h, last_a = 0, len(h) - 1, len(a) - 1
  corner = {(jj, ii): abs(1.0 + h[jj] * a[ii])
            for jj in (first, last_h) for ii in (first, last_a)}

  def best(*pairs):
    return max(pairs, key=lambda p: corner[p])

  if h[first] > 0:                                   # all λ^H > 0
    return last_h, last_a
  if h[last_h] < 0:                                  # all λ^H < 0
    if a[first] > 0:
      return best((last_h, first), (first, last_a))
    if h[first] > -2:
      return first, first
    return best((first, first), (first, last_a))
  # λ_1^H < 0 < λ_d^H (a zero λ^H falls here too).
  if a[first] > 0:
    return best((last_h, last_a), (first, last_a))
  return best((last_h, last_a), (first, last_a), (first, first))


def layer_kernels(model, params: Mapping[str, Any]) -> list[tuple[Any, Any]]:
  """Per-layer (W_V (d, heads, d_h), W_proj (heads, d_h, d)) of a trained `ViT`.

  Works for every encoder layout (scan, segmented scan, loop) and for layers
  with different `value_output` settings (`model.layer_overrides`): each
  layer's kernels follow its own `ValueOutput` (`models.layouts.layer_fields`).

  Args:
    model: the `models.ViT` the parameters belong to.
    params: its "params" collection.

  Returns:
    One (w_v, w_proj) pair per layer, in layer order.
  """
  trees, fields = layer_trees(params), layer_fields(model)
  if len(trees) != len(fields):
    raise ValueError(f"params have {len(trees)} layers; model.depth={len(fields)}")
  return [value_output_kernels(tree["attention"],
                               ValueOutput.from_options(block["attention_kwargs"]),
                               block["num_heads"])
          for tree, block in zip(trees, fields)]


@dataclasses.dataclass(frozen=True)
class DominatingCounts:
  """Table 1: how often the dominating eigenvalue pairs with λ_n^A = 1 or not.

  Attributes:
    low_pass: cases where 1 + λ_j^H λ_n^A dominates (Perron root; Thm. 3 case 1).
    not_low_pass: cases where a non-Perron 1 + λ_j^H λ_i^A dominates, ties with
      one included (Thm. 3 cases 2–3).
    tied: cases with several dominating pairs (counted in the two above).
  """
  low_pass: int
  not_low_pass: int
  tied: int

  @property
  def total(self) -> int:
    return self.low_pass + self.not_low_pass

  @property
  def low_pass_fraction(self) -> float:
    return self.low_pass / self.total

  @property
  def not_low_pass_fraction(self) -> float:
    return self.not_low_pass / self.total


def dominating_counts(h_spectra: Sequence[Any], attention: Sequence[Any],
                      per_head: bool = False, rtol: float = 1e-9) -> DominatingCounts:
  """Table-1 counts over layers and the examples of a batch.

  Args:
    h_spectra: per layer, the eigenvalues of H: (d,) for the full-H reading
      (`np.linalg.eigvals(h_matrix(...))`), (heads, d) per head
      (`head_h_spectra`).
    attention: per layer, the attention maps (B, heads, n, n) as sown by the
      model (`models.per_layer(...)[l]["attention/attention_weights"]`).
    per_head: False = full H with the head-averaged map; True = H_h with A_h.
    rtol: tie tolerance (see `dominating_from_spectra`).

  Returns:
    The counts over every (layer, example[, head]).
  """
  low = not_low = tied = 0
  for lam_h, maps in zip(h_spectra, attention):
    maps = np.asarray(maps, np.float64)
    if not per_head:
      maps = maps.mean(axis=1, keepdims=True)                   # (B, 1, n, n)
      lam_h = np.asarray(lam_h)[None]
    lam_a = np.linalg.eigvals(maps)                              # (B, heads, n)
    for b in range(lam_a.shape[0]):
      for head in range(lam_a.shape[1]):
        dom = dominating_from_spectra(lam_h[head], lam_a[b, head], rtol=rtol)
        low += dom.low_pass
        not_low += not dom.low_pass
        tied += dom.tied
  return DominatingCounts(low, not_low, tied)
