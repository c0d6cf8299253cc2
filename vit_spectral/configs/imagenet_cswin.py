r"""CSwin-T/S/B on ImageNet-1k with CSwin's recipe (Dong et al., CVPR 2022).

Launch on a Cloud TPU VM pod slice (see docs/running.md;
ImageNet prepared once with `tfds build imagenet2012`):

  launch/tpu_pod.sh --tpu=NAME --zone=ZONE -- \
      --config=configs/imagenet_cswin.py:size=T --config.input.data_dir=gs://BUCKET/tfds \
      --workdir=gs://BUCKET/cswin_t

Meant to reach (CSwin paper, Table: ImageNet-1K, 224²; `eval_accuracy`, with
`eval_ema_accuracy` the EMA): CSwin-T 82.7%, CSwin-S 83.6%, CSwin-B 84.2%
(the official README lists 82.8% for T).

Recipe (the official README's training commands, 8 GPUs, and main.py's
defaults): AdamW (0.9, 0.999), eps 1e-8, no clipping; T and S: batch 2048
(8 × 256), lr 2e-3, weight decay 0.05, DropPath 0.2 / 0.4, EMA 0.99984; B:
batch 1024 (8 × 128), lr 1e-3, weight decay 0.1, DropPath 0.5, EMA 0.99992
(lr scales linearly with `batch` from those); 20 warmup epochs from 1e-6,
cosine to 1e-5 over 300 epochs, then 10 cooldown epochs at 1e-5 (timm's
scheduler, which main.py trains through: 310 epochs in all); random-resized
crop + flip, RandAugment m9-mstd0.5 (2 layers, timm's "increasing" ops),
random erasing 0.25, Mixup 0.8 / CutMix 1.0 (switch 0.5), label smoothing
0.1; evaluation: bicubic resize to 224/0.9, central 224² (CSwin's cfg:
crop_pct 0.9, bicubic). Weight decay skips 1-D parameters and biases, as
timm's optimizer factory.

Arguments (`imagenet_cswin.py:size=S,...`): size (T | S | B), batch, epochs,
dtype (bfloat16 = mixed precision, the default; float32).
"""

import ml_collections

from vit_spectral.configs import common
from vit_spectral.data.statistics import dataset_statistics

# size -> (batch, lr at that batch, weight decay, DropPath, EMA)  (official README)
CSWIN_SIZES = {"T": (2048, 2e-3, 0.05, 0.2, 0.99984),
               "S": (2048, 2e-3, 0.05, 0.4, 0.99984),
               "B": (1024, 1e-3, 0.1, 0.5, 0.99992)}


def cswin_input(config: ml_collections.ConfigDict, batch: int) -> None:
  """ImageNet at 224² with CSwin's data recipe (module docstring), in place."""
  stats = dataset_statistics("imagenet2012")
  config.input = common.input_config(
      "imagenet2012", image_size=224, batch_size=batch, eval_batch_size=1000,
      train_split="train", eval_split="validation", train_augment="random_resized_crop",
      flip=True, eval_resize="resize_center_crop", crop_fraction=0.9,
      eval_resize_method="bicubic", mean=stats.mean, std=stats.std)
  common.deit_augmentation(config)


def check_size(size: str, sizes) -> None:
  if size not in sizes:
    raise ValueError(f"size={size!r}; choose one of {sorted(sizes)}")


def get_config(arg=None):
  args = common.parse_arg(arg, size="T", batch=0, epochs=300.0,
                          dtype=common.ACCELERATOR_DTYPE)
  check_size(args.size, CSWIN_SIZES)
  base_batch, lr, weight_decay, drop_path, ema = CSWIN_SIZES[args.size]
  config = common.base_config()
  common.epoch_cadences(config, args.epochs, eval_every_epochs=1)
  cswin_input(config, args.batch or base_batch)
  config.ema_decay = ema
  config.model = common.model_config(f"CSwin-{args.size}", drop_path_rate=drop_path,
                                     dtype=args.dtype)
  config.optim = common.optim_config(
      "adamw", learning_rate=lr, base_batch_size=base_batch, warmup_epochs=20,
      warmup_init_learning_rate=1e-6, end_learning_rate=1e-5, cooldown_epochs=10,
      weight_decay=weight_decay, b1=0.9, b2=0.999, eps=1e-8, grad_clip_norm=None)
  return config
