r"""ViT-Ti on CIFAR-100 with eigen-reparameterized W_V W_proj (paper 003, §4–5, Tables 2–3).

Launch (data prepared with `tfds build cifar100 --data_dir=$TFDS`), e.g. ViT-Ti*
on 10% of the training set, or ViT-Ti-NS⁻ at depth 24:

  python train.py --config=configs/cifar100_eigen.py:model=star,fraction=0.1 \
      --config.input.data_dir=$TFDS --workdir=workdir/c100_star_10
  python train.py --config=configs/cifar100_eigen.py:model=minus_ns,depth=24 \
      --config.input.data_dir=$TFDS --workdir=workdir/c100_minus_ns_d24

Arguments:
  model: "standard" (ViT-Ti), "minus" (ViT-Ti⁻), "plus" (ViT-Ti⁺), "star" (ViT-Ti*:
    layers [0, depth/2) "minus", the rest standard), "minus_ns" (ViT-Ti-NS⁻),
    "star_ns" (ViT-Ti-NS*: first half "minus_ns").
  depth: 12 (Table 2) or 24 (Table 3).
  fraction: share of the training split, 1.0 / 0.5 / 0.1 (Table 2's columns;
    `input.train_fraction`, a TFDS slice "train[:10%]").
  batch: the global batch (96).
  epochs: the run's length (300).
  patch: the patch side (2).
  dtype: "bfloat16" (mixed precision, the default) or "float32".

Recipe (§5): "the one used in Park & Kim (2022)", `configs/cifar_recipes.park_kim`:
AdamW, learning rate 1.25e-4, weight decay 5e-2, 5 warmup epochs, cosine
schedule, batch 96, 300 epochs, gradient clipping 1.0, drop path 0.1,
RandAugment, Mixup, CutMix, random erasing, label smoothing 0.1. The paper
does not give the patch size for its 32² images; Park & Kim's ViT-Ti uses 2×2
(256 tokens), as here.

Meant to reach (paper 003, Tables 2–3, test accuracy %, 100% / 50% / 10% data,
depth 12): ViT-Ti 66.78 / 56.38 / 32.47; ViT-Ti⁺ 64.34 / 55.21 / 28.67;
ViT-Ti⁻ 66.62 / 56.58 / 33.99; ViT-Ti* 67.84 / 57.78 / 33.64; ViT-Ti-NS⁻
67.80 / 57.54 / 33.78; ViT-Ti-NS* 68.53 / 57.67 / 33.75. Depth 24 (100%):
ViT-Ti 67.22, ⁺ 65.65, ⁻ 66.76, * 69.05, NS⁻ 67.09, NS* 69.64.
"""

from vit_spectral.configs import common
from vit_spectral.configs.cifar_recipes import park_kim
from vit_spectral.models.segments import star_overrides

# model argument -> (value_output of every layer, value_output of the first half)
MODELS = {
    "standard": ("standard", None),
    "minus": ("minus", None),
    "plus": ("plus", None),
    "minus_ns": ("minus_ns", None),
    "star": ("standard", "minus"),
    "star_ns": ("standard", "minus_ns"),
}


def get_config(arg=None):
  args = common.parse_arg(arg, model="standard", depth=12, fraction=1.0, batch=96,
                          epochs=300, patch=2, dtype=common.ACCELERATOR_DTYPE)
  if args.model not in MODELS:
    raise ValueError(f"config argument model={args.model!r}; choose one of {list(MODELS)}")
  every_layer, first_half = MODELS[args.model]

  config = park_kim("cifar100", size="Ti", patch=args.patch, epochs=args.epochs,
                    batch=args.batch)
  config.input.train_fraction = args.fraction
  config.model.depth = args.depth
  config.model.attention = dict(name="dot_product", value_output=every_layer)
  if first_half:
    config.model.layer_overrides = star_overrides(args.depth, first_half)
  config.model.dtype = args.dtype
  return config
