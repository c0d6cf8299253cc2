"""Generalized (non-isotropic) quadratic encoding (paper 002, App. A.1, eq. 16).

Each head h has a centre Δ_h and a learned 2×2 matrix S_h = Σ_h^{-1/2}; with
Σ_h⁻¹ = S_h S_hᵀ (positive semi-definite by construction) the score is

    A_qk = −½ (δ − Δ_h)ᵀ Σ_h⁻¹ (δ − Δ_h),   δ = k − q          (eq. 16)

Init (App. A.1): Δ_h ~ N(0, σ² I) and S_h = I + E_h, the entries of E_h i.i.d.
N(0, ε²). The paper writes "N(0, 2I₂)" and "N(0, 0.01 I₂)", which read as
covariances would give σ = √2 and ε = 0.1; the authors' code decides σ = 2 and
ε = 0.01 (epfml/attention-cnn @9ffaa30, runs/quadratic-generalized/run.sh:
models/bert.py, GaussianSelfAttention.__init__, draws attention_centers with
torch's `normal_(0.0, gaussian_init_mu_std)` and adds
`normal_(0, gaussian_init_sigma_std)` to the identity for attention_spreads,
both second arguments standard deviations, at train.py's defaults
gaussian_init_mu_std=2., gaussian_init_sigma_std=0.01). Initial heads are
then close to isotropic Gaussians, as App. A.1 wants.
"""

from __future__ import annotations

from typing import ClassVar, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp

from vit_spectral.attention.quadratic import gaussian_logits
from vit_spectral.attention.registry import register_attention
from vit_spectral.attention.relative import RelativePositionAttention, relative_shifts


def gaussian_precision(inv_sqrt_cov):
  """Σ⁻¹ = S Sᵀ: (..., H, 2, 2) -> (..., H, 2, 2)."""
  return jnp.einsum("...ij,...kj->...ik", inv_sqrt_cov, inv_sqrt_cov)


def _near_identity(std: float):
  def init(key, shape, dtype=jnp.float32):
    return jnp.eye(2, dtype=dtype) + std * jax.random.normal(key, shape, dtype)
  return init


@register_attention("gaussian")
class GaussianAttention(RelativePositionAttention):
  """Multi-head attention with non-isotropic Gaussian heads (eq. 16).

  Parameters: "centers" (H, 2) Δ_h, "inv_sqrt_cov" (H, 2, 2) S_h, then "value"
  and "out".

  Attributes:
    center_init_std: σ of the centres' init (2, the authors'; the module
      docstring gives the source).
    inv_sqrt_cov_init_std: ε, the std of each entry of the perturbation of
      S_h = I at init (0.01, the authors').
  No fused path (`supports_fused` False; `RelativePositionAttention` says
  why): the scores are positional only. `implementation="fused"` raises,
  "auto" computes the map.
  """
  PARAM_AXES: ClassVar[Mapping[str, tuple[str | None, ...]]] = {
      "centers": ("heads", None),          # Δ_h (H, 2)
      "inv_sqrt_cov": ("heads", None, None),   # S_h (H, 2, 2)
  }

  center_init_std: float = 2.0
  inv_sqrt_cov_init_std: float = 0.01

  def scores(self, q, k, x):
    """−½ (δ − Δ_h)ᵀ S_h S_hᵀ (δ − Δ_h) (eq. 16): (1, H, T, T), zero on prefix pairs."""
    del q, k
    shifts = relative_shifts(self.grid_shape(x.shape[1]))
    centers = self.param("centers", nn.initializers.normal(self.center_init_std),
                         (self.num_heads, 2), self.param_dtype)
    inv_sqrt_cov = self.param("inv_sqrt_cov", _near_identity(self.inv_sqrt_cov_init_std),
                              (self.num_heads, 2, 2), self.param_dtype)
    logits = gaussian_logits(shifts, centers, gaussian_precision(inv_sqrt_cov))
    return self.embed_grid_logits(logits[None], x.shape[1])           # (1, H, T, T)
