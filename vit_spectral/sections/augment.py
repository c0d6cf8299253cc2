"""The augmentations' names, defaults and checks, without TensorFlow.

`config.input` (`sections.input`) is built and checked by the command line
before TensorFlow is imported (`--print_config`, a config error), so what it
needs of the ops lives here; the ops themselves are `data.randaugment` and
`data.preprocessing`, which import these names.
"""

from __future__ import annotations

# RandAugment (`data.randaugment`): timm's "rand-m9-mstd0.5-inc1", DeiT's
# setting (paper 004 Table 10: "(9, 0.5)").
MAX_LEVEL = 10.0
NUM_LAYERS = 2
MAGNITUDE = 9.0
MAGNITUDE_STD = 0.5
OP_SET = "increasing"
# The op sets `randaugment.OP_SETS` defines, by name.
OP_SET_NAMES = ("increasing", "default")
# Names in the order of each op set (index = the drawn op).
OP_NAMES = (
    "AutoContrast", "Equalize", "Invert", "Rotate", "PosterizeIncreasing",
    "SolarizeIncreasing", "SolarizeAdd", "ColorIncreasing",
    "ContrastIncreasing", "BrightnessIncreasing", "SharpnessIncreasing",
    "ShearX", "ShearY", "TranslateXRel", "TranslateYRel")

# The resize kernels of `data.preprocessing` (input.eval_resize_method).
RESIZE_METHODS = ("bilinear", "bicubic")


def check_randaugment(num_layers: int, magnitude: float, magnitude_std: float,
                      op_set: str = OP_SET) -> None:
  """Raises ValueError naming the bad `config.input.randaugment_*` field."""
  if op_set not in OP_SET_NAMES:
    raise ValueError(f"config.input.randaugment_ops={op_set!r}; choose one of "
                     f"{list(OP_SET_NAMES)}")
  if num_layers < 0:
    raise ValueError(f"config.input.randaugment_layers={num_layers} must be >= 0")
  if not 0.0 <= magnitude <= MAX_LEVEL:
    raise ValueError(f"config.input.randaugment_magnitude={magnitude} must be "
                     f"in [0, {MAX_LEVEL:g}]")
  if magnitude_std < 0:
    raise ValueError(
        f"config.input.randaugment_magnitude_std={magnitude_std} must be >= 0")
