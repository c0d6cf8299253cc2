r"""LipsFormer-ViT on CIFAR-10 / CIFAR-100, trained without learning-rate warmup (paper 001).

Launch (prepare the data first: `tfds build cifar10 --data_dir=DIR`):

  python train.py --config=configs/lipsformer_cifar.py --workdir=workdir/lipsformer_c10 \
      --config.input.data_dir=DIR
  python train.py --config=configs/lipsformer_cifar.py:dataset=cifar100 ...

Model: a ViT-S/4-shaped LipsFormer (32×32 images, 4×4 patches → 64 tokens + CLS,
width 384, 12 blocks, 6 heads, MLP 1536) with CenterNorm, scaled cosine
attention (τ = 12), spectral init, weighted residuals α = 1/L (L = 12 blocks,
Table 6), the 7×7 depth-wise + 1×1 convolution branch and the LipsFormer block
order; DropPath 0.2 without rescaling in training (Table 6, tiny; App. J;
× (1 − p) at evaluation). Optimizer
(Table 6, tiny): AdamW lr 2e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.05,
label smoothing 0.1, cosine schedule, no warmup, no clipping; 300 epochs at
batch 256 (`epochs=`, `lr=`, `depth=` arguments). `dtype=float32` switches
off mixed precision (bfloat16 compute, the default).

The paper reports ImageNet numbers only (Table 2); there is no CIFAR number to
reach. What this recipe is meant to show is the paper's claim that the run is
stable without warmup (a from-scratch ViT of this size typically ends near
90% on CIFAR-10 with strong augmentation, which this recipe does not add).
"""

from vit_spectral.configs import common
from vit_spectral.configs.lipsformer_parts import lipsformer_model_fields, lipsformer_optim

DATASETS = ("cifar10", "cifar100")


def get_config(arg=None):
  args = common.parse_arg(arg, dataset="cifar10", depth=12, width=384, heads=6,
                          lr=2e-3, epochs=300, batch=256, dtype=common.ACCELERATOR_DTYPE)
  if args.dataset not in DATASETS:
    raise ValueError(f"dataset={args.dataset!r}; choose one of {list(DATASETS)}")
  config = common.base_config()
  common.epoch_cadences(config, args.epochs, eval_every_epochs=10)
  config.input = common.cifar_input(args.dataset, batch_size=args.batch, eval_batch_size=500)
  config.model = common.model_config(
      hidden_size=args.width, num_heads=args.heads, mlp_dim=4 * args.width,
      patch_size=4, drop_path_rate=0.2, dtype=args.dtype,
      **lipsformer_model_fields(args.depth))
  config.optim = lipsformer_optim(args.lr, weight_decay=0.05)
  config.label_smoothing = 0.1
  return config
