"""The training recipes of papers 003 and 004, each written once: `park_kim`
(used by cifar10_vit.py, cifar100_vit.py, cifar100_eigen.py and
cifar100_vit_ti_fourier.py) and `table10` (used by those two CIFAR files and
by hopfield_vit.py and hopfield_attention_only.py).

- `park_kim`: paper 003 §5, "the setup of Park & Kim (2022), which follows
  DeiT" (their cifar100_vit.yaml): ViT-Ti with 2×2 patches on 32×32 images,
  AdamW lr 1.25e-4 (no batch-size scaling), weight decay 0.05, batch 96, 300
  epochs with 5 warmup epochs, cosine to 0, gradient clipping 1.0, drop-path
  0.1, pad-4 crop and flip, RandAugment m9 n2 mstd0.5 on timm's default op
  set (randaugment_ops="default", not DeiT's "increasing"), random erasing
  0.25, Mixup 0.8 / CutMix 0.8, label smoothing 0.1.
- `table10`: paper 004 App. G Table 10 as timm's train.py trains it: ViT-T/S/
  B/L with 16×16 patches on 224² images (CIFAR resized up), random-resized
  crop and flip, RandAugment (9, 0.5) with 2 layers (DeiT's), random erasing
  0.25, Mixup 0.8, CutMix 1.0, label smoothing 0.1, AdamW (eps 1e-8) at the
  table's "base learning rate" 6.25e-5 scaled to the batch (`lr_scaling`),
  300 epochs + 10 cooldown epochs at the floor (timm trains epochs +
  cooldown), 20 linear warmup epochs from 1e-6, cosine to 1e-6, drop-path
  0.1/0.2/0.2/0.3, batch 256/256/128/32. Not in the table, so timm's/DeiT's
  choices: ImageNet mean/std (timm normalises with the model's ImageNet
  statistics), evaluation by resizing the shorter side to 256 and taking the
  central 224² (crop fraction 0.875), weight decay 0.05 (none on 1-D
  parameters, position embedding and class token).

  Table 10's learning rate. The table gives one "base learning rate",
  6.25e-5, beside a batch per size (256/256/128/32). Its entries are timm
  train.py's arguments (warmup lr, min lr, cooldown epochs, and "base lr",
  timm's --lr-base), and with --lr unset timm trains at
  lr = lr_base · (B / lr_base_size)^k, B the global batch (per-process batch ×
  processes × accumulation steps; the table's batch is read as global),
  lr_base_size 256 (its default), k = ½ when the optimizer's name holds "ada"
  or "lamb" (AdamW; --lr-base-scale unset, its default) and 1 otherwise
  (huggingface/pytorch-image-models @2aabaef train.py, main(): the
  `if not args.lr:` block after the model is built; --lr defaults to None).
  The paper does not say which rule it ran, so `lr_scaling` selects the reading:
    "sqrt" (default, timm's rule for AdamW): 6.25e-5 · (B / 256)^½
       = 6.25e-5 (Ti, S), 4.42e-5 (B), 2.21e-5 (L);
    "linear": 6.25e-5 · B / 256 = 6.25e-5 (Ti, S), 3.125e-5 (B), 7.81e-6 (L);
    "none": 6.25e-5 for every size (this library's reading before).
  Ti and S train at batch 256, where all three agree. The scaling is applied
  at run time to the global batch (`optim.base_batch_size`,
  `optim.batch_scaling`), so a batch set on the command line is rescaled as
  timm would; the trainer logs the resulting rate.
"""

from __future__ import annotations

import ml_collections

from vit_spectral.configs import common
from vit_spectral.data.statistics import dataset_statistics
from vit_spectral.sections.optim import DEIT_NO_DECAY
from vit_spectral.sections.robustness import robustness_config

RECIPES = ("park_kim", "table10")
# Table 10's learning rate: the base rate, timm's --lr-base-size, the readings.
TABLE10_LR_BASE = 6.25e-5
TIMM_LR_BASE_SIZE = 256
LR_SCALINGS = ("none", "linear", "sqrt")
TABLE10_LR_SCALING = "sqrt"    # timm's rule for AdamW (the module docstring)
# Table 10: size -> (drop-path rate, batch size).
TABLE10_SIZES = {"Ti": (0.1, 256), "S": (0.2, 256), "B": (0.2, 128), "L": (0.3, 32)}
TABLE10_COOLDOWN_EPOCHS = 10
# TFDS name -> (train split, eval split).
SPLITS = {"cifar10": ("train", "test"), "cifar100": ("train", "test"),
          "imagenet2012": ("train", "validation")}


def _splits(dataset: str) -> tuple[str, str]:
  if dataset not in SPLITS:
    raise ValueError(f"config argument dataset={dataset!r}; choose one of {list(SPLITS)}")
  return SPLITS[dataset]


def park_kim(dataset: str = "cifar100", *, size: str = "Ti", patch: int = 2,
             epochs: float = 300, batch: int = 0) -> ml_collections.ConfigDict:
  """Paper 003's recipe (Park & Kim 2022) for ViT-<size>/<patch> on `dataset`;
  batch 0 = the recipe's 96."""
  train_split, eval_split = _splits(dataset)
  config = common.base_config()
  common.epoch_cadences(config, epochs, eval_every_epochs=10)
  config.input = common.cifar_input(dataset, batch_size=batch or 96, eval_batch_size=256,
                                    train_split=train_split, eval_split=eval_split)
  config.model = common.model_config(variant=f"{size}/{patch}", drop_path_rate=0.1)
  config.optim = common.optim_config(
      "adamw", learning_rate=1.25e-4, warmup_epochs=5, end_learning_rate=0.0,
      weight_decay=0.05, grad_clip_norm=1.0, no_decay_patterns=DEIT_NO_DECAY)
  common.deit_augmentation(config)
  config.input.randaugment_ops = "default"
  config.mixup.cutmix_alpha = 0.8
  return config


def table10_lr_scaling(lr_scaling: str) -> dict:
  """The `config.optim` fields of a Table 10 `lr_scaling` reading (the module
  docstring lists them).

  Raises:
    ValueError: `lr_scaling` is not one of LR_SCALINGS.
  """
  if lr_scaling not in LR_SCALINGS:
    raise ValueError(f"config argument lr_scaling={lr_scaling!r}; choose one of "
                     f"{list(LR_SCALINGS)}")
  if lr_scaling == "none":
    return dict(learning_rate=TABLE10_LR_BASE, base_batch_size=None)
  return dict(learning_rate=TABLE10_LR_BASE, base_batch_size=TIMM_LR_BASE_SIZE,
              batch_scaling=lr_scaling)


def table10(dataset: str = "cifar10", *, size: str = "Ti", epochs: float = 300,
            batch: int = 0, drop_path_rate: float | None = None,
            lr_scaling: str = TABLE10_LR_SCALING) -> ml_collections.ConfigDict:
  """Paper 004 App. G Table 10 for ViT-<size>/16 on `dataset`; batch 0 and
  drop_path_rate None = the table's for `size`. `epochs` excludes the 10
  cooldown epochs, which are trained after them. `lr_scaling` ("none" |
  "linear" | "sqrt") reads the table's base learning rate (module docstring)."""
  if size not in TABLE10_SIZES:
    raise ValueError(f"config argument size={size!r}; choose one of {list(TABLE10_SIZES)}")
  lr_fields = table10_lr_scaling(lr_scaling)
  train_split, eval_split = _splits(dataset)
  table_drop_path, table_batch = TABLE10_SIZES[size]
  stats = dataset_statistics("imagenet2012")  # timm's default, for every data set
  config = common.base_config()
  common.epoch_cadences(config, epochs + TABLE10_COOLDOWN_EPOCHS, eval_every_epochs=10)
  config.input = common.input_config(
      dataset, image_size=224, batch_size=batch or table_batch, eval_batch_size=256,
      train_split=train_split, eval_split=eval_split,
      train_augment="random_resized_crop", flip=True,
      eval_resize="resize_center_crop",
      mean=stats.mean, std=stats.std)
  config.model = common.model_config(
      variant=f"{size}/16",
      drop_path_rate=table_drop_path if drop_path_rate is None else drop_path_rate)
  config.optim = common.optim_config(
      "adamw", **lr_fields, warmup_epochs=20,
      warmup_init_learning_rate=1e-6, end_learning_rate=1e-6,
      cooldown_epochs=TABLE10_COOLDOWN_EPOCHS, weight_decay=0.05, eps=1e-8,
      no_decay_patterns=DEIT_NO_DECAY)
  common.deit_augmentation(config)
  return config


def parse(arg, default_corrupted: str):
  """The arguments both CIFAR config files take."""
  return common.parse_arg(
      arg, recipe="park_kim", size="Ti", depth=0, attention="dot_product",
      fraction=1.0, corrupted=default_corrupted, epochs=300.0, batch=0,
      data_dir="", dtype=common.ACCELERATOR_DTYPE, lr_scaling="")


def cifar_config(dataset: str, args):
  """The config for `dataset` ("cifar10" | "cifar100") and parsed `args`."""
  if args.recipe not in RECIPES:
    raise ValueError(f"recipe={args.recipe!r}; choose one of {list(RECIPES)}")
  if args.size not in TABLE10_SIZES:
    raise ValueError(f"size={args.size!r}; choose one of {list(TABLE10_SIZES)}")
  if args.recipe == "park_kim":
    if args.lr_scaling:
      raise ValueError(f"config argument lr_scaling={args.lr_scaling!r} reads Table 10's "
                       "base learning rate: it needs recipe=table10 (park_kim trains at "
                       "its rate as it is)")
    config = park_kim(dataset, size=args.size, epochs=args.epochs, batch=args.batch)
  else:
    config = table10(dataset, size=args.size, epochs=args.epochs, batch=args.batch,
                     lr_scaling=args.lr_scaling or TABLE10_LR_SCALING)
  config.input.train_fraction = args.fraction
  config.input.data_dir = args.data_dir or None
  if args.depth:  # 0 = the size's own depth (12; L: 24)
    config.model.depth = args.depth
  config.model.attention = dict(name=args.attention)
  if args.corrupted:
    config.robustness = robustness_config(args.corrupted)
  config.model.dtype = args.dtype
  return config
