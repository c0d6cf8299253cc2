"""vit_spectral: why deep Vision Transformers oversmooth, and how to stop it.

JAX/Flax (linen) reimplementations of five papers on oversmoothing in deep ViTs,
with one model (`vit_spectral.models.ViT`), one attention registry
(`vit_spectral.attention`), pretrained checkpoints in (`vit_spectral.pretrained`),
the papers' diagnostics (`vit_spectral.analysis`), a sharded trainer
(`vit_spectral.training`; what keeps a run resumable in `vit_spectral.durability`,
compile-only planning in `vit_spectral.planning`), the shipped recipes
(`vit_spectral.configs`) and the command line (`vit_spectral.main`).
"""

__version__ = "0.1.0"

# Subpackages, imported on use: `from vit_spectral import analysis` or
# `from vit_spectral.training import trainer`.
__all__ = ["analysis", "attention", "configs", "data", "durability", "layers", "models",
           "planning", "pretrained", "settings", "training"]
