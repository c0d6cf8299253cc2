r"""LipsFormer-ViT on ImageNet-1k, trained without learning-rate warmup (paper 001).

Launch (ImageNet must be prepared for TFDS by hand, see docs/running.md):

  python train.py --config=configs/lipsformer_imagenet.py --workdir=workdir/lipsformer_in1k \
      --config.input.data_dir=DIR
  python train.py --config=configs/lipsformer_imagenet.py:size=base ...

A plain (single-stage) ViT with the LipsFormer blocks: CenterNorm, scaled cosine
attention (τ = 12), spectral init, α = 1/L (L = depth, the number of blocks,
Table 6), the 7×7 depth-wise + 1×1 convolution branch, LipsFormer block order,
DropPath without rescaling in training (App. J; × (1 − p) at evaluation);
224² images, 16×16 patches. Table 6
hyper-parameters by size: tiny/small AdamW lr 2e-3, weight decay 0.05, DropPath
0.2/0.4, betas (0.9, 0.999); base lr 1e-3, weight decay 0.1, DropPath 0.5;
large as base with betas (0.9, 0.99); eps 1e-8, label smoothing 0.1, cosine
schedule, no warmup, no gradient clipping, 300 epochs at batch 1024,
RandAugment (9, 0.5), Mixup 0.8, CutMix 1.0, EMA 0.99984 (tiny/small) /
0.99992 (base/large). Not in Table 6, taken from the Swin code base the
authors build on: 2 RandAugment layers on timm's "increasing" ops, random
erasing 0.25, Mixup/CutMix switch probability 0.5, batch 1024 and DeiT's
evaluation (shorter side to 256, central 224²).

The paper's numbers are for its hierarchical Swin/CSwin-based LipsFormers
(e.g. LipsFormer-CSwin-T 83.5% top-1, LipsFormer-Swin-T 82.7%, Table 2/7); a
plain ViT with these blocks is expected to train stably without warmup, not to
match those numbers (DeiT-S, the plain-ViT reference with strong augmentation,
reaches 79.8%).

Arguments: size (tiny | small | base | large), epochs, batch, dtype (bfloat16 =
mixed precision, the default; float32).
"""

from vit_spectral.configs import common
from vit_spectral.configs.lipsformer_parts import lipsformer_model_fields, lipsformer_optim
from vit_spectral.data.statistics import dataset_statistics
from vit_spectral.models.variants import variant_fields

# size -> (ViT variant, lr, weight decay, DropPath, Adam b2)   (Table 6)
_SIZES = {"tiny": ("Ti/16", 2e-3, 0.05, 0.2, 0.999),
          "small": ("S/16", 2e-3, 0.05, 0.4, 0.999),
          "base": ("B/16", 1e-3, 0.1, 0.5, 0.999),
          "large": ("L/16", 1e-3, 0.1, 0.5, 0.99)}
# size -> EMA decay (Table 6)
_EMA = {"tiny": 0.99984, "small": 0.99984, "base": 0.99992, "large": 0.99992}


def get_config(arg=None):
  args = common.parse_arg(arg, size="tiny", epochs=300, batch=1024,
                          dtype=common.ACCELERATOR_DTYPE)
  if args.size not in _SIZES:
    raise ValueError(f"size={args.size!r}; choose one of {sorted(_SIZES)}")
  variant, lr, weight_decay, drop_path, b2 = _SIZES[args.size]
  depth = variant_fields(variant)["depth"]
  config = common.base_config()
  common.epoch_cadences(config, args.epochs, eval_every_epochs=1)
  stats = dataset_statistics("imagenet2012")
  config.input = common.input_config(
      "imagenet2012", image_size=224, batch_size=args.batch, eval_batch_size=1000,
      eval_split="validation", train_augment="random_resized_crop", flip=True,
      eval_resize="resize_center_crop", mean=stats.mean, std=stats.std)
  common.deit_augmentation(config)
  config.ema_decay = _EMA[args.size]
  config.model = common.model_config(variant, drop_path_rate=drop_path, dtype=args.dtype,
                                     **lipsformer_model_fields(depth))
  config.optim = lipsformer_optim(lr, weight_decay=weight_decay, b2=b2)
  config.label_smoothing = 0.1
  return config
