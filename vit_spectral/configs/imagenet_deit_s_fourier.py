r"""DeiT-S on ImageNet with AttnScale or FeatScale, 12 or 24 layers (paper 000, §5.1).

Launch (data prepared with `tfds build imagenet2012 --data_dir=DIR`):

  python train.py --config=configs/imagenet_deit_s_fourier.py:method=attn_scale,depth=12 \
      --config.input.data_dir=DIR --workdir=workdir/deit_s12_attnscale
  python train.py --config=configs/imagenet_deit_s_fourier.py:method=feat_scale,depth=24 \
      --config.input.data_dir=DIR --workdir=workdir/deit_s24_featscale

Arguments: method = attn_scale | feat_scale | baseline; depth = 12 | 24;
dropout (negative = the depth's: 0.0 at 12 layers, 0.2 at 24); drop_path
(negative = DeiT's 0.1 at either depth); dtype (bfloat16 = mixed precision,
the default; float32). FeatScale follows eqs. 10-12;
`--config.model.block.feat_scale_form=authors_deit` gives the authors' DeiT
code's form, which adds the re-weighted parts twice (`layers.feat_scale`).

Meant to reach (paper 000, Table 1, top-1 on the 50k validation images):
  12 layers: baseline 79.8, AttnScale 80.7, FeatScale 80.9;
  24 layers: baseline 80.5, AttnScale 81.1, FeatScale 81.3.

Recipe: §5.1 "we follow the same training recipe, hyper-parameters, and data
augmentation with Touvron et al. (2021a)", i.e. DeiT's, as
`configs/imagenet_deit.deit_recipe` builds it: 300 epochs, batch 1024, AdamW
with lr 5e-4·1024/512 = 1e-3, weight decay 0.05 (never on 1-D parameters: ω,
s, t, biases, norms), 5 warmup epochs from 1e-6 then cosine to 1e-5,
RandAugment m9-mstd0.5, random erasing 0.25, repeated augmentation ×3, Mixup
0.8 / CutMix 1.0, label smoothing 0.1, EMA 0.99996, stochastic depth 0.1.

24 layers: §5.1 sets "dropout rate to 0.2 when training 24-layer DeiT
(Touvron et al., 2021b)" without saying whether plain dropout or stochastic
depth; the authors' code decides. Their README's 24-layer commands
(VITA-Group/ViT-Anti-Oversmoothing, "24-layer DeiT-S + AttnScale /
FeatScale") pass `--drop 0.2`, which their DeiT main.py (`--drop`, "Dropout
rate", default 0.0) hands to the model as `drop_rate`: dropout after the
position embedding, on the attention output and in the MLP (our
`dropout_rate`). They leave `--drop-path` at main.py's default 0.1. So at 24
layers dropout_rate=0.2 and drop_path_rate=0.1 (linear over depth, as timm's);
at 12 layers 0.0 and 0.1, as their 12-layer commands. (Those commands also
leave `--epochs` at their main.py's default, 500, where DeiT's is 300; the
epochs stay the 300 of the DeiT recipe the paper names.)
"""

from vit_spectral.configs import common
from vit_spectral.configs.imagenet_deit import deit_recipe

METHODS = ("baseline", "attn_scale", "feat_scale")
# depth -> dropout rate: the authors' `--drop 0.2` at 24 layers (module docstring).
DROPOUT = {12: 0.0, 24: 0.2}
# DeiT main.py's `--drop-path` default, which the authors' commands keep at both depths.
DEIT_DROP_PATH = 0.1


def fourier_model(method: str, **fields):
  """`config.model` for `method` (paper 000): AttnScale is an attention, FeatScale a block option."""
  if method not in METHODS:
    raise ValueError(f"config argument method={method!r}; choose one of {list(METHODS)}")
  attention = dict(name="attn_scale" if method == "attn_scale" else "dot_product")
  # feat_scale_form is spelled out so that the command line can switch it.
  block = dict(feat_scale=True, feat_scale_form="equations") if method == "feat_scale" else {}
  return common.model_config(attention=attention, block=block, **fields)


def get_config(arg=None):
  args = common.parse_arg(arg, method="attn_scale", depth=12, drop_path=-1.0, dropout=-1.0,
                          dtype=common.ACCELERATOR_DTYPE)
  if args.depth not in DROPOUT:
    raise ValueError(f"config argument depth={args.depth}; choose one of {sorted(DROPOUT)}")
  drop_path = args.drop_path if args.drop_path >= 0 else DEIT_DROP_PATH
  dropout = args.dropout if args.dropout >= 0 else DROPOUT[args.depth]
  config = deit_recipe()
  config.model = fourier_model(args.method, variant="S/16", depth=args.depth,
                               drop_path_rate=drop_path, dropout_rate=dropout,
                               dtype=args.dtype)
  return config
