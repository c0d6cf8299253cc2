"""Modern Hopfield Attention (Masumura & Taki, paper 004, eqs. 10 and 32).

Per layer ℓ and head, with s_ℓ = Q_ℓ K_ℓᵀ / sqrt(d_k) the scaled scores:

    h_ℓ = α'·h_{ℓ-1} + (1 - α')·s_ℓ,   h_0 = 0                      (eq. 10)
        = (1 - α')·Σ_{m=1..ℓ} α'^{ℓ-m} s_m                           (eq. 32)
    y   = α·skip + (1 - α)·Out(softmax(h_ℓ) V_ℓ)                     (eq. 10)

Reading of eq. (32): the extracted recursive form "β/sqrt(d_k) QKᵀ + α'/sqrt(d_k)
A^(ℓ-1)" scales the carried term by 1/sqrt(d_k) a second time, which contradicts
the closed sum on its left; we implement the sum (the scale enters once, in s_m),
which is also eq. (10) with the paper's §4.1 scaled dot product.

The hidden state h is the attention-variant memory of the encoder contract
(`attention.base`): the encoder's scan (or loop) carries it from block to block
as one float32 (B, heads, T, T) map, with the gradient flowing through it.
When the "intermediates" collection is collected, each layer also sows
"memory_norm", ‖h_ℓ‖_F per image (B,) (over heads and both token axes), which
the training diagnostics log (`training.diagnostics`).

Masks: the softmax reads h only where `mask` is True, and the carried state is
zeroed where `mask` is False, so the scores of masked pairs (e.g. future keys of
a causal decoder) are neither read by this layer nor handed to the next one.

`skip` is what α mixes in: the module input by default (inside a pre-norm block
this is LN(x): the "inner" reading); `Block(attention_residual="replace")` hands
the block input x instead (α·x + (1 - α)·Attn(LN(x)), eq. 10 on the residual
stream). α = α' = 0 is standard dot-product attention bit for bit.

Fused path (`implementation`, `attention.base`): only with α' = 0, where the
weights are softmax(s_ℓ) and no layer reads the carried h (eq. 10 with α' = 0
drops h_{ℓ-1}): the mixed values come from `attention.fused.fused_attention`
(the masked softmax(Q Kᵀ/√d_k)), α mixes the skip in as above, and the state
handed in is handed on unchanged instead of s_ℓ (nobody reads it). With α' > 0
the state is carried (`use_fused(has_state=True)`): "auto" computes the map,
"fused" raises.
"""

from __future__ import annotations

from typing import ClassVar, Mapping

import jax.numpy as jnp

from vit_spectral.attention.base import Attention
from vit_spectral.attention.registry import register_attention


@register_attention("hopfield")
class HopfieldAttention(Attention):
  """Multi-head attention whose weights are the softmax of a carried score memory.

  Hooks (`attention.base`): `prepare` checks α and α'; `carries_state` is
  α' > 0; `update_state` mixes the scores s_ℓ with the state handed in (eq. 10)
  and hands h_ℓ on; `mix_skip` mixes the skip in with α. The call takes
  `skip=` (`mixes_skip`): y (B, T, D) and h_ℓ (float32 (B, H, T, T), zero
  where masked); on the fused path (α' = 0) the state handed in, unchanged.

  Training diagnostics (`LOGGED_SOWN`; paper 004, eq. 10): per layer
  "hopfield_memory_norm", ‖h_ℓ‖_F of the carried score memory (the module
  docstring), averaged over the images.

  Attributes:
    alpha: α of eq. (10), the weight of the skip path (0 = no skip).
    alpha_hidden: α' of eq. (10), the decay of the hidden state h (0 = no memory:
      the weights are those of standard attention).
  """
  alpha: float = 0.5
  alpha_hidden: float = 0.5

  OPTION_RANGES: ClassVar[Mapping[str, str]] = {"alpha": "[0, 1]", "alpha_hidden": "[0, 1]"}

  # The block may hand a `skip` tensor for α to mix (attention_residual="replace").
  mixes_skip: ClassVar[bool] = True
  supports_fused: ClassVar[bool] = True
  LOGGED_SOWN: ClassVar[Mapping[str, str]] = {"memory_norm": "hopfield_memory_norm"}

  @classmethod
  def initial_state(cls, batch_size: int, num_tokens: int, num_heads: int):
    """h_0 = 0: float32 (B, heads, T, T)."""
    return jnp.zeros((batch_size, num_heads, num_tokens, num_tokens), jnp.float32)

  def carries_state(self) -> bool:
    return bool(self.alpha_hidden)

  def update_state(self, logits, state, mask):
    """s_ℓ and h_{ℓ-1} (None = h_0 = 0) -> (h_ℓ, h_ℓ), eq. (10), float32 (B, H, T, T)."""
    scores = logits.astype(jnp.float32)                              # s_ℓ
    hidden = (1.0 - self.alpha_hidden) * scores
    if state is not None and self.alpha_hidden:
      hidden = hidden + self.alpha_hidden * state                    # eq. (10)
    if mask is not None:
      # Masked pairs never reach the next layer (they are not read here either:
      # `probabilities` masks the same entries).
      hidden = jnp.where(mask, hidden, 0.0)
    if self.is_mutable_collection("intermediates"):  # the diagnostics' memory norm
      self.sow("intermediates", "memory_norm",
               jnp.sqrt(jnp.sum(jnp.square(hidden), axis=(1, 2, 3))))   # ‖h_ℓ‖_F, (B,)
    return hidden, hidden

  def mix_skip(self, x, out, skip=None):
    """α·skip + (1 − α)·out (eq. 10), skip = x when None; out itself when α = 0."""
    if not self.alpha:
      return out
    skip = x if skip is None else skip
    return self.alpha * skip.astype(out.dtype) + (1.0 - self.alpha) * out
