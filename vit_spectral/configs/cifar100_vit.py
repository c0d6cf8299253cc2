r"""ViT-Ti on CIFAR-100: paper 003 §5 (Park & Kim's DeiT-style setup) and paper
004 App. G Table 10 (configs/cifar_recipes.py describes both recipes).

Launch (prepare once: `tfds build cifar100 --data_dir=DIR`):

  python train.py --config=configs/cifar100_vit.py --config.input.data_dir=DIR \
      --workdir=gs://BUCKET/cifar100_vit_ti
  # data efficiency (003 Table 2):  cifar100_vit.py:fraction=0.1   (and 0.5)
  # depth (003 Table 3):            cifar100_vit.py:depth=24
  # corruption (003 Table 4): prepare CIFAR-100-C in TFDS format (docs/training.md,
  #   "Corruption robustness") as cifar100_corrupted, then add
  #   :corrupted=cifar100_corrupted
  # paper 004 (Table 3):            cifar100_vit.py:recipe=table10,size=Ti

Meant to reach: paper 003 Tables 2–4, ViT-Ti 66.78% on clean CIFAR-100 (depth
12; 67.22% at depth 24) and 61.59 / 57.75 / 53.12 / 49.32 / 39.17% mean
accuracy at corruption severities 1–5; paper 004 Table 3, ViT-Tiny 73.08%
(recipe=table10).

Arguments: as configs/cifar10_vit.py (corrupted defaults to "": CIFAR-100-C
is not in TFDS).
"""

from vit_spectral.configs import cifar_recipes


def get_config(arg=None):
  args = cifar_recipes.parse(arg, default_corrupted="")
  return cifar_recipes.cifar_config("cifar100", args)
