"""Attention variants behind one registry and one call contract.

Importing this package registers every built-in variant. Use
`get_attention(name)` to resolve a config name; `registered_attentions()` lists
them. Every variant is an `Attention` subclass (`base.py` states the contract:
`y, new_state = attn(x, state)` as the encoder carries it, or the plain
`y = attn(x)` in a module of one's own with `return_state=False`):

  "dot_product"       DotProductAttention          softmax(QKᵀ/√d)V
  "attn_scale"        AttnScaleAttention           paper 000, eqs. 7-9
  "cosine"            CosineAttention              paper 001, §4.1.2 (SCSA)
  "quadratic"         QuadraticAttention           paper 002, eq. 9
  "gaussian"          GaussianAttention            paper 002, App. A.1, eq. 16
  "relative_learned"  LearnedRelativeAttention     paper 002, §4.3, eq. 8
  "hopfield"          HopfieldAttention            paper 004, eq. 10
  "class_attention"   ClassAttention               CaiT's class stage (class token asks)
"""

from vit_spectral.attention.base import Attention, apply_weights, scaled_dot_logits
from vit_spectral.attention.fused import fused_attention
from vit_spectral.attention.registry import (get_attention, register_attention, registered_attentions,
                                            token_attentions)

# Importing a variant's module registers it.
from vit_spectral.attention.dot_product import DotProductAttention
from vit_spectral.attention.attn_scale import (AttnScaleAttention, all_pass_apply, all_pass_rescale,
                                              all_pass_weights)
from vit_spectral.attention.cosine import CosineAttention, smooth_l2_normalize
from vit_spectral.attention.relative import RelativePositionAttention, relative_shifts
from vit_spectral.attention.quadratic import QuadraticAttention, quadratic_precision
from vit_spectral.attention.gaussian import GaussianAttention, gaussian_precision
from vit_spectral.attention.relative_learned import LearnedRelativeAttention
from vit_spectral.attention.hopfield import HopfieldAttention
from vit_spectral.attention.class_attention import ClassAttention
from vit_spectral.attention.conv_equivalence import conv_to_quadratic_attention
from vit_spectral.attention.masks import causal_mask, combine_masks, padding_mask

__all__ = [
    "Attention", "AttnScaleAttention", "ClassAttention", "CosineAttention", "DotProductAttention",
    "GaussianAttention", "HopfieldAttention", "LearnedRelativeAttention",
    "QuadraticAttention", "RelativePositionAttention",
    "all_pass_apply", "all_pass_rescale", "all_pass_weights", "apply_weights",
    "causal_mask", "combine_masks", "conv_to_quadratic_attention", "fused_attention",
    "gaussian_precision",
    "get_attention", "padding_mask", "quadratic_precision", "register_attention",
    "registered_attentions", "relative_shifts", "scaled_dot_logits",
    "smooth_l2_normalize", "token_attentions",
]
