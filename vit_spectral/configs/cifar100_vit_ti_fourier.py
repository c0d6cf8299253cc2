r"""ViT-Ti on CIFAR-100 with AttnScale or FeatScale (paper 000's methods, paper 003's setup).

Launch (data prepared with `tfds build cifar100 --data_dir=DIR`):

  python train.py --config=configs/cifar100_vit_ti_fourier.py:method=feat_scale \
      --config.input.data_dir=DIR --workdir=workdir/cifar100_ti_featscale

Arguments: method = attn_scale | feat_scale | baseline; depth (default 12);
patch (default 2); dtype (bfloat16 = mixed precision, the default; float32).

Meant to reach (paper 003, Table 2, 100% of the training set, top-1 on the test
set): ViT-Ti 66.78 ± 0.1, ViT-Ti + FeatScale 66.57 ± 0.5; AttnScale is not
reported there (expect the baseline's level).

Recipe: paper 003 §5 (Park & Kim 2022, after DeiT), `configs/cifar_recipes.park_kim`:
300 epochs, batch 96, AdamW lr 1.25e-4, weight decay 0.05 (never on 1-D
parameters), cosine schedule after 5 warmup epochs, gradient clipping 1.0,
RandAugment, Mixup, CutMix, random erasing, label smoothing 0.1, stochastic
depth 0.1; ViT-Ti with 2×2 patches on the 32×32 images (256 tokens + CLS).
"""

from vit_spectral.configs import common
from vit_spectral.configs.cifar_recipes import park_kim
from vit_spectral.configs.imagenet_deit_s_fourier import fourier_model


def get_config(arg=None):
  args = common.parse_arg(arg, method="feat_scale", depth=12, patch=2,
                          dtype=common.ACCELERATOR_DTYPE)
  config = park_kim("cifar100", size="Ti", patch=args.patch)
  config.model = fourier_model(args.method, variant=f"Ti/{args.patch}", depth=args.depth,
                               drop_path_rate=config.model.drop_path_rate,
                               dtype=args.dtype)
  return config
