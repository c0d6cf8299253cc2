"""TFDS builder for scikit-learn's `load_digits`: tiny, real and offline.

The 1797 images ship inside scikit-learn, so this builder prepares itself
without any network access. It exists so that the whole training stack can be
exercised end to end on real images on a laptop or in CI.

Importing this module registers the builders under the TFDS names ``digits``
and ``digits_parity`` (the same images and splits, labelled even / odd: a
second task for fine-tuning tests).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from vit_spectral.data.tensorflow_import import tfds

# Fixed so that the split never changes between machines or library versions
# of our own code; changing it requires a new builder VERSION.
SPLIT_SEED = 0
TEST_FRACTION = 0.2

# sklearn stores pixel intensities as integers 0..16 (4x4 block counts).
_SKLEARN_MAX_VALUE = 16

NUM_TRAIN_EXAMPLES = 1437
NUM_TEST_EXAMPLES = 360


def digits_split_indices() -> tuple[np.ndarray, np.ndarray]:
  """Returns the (train, test) indices into `sklearn.datasets.load_digits`.

  A stratified 80/20 split with a fixed seed: 1437 train and 360 test
  examples. Each index array is sorted ascending.

  Returns:
    train_indices: int64 array, shape (1437,).
    test_indices: int64 array, shape (360,).
  """
  # Imported lazily: scikit-learn is only needed when preparing the data.
  from sklearn import datasets as sk_datasets
  from sklearn import model_selection

  labels = sk_datasets.load_digits().target
  train, test = model_selection.train_test_split(
      np.arange(labels.shape[0]),
      test_size=TEST_FRACTION,
      random_state=SPLIT_SEED,
      stratify=labels,
  )
  return np.sort(train), np.sort(test)


def rescale_to_uint8(images: np.ndarray) -> np.ndarray:
  """Maps sklearn's 0..16 intensities to 0..255 uint8, rounding to nearest.

  Args:
    images: float or int array with values in [0, 16], any shape.

  Returns:
    uint8 array of the same shape. 0 -> 0, 16 -> 255; the only exact tie
    (8 -> 127.5) rounds to 128.
  """
  # floor(x + 0.5) rounds ties up; np.round would round them to even, which
  # here happens to agree (128), but rounding up is the simpler rule to state.
  scaled = np.floor(
      images.astype(np.float64) * 255.0 / _SKLEARN_MAX_VALUE + 0.5)
  return scaled.astype(np.uint8)


class Digits(tfds.core.GeneratorBasedBuilder):
  """scikit-learn's 8x8 handwritten digits (UCI optdigits test set), offline.

  Features:
    image: uint8 (8, 8, 1); sklearn's 0..16 values rescaled to 0..255 and
      rounded (see `rescale_to_uint8`).
    label: ClassLabel(num_classes=10), the digit 0..9.

  Splits (deterministic stratified 80/20 split of the 1797 examples,
  `sklearn.model_selection.train_test_split(..., test_size=0.2,
  random_state=0, stratify=labels)`):
    train: 1437 examples.
    test: 360 examples; per class 0..9: 36 36 35 37 36 37 36 36 35 36.
    (train per class: 142 146 142 146 145 145 145 143 139 144.)

  The example keys are the row indices into `load_digits()`.
  """

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Initial release."}

  DESCRIPTION = ("The 1797 8x8 greyscale handwritten digits bundled with "
                 "scikit-learn (sklearn.datasets.load_digits), rescaled to 0..255.")

  def label(self, digit: int) -> int:
    """The example's label for the digit `digit` (0..9)."""
    return digit

  def label_feature(self) -> tfds.features.ClassLabel:
    """The `label` feature: the 10 digits."""
    return tfds.features.ClassLabel(num_classes=10)

  def _info(self) -> tfds.core.DatasetInfo:
    return self.dataset_info_from_configs(
        description=self.DESCRIPTION,
        features=tfds.features.FeaturesDict({
            "image": tfds.features.Image(shape=(8, 8, 1), dtype=np.uint8),
            "label": self.label_feature(),
        }),
        supervised_keys=("image", "label"),
        homepage="https://archive.ics.uci.edu/dataset/80",
    )

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    del dl_manager  # Nothing to download: the data ships with scikit-learn.
    train, test = digits_split_indices()
    return {
        "train": self._generate_examples(train),
        "test": self._generate_examples(test),
    }

  def _generate_examples(
      self, indices: np.ndarray
  ) -> Iterator[tuple[int, dict[str, np.ndarray | int]]]:
    """Yields (key, example) for the given rows of `load_digits()`."""
    from sklearn import datasets as sk_datasets

    digits = sk_datasets.load_digits()
    images = rescale_to_uint8(digits.images)[..., np.newaxis]  # (N, 8, 8, 1)
    for index in indices:
      index = int(index)
      yield index, {"image": images[index],
                    "label": self.label(int(digits.target[index]))}


class DigitsParity(Digits):
  """`Digits` labelled by parity: label = digit % 2 (0 "even", 1 "odd").

  The same images, splits and example keys as `digits` (a model trained on
  one can be fine-tuned on the other with a new 2-class head). Test split:
  178 even, 182 odd.
  """

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Initial release."}
  DESCRIPTION = Digits.DESCRIPTION + " Labelled by parity: digit % 2."

  def label(self, digit: int) -> int:
    return digit % 2

  def label_feature(self) -> tfds.features.ClassLabel:
    return tfds.features.ClassLabel(names=["even", "odd"])
