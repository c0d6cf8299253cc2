r"""ViT-T/S/B/L with Modern Hopfield Attention (paper 004, §4.4, App. G Table 10).

Launch (one of the paper's Table 3 / Table 4 cells; data prepared with TFDS):

  python train.py --config=configs/hopfield_vit.py:size=Ti,alpha=0.5,dataset=cifar100 \
      --workdir=workdir/hopfield_ti_c100_a05 --config.input.data_dir=/data/tfds
  python train.py --config=configs/hopfield_vit.py:size=B,alpha=0.7,dataset=imagenet2012
  python train.py --config=configs/hopfield_vit.py:size=S,attention=dot_product  # baseline

Expected (paper, CIFAR-10 / CIFAR-100 test accuracy; Table 3):
  Ti: α=0.5 93.0 / 72.0, α=0.7 93.8 / 72.6 (self-attention 93.3 / 73.1)
  S:  α=0.5 95.3 / 75.4, α=0.7 95.4 / 75.6 (self-attention 95.5 / 74.5)
  B:  α=0.5 96.2 / 76.2, α=0.7 96.5 / 75.6 (self-attention 96.2 / 75.4)
  L:  α=0.5 96.5 / 75.8, α=0.7 96.7 / 75.4 (self-attention 96.3 / 72.9)
  ImageNet-1k, ViT-B (Table 4): α=0.5 76.4, α=0.7 77.1 (self-attention 76.1).

Arguments: size (Ti, S, B, L), dataset (cifar10, cifar100, imagenet2012),
attention (hopfield, dot_product), alpha (α, the skip weight), alpha_hidden (α';
negative = equal to alpha, the paper's §4.1 choice α = α'), placement ("add":
the inner reading x + [α·LN(x) + (1-α)·Attn(LN(x))]; "replace": α·x +
(1-α)·Attn(LN(x))), epochs, dtype (bfloat16 = mixed precision, the default;
float32), lr_scaling (none | linear | sqrt, default sqrt: how Table 10's base
learning rate 6.25e-5 follows the batch; peak rate Ti/S 6.25e-5, B 4.42e-5,
L 2.21e-5 with sqrt; `configs/cifar_recipes.py` gives the readings and why
timm's AdamW rule is the default).

Recipe: paper 004 App. G Table 10 as `configs/cifar_recipes.table10` builds it
for every data set (its docstring lists the settings: AdamW at the base rate
6.25e-5 scaled to the batch as `lr_scaling` says, RandAugment (9, 0.5),
Mixup 0.8, CutMix 1.0, random erasing 0.25, label smoothing 0.1, 20 warmup
epochs from 1e-6, cosine to 1e-6, 300 + 10 cooldown epochs, drop path and
batch per size); `epochs` counts the 300, not the cooldown.
"""

from vit_spectral.configs import common
from vit_spectral.configs.cifar_recipes import (SPLITS, TABLE10_LR_SCALING, TABLE10_SIZES,
                                                table10)

PLACEMENTS = ("add", "replace")


def hopfield_attention(args) -> dict:
  """config.model.attention for `args.attention`, α and α' (α' < 0: = α)."""
  if args.attention == "dot_product":
    return dict(name="dot_product")
  if args.attention != "hopfield":
    raise ValueError(f"config argument attention={args.attention!r}; choose one of "
                     "['hopfield', 'dot_product']")
  alpha_hidden = args.alpha if args.alpha_hidden < 0 else args.alpha_hidden
  return dict(name="hopfield", alpha=args.alpha, alpha_hidden=alpha_hidden)


def table_10_config(args, *, block: dict, drop_path_rate: float | None = None):
  """Table 10's recipe for ViT-<args.size>/16 on `args.dataset` with the
  attention of `args` and the block options `block`."""
  if args.dataset not in SPLITS:
    raise ValueError(f"config argument dataset={args.dataset!r}; choose one of {list(SPLITS)}")
  config = table10(args.dataset, size=args.size, epochs=args.epochs,
                   drop_path_rate=drop_path_rate, lr_scaling=args.lr_scaling)
  config.model.attention = hopfield_attention(args)
  config.model.block = block
  config.model.dtype = args.dtype
  return config


def get_config(arg=None):
  args = common.parse_arg(arg, size="Ti", dataset="cifar10", attention="hopfield",
                          alpha=0.5, alpha_hidden=-1.0, placement="add", epochs=300,
                          dtype=common.ACCELERATOR_DTYPE, lr_scaling=TABLE10_LR_SCALING)
  if args.size not in TABLE10_SIZES:
    raise ValueError(f"config argument size={args.size!r}; choose one of {list(TABLE10_SIZES)}")
  if args.placement not in PLACEMENTS:
    raise ValueError(f"config argument placement={args.placement!r}; choose one of {list(PLACEMENTS)}")
  block = dict(attention_residual=args.placement) if args.placement != "add" else dict()
  return table_10_config(args, block=block)
