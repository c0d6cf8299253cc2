"""A training config's sections, each declared once as a frozen dataclass:
its fields, their defaults and the checks that need no device.

  run          top-level fields (`RunSettings`); every section at once
               (`training_settings` -> `TrainingSettings`, built once in `main`)
  input        config.input (`InputSettings`)
  augment      the augmentations' names, defaults and checks (part of config.input)
  optim        config.optim (`OptimSettings`)
  mix          config.mixup (`MixSettings`)
  mesh         config.mesh (`MeshSettings`)
  init_from    config.init_from (`InitFromSettings`)
  diagnostics  config.diagnostics (`DiagnosticsSettings`)
  robustness   config.robustness (`RobustnessSettings`)
  logging      config.logging (`LoggingSettings`: W&B beside TensorBoard)

`config.model` is `models.build`'s (`ModelSpec`). No module here imports
TensorFlow, and only `run` imports JAX and Flax (through `models.build`, for
`config.model`); the modules that act on a section (`training.optim`,
`data.input_pipeline`, ...) import its names from here. Submodules are
imported on use (`from vit_spectral.sections import optim`).
"""

__all__ = ["augment", "diagnostics", "init_from", "input", "logging", "mesh", "mix", "optim",
           "robustness", "run"]
