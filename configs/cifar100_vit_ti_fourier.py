r"""ViT-Ti on CIFAR-100 with AttnScale or FeatScale (paper 000's methods, paper 003's setup).

Launch (data prepared with `tfds build cifar100 --data_dir=DIR`):

  python train.py --config=configs/cifar100_vit_ti_fourier.py:method=feat_scale \
      --config.input.data_dir=DIR --workdir=workdir/cifar100_ti_featscale

Arguments: method = attn_scale | feat_scale | baseline; depth (default 12);
patch (default 2).

Meant to reach (paper 003, Table 2, 100% of the training set, top-1 on the test
set): ViT-Ti 66.78 ± 0.1, ViT-Ti + FeatScale 66.57 ± 0.5; AttnScale is not
reported there (expect the baseline's level). Those numbers use RandAugment,
Mixup and CutMix, which this file leaves to the input defaults of the library.

Recipe (paper 003 §5, after Park & Kim 2022, after DeiT): 300 epochs, batch 96,
AdamW lr 1.25e-4, weight decay 0.05 (never on 1-D parameters), cosine schedule
after 5 warmup epochs, label smoothing 0.1, stochastic depth 0.1; ViT-Ti with
2×2 patches on the 32×32 images (256 tokens + CLS).
"""

from configs import common
from configs.imagenet_deit_s_fourier import fourier_model

CIFAR100_TRAIN_EXAMPLES = 50_000


def get_config(arg=None):
  args = common.parse_arg(arg, method="feat_scale", depth=12, patch=2)
  batch_size = 96
  steps_per_epoch = CIFAR100_TRAIN_EXAMPLES // batch_size

  config = common.base_config()
  config.num_epochs = 300
  config.log_every = 200
  config.eval_every = 10 * steps_per_epoch
  config.checkpoint_every = 5 * steps_per_epoch
  config.label_smoothing = 0.1
  config.input = common.input_config(
      "cifar100", image_size=32, batch_size=batch_size, train_augment="pad_crop",
      pad_crop_padding=4, flip=True, mean=(0.5071, 0.4865, 0.4409),
      std=(0.2673, 0.2564, 0.2762))
  config.model = fourier_model(args.method, variant=f"Ti/{args.patch}", depth=args.depth,
                               drop_path_rate=0.1)
  config.optim = common.optim_config(
      "adamw", learning_rate=1.25e-4, warmup_steps=5 * steps_per_epoch, weight_decay=0.05)
  return config
