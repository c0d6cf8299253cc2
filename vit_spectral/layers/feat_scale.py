"""FeatScale: per-channel re-weighting of the DC and high-frequency parts (paper 000, §3.2).

Applied once to the output Y = MSA(X) of a block's attention, before the residual
add (eqs. 10–12):

    X_DC = DC[Y]·(diag(s) + I)        (10)
    X_HC = HC[Y]·(diag(t) + I)        (11)
    X'   = X_DC + X_HC                (12)

with DC[Y] the token mean broadcast to every token and HC[Y] = Y − DC[Y]
(Definition 1). s, t ∈ ℝ^d start at zero. X' is computed as Y + DC[Y]·s + HC[Y]·t,
which equals eq. 12 and is Y bit for bit when s = t = 0.

Two forms (`form`, the Block's `feat_scale_form`):

  "equations" (default)  X' = Y + DC[Y]·s + HC[Y]·t: eqs. 10–12, and what the
                         authors' CaiT and Swin code computes
                         (VITA-Group/ViT-Anti-Oversmoothing, featscale_cait.py,
                         swin/models/swin_featscale.py).
  "authors_deit"         X' = Y + 2·(DC[Y]·s + HC[Y]·t): the authors' DeiT code
                         (featscale.py, since commit 969b564 "bugfix to featscale",
                         2022-04-05, the last change before their pretrained
                         models were published) computes
                         `x_attn = x_attn + x_d + x_h` and then adds
                         `x + drop_path(x_attn + x_d + x_h)`, so the re-weighted
                         parts enter twice: eqs. 10–12 with s and t doubled.
                         The same parameters at s = t = 0 are still Y; the
                         form matters for the learning dynamics (the scales'
                         gradients double) and for loading their DeiT weights.
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping

import flax.linen as nn
import jax.numpy as jnp

# How the re-weighted parts enter (FeatScale.form; the module docstring).
FEAT_SCALE_FORMS = ("equations", "authors_deit")


def check_feat_scale_form(form: str, field: str = "FeatScale.form") -> None:
  """Raises ValueError naming `field` unless `form` is one of FEAT_SCALE_FORMS."""
  if form not in FEAT_SCALE_FORMS:
    raise ValueError(f"{field}={form!r}; choose one of {list(FEAT_SCALE_FORMS)}")


class FeatScale(nn.Module):
  """Re-weights DC and HC of the tokens, channel by channel (eqs. 10–12).

  Parameters "dc_scale" (s) and "hc_scale" (t), each (D,) zeros: 1-D, so the
  optimizer never weight-decays them.

  Attributes:
    form: "equations" (eqs. 10–12) or "authors_deit" (the authors' DeiT code:
      s and t enter twice); see the module docstring.
    dtype: output dtype; param_dtype: parameter dtype.
    LOGGED_PARAMS: class constant; the training diagnostics log s and t per
      layer as feat_scale_s_mean, _min, _max and feat_scale_t_... (Fig. 7).
  """
  LOGGED_PARAMS: ClassVar[Mapping[str, str]] = {"dc_scale": "feat_scale_s",
                                                "hc_scale": "feat_scale_t"}

  form: str = "equations"
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, y):
    """y: (B, T, D) -> (B, T, D) in `dtype`; the token mean and the re-weighting
    run in float32 (in bf16, s and t would be rounded away while |s|, |t| < 2⁻⁸)."""
    check_feat_scale_form(self.form)
    width = y.shape[-1]
    s = self.param("dc_scale", nn.initializers.zeros, (width,), self.param_dtype)
    t = self.param("hc_scale", nn.initializers.zeros, (width,), self.param_dtype)
    y32 = y.astype(jnp.promote_types(y.dtype, jnp.float32))
    dc = jnp.mean(y32, axis=-2, keepdims=True)                  # (B, 1, D)
    scaled = dc * s.astype(y32.dtype) + (y32 - dc) * t.astype(y32.dtype)
    if self.form == "authors_deit":   # featscale.py adds x_d + x_h twice
      scaled = 2.0 * scaled
    return (y32 + scaled).astype(self.dtype)
