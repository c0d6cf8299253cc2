r"""A small CSwin (or LipsFormer-CSwin) on scikit-learn's digits (1797 real 8×8 images).

Launch (CPU):

  python train.py --config=configs/digits_cswin.py --workdir=workdir/digits_cswin
  python train.py --config=configs/digits_cswin.py:model=lipsformer --workdir=workdir/digits_lcswin

Model (`models.cswin.CSwin`): a 3×3 stride-2 stem on the 8×8 image (a 4×4
grid of width 32), two blocks with cross-shaped windows of 2-row / 2-column
stripes (2 heads: one per direction) and LePE, a 3×3 stride-2 merge to 2×2
(width 64), two blocks of global attention (4 heads, the stripe covers the
grid), final norm, mean pool, head. `model=lipsformer` swaps in the
LipsFormer-CSwin parts (non-overlapping 2×2 stem and merge, CenterNorm,
cosine attention τ = 12 with LePE, spectral init, α = 0.2 (the authors'
LipsFormer-CSwin value, `models.cswin`), the dw+pw and the second dw
convolution branches, LipsFormer block order, DropPath without rescaling) and
AdamW without warmup (paper 001, Table 6).

Measured (CPU, 2 cores shared with other jobs at load ~4-7, seed 0,
`eval_accuracy` on the 360 held-out digits, 600 steps of batch 128, the
defaults): model=cswin 98.1% (train accuracy 1.0 from step 300; 2 min wall
in all, compile included, 1 min of CPU time); model=lipsformer (lr 1e-2, no
warmup, α = 0.2) 98.3% (its convolution branches make steps ~5× slower on CPU:
4 min wall at load ~4-5, 2.4 min of CPU time; 98.6% with the earlier α =
1/16).

Arguments: model (cswin | lipsformer), width, steps, lr (0 = the model's:
2e-3 with 100 warmup steps for cswin, 1e-2 without warmup for lipsformer).
"""

from vit_spectral.configs import common
from vit_spectral.configs.lipsformer_parts import lipsformer_optim

_MODELS = ("cswin", "lipsformer")
# model -> its learning rate when `lr` is not given (0): AdamW with 100 warmup
# steps for the CSwin, none for the LipsFormer (which takes the larger rate).
_LEARNING_RATES = {"cswin": 2e-3, "lipsformer": 1e-2}


def get_config(arg=None):
  args = common.parse_arg(arg, model="cswin", width=32, steps=600, lr=0.0)
  if args.model not in _MODELS:
    raise ValueError(f"model={args.model!r}; choose one of {list(_MODELS)}")
  lr = args.lr or _LEARNING_RATES[args.model]
  config = common.base_config()
  config.total_steps = args.steps
  config.log_every = 100
  config.eval_every = args.steps
  config.checkpoint_every = args.steps
  config.input = common.input_config(
      "digits", image_size=8, batch_size=128, eval_batch_size=360,
      train_augment="none", flip=False, shuffle_buffer=2048)
  depths = (2, 2)
  shape = dict(hidden_size=args.width, depths=depths, num_heads=(2, 4), stripe_widths=(2, 2),
               patch_size=2, mlp_ratio=2.0)
  if args.model == "cswin":
    config.model = common.model_config("CSwin-T", **shape)
    config.optim = common.optim_config("adamw", learning_rate=lr, warmup_steps=100,
                                       weight_decay=0.05, grad_clip_norm=1.0)
  else:
    # α: the variant's (0.2, `models.cswin.LIPSFORMER_CSWIN_ALPHA`).
    config.model = common.model_config("LipsFormer-CSwin-T", **shape)
    config.optim = lipsformer_optim(lr)
  config.label_smoothing = 0.1
  return config
