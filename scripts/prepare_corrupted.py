r"""Converts a Hendrycks-style corruption set (.npy files) to TFDS format.

  python scripts/prepare_corrupted.py --npy_dir=CIFAR-100-C \
      --name=cifar100_corrupted --num_classes=100 --data_dir=DIR

then train with `--config.input.data_dir=DIR` and
`configs/cifar100_vit.py:corrupted=cifar100_corrupted`. See
vit_spectral/data/corrupted.py for the expected layout.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

_NPY_DIR = flags.DEFINE_string("npy_dir", None, "labels.npy + <corruption>.npy",
                               required=True)
_NAME = flags.DEFINE_string("name", "cifar100_corrupted", "TFDS name to write")
_NUM_CLASSES = flags.DEFINE_integer("num_classes", 100, "label classes")
_DATA_DIR = flags.DEFINE_string("data_dir", None, "TFDS data_dir", required=True)
_CORRUPTIONS = flags.DEFINE_list("corruptions", None,
                                 "corruptions to convert (default: all files)")


def main(argv):
  del argv
  from vit_spectral.data import corrupted  # noqa: PLC0415
  written = corrupted.store_corruptions(
      _NPY_DIR.value, _NAME.value, _DATA_DIR.value, _NUM_CLASSES.value,
      _CORRUPTIONS.value)
  print(f"wrote {len(written)} configs of {_NAME.value} to {_DATA_DIR.value}")


if __name__ == "__main__":
  app.run(main)
