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

The settings (mode, clip, ε) have one owner, the frozen `ValueOutput`
(`DEFAULT` gives `attention.base.Attention`'s defaults); `value_output_kernels`
is the one definition of the kernels, for the model (`Attention._eigen_kernels`)
and the analysis (`analysis.eigen`). Design notes and cost:
docs/design.md#attentionvalue_outputpy

Parameters of an eigen-reparameterized attention module (besides query/key):
  h_theta (D, D): Θ (symmetric modes), or h_vectors (D, D): V_H (non-symmetric);
  h_psi (D,): ψ; value_bias (H, Dh) when qkv_bias; out_bias (D,).
The standard mode keeps the Dense submodules `value` and `out` unchanged.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import jax
import jax.numpy as jnp

from vit_spectral.settings import check_choice, check_range, require

__all__ = ["ATTENTION_FIELDS", "DEFAULT", "PSI", "STANDARD", "THETA", "VALUE_OUTPUTS",
           "VECTORS", "ValueOutput", "eigen_factors", "eigenvalues",
           "orthogonal_factor", "psi_init", "value_output_kernels"]

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

# The kernels' own matmuls run in float32 whatever the backend's default
# (TPU: bfloat16 passes), as the solver calls they stand in for.
_HIGHEST = jax.lax.Precision.HIGHEST

# The attention module's field of each ValueOutput field (`attention.base`).
ATTENTION_FIELDS = {"value_output": "mode", "value_output_clip": "clip",
                    "value_output_eps": "eps"}


@dataclasses.dataclass(frozen=True)
class ValueOutput:
  """How an attention module builds W_V and W_proj; checked when built.

  An attention module's fields `value_output`, `value_output_clip` and
  `value_output_eps` (`ATTENTION_FIELDS`) are these three.

  Attributes:
    mode: "standard" (free `value` and `out` Dense layers) or an eigen mode:
      "minus" / "plus" (V Λ Vᵀ, V = Q of QR(Θ), Λ = ∓ψ²), "minus_ns" /
      "plus_ns" (V Λ V⁻¹, V free).
    clip: clip Λ to [−1, −ε] ("minus*") or [ε, 1] ("plus*").
    eps: the ε of the clip, in (0, 1].
  """
  mode: str = STANDARD
  clip: bool = False
  eps: float = 1e-3

  def __post_init__(self):
    check_choice(self.mode, VALUE_OUTPUTS, "model.attention.value_output")
    require(self.clip in (True, False),
            f"model.attention.value_output_clip={self.clip!r} must be True or False")
    check_range(float(self.eps), "model.attention.value_output_eps", 0.0, 1.0,
                low_open=True)

  @classmethod
  def from_options(cls, options: Mapping[str, Any] | None) -> ValueOutput:
    """The settings in an attention module's options (its `attention_kwargs`);
    absent keys take the defaults, other keys are ignored."""
    options = options or {}
    return cls(**{field: options[key] for key, field in ATTENTION_FIELDS.items()
                  if key in options})

  @property
  def eigen(self) -> bool:
    """Whether W_V W_proj is eigen-reparameterized (any mode but "standard")."""
    return self.mode != STANDARD

  @property
  def symmetric(self) -> bool:
    """True for the QR (orthogonal V_H) modes, False for the "-NS" modes."""
    require(self.eigen, "value_output='standard' has no eigendecomposition")
    return _EIGEN_MODES[self.mode][1]

  def check_heads(self, num_heads: int, head_dim: int, width: int) -> None:
    """An eigen mode's V_H is width×width, split into the heads' channels."""
    require(not self.eigen or num_heads * head_dim == width,
            f"model.attention.value_output={self.mode!r} needs num_heads*head_dim "
            f"== hidden_size, got {num_heads}*{head_dim} != {width}")


DEFAULT = ValueOutput()


def _settings(value_output: ValueOutput | str) -> ValueOutput:
  """A `ValueOutput`, or a mode name with the default clip and ε."""
  if isinstance(value_output, ValueOutput):
    return value_output
  return ValueOutput(mode=value_output)


def psi_init(key, shape, dtype=jnp.float32):
  """ψ ~ U(0, 1]: Λ = ∓ψ² then starts inside [−1, 0) resp. (0, 1] (paper §4)."""
  return (1.0 - jax.random.uniform(key, shape, jnp.float32)).astype(dtype)


def eigenvalues(psi, value_output: ValueOutput | str):
  """diag(Λ_H) = ±ψ², optionally clipped to [−1, −ε] / [ε, 1] (paper §4).

  Args:
    psi: (D,) parameter ψ.
    value_output: the settings (an eigen mode; a bare mode name = no clip).

  Returns:
    (D,) eigenvalues, float32.
  """
  settings = _settings(value_output)
  require(settings.eigen, "value_output='standard' has no eigenvalues")
  sign, _ = _EIGEN_MODES[settings.mode]
  lam = sign * jnp.square(psi.astype(jnp.float32))
  if settings.clip:
    eps = settings.eps
    lam = jnp.clip(lam, -1.0, -eps) if sign < 0 else jnp.clip(lam, eps, 1.0)
  return lam


def orthogonal_factor(theta):
  """V_H = Q of QR(Θ) (paper §4): (D, D) -> orthogonal (D, D), float32.

  Householder QR as `jnp.linalg.qr` computes it (the same reflectors, so the
  same signs of V_H's columns, and its gradient rule), with Q and R formed by
  matmuls (`_householder_qr`): the same Q to float32 rounding.
  """
  return _householder_q(theta.astype(jnp.float32))


def _householder_qr(x):
  """(Q, R) of the square x = QR from geqrf's reflectors, formed by matmuls.

  Q = I − Y T Yᵀ, with T the compact-WY factor of the reflectors
  H_j = I − τ_j y_j y_jᵀ: T⁻¹ = diag(1/τ) + striu(YᵀY) (Puglisi 1992; LAPACK's
  larft), solved as (I + diag(τ) striu(YᵀY)) T = diag(τ) (τ_j = 0 needs no
  1/τ). R = triu(Qᵀx), R to rounding.
  """
  h, taus = jnp.linalg.qr(x, mode="raw")  # geqrf; NumPy's raw mode returns its transpose
  eye = jnp.eye(x.shape[-1], dtype=x.dtype)
  y = jnp.tril(h.T, -1) + eye              # unit lower: y_j on and below the diagonal
  gram = jnp.matmul(y.T, y, precision=_HIGHEST)
  t = jax.lax.linalg.triangular_solve(eye + taus[:, None] * jnp.triu(gram, 1), jnp.diag(taus),
                                      left_side=True, lower=False, unit_diagonal=True)
  q = eye - jnp.matmul(y, jnp.matmul(t, y.T, precision=_HIGHEST), precision=_HIGHEST)
  return q, jnp.triu(jnp.matmul(q.T, x, precision=_HIGHEST))


@jax.custom_jvp
def _householder_q(x):
  return _householder_qr(x)[0]


@_householder_q.defjvp
def _householder_q_jvp(primals, tangents):
  """dQ as `jax.lax.linalg.qr`'s JVP computes it (real, square: its
  `_thin_qr_jvp`, default-precision matmuls as there)."""
  (x,), (dx,) = primals, tangents
  q, r = _householder_qr(x)
  dx_rinv = jax.lax.linalg.triangular_solve(r, dx)  # dx R⁻¹
  qt_dx_rinv = q.T @ dx_rinv
  lower = jnp.tril(qt_dx_rinv, -1)
  return q, q @ ((lower - lower.T) - qt_dx_rinv) + dx_rinv


def _lu_newton_inverse(v):
  """V⁻¹: `jnp.linalg.inv` (LU), then one Newton step X ← X(2I − VX), which
  leaves V⁻¹ a matmul output (why: docs/design.md#attentionvalue_outputpy)."""
  x = jnp.linalg.inv(v)
  eye = jnp.eye(v.shape[-1], dtype=v.dtype)
  return jnp.matmul(x, 2 * eye - jnp.matmul(v, x, precision=_HIGHEST), precision=_HIGHEST)


@jax.custom_jvp
def _inverse(v):
  return _lu_newton_inverse(v)


@_inverse.defjvp
def _inverse_jvp(primals, tangents):
  """d(V⁻¹) = −V⁻¹ dV V⁻¹ with the V⁻¹ just computed (two matmuls)."""
  (v,), (dv,) = primals, tangents
  inv = _lu_newton_inverse(v)
  return inv, -jnp.matmul(inv, jnp.matmul(dv, inv, precision=_HIGHEST), precision=_HIGHEST)


def eigen_factors(params: Mapping[str, Any], value_output: ValueOutput | str):
  """(V_H, Λ_H, V_H⁻¹) of W_V W_proj = V_H Λ_H V_H⁻¹ (V_H⁻¹ = V_Hᵀ when symmetric).

  Args:
    params: the attention module's parameters (h_theta or h_vectors, and h_psi).
    value_output: the settings (an eigen mode).

  Returns:
    v (D, D), lam (D,), v_inv (D, D), all float32.
  """
  settings = _settings(value_output)
  lam = eigenvalues(params[PSI], settings)
  if settings.symmetric:
    v = orthogonal_factor(params[THETA])
    return v, lam, v.T
  v = params[VECTORS].astype(jnp.float32)
  return v, lam, _inverse(v)


def value_output_kernels(params: Mapping[str, Any], value_output: ValueOutput | str,
                         num_heads: int):
  """The value kernel W_V (D, H, Dh) and output kernel W_proj (H, Dh, D).

  "standard": the `value` and `out` DenseGeneral kernels as stored.
  Eigen modes: W_V = V_H and W_proj = Λ_H V_H⁻¹ (V_Hᵀ when symmetric), reshaped
  per head (paper §5), so that Σ_h W_V,h W_proj,h = V_H Λ_H V_H⁻¹.

  Args:
    params: the attention module's parameters.
    value_output: the settings (`ValueOutput`, or a mode name without clip).
    num_heads: H.

  Returns:
    (w_v, w_proj); float32 in the eigen modes, the stored dtype otherwise.
  """
  settings = _settings(value_output)
  if not settings.eigen:
    return params["value"]["kernel"], params["out"]["kernel"]
  v, lam, v_inv = eigen_factors(params, settings)
  width = v.shape[0]
  head_dim = width // num_heads
  settings.check_heads(num_heads, head_dim, width)
  w_v = v.reshape(width, num_heads, head_dim)
  w_proj = (lam[:, None] * v_inv).reshape(num_heads, head_dim, width)
  return w_v, w_proj
