r"""Swin and LipsFormer-Swin on ImageNet-1k: the rows of papers 000 and 001 on Swin.

Launch on a Cloud TPU VM pod slice (see docs/running.md;
ImageNet prepared once with `tfds build imagenet2012`):

  launch/tpu_pod.sh --tpu=NAME --zone=ZONE -- \
      --config=configs/imagenet_swin.py:row=swin_s_attn_scale \
      --config.input.data_dir=gs://BUCKET/tfds --workdir=gs://BUCKET/swin_s_attn_scale

Rows (`row=`) and the top-1 they are meant to reach (`eval_accuracy`):

  swin_s               Swin-S baseline: 83.0% (paper 000 Table 1; Swin Table 1)
  swin_s_attn_scale    Swin-S + AttnScale: 83.4% (paper 000 Table 1)
  swin_s_feat_scale    Swin-S + FeatScale: 83.5% (paper 000 Table 1)
  swin_t, swin_b       Swin-T 81.3%, Swin-B 83.5% (Swin, Liu et al. 2021, Table 1)
  lipsformer_swin_t    LipsFormer-Swin-T: 82.7% without warmup (paper 001, App. D,
                       Table 7)

Recipe of the Swin rows (Swin §4.1 and its code's defaults, which paper 000
keeps for its Swin-S rows): batch 1024, AdamW lr 1e-3 × batch/1024 (Swin's
5e-4 × batch/512), weight decay 0.05 (none on 1-D parameters nor the relative
position bias tables), 20 linear warmup epochs from 1e-6 then cosine to 1e-5
over 300 epochs, gradient clipping 5.0, drop path 0.2 / 0.3 / 0.5 (T / S / B),
random-resized crop + flip, RandAugment m9-mstd0.5, random erasing 0.25,
Mixup 0.8 / CutMix 1.0, label smoothing 0.1; no repeated augmentation and no
EMA (Swin uses neither). AttnScale's DC is the window's (it acts on each
window's attention map); FeatScale's is the token mean of the whole stage map,
after the windows are merged (the authors' swin/models/swin_featscale.py;
`models.swin`).

LipsFormer-Swin-T (paper 001, Table 6, tiny): AdamW lr 2e-3, betas (0.9,
0.999), eps 1e-8, weight decay 0.05, no warmup, no gradient clipping, cosine,
drop path 0.2 (without rescaling), EMA 0.99984, the same data recipe, 300
epochs at batch 1024 (the batch the Swin code base it builds on uses).

Arguments: row, batch, epochs, dtype (bfloat16 = mixed precision, the
default; float32).
"""

from vit_spectral.configs import common
from vit_spectral.configs.lipsformer_parts import lipsformer_optim
from vit_spectral.data.statistics import dataset_statistics
from vit_spectral.sections.optim import DEIT_NO_DECAY

# row -> (variant, model fields, drop path)
ROWS = {
    "swin_t": ("Swin-T", {}, 0.2),
    "swin_s": ("Swin-S", {}, 0.3),
    "swin_b": ("Swin-B", {}, 0.5),
    "swin_s_attn_scale": ("Swin-S", {"attention": {"name": "attn_scale"}}, 0.3),
    "swin_s_feat_scale": ("Swin-S", {"block": {"feat_scale": True}}, 0.3),
    "lipsformer_swin_t": ("LipsFormer-Swin-T", {}, 0.2),
}
# Swin excludes its relative position bias tables from weight decay (1-D ones are anyway).
SWIN_NO_DECAY = DEIT_NO_DECAY + (r"(^|/)relative_position_bias_table$",)


def get_config(arg=None):
  args = common.parse_arg(arg, row="swin_s", batch=1024, epochs=300.0,
                          dtype=common.ACCELERATOR_DTYPE)
  if args.row not in ROWS:
    raise ValueError(f"row={args.row!r}; choose one of {sorted(ROWS)}")
  variant, fields, drop_path = ROWS[args.row]
  lipsformer = variant.startswith("LipsFormer")
  stats = dataset_statistics("imagenet2012")
  config = common.base_config()
  common.epoch_cadences(config, args.epochs, eval_every_epochs=1)
  config.input = common.input_config(
      "imagenet2012", image_size=224, batch_size=args.batch, eval_batch_size=1000,
      train_split="train", eval_split="validation",
      train_augment="random_resized_crop", flip=True, eval_resize="resize_center_crop",
      mean=stats.mean, std=stats.std)
  common.deit_augmentation(config)
  config.model = common.model_config(variant, drop_path_rate=drop_path, dtype=args.dtype,
                                     **fields)
  if lipsformer:
    config.optim = lipsformer_optim(2e-3, weight_decay=0.05, b2=0.999)
    config.ema_decay = 0.99984
  else:
    config.optim = common.optim_config(
        "adamw", learning_rate=1e-3, base_batch_size=1024, warmup_epochs=20,
        warmup_init_learning_rate=1e-6, end_learning_rate=1e-5, weight_decay=0.05,
        grad_clip_norm=5.0, no_decay_patterns=SWIN_NO_DECAY)
  return config
