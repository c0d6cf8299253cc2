"""The LipsFormer model and optimizer fields every LipsFormer recipe shares (paper 001).

The LipsFormer-ViT: CenterNorm (eq. 2), scaled cosine attention (eq. 6, τ = 12),
spectral initialization (eq. 5), weighted residual shortcuts (eq. 4) with
α = 1/L, the convolution branch (§4.2.1: 7×7 depth-wise then 1×1 point-wise,
one weighted residual branch without a norm) and the LipsFormer block order
x <- CenterNorm(x + DropPath(α ⊙ f(x))) for attention and feed-forward
(Table 1), DropPath without the 1/(1 − p) rescaling in training (App. J; at
evaluation the branches are scaled by 1 − p instead, `layers.drop_path`).
Table 6: no warmup, AdamW, no gradient clipping.

α = 1/L with L the number of residual *blocks* (transformer blocks), the same
α on every weighted branch of every block (`block_alpha`). Table 6: "L_t,
L_s, L_b, L_ℓ are the number of residual blocks", α = 1/L; Theorem 2 sets α =
1/Σ_s M_s with M_s the residual blocks of stage s. The paper's other numbers
agree with blocks, not branches: §4.1.3 initialises α to "a small value such
as 0.1 and 0.2" and Table 3 ablates 0.1–0.4. The authors' code decides what a
block is: IDEA-Research/LipsFormer models/lipsformer_swin.py initialises every
ScaleLayer of a block (conv, attention, MLP) to 1/num_layers with num_layers =
sum(depths), the transformer blocks (1/12 for LipsFormer-Swin-T). With k
weighted branches per block, eq. (19)'s product is then at most exp(k·κ)
rather than Theorem 2's exp(κ) (`analysis.lipschitz`). The hierarchical
LipsFormers carry their α in their VARIANTS: LipsFormer-Swin 1/sum(depths)
(`models.swin`), LipsFormer-CSwin 0.2 (`models.cswin`, the authors' CSwin code).
"""

from __future__ import annotations

from vit_spectral.configs import common


def block_alpha(num_blocks: int) -> float:
  """α = 1/L, L = `num_blocks` transformer blocks (Table 6, Theorem 2; the
  authors' lipsformer_swin.py: 1/sum(depths)). See the module docstring."""
  if num_blocks <= 0:
    raise ValueError(f"num_blocks={num_blocks} must be positive")
  return 1.0 / num_blocks


def residual_branches(depth: int, conv_block: bool) -> int:
  """Weighted residual branches in `depth` blocks (conv, attention, MLP).

  A count for the Lipschitz bound of eq. (19), which multiplies over branches;
  not the L of α = 1/L, which counts blocks (`block_alpha`)."""
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
    alpha: initial residual weight of every branch; None = 1/depth
      (`block_alpha`: Table 6, L = the number of blocks).
    conv_kernel_size: depth-wise kernel side (7).
  """
  if alpha is None:
    alpha = block_alpha(depth)
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
