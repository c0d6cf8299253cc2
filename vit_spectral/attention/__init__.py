"""Attention variants behind one registry and one call contract.

Importing this package registers every built-in variant. Use
`get_attention(name)` to resolve a config name; `registered_attentions()` lists
them.
"""

from vit_spectral.attention.base import Attention, apply_weights, scaled_dot_logits
from vit_spectral.attention.registry import get_attention, register_attention, registered_attentions

# Importing a variant's module registers it.
from vit_spectral.attention import dot_product  # noqa: F401  (registers "dot_product")
from vit_spectral.attention import quadratic  # noqa: F401  (registers "quadratic")
from vit_spectral.attention import gaussian  # noqa: F401  (registers "gaussian")
from vit_spectral.attention import relative_learned  # noqa: F401  (registers "relative_learned")
from vit_spectral.attention.relative import relative_shifts
from vit_spectral.attention.conv_equivalence import conv_to_quadratic_attention
from vit_spectral.attention import attn_scale  # noqa: F401  (registers "attn_scale")
from vit_spectral.attention import hopfield  # noqa: F401  (registers "hopfield")
from vit_spectral.attention.masks import causal_mask, combine_masks, padding_mask
from vit_spectral.attention import cosine  # noqa: F401  (registers "cosine")
