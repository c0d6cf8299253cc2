"""Scaled cosine similarity attention, SCSA (LipsFormer, paper 001, §4.1.2, eq. 6).

Per head, with rows of Q = XW^Q, K = XW^K, V = XW^V ℓ2-normalised with the
smoothing ε inside the square root,

    q̂_i = q_i / sqrt(‖q_i‖² + ε)      (likewise k̂_j, v̂_j)
    SCSA(X) = ν · softmax(τ · Q̂ K̂ᵀ) · V̂

Because q̂, k̂, v̂ have norm < 1 and the normalisation's Jacobian is bounded by
ε^{-1/2}‖W‖, SCSA is Lipschitz (Theorem 1; `analysis.lipschitz.scsa_lipschitz_bound`).
The heads are concatenated and scaled by 1/K (K heads, App. A.2) before the output
projection, so the multi-head bound is the mean of the per-head bounds times
‖W^O‖.

Two readings of V, chosen by `normalize_value`:
  * True (default): the paper's eq. 6 and Theorem 1 — V̂ row-normalised.
  * False: the authors' released LipsFormer-Swin code, which feeds raw V and
    uses τ = 10. App. K notes that attention is then *not* Lipschitz (the output
    grows with ‖V‖); kept for reproducing that code.
τ = 12 in Table 6.
"""

from __future__ import annotations

from typing import ClassVar, Mapping

import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from vit_spectral.attention.base import Attention
from vit_spectral.attention.registry import register_attention


def smooth_l2_normalize(x, epsilon: float):
  """x / sqrt(‖x‖² + ε) over the last axis (the row normalisation of eq. 6)."""
  x32 = x.astype(jnp.float32)
  norm = jnp.sqrt(jnp.sum(x32 * x32, axis=-1, keepdims=True) + epsilon)
  return (x32 / norm).astype(x.dtype)


@register_attention("cosine")
class CosineAttention(Attention):
  """ν·softmax(τ·Q̂K̂ᵀ)·V̂ per head, heads scaled by 1/K, then projected.

  Call contract: see `vit_spectral.attention.base`.

  Attributes (besides `Attention`'s):
    tau: logit scale τ (Table 6: 12; the authors' Swin code: 10).
    nu: output scale ν.
    learnable_tau, learnable_nu: make τ / ν a learned scalar parameter ("tau",
      "nu") initialised to the value above; otherwise a constant.
    epsilon: smoothing ε inside the square root of the normalisation.
    normalize_value: ℓ2-normalise V (the paper) or not (the authors' code).
    scale_heads: multiply the head concatenation by 1/K (App. A.2).

  Hooks (`attention.base`): `project` normalises q, k (and v); `scores` are
  τ·q̂k̂ᵀ; `scale_output` applies ν and 1/K after LePE (LePE of the mixed V̂,
  inside ν and 1/K as in LipsFormer-CSwin's code). Fused path
  (`implementation`): `fused_inputs` hands the normalised q̂, k̂ (the pipeline
  v̂) to `attention.fused.fused_attention`. A constant τ (in `param_dtype`,
  as here) is the call's `scale`, applied to the float32 cosines as here; a
  learned τ is a traced value, so it multiplies q̂ instead (in `dtype`) and
  the scale is 1.
  """
  supports_fused: ClassVar[bool] = True
  PARAM_AXES: ClassVar[Mapping[str, tuple[str | None, ...]]] = {"tau": (), "nu": ()}
  # ε > 0 is what keeps the normalisation Lipschitz.
  OPTION_RANGES: ClassVar[Mapping[str, str]] = {"epsilon": "(0, inf)"}

  tau: float = 12.0
  nu: float = 1.0
  learnable_tau: bool = False
  learnable_nu: bool = False
  epsilon: float = 1e-6
  normalize_value: bool = True
  scale_heads: bool = True

  def scalar(self, name: str, value: float, learnable: bool):
    """τ or ν: a learned scalar "name" (created by the first call), else the
    constant `value` in `param_dtype`."""
    if learnable:
      return self._shared_param(name, nn.initializers.constant(value), ())
    return jnp.asarray(value, self.param_dtype)

  def scales(self):
    """(τ, ν), created in this order where learned."""
    return (self.scalar("tau", self.tau, self.learnable_tau),
            self.scalar("nu", self.nu, self.learnable_nu))

  def project(self, x):
    """q̂, k̂ (and v̂ with `normalize_value`), each (B, T, H, Dh), eq. 6."""
    q, k, v = self.project_qkv(x)
    q = smooth_l2_normalize(q, self.epsilon)
    k = smooth_l2_normalize(k, self.epsilon)
    if self.normalize_value:
      v = smooth_l2_normalize(v, self.epsilon)
    return q, k, v

  def scores(self, q, k, x):
    """τ·q̂k̂ᵀ: cosines in float32 (the product accumulates there), times τ."""
    del x
    tau, _ = self.scales()
    cosines = jnp.einsum("bthd,bshd->bhts", q, k, preferred_element_type=jnp.float32)
    return tau.astype(jnp.float32) * cosines

  def fused_inputs(self, q, k, x):
    del x
    tau, _ = self.scales()
    if self.learnable_tau:   # a traced τ is no `scale`: fold it into q̂
      return q * tau.astype(q.dtype), k, 1.0, None
    return q, k, float(np.asarray(self.tau, self.param_dtype)), None   # τ as stored

  def scale_output(self, mixed, v):
    """ν·mixed, then 1/K (App. A.2)."""
    _, nu = self.scales()
    y = nu.astype(v.dtype) * mixed
    if self.scale_heads:
      y = y / self.num_heads
    return y
