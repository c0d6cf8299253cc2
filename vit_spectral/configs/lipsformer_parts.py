"""The LipsFormer model and optimizer fields every LipsFormer recipe shares (paper 001).

The LipsFormer-ViT: CenterNorm (eq. 2), scaled cosine attention (eq. 6, τ = 12),
spectral initialization (eq. 5), weighted residual shortcuts (eq. 4) with
α = 1/L, the convolution branch (§4.2.1: 7×7 depth-wise then 1×1 point-wise,
one weighted residual branch without a norm) and the LipsFormer block order
x <- CenterNorm(x + DropPath(α ⊙ f(x))) for attention and feed-forward
(Table 1), DropPath without the 1/(1 − p) rescaling (App. J). Table 6: no
warmup, AdamW, no gradient clipping.

L, the number of residual branches, counts every weighted branch of the
network (2 per block, 3 with the convolution branch), so that α = 1/L makes
Theorem 2's product over the branches at most exp(κ).
"""

from __future__ import annotations

from vit_spectral.configs import common


def residual_branches(depth: int, conv_block: bool) -> int:
  """L: weighted residual branches in `depth` blocks (conv, attention, MLP)."""
  return depth * (3 if conv_block else 2)


def lipsformer_model_fields(depth: int, *, conv_block: bool = True, tau: float = 12.0,
                            normalize_value: bool = True, alpha: float | None = None,
                            conv_kernel_size: int = 7) -> dict:
  """`common.model_config` fields that turn a ViT into a LipsFormer-ViT.

  Args:
    depth: number of blocks.
    conv_block: add the depth-wise + point-wise convolution branch.
    tau: cosine-attention logit scale (12 in Table 6; 10 in the authors' code).
    normalize_value: normalise V (the paper) or not (the authors' Swin code).
    alpha: initial residual weight; None = 1/L (Table 6).
    conv_kernel_size: depth-wise kernel side (7).
  """
  if alpha is None:
    alpha = 1.0 / residual_branches(depth, conv_block)
  return dict(
      depth=depth, norm="center_norm", kernel_init="spectral",
      attention=dict(name="cosine", tau=tau, normalize_value=normalize_value),
      block=dict(block_order="lipsformer", residual_alpha=alpha,
                 conv_block=conv_block, conv_kernel_size=conv_kernel_size,
                 drop_path_rescale=False))


def lipsformer_optim(learning_rate: float, weight_decay: float = 0.05,
                     b2: float = 0.999):
  """Table 6: AdamW (0.9, b2), eps 1e-8, no warmup, no clipping, cosine decay."""
  return common.optim_config(
      "adamw", learning_rate=learning_rate, warmup_steps=0, weight_decay=weight_decay,
      b1=0.9, b2=b2, eps=1e-8, grad_clip_norm=None)
