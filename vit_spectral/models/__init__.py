"""The Vision Transformer and the papers' other backbones (Swin, CaiT, CSwin),
their registered names, the block and encoder specs, the parameter layouts and
pretrained checkpoints in (timm, big_vision).

Importing this package registers every model name (each family module
registers its own, `models.backbone.register_models`)."""

from vit_spectral.models.backbone import (Backbone, ClassifierHead, IsotropicBackbone,
                                          StagedBackbone, register_models,
                                          registered_model_names)
from vit_spectral.models.build import build_model, model_class, model_config, model_kwargs
from vit_spectral.models.cait import CaiT
from vit_spectral.models.cswin import CSwin
from vit_spectral.models.intermediates import per_layer, per_stage, stage_names
from vit_spectral.models.layouts import (Layout, layer_fields, layer_specs_of, layer_trees,
                                         loop_to_scan, model_layout, scan_to_loop, to_layout,
                                         tree_layout, with_layer_trees)
from vit_spectral.models.pretrained import LoadReport, load_big_vision, load_into, load_timm
from vit_spectral.models.timm_preprocessing import TimmPreprocessing, timm_preprocessing
# The converters of the other families register themselves with `pretrained`.
from vit_spectral.models import cait_timm, swin_timm  # noqa: F401,E402  isort: skip
from vit_spectral.models.specs import BlockSpec, EncoderSpec
from vit_spectral.models.swin import Swin
from vit_spectral.models.token_layouts import StripeLayout, TokenLayout, WindowLayout
from vit_spectral.models.variants import MODEL_NAMES, SIZES, variant_fields
from vit_spectral.models.vit import Block, Encoder, ViT

__all__ = ["Backbone", "Block", "BlockSpec", "CSwin", "CaiT", "ClassifierHead", "Encoder",
           "EncoderSpec", "IsotropicBackbone", "Layout", "LoadReport", "MODEL_NAMES", "SIZES",
           "StagedBackbone", "StripeLayout", "Swin", "TimmPreprocessing", "TokenLayout", "ViT",
           "WindowLayout",
           "build_model", "layer_fields", "layer_specs_of", "layer_trees", "load_big_vision",
           "load_into", "load_timm", "loop_to_scan", "model_class", "model_config",
           "model_kwargs", "model_layout", "per_layer", "per_stage", "register_models",
           "registered_model_names", "scan_to_loop", "stage_names", "to_layout",
           "timm_preprocessing", "tree_layout", "variant_fields", "with_layer_trees"]
