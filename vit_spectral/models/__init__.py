"""The Vision Transformer and its registered names."""

from vit_spectral.models.build import build_model, model_kwargs
from vit_spectral.models.intermediates import per_layer
from vit_spectral.models.layouts import loop_to_scan, scan_to_loop
from vit_spectral.models.variants import MODEL_NAMES, SIZES, variant_fields
from vit_spectral.models.vit import Block, Encoder, ViT

__all__ = [
    "Block", "Encoder", "MODEL_NAMES", "SIZES", "ViT", "build_model", "loop_to_scan",
    "model_kwargs", "per_layer", "scan_to_loop", "variant_fields",
]
