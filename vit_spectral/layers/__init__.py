"""Layers shared by every block: norms, MLP, drop-path, FeatScale, initializers."""

from vit_spectral.layers.drop_path import DropPath, linear_drop_path_rates
from vit_spectral.layers.feat_scale import FeatScale
from vit_spectral.layers.initializers import get_initializer, register_initializer, registered_initializers
from vit_spectral.layers.mlp import MlpBlock
from vit_spectral.layers.norms import LayerNorm, get_norm, register_norm, registered_norms

# Importing these modules registers "center_norm" and the "spectral" initializer.
from vit_spectral.layers.center_norm import CenterNorm
from vit_spectral.layers import spectral_init  # noqa: F401
from vit_spectral.layers.grid_conv import GridConv
from vit_spectral.layers.space_to_depth import depth_to_space, space_to_depth

__all__ = [
    "CenterNorm", "DropPath", "FeatScale", "GridConv", "LayerNorm", "MlpBlock",
    "depth_to_space", "get_initializer", "get_norm", "linear_drop_path_rates",
    "register_initializer", "register_norm", "registered_initializers",
    "registered_norms", "space_to_depth", "spectral_init",
]
