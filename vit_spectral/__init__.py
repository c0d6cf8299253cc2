"""vit_spectral: why deep Vision Transformers oversmooth, and how to stop it.

JAX/Flax (linen) reimplementations of five papers on oversmoothing in deep ViTs,
with one model (`vit_spectral.models.ViT`), one attention registry
(`vit_spectral.attention`), pretrained checkpoints in (`vit_spectral.pretrained`),
the papers' diagnostics (`vit_spectral.analysis`), a sharded trainer
(`vit_spectral.training`; its config sections in `vit_spectral.sections`, what
keeps a run resumable in `vit_spectral.durability`, compile-only planning in
`vit_spectral.planning`), the shipped recipes
(`vit_spectral.configs`) and the command line (`vit_spectral.main`).
"""

__version__ = "0.1.0"

from vit_spectral import lazy_exports  # noqa: E402

# Subpackages, imported on use: `from vit_spectral import analysis` or
# `from vit_spectral.training import trainer`.
__all__ = ["analysis", "attention", "configs", "data", "durability", "layers", "models",
           "planning", "pretrained", "sections", "settings", "training"]

# Modules that moved (old path -> new), importable at the old path with a
# DeprecationWarning.
MOVED_MODULES = {
    "vit_spectral.data.augment_settings": "vit_spectral.sections.augment",
    "vit_spectral.data.input_settings": "vit_spectral.sections.input",
    "vit_spectral.training.diagnostics_settings": "vit_spectral.sections.diagnostics",
    "vit_spectral.training.init_from_settings": "vit_spectral.sections.init_from",
    "vit_spectral.training.mesh_settings": "vit_spectral.sections.mesh",
    "vit_spectral.training.mix_settings": "vit_spectral.sections.mix",
    "vit_spectral.training.optim_settings": "vit_spectral.sections.optim",
    "vit_spectral.training.run_settings": "vit_spectral.sections.run",
}
lazy_exports.alias_modules(MOVED_MODULES)
