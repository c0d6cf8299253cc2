"""Eigen-reparameterized value and output projections (paper 003, §4).

The attention update of paper 003 (eqs. 2–3) is X_l = X_{l-1} + A X_{l-1} W_V W_proj,
i.e. vec(X_l) = (I + H ⊗ A) vec(X_{l-1}) with H := W_projᵀ W_Vᵀ. Instead of two
free matrices, the product W_V W_proj is built from an eigendecomposition whose
eigenvalues Λ_H are controlled:

  symmetric ("minus", "plus"):  W_V = V_H, W_proj = Λ_H V_Hᵀ, V_H = Q of QR(Θ)
      -> W_V W_proj = V_H Λ_H V_Hᵀ (symmetric, so H is too), Θ free (D×D);
      gradients reach Θ through the QR (Seeger et al., 2017).
  non-symmetric ("minus_ns", "plus_ns"):  W_V = V_H, W_proj = Λ_H V_H⁻¹
      -> W_V W_proj = V_H Λ_H V_H⁻¹, V_H free (D×D).
  Λ_H = −ψ² ("minus", the paper's superscript −) or +ψ² ("plus", superscript +),
  ψ ∈ ℝ^D free and initialised uniformly in (0, 1], so Λ starts in [−1, 0)
  resp. (0, 1]. With `clip`, Λ is clipped to [−1, −ε] resp. [ε, 1] (the paper's
  "clip(ψ, [−1, −ε])", applied here to ±ψ² so that both signs share one ψ).

Multi-head (paper §5, "W_V = V_H and W_proj = Λ_H V_Hᵀ"): V_H is D×D and its
columns are the concatenated head channels, so it needs num_heads·head_dim = D;
W_V, reshaped to (D, H, Dh), projects the values of every head, and W_proj,
reshaped to (H, Dh, D), is the output projection. The sum over heads of
W_V,h W_proj,h is then exactly V_H Λ_H V_H^{T or −1}.

Both `Attention.project_qkv` (value) and `Attention.project_out` (output) call
`value_output_kernels` on the same parameters, and the diagnostics
(`vit_spectral.analysis.eigen`) call it on trained parameters: one definition of
the kernels for the model and the analysis.

Parameters of an eigen-reparameterized attention module (besides query/key):
  h_theta (D, D): Θ (symmetric modes), or h_vectors (D, D): V_H (non-symmetric);
  h_psi (D,): ψ; value_bias (H, Dh) when qkv_bias; out_bias (D,).
The standard mode keeps the Dense submodules `value` and `out` unchanged.
"""

from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp

STANDARD = "standard"
# mode -> (sign of Λ = sign·ψ², symmetric eigendecomposition?)
_EIGEN_MODES = {
    "minus": (-1.0, True),
    "plus": (1.0, True),
    "minus_ns": (-1.0, False),
    "plus_ns": (1.0, False),
}
VALUE_OUTPUTS = (STANDARD, *_EIGEN_MODES)

THETA = "h_theta"
VECTORS = "h_vectors"
PSI = "h_psi"


def check_value_output(value_output: str, clip: bool = False, eps: float = 1e-3) -> None:
  """Raises ValueError for an unknown mode or an ε outside (0, 1]."""
  if value_output not in VALUE_OUTPUTS:
    raise ValueError(f"model.attention.value_output={value_output!r}; "
                     f"choose one of {list(VALUE_OUTPUTS)}")
  if clip and not 0.0 < float(eps) <= 1.0:
    raise ValueError(f"model.attention.value_output_eps={eps} must be in (0, 1] "
                     "when value_output_clip is set")


def is_symmetric(value_output: str) -> bool:
  """True for the QR (orthogonal V_H) modes, False for the "-NS" modes."""
  check_value_output(value_output)
  if value_output == STANDARD:
    raise ValueError("value_output='standard' has no eigendecomposition")
  return _EIGEN_MODES[value_output][1]


def psi_init(key, shape, dtype=jnp.float32):
  """ψ ~ U(0, 1]: Λ = ∓ψ² then starts inside [−1, 0) resp. (0, 1] (paper §4)."""
  return (1.0 - jax.random.uniform(key, shape, jnp.float32)).astype(dtype)


def eigenvalues(psi, value_output: str, clip: bool = False, eps: float = 1e-3):
  """diag(Λ_H) = ±ψ², optionally clipped to [−1, −ε] / [ε, 1] (paper §4).

  Args:
    psi: (D,) parameter ψ.
    value_output: an eigen mode ("minus", "plus", "minus_ns", "plus_ns").
    clip: clip Λ into [−1, −ε] ("minus") or [ε, 1] ("plus").
    eps: the ε of the clip.

  Returns:
    (D,) eigenvalues, float32.
  """
  check_value_output(value_output, clip, eps)
  sign, _ = _EIGEN_MODES[value_output]
  lam = sign * jnp.square(psi.astype(jnp.float32))
  if clip:
    lam = jnp.clip(lam, -1.0, -eps) if sign < 0 else jnp.clip(lam, eps, 1.0)
  return lam


def orthogonal_factor(theta):
  """V_H = Q of QR(Θ) (paper §4): (D, D) -> orthogonal (D, D), float32."""
  q, _ = jnp.linalg.qr(theta.astype(jnp.float32))
  return q


def eigen_factors(params: Mapping[str, Any], value_output: str, clip: bool = False,
                  eps: float = 1e-3):
  """(V_H, Λ_H, V_H⁻¹) of W_V W_proj = V_H Λ_H V_H⁻¹ (V_H⁻¹ = V_Hᵀ when symmetric).

  Args:
    params: the attention module's parameters (h_theta or h_vectors, and h_psi).
    value_output: an eigen mode.
    clip, eps: see `eigenvalues`.

  Returns:
    v (D, D), lam (D,), v_inv (D, D), all float32.
  """
  lam = eigenvalues(params[PSI], value_output, clip, eps)
  if is_symmetric(value_output):
    v = orthogonal_factor(params[THETA])
    return v, lam, v.T
  v = params[VECTORS].astype(jnp.float32)
  return v, lam, jnp.linalg.inv(v)


def value_output_kernels(params: Mapping[str, Any], value_output: str, num_heads: int,
                         clip: bool = False, eps: float = 1e-3):
  """The value kernel W_V (D, H, Dh) and output kernel W_proj (H, Dh, D).

  "standard": the `value` and `out` DenseGeneral kernels as stored.
  Eigen modes: W_V = V_H and W_proj = Λ_H V_H⁻¹ (V_Hᵀ when symmetric), reshaped
  per head (paper §5), so that Σ_h W_V,h W_proj,h = V_H Λ_H V_H⁻¹.

  Args:
    params: the attention module's parameters.
    value_output: one of VALUE_OUTPUTS.
    num_heads: H.
    clip, eps: see `eigenvalues`.

  Returns:
    (w_v, w_proj); float32 in the eigen modes, the stored dtype otherwise.
  """
  check_value_output(value_output, clip, eps)
  if value_output == STANDARD:
    return params["value"]["kernel"], params["out"]["kernel"]
  v, lam, v_inv = eigen_factors(params, value_output, clip, eps)
  width = v.shape[0]
  if width % num_heads:
    raise ValueError(f"model.hidden_size={width} is not divisible by "
                     f"model.num_heads={num_heads}")
  head_dim = width // num_heads
  w_v = v.reshape(width, num_heads, head_dim)
  w_proj = (lam[:, None] * v_inv).reshape(num_heads, head_dim, width)
  return w_v, w_proj
