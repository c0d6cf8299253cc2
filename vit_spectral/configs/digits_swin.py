r"""A tiny Swin (or LipsFormer-Swin) on scikit-learn's digits (1797 real 8×8 grey images).

Launch (CPU, 2 cores):

  python train.py --config=configs/digits_swin.py --workdir=workdir/digits_swin
  python train.py --config=configs/digits_swin.py:model=LipsFormer-Swin-T \
      --workdir=workdir/digits_lipsformer_swin

Measured (seed 0, 1500 steps, batch 128, 2026-11-23, 2 shared CPU cores under
load ~7): Swin 98.9% test accuracy on the 360 held-out digits (97.5% at step
500), 3 min 56 s wall (2 min 15 s of CPU time, compile included);
LipsFormer-Swin-T (α = 1/4, 2026-11-24, load ~5) 98.6% (98.6% at step 500),
5 min 38 s wall (2 min 42 s of CPU); 98.1% with the earlier α = 1/12.
Expected: >= 97% for both.

Model: Swin-T's design at digits scale: 2×2 patches (a 4×4 token grid),
2×2 windows shifted by 1 on every odd block of stage 0, patch merging to a
2×2 grid (one window, no shift) for stage 1; widths 32 / 64, depths (2, 2),
heads (2, 4), MLP ratio 4, relative position bias. `model=LipsFormer-Swin-T`
takes the LipsFormer-Swin-T parts (CenterNorm, scaled cosine attention,
α = 1/L with L = 4 blocks, the convolution branch with a 3×3 depth-wise
kernel on these 4×4 and 2×2 grids, spectral init, merging by a 2×2 stride-2
convolution) at the same shape, without warmup. Arguments: model (Swin-T | LipsFormer-Swin-T),
attention (a registered name, e.g. attn_scale), feat_scale, steps,
encoder_mode.
"""

from vit_spectral.configs import common
from vit_spectral.configs.lipsformer_parts import block_alpha

_SHAPE = dict(embed_dim=32, depths=(2, 2), num_heads=(2, 4), patch_size=2, window_size=2)
MODELS = ("Swin-T", "LipsFormer-Swin-T")


def get_config(arg=None):
  args = common.parse_arg(arg, model="Swin-T", attention="", feat_scale=False, steps=1500,
                          encoder_mode="loop")
  if args.model not in MODELS:
    raise ValueError(f"model={args.model!r}; choose one of {list(MODELS)}")
  lipsformer = args.model == "LipsFormer-Swin-T"
  config = common.base_config()
  config.total_steps = args.steps
  config.log_every = 100
  config.eval_every = 500
  config.checkpoint_every = 500
  config.input = common.input_config(
      "digits", image_size=8, batch_size=128, eval_batch_size=360,
      train_augment="none", flip=False, shuffle_buffer=2048)
  block = {"feat_scale": True} if args.feat_scale else {}
  if lipsformer:
    # α = 1/L over L = 4 blocks (the variant's 1/sum(depths), `models.swin`, at this
    # depth); a 3×3 depth-wise kernel on 4×4 and 2×2 grids.
    block.update(residual_alpha=block_alpha(sum(_SHAPE["depths"])), conv_kernel_size=3)
  fields = dict(_SHAPE, encoder_mode=args.encoder_mode, dropout_rate=0.1)
  if block:
    fields["block"] = block
  if args.attention:
    fields["attention"] = dict(name=args.attention)
  config.model = common.model_config(args.model, **fields)
  config.optim = common.optim_config(
      "adamw", learning_rate=2e-3, warmup_steps=0 if lipsformer else 100,
      weight_decay=0.05, grad_clip_norm=None if lipsformer else 1.0)
  config.label_smoothing = 0.1
  return config
