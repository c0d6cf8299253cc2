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

from typing import ClassVar, Mapping

import flax.linen as nn
import jax
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

  Init. The paper gives only "Δ(h) ~ N(0, 2I₂)" (§4.1) and nothing for α; the
  authors' code decides both (epfml/attention-cnn @9ffaa30, the isotropic run
  runs/quadratic/run.sh: train.py with attention_isotropic_gaussian True and the
  config defaults gaussian_init_mu_std=2., gaussian_init_sigma_std=0.01):
  - models/bert.py, GaussianSelfAttention.__init__, draws attention_centers
    with torch's `normal_(0.0, gaussian_init_mu_std)`, whose second argument is
    a standard deviation: Δ_h ~ N(0, 2² I), not the covariance reading
    N(0, 2 I) (σ = √2) of the paper's notation;
  - it holds one inverse standard deviation per head, s_h = 1 + ε_h with
    ε_h ~ N(0, 0.01²) (again `normal_(0, gaussian_init_sigma_std)`), and
    get_heads_target_vectors scores −½ s_h² ‖δ − Δ_h‖² (a = c = s², b = 0);
    with eq. 9's −α_h ‖δ − Δ_h‖² that is α_h = s_h² / 2, 0.5 at ε = 0.

  Attributes:
    center_init_std: σ of Δ_h ~ N(0, σ² I) at init; 2, the authors' value
      (`center_init_std=1.4142` gives the covariance reading).
    alpha_init: α at init before the noise; 0.5 = s²/2 at s = 1, the authors'.
    spread_init_std: std of ε_h in α_h = alpha_init · (1 + ε_h)² (0 = every
      head at alpha_init); 0.01, the authors' gaussian_init_sigma_std.
  No fused path (`supports_fused` False; `RelativePositionAttention` says
  why): the scores are positional only. `implementation="fused"` raises,
  "auto" computes the map.
  """
  PARAM_AXES: ClassVar[Mapping[str, tuple[str | None, ...]]] = {
      "centers": ("heads", None),          # Δ_h (H, 2)
      "log_alpha": ("heads",),             # log α_h (H,)
  }

  center_init_std: float = 2.0
  alpha_init: float = 0.5
  spread_init_std: float = 0.01

  OPTION_RANGES: ClassVar[Mapping[str, str]] = {"alpha_init": "(0, inf)",
                                                "spread_init_std": "[0, inf)"}

  def scores(self, q, k, x):
    """−α_h ‖δ − Δ_h‖² (eq. 9): (1, H, T, T), zero on prefix pairs."""
    del q, k
    shifts = relative_shifts(self.grid_shape(x.shape[1]))
    centers = self.param("centers", nn.initializers.normal(self.center_init_std),
                         (self.num_heads, 2), self.param_dtype)
    log_alpha = self.param("log_alpha", self._log_alpha_init, (self.num_heads,),
                           self.param_dtype)
    logits = gaussian_logits(shifts, centers, quadratic_precision(log_alpha))
    return self.embed_grid_logits(logits[None], x.shape[1])           # (1, H, T, T)

  def _log_alpha_init(self, key, shape, dtype=jnp.float32):
    """log α_h = log alpha_init + 2 log|1 + ε_h|, ε_h ~ N(0, spread_init_std²):
    α_h = alpha_init · s_h², s_h = 1 + ε_h the authors' per-head spread."""
    eps = self.spread_init_std * jax.random.normal(key, shape, jnp.float32)
    return (jnp.log(self.alpha_init) + 2.0 * jnp.log(jnp.abs(1.0 + eps))).astype(dtype)
