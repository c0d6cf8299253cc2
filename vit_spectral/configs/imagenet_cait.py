r"""CaiT-S24 on ImageNet-1k: paper 000's Table 1 CaiT rows (baseline, +AttnScale,
+FeatScale).

Launch (one row per run; ImageNet prepared for TFDS, see docs/running.md):

  python train.py --config=configs/imagenet_cait.py:baseline --workdir=workdir/cait_s24
  python train.py --config=configs/imagenet_cait.py:attn_scale --workdir=workdir/cait_s24_as
  python train.py --config=configs/imagenet_cait.py:feat_scale --workdir=workdir/cait_s24_fs
  # add --config.input.data_dir=DIR (or gs://BUCKET/tfds with launch/tpu_pod.sh)

Meant to reach (paper 000, Table 1, CaiT-S 224², 24 layers, 46.9M parameters;
`eval_accuracy`, `eval_ema_accuracy` for the EMA): baseline 82.6% (82.7%
reproduced by the paper), +AttnScale 83.2%, +FeatScale 83.2%.

Rows: "baseline" = CaiT-S24 (LayerScale 1e-5, talking heads, 2 class-attention
layers; `models.cait`); "attn_scale" = AttnScale in every self-attention layer
(`attention=dict(name="attn_scale")`, acting after the talking heads'
post-softmax mixing); "feat_scale" = FeatScale after every self-attention
layer's attention (`block=dict(feat_scale=True)`). The class-attention layers
stay plain: paper 000 (§5) applies its techniques to the patch-token layers
only.

Recipe. Paper 000 says only that CaiT is trained as in its paper (Touvron et
al. 2021b), which is not among /work/shared/papers; what follows is that
paper's setup as we read it (DeiT's recipe, `imagenet_deit.deit_recipe`, with
CaiT's changes): 400 epochs, batch 1024, AdamW lr 5e-4 × batch/512 (1e-3 at
1024), weight decay 0.05 (none on 1-D parameters, position embedding and
class token), 5 warmup epochs, cosine to 1e-5, no dropout, uniform
stochastic depth 0.1 for S24 (0.05 for XXS24), RandAugment m9-mstd0.5,
random erasing 0.25, repeated augmentation ×3, Mixup 0.8 / CutMix 1.0, label
smoothing 0.1, EMA 0.99996. CaiT evaluates at crop ratio 1.0 (resize to 224,
central 224², bicubic: facebookresearch/deit README_cait.md); here
`crop_fraction=1.0` with the bicubic kernel. Check epochs and stochastic depth
against the CaiT paper before spending a full run.

Arguments (`imagenet_cait.py:<row>,key=value,...`; the row may also be given
as row=...): row (baseline | attn_scale | feat_scale), variant (CaiT-S24 |
CaiT-XXS24), epochs, batch, drop_path (negative = the variant's: 0.1 S24, 0.05
XXS24), dtype (bfloat16 = mixed precision, the default; float32).
"""

import ml_collections

from vit_spectral.configs import common
from vit_spectral.configs.imagenet_deit import deit_recipe

# row -> (config.model fields on top of the variant, paper 000 Table 1 top-1 %)
ROWS = {
    "baseline": ({}, 82.6),
    "attn_scale": ({"attention": {"name": "attn_scale"}}, 83.2),
    "feat_scale": ({"block": {"feat_scale": True}}, 83.2),
}
# CaiT's uniform stochastic-depth rate per variant.
DROP_PATH = {"CaiT-S24": 0.1, "CaiT-XXS24": 0.05}


def cait_recipe(*, row: str, variant: str, epochs: float, batch: int, drop_path: float,
                dtype: str) -> ml_collections.ConfigDict:
  """The module docstring's recipe for one row (negative drop_path = the variant's)."""
  if row not in ROWS:
    raise ValueError(f"imagenet_cait row={row!r}; choose one of {sorted(ROWS)}")
  if variant not in DROP_PATH:
    raise ValueError(f"imagenet_cait variant={variant!r}; choose one of {sorted(DROP_PATH)}")
  fields, _ = ROWS[row]
  config = deit_recipe(batch=batch, epochs=epochs, variant=variant,
                       drop_path_rate=DROP_PATH[variant] if drop_path < 0 else drop_path,
                       dtype=dtype, **fields)
  config.input.crop_fraction = 1.0
  config.input.eval_resize_method = "bicubic"
  return config


def get_config(arg=None):
  items = [item for item in (arg or "").split(",") if item]
  row = items.pop(0) if items and "=" not in items[0] else None
  args = common.parse_arg(",".join(items), row=row or "baseline", variant="CaiT-S24",
                          epochs=400.0, batch=1024, drop_path=-1.0,
                          dtype=common.ACCELERATOR_DTYPE)
  return cait_recipe(row=args.row, variant=args.variant, epochs=args.epochs, batch=args.batch,
                     drop_path=args.drop_path, dtype=args.dtype)
