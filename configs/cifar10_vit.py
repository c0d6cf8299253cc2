r"""ViT-Ti on CIFAR-10, the DeiT-style recipe papers 003 and 004 train with.

Launch (data prepared with `tfds build cifar10 --data_dir=$TFDS`):

  python train.py --config=configs/cifar10_vit.py --config.input.data_dir=$TFDS \
      --workdir=gs://BUCKET/cifar10_vit

Paper 004's exact setting (ViT-Tiny, 224² resize, patch 16):
  --config=configs/cifar10_vit.py:variant=Ti/16,image_size=224

Meant to reach: paper 004 Table 3 reports 93.27% for ViT-Tiny with self-attention
on CIFAR-10 (224², patch 16, with RandAugment/Mixup/CutMix/random erasing, which
the recipe issue adds to the input pipeline); at 32² with 4×4 patches and the
augmentation here, expect high 80s.
"""

from configs import common


def get_config(arg=None):
  return common.cifar_vit("cifar10", arg)
