r"""A small CaiT on scikit-learn's digits (1797 real 8×8 grey images).

Launch (CPU; 1200 steps, about 220 CPU-seconds, so roughly 2-3 minutes on 2
quiet cores, compile included):

  python train.py --config=configs/digits_cait.py --workdir=workdir/digits_cait

Measured (seed 0, the default 1200 steps, 2026-11-23, on the shared 2-core
machine at load ~5, killed after the step-500 checkpoint and resumed): test
accuracy (eval_accuracy, 360 held-out digits) 97.8% at step 500, 98.3% at
1000, 97.5% at the end (1200). A 1500-step run reached 95.8 / 96.9 / 97.5%
at 500 / 1000 / 1500 (268 CPU-seconds; 8 min 45 s wall at that load).

Model (`models.cait`, class CaiT through the registered name "CaiT-XXS24"
with its shape overridden): 2×2 patches (16 patch tokens), width 64, 4
self-attention layers with talking heads and LayerScale, then 2
class-attention layers (the class token joins there), 4 heads, MLP 128.
LayerScale starts at 0.1, CaiT's value for networks of depth <= 18 (1e-5 is
for its 24-layer models). The recipe is digits_vit.py's (AdamW 2e-3, 100
warmup steps, weight decay 0.05, clip 1.0, label smoothing 0.1, dropout 0.1,
no augmentation).

Arguments (`digits_cait.py:depth=6,attention=attn_scale`): depth (SA
layers), class_depth, width, heads, attention (the SA stage's), feat_scale,
encoder_mode, steps.
"""

from vit_spectral.configs import common, digits_vit


def get_config(arg=None):
  args = common.parse_arg(arg, depth=4, class_depth=2, width=64, heads=4,
                          attention="dot_product", feat_scale=False, encoder_mode="scan",
                          steps=1200)
  config = digits_vit.get_config(f"steps={args.steps}")
  config.model = common.model_config(
      variant="CaiT-XXS24", hidden_size=args.width, depth=args.depth,
      class_depth=args.class_depth, num_heads=args.heads, mlp_dim=2 * args.width,
      patch_size=2, layer_scale_init=0.1, attention=dict(name=args.attention),
      block=dict(feat_scale=args.feat_scale), encoder_mode=args.encoder_mode,
      dropout_rate=0.1)
  return config
