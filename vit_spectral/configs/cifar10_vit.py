r"""ViT on CIFAR-10 with the DeiT-style recipes of papers 003 and 004
(configs/cifar_recipes.py describes both), evaluated on CIFAR-10-C at the end.

Launch (prepare once: `tfds build cifar10 cifar10_corrupted --data_dir=DIR`):

  python train.py --config=configs/cifar10_vit.py:recipe=table10,size=Ti \
      --config.input.data_dir=DIR --workdir=gs://BUCKET/cifar10_vit_ti

Meant to reach: paper 004 Table 3, ViT-Tiny self-attention 93.27% on CIFAR-10
(recipe=table10; S 95.45, B 96.19, L 96.31). recipe=park_kim is paper 003's
setup on CIFAR-10 (the paper reports CIFAR-100 only).

Arguments (`cifar10_vit.py:key=value,...`): recipe (park_kim | table10), size
(Ti | S | B | L), depth (0 = the size's), attention (a registered name), fraction (of the
training split), corrupted (TFDS corruption set, "" = none; default
cifar10_corrupted), epochs, batch (0 = the recipe's), data_dir, dtype
(bfloat16 = mixed precision, the default; float32 switches it off),
lr_scaling (recipe=table10 only: none | linear | sqrt, how Table 10's base
learning rate follows the batch; "" = sqrt, timm's AdamW rule:
configs/cifar_recipes.py says why).
"""

from vit_spectral.configs import cifar_recipes


def get_config(arg=None):
  args = cifar_recipes.parse(arg, default_corrupted="cifar10_corrupted")
  return cifar_recipes.cifar_config("cifar10", args)
