r"""DeiT-S on ImageNet-1k: the recipe of DeiT's main.py defaults, which paper 000
(§5) trains its baselines and AttnScale/FeatScale models with.

Launch on a Cloud TPU VM pod slice (see docs/running.md;
ImageNet prepared once with `tfds build imagenet2012`):

  launch/tpu_pod.sh --tpu=NAME --zone=ZONE -- \
      --config=configs/imagenet_deit.py --config.input.data_dir=gs://BUCKET/tfds \
      --workdir=gs://BUCKET/deit_s

Meant to reach: 79.8% top-1 (paper 000 Table 1, DeiT-S, 12 layers, 300
epochs; 80.5% at depth=24), `eval_accuracy`; `eval_ema_accuracy` is the EMA.

Recipe (DeiT main.py defaults): batch 1024, AdamW lr 5e-4 × batch/512, weight
decay 0.05 (none on 1-D parameters, position embedding and class token),
5 warmup epochs from 1e-6, cosine to 1e-5 over 300 epochs, drop-path 0.1,
random-resized crop + flip, RandAugment m9-mstd0.5 (2 layers), random erasing
0.25, repeated augmentation ×3, Mixup 0.8 / CutMix 1.0 (switch 0.5), label
smoothing 0.1, EMA 0.99996. DeiT's scheduler has 10 cooldown epochs, but its
loop stops at 300 epochs, so none are trained here either.

Arguments (`imagenet_deit.py:key=value,...`): variant (S/16), depth,
attention, batch, epochs, repeated_augment, dtype (bfloat16 = mixed precision,
the default; float32).
"""

import ml_collections

from vit_spectral.configs import common
from vit_spectral.data.statistics import dataset_statistics
from vit_spectral.sections.optim import DEIT_NO_DECAY


def deit_recipe(*, batch: int = 1024, epochs: float = 300,
                repeated_augment: int = 3, **model_fields) -> ml_collections.ConfigDict:
  """DeiT's ImageNet recipe (main.py defaults, see the module docstring) with
  `common.model_config(**model_fields)` (drop_path_rate defaults to 0.1)."""
  stats = dataset_statistics("imagenet2012")
  config = common.base_config()
  common.epoch_cadences(config, epochs, eval_every_epochs=1)
  config.input = common.input_config(
      "imagenet2012", image_size=224, batch_size=batch, eval_batch_size=1000,
      train_split="train", eval_split="validation",
      train_augment="random_resized_crop", flip=True,
      eval_resize="resize_center_crop",
      mean=stats.mean, std=stats.std, repeated_augment=repeated_augment)
  common.deit_augmentation(config)
  config.model = common.model_config(**{"drop_path_rate": 0.1, **model_fields})
  config.optim = common.optim_config(
      "adamw", learning_rate=5e-4, base_batch_size=512, warmup_epochs=5,
      warmup_init_learning_rate=1e-6, end_learning_rate=1e-5, weight_decay=0.05,
      no_decay_patterns=DEIT_NO_DECAY)
  config.ema_decay = 0.99996
  return config


def get_config(arg=None):
  args = common.parse_arg(arg, variant="S/16", depth=12, attention="dot_product",
                          batch=1024, epochs=300.0, repeated_augment=3,
                          dtype=common.ACCELERATOR_DTYPE)
  return deit_recipe(batch=args.batch, epochs=args.epochs,
                     repeated_augment=args.repeated_augment, variant=args.variant,
                     depth=args.depth, attention=dict(name=args.attention),
                     dtype=args.dtype)
