"""The CIFAR ViT recipes of papers 003 and 004, shared by cifar10_vit.py and
cifar100_vit.py (which pick the data set and read the command-line arguments).

- `park_kim`: paper 003 §5, "the setup of Park & Kim (2022), which follows
  DeiT": ViT-Ti with 2×2 patches on 32×32 images, AdamW lr 1.25e-4 (no
  batch-size scaling), weight decay 0.05, batch 96, 300 epochs with 5 warmup
  epochs, cosine to 0, gradient clipping 1.0, drop-path 0.1, pad-4 crop and
  flip, RandAugment m9 n2 mstd0.5, random erasing 0.25, Mixup 0.8 / CutMix 0.8
  (Park & Kim's cifar100_vit.yaml uses 0.8 for both), label smoothing 0.1.
  Their RandAugment is timm's default op set (randaugment_ops="default"), not
  DeiT's "increasing" one.
- `table10`: paper 004 App. G Table 10: ViT-T/S/B/L with 16×16 patches on
  CIFAR resized to 224, AdamW (eps 1e-8) at the table's "base learning rate"
  6.25e-5 (read as the learning rate itself: the table gives no reference
  batch), 300 epochs + 10 cooldown epochs at the floor (timm trains
  epochs + cooldown), 20 linear warmup epochs from 1e-6, cosine to 1e-6,
  drop-path 0.1/0.2/0.2/0.3, batch 256/256/128/32, random erasing 0.25,
  Mixup 0.8, CutMix 1.0, label smoothing 0.1, RandAugment (9, 0.5). Weight
  decay is not in the table: we use DeiT's 0.05.
"""

from __future__ import annotations

from configs import common
from vit_spectral.training.optim import DEIT_NO_DECAY
from vit_spectral.training.robustness import robustness_config

RECIPES = ("park_kim", "table10")
# Per-channel statistics of the training splits.
CIFAR_STATS = {
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": ((0.5071, 0.4867, 0.4408), (0.2675, 0.2565, 0.2761)),
}
IMAGENET_STATS = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
# Table 10: size -> (drop-path rate, batch size).
TABLE10_SIZES = {"Ti": (0.1, 256), "S": (0.2, 256), "B": (0.2, 128), "L": (0.3, 32)}


def parse(arg, default_corrupted: str):
  """The arguments both CIFAR config files take."""
  return common.parse_arg(
      arg, recipe="park_kim", size="Ti", depth=0, attention="dot_product",
      fraction=1.0, corrupted=default_corrupted, epochs=300.0, batch=0,
      data_dir="")


def cifar_config(dataset: str, args):
  """The config for `dataset` ("cifar10" | "cifar100") and parsed `args`."""
  if args.recipe not in RECIPES:
    raise ValueError(f"recipe={args.recipe!r}; choose one of {list(RECIPES)}")
  if args.size not in TABLE10_SIZES:
    raise ValueError(f"size={args.size!r}; choose one of {list(TABLE10_SIZES)}")
  config = common.base_config()
  config.num_epochs = args.epochs
  config.log_every = 100
  config.eval_every, config.eval_every_epochs = None, 10
  config.checkpoint_every, config.checkpoint_every_epochs = None, 1
  if args.recipe == "park_kim":
    _park_kim(config, dataset, args)
  else:
    _table10(config, dataset, args)
  common.deit_augmentation(config)
  config.input.train_fraction = args.fraction
  config.input.data_dir = args.data_dir or None
  if args.recipe == "park_kim":
    config.mixup.cutmix_alpha = 0.8
    config.input.randaugment_ops = "default"
  if args.depth:  # 0 = the size's own depth (12; L: 24)
    config.model.depth = args.depth
  config.model.attention = dict(name=args.attention)
  if args.corrupted:
    config.robustness = robustness_config(args.corrupted)
  return config


def _park_kim(config, dataset: str, args) -> None:
  mean, std = CIFAR_STATS[dataset]
  config.input = common.input_config(
      dataset, image_size=32, batch_size=args.batch or 96, eval_batch_size=250,
      train_augment="pad_crop", pad_crop_padding=4, flip=True, mean=mean, std=std)
  config.model = common.model_config(variant=f"{args.size}/2", drop_path_rate=0.1)
  config.optim = common.optim_config(
      "adamw", learning_rate=1.25e-4, warmup_epochs=5, end_learning_rate=0.0,
      weight_decay=0.05, grad_clip_norm=1.0, no_decay_patterns=DEIT_NO_DECAY)


def _table10(config, dataset: str, args) -> None:
  drop_path, batch = TABLE10_SIZES[args.size]
  mean, std = IMAGENET_STATS  # timm's defaults: the images are resized to 224
  config.num_epochs = args.epochs + 10  # + the cooldown epochs
  config.input = common.input_config(
      dataset, image_size=224, batch_size=args.batch or batch,
      eval_batch_size=250, train_augment="random_resized_crop", flip=True,
      eval_resize="resize_center_crop", crop_fraction=0.875, mean=mean, std=std)
  config.model = common.model_config(variant=f"{args.size}/16",
                                     drop_path_rate=drop_path)
  config.optim = common.optim_config(
      "adamw", learning_rate=6.25e-5, warmup_epochs=20,
      warmup_init_learning_rate=1e-6, end_learning_rate=1e-6, cooldown_epochs=10,
      weight_decay=0.05, eps=1e-8, no_decay_patterns=DEIT_NO_DECAY)
