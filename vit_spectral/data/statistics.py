"""Per-channel normalisation statistics of the data sets the recipes train on.

One table, read by every recipe (`configs/`), benchmark and notebook that
normalises these data sets, so a statistic is written once. It lives in the
library rather than in `configs/` because the statistics are facts about the
data sets (like the builders next to them), and library code and notebooks
may not import `configs`.

Values are (mean, std) per channel (RGB, or the one grey channel) of images
scaled to [0, 1]:

- fashion_mnist, mnist: of the 60,000 training images (computed here from the
  idx files `data.idx_files` reads: 0.2860 / 0.3530 and 0.1307 / 0.3081).

- cifar10: of the 50,000 training images (the values every CIFAR-10 recipe
  of this repository and Park & Kim's code use).
- cifar100: of the 50,000 training images as Park & Kim (2022) give them in
  their `cifar100_vit.yaml`, the setup paper 003 trains with (another
  widespread version differs in the fourth decimal).
- imagenet2012: the ImageNet training-set statistics torchvision, timm and
  DeiT normalise with (timm's IMAGENET_DEFAULT_MEAN / _STD); timm applies
  them to any data set a model is trained on unless told otherwise.
"""

from __future__ import annotations

from typing import NamedTuple


class Normalization(NamedTuple):
  """Per-channel (mean, std) of images in [0, 1]."""

  mean: tuple[float, ...]
  std: tuple[float, ...]


DATASET_STATISTICS = {
    "fashion_mnist": Normalization((0.2860,), (0.3530,)),
    "mnist": Normalization((0.1307,), (0.3081,)),
    "cifar10": Normalization((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": Normalization((0.5071, 0.4867, 0.4408), (0.2675, 0.2565, 0.2761)),
    "imagenet2012": Normalization((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
}


def dataset_statistics(dataset: str) -> Normalization:
  """The Normalization of `dataset` (a TFDS name; ":version" is ignored)."""
  name = dataset.split(":")[0]
  if name not in DATASET_STATISTICS:
    raise ValueError(f"input.dataset={dataset!r} has no stored statistics; choose "
                     f"one of {sorted(DATASET_STATISTICS)}")
  return DATASET_STATISTICS[name]
