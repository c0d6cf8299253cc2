"""Quadratic relative positional encoding: Gaussian attention heads (paper 002, eq. 9).

Each head h has a centre Δ_h ∈ ℝ² and a width α_h > 0; its score for query q and
key k is

    A_qk = −α_h ‖δ − Δ_h‖²,   δ = k − q                     (eq. 9 / eq. 14)

so softmax(A_q,:) is an isotropic Gaussian around q + Δ_h on the grid (eq. 15).
Eq. 9 writes this as v_hᵀ r_δ with r_δ = (‖δ‖², δ₁, δ₂) and
v_h = −α_h (1, −2Δ₁, −2Δ₂), which drops the constant −α_h‖Δ_h‖²; softmax is
shift-invariant, so the full square used here gives the same probabilities.
W_qry = W_key = 0: the scores do not depend on the data (Lemma 2).
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from vit_spectral.attention.registry import register_attention
from vit_spectral.attention.relative import RelativePositionAttention, relative_shifts


def quadratic_precision(log_alpha):
  """Σ⁻¹ = 2α I of the Gaussian a quadratic head defines: (..., H) -> (..., H, 2, 2).

  −α‖δ − Δ‖² = −½ (δ − Δ)ᵀ (2α I) (δ − Δ), the form of eq. 16.
  """
  alpha = jnp.exp(log_alpha)
  return 2.0 * alpha[..., None, None] * jnp.eye(2, dtype=alpha.dtype)


def gaussian_logits(shifts, centers, precision):
  """Scores −½ (δ − Δ_h)ᵀ Σ_h⁻¹ (δ − Δ_h) for every head (eq. 16).

  Args:
    shifts: (N, N, 2) δ = k − q.
    centers: (H, 2) Δ_h.
    precision: (H, 2, 2) Σ_h⁻¹ (symmetric).

  Returns:
    (H, N, N) logits.
  """
  d = shifts[None].astype(centers.dtype) - centers[:, None, None, :]   # (H, N, N, 2)
  return -0.5 * jnp.einsum("hqki,hij,hqkj->hqk", d, precision, d)


@register_attention("quadratic")
class QuadraticAttention(RelativePositionAttention):
  """Multi-head attention with the quadratic encoding of eq. 9.

  Parameters: "centers" (H, 2) Δ_h, "log_alpha" (H,) log α_h (α > 0 by
  construction), then "value" and "out" as in every variant.

  Attributes:
    center_init_std: Δ_h ~ N(0, σ² I) at init (the paper's "N(0, 2I)", read as
      σ = 2).
    alpha_init: α_h at init (all heads; the paper does not state it).
  No fused path (`supports_fused` False; `RelativePositionAttention` says
  why): the scores are positional only. `implementation="fused"` raises,
  "auto" computes the map.
  """
  center_init_std: float = 2.0
  alpha_init: float = 1.0

  @nn.compact
  def __call__(self, x, state=None, mask=None):
    """x: (B, T, D) -> ((B, T, D), state unchanged)."""
    self.use_fused()     # validates `implementation`; False: no fused path here
    if self.alpha_init <= 0:
      raise ValueError(f"model.attention.alpha_init={self.alpha_init} must be > 0")
    shifts = relative_shifts(self.grid_shape(x.shape[1]))
    centers = self.param("centers", nn.initializers.normal(self.center_init_std),
                         (self.num_heads, 2), self.param_dtype)
    log_alpha = self.param("log_alpha", nn.initializers.constant(jnp.log(self.alpha_init)),
                           (self.num_heads,), self.param_dtype)
    logits = gaussian_logits(shifts, centers, quadratic_precision(log_alpha))
    logits = self.embed_grid_logits(logits[None], x.shape[1])          # (1, H, T, T)
    return self.attend(x, logits, mask), state
