r"""A LipsFormer-ViT on scikit-learn's digits, trained without warmup (paper 001).

Launch (CPU):

  python train.py --config=configs/lipsformer_digits.py --workdir=workdir/lipsformer_digits
  python train.py --config=configs/lipsformer_digits.py:lr=3e-2,steps=400

The model of `benchmarks/lipsformer_lr_sweep.py`: 12 blocks of width 32 (4
heads, MLP 64) on 2×2 patches of the 8×8 image, CenterNorm, cosine attention
(τ = 12), spectral init, α = 1/L (L = 12 blocks, Table 6), the convolution
branch, LipsFormer block order; AdamW with no warmup and no clipping (Table
6). Measured: 97.2% test accuracy at lr 1e-2 and 1000 steps without conv
branches (`steps=1000,conv=false`, α = 1/12, 2026-11-24; 98.3% with the
earlier α = 1/24; baseline=true: 92.8%); the sweep is in
docs/paper-001-lipsformer.md. Arguments: depth, width, heads, lr, steps, conv
(true/false), baseline (true = the same recipe with the pre-norm
LayerNorm/dot-product ViT, for the comparison).
"""

from vit_spectral.configs import common
from vit_spectral.configs.lipsformer_parts import lipsformer_model_fields, lipsformer_optim


def get_config(arg=None):
  args = common.parse_arg(arg, depth=12, width=32, heads=4, lr=1e-2, steps=400,
                          conv=True, baseline=False)
  config = common.base_config()
  config.total_steps = args.steps
  config.log_every = 50
  config.eval_every = args.steps
  config.checkpoint_every = args.steps
  config.input = common.input_config(
      "digits", image_size=8, batch_size=128, eval_batch_size=360,
      train_augment="pad_crop", pad_crop_padding=1, flip=False, shuffle_buffer=2048)
  shape = dict(hidden_size=args.width, depth=args.depth, num_heads=args.heads,
               mlp_dim=2 * args.width, patch_size=2, dropout_rate=0.0)
  if not args.baseline:
    shape.update(lipsformer_model_fields(args.depth, conv_block=args.conv))
  config.model = common.model_config(**shape)
  config.optim = lipsformer_optim(args.lr)
  config.label_smoothing = 0.1
  return config
