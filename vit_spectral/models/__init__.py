"""The Vision Transformer and the papers' other backbones (Swin, CaiT, CSwin),
their registered names, the parameter layouts and pretrained checkpoints in
(timm, big_vision)."""

from vit_spectral.models.build import build_model, model_class, model_kwargs
from vit_spectral.models.cait import CaiT
from vit_spectral.models.cswin import CSwin
from vit_spectral.models.intermediates import per_layer, per_stage, stage_names
from vit_spectral.models.layouts import (Layout, layer_fields, layer_trees, loop_to_scan,
                                         model_layout, scan_to_loop, to_layout, tree_layout,
                                         with_layer_trees)
from vit_spectral.models.pretrained import LoadReport, load_big_vision, load_into, load_timm
from vit_spectral.models.swin import Swin
from vit_spectral.models.variants import BACKBONE_NAMES, MODEL_NAMES, SIZES, variant_fields
from vit_spectral.models.vit import Block, Encoder, ViT

__all__ = ["BACKBONE_NAMES", "Block", "CSwin", "CaiT", "Encoder", "Layout", "LoadReport",
           "MODEL_NAMES", "SIZES", "Swin", "ViT", "build_model", "layer_fields", "layer_trees",
           "load_big_vision", "load_into", "load_timm", "loop_to_scan", "model_class",
           "model_kwargs", "model_layout", "per_layer", "per_stage", "scan_to_loop",
           "stage_names", "to_layout", "tree_layout", "variant_fields", "with_layer_trees"]
