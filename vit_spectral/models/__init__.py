"""The Vision Transformer and the papers' other backbones (Swin, CaiT, CSwin),
their registered names, the block and encoder specs and the parameter
layouts. The checkpoint loaders live in `vit_spectral.pretrained`; their
names stay importable from here (`load_timm`, `load_big_vision`, ...).

Names are imported from their modules on first use (`lazy_exports`): `import
vit_spectral.models` imports neither JAX nor Flax. The registry of model
names imports the family modules when first read
(`models.backbone.registered_model_names`).
"""

from vit_spectral import lazy_exports

_EXPORTS = {
    "Backbone": "backbone",
    "Block": "vit",
    "BlockSpec": "specs",
    "CSwin": "cswin",
    "CaiT": "cait",
    "ClassifierHead": "backbone",
    "Encoder": "vit",
    "EncoderSpec": "specs",
    "IsotropicBackbone": "backbone",
    "Layout": "layouts",
    "LoadReport": "vit_spectral.pretrained.loading",
    "MODEL_NAMES": "variants",
    "SIZES": "variants",
    "StagedBackbone": "backbone",
    "StripeLayout": "token_layouts",
    "Swin": "swin",
    "TimmPreprocessing": "vit_spectral.pretrained.timm_preprocessing",
    "TokenLayout": "token_layouts",
    "ViT": "vit",
    "WindowLayout": "token_layouts",
    "build_model": "build",
    "layer_fields": "layouts",
    "layer_specs_of": "layouts",
    "layer_trees": "layouts",
    "load_big_vision": "vit_spectral.pretrained.loading",
    "load_into": "vit_spectral.pretrained.loading",
    "load_timm": "vit_spectral.pretrained.loading",
    "loop_to_scan": "layouts",
    "model_class": "build",
    "model_config": "build",
    "model_kwargs": "build",
    "model_layout": "layouts",
    "per_layer": "intermediates",
    "per_stage": "intermediates",
    "register_models": "backbone",
    "registered_model_names": "backbone",
    "scan_to_loop": "layouts",
    "stage_names": "intermediates",
    "timm_preprocessing": "vit_spectral.pretrained.timm_preprocessing",
    "to_layout": "layouts",
    "tree_layout": "layouts",
    "variant_fields": "variants",
    "with_layer_trees": "layouts",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports.exports(__name__, _EXPORTS)
