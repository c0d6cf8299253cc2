"""Other people's checkpoints in: timm and big_vision ViTs, timm's CaiT and
Swin, and trainer workdirs (`config.init_from`).

  model, variables = load_timm("deit_small_patch16_224.safetensors",
                               "deit_small_patch16_224")
  model, variables = load_big_vision("ViT-B_16.npz", "B/16")
  timm_preprocessing("deit_small_patch16_224")   # the input its weights expect

`loading` converts the ViT families and dispatches the others to their
family's converter (`loading.FAMILY_CONVERTERS`: `cait_timm`, `swin_timm`);
`weight_files` reads the files without unpickling. Names are imported on
first use (`lazy_exports`): `import vit_spectral.pretrained` imports no JAX.
"""

from vit_spectral import lazy_exports

_EXPORTS = {
    "FORMATS": "formats",
    "SUFFIXES": "formats",
    "LoadReport": "loading",
    "TIMM_ARCHITECTURES": "timm_names",
    "TimmPreprocessing": "timm_preprocessing",
    "known_timm_names": "loading",
    "load_big_vision": "loading",
    "load_into": "loading",
    "load_timm": "loading",
    "timm_model_config": "loading",
    "timm_preprocessing": "timm_preprocessing",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports.exports(__name__, _EXPORTS)
