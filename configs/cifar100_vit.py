r"""ViT-Ti on CIFAR-100, the DeiT-style recipe of papers 003 (§5) and 004 (App. G).

Launch (data prepared with `tfds build cifar100 --data_dir=$TFDS`):

  python train.py --config=configs/cifar100_vit.py --config.input.data_dir=$TFDS \
      --workdir=gs://BUCKET/cifar100_vit

Paper 003's batch: `configs/cifar100_vit.py:batch=96` (lr 1.25e-4 at batch 128 is
the DeiT scaling 5e-4·128/512; paper 003 states 1.25e-4 at batch 96).

Meant to reach: paper 004 Table 3 reports 73.08% for ViT-Tiny on CIFAR-100 (224²,
patch 16, full DeiT augmentation); at 32² with 4×4 patches and this recipe's
augmentation, expect about 60-65%.
"""

from configs import common


def get_config(arg=None):
  return common.cifar_vit("cifar100", arg)
