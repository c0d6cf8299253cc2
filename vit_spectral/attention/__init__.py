"""Attention variants behind one registry and one call contract.

Every variant is an `Attention` subclass in a module of its own that registers
it (`@register_attention(name)`); `base.py` states the contract: `y, new_state
= attn(x, state)` as the encoder carries it, or the plain `y = attn(x)` in a
module of one's own with `return_state=False`. Importing this package imports
the built-in variants' modules (`VARIANT_MODULES`, one line each) and exports
every registered class here by its class name. `get_attention(name)` resolves
a config name, `registered_attentions()` lists them, and `python -m
vit_spectral.registries` prints each with its class and the paper it follows.
"""

import importlib

from vit_spectral.attention.base import Attention, apply_weights, scaled_dot_logits
from vit_spectral.attention.fused import fused_attention
from vit_spectral.attention.registry import (get_attention, register_attention, registered_attentions,
                                            token_attentions)

# The built-in variants: importing a module registers its class.
VARIANT_MODULES = ("dot_product", "attn_scale", "cosine", "quadratic", "gaussian",
                   "relative_learned", "hopfield", "class_attention")
for _module in VARIANT_MODULES:
  importlib.import_module(f"{__name__}.{_module}")

# The variants' helpers, and what the relative variants share.
from vit_spectral.attention.attn_scale import (all_pass_apply, all_pass_rescale,  # noqa: E402
                                              all_pass_weights)
from vit_spectral.attention.cosine import smooth_l2_normalize  # noqa: E402
from vit_spectral.attention.relative import RelativePositionAttention, relative_shifts  # noqa: E402
from vit_spectral.attention.quadratic import quadratic_precision  # noqa: E402
from vit_spectral.attention.gaussian import gaussian_precision  # noqa: E402
from vit_spectral.attention.conv_equivalence import conv_to_quadratic_attention  # noqa: E402
from vit_spectral.attention.masks import causal_mask, combine_masks, padding_mask  # noqa: E402

# Every registered class, by its class name (`from vit_spectral.attention import HopfieldAttention`).
_CLASSES = {get_attention(name).__name__: get_attention(name) for name in registered_attentions()}
globals().update(_CLASSES)

__all__ = sorted([
    "Attention", "RelativePositionAttention", "VARIANT_MODULES", *_CLASSES,
    "all_pass_apply", "all_pass_rescale", "all_pass_weights", "apply_weights",
    "causal_mask", "combine_masks", "conv_to_quadratic_attention", "fused_attention",
    "gaussian_precision", "get_attention", "padding_mask", "quadratic_precision",
    "register_attention", "registered_attentions", "relative_shifts", "scaled_dot_logits",
    "smooth_l2_normalize", "token_attentions",
])
