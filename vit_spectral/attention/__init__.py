"""Attention variants behind one registry and one call contract.

Importing this package registers every built-in variant. Use
`get_attention(name)` to resolve a config name; `registered_attentions()` lists
them.
"""

from vit_spectral.attention.base import Attention, apply_weights, scaled_dot_logits
from vit_spectral.attention.registry import get_attention, register_attention, registered_attentions

# Importing a variant's module registers it.
from vit_spectral.attention import dot_product  # noqa: F401  (registers "dot_product")
from vit_spectral.attention import cosine  # noqa: F401  (registers "cosine")
