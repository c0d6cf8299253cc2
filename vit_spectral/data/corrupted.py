"""Corruption benchmarks in Hendrycks & Dietterich's .npy layout -> TFDS format.

CIFAR-10-C ships with TFDS (`cifar10_corrupted`); CIFAR-100-C (paper 003,
Table 4) and other "-C" sets come as a directory of NumPy files:

  labels.npy            int (5 N,)     the labels, repeated for each severity
  <corruption>.npy      uint8 (5 N, H, W, C), severity s in rows (s-1)N .. sN-1

`store_corruptions` writes each (corruption, severity) as the TFDS builder
config "<corruption>_<severity>" of data set `name` (split "test", features
`image` and `label`), the layout `cifar10_corrupted` has, so that
`config.robustness.dataset = name` evaluates it
(`vit_spectral.training.robustness`); `scripts/prepare_corrupted.py` is the command.
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from vit_spectral.data.tensorflow_import import tfds

NUM_SEVERITIES = 5


def _severity_rows(array: np.ndarray, severity: int, what: str) -> np.ndarray:
  if len(array) % NUM_SEVERITIES:
    raise ValueError(f"{what} has {len(array)} rows, not a multiple of "
                     f"{NUM_SEVERITIES} severities")
  n = len(array) // NUM_SEVERITIES
  return array[(severity - 1) * n:severity * n]


def store_corruptions(npy_dir: str, name: str, data_dir: str, num_classes: int,
                      corruptions: Sequence[str] | None = None,
                      version: str = "1.0.0") -> list[str]:
  """Writes every corruption × severity of `npy_dir` as TFDS configs of `name`.

  Args:
    npy_dir: directory with labels.npy and <corruption>.npy files.
    name: the TFDS name to store under (e.g. "cifar100_corrupted").
    data_dir: the TFDS data_dir (config.input.data_dir).
    num_classes: number of label classes (100 for CIFAR-100-C).
    corruptions: which corruptions (default: every .npy but labels.npy).
    version: the TFDS version to write.

  Returns:
    The config names written, e.g. ["fog_1", ..., "fog_5", ...].

  Raises:
    FileNotFoundError: a missing labels.npy or corruption file.
    ValueError: shapes that do not fit the layout above.
  """
  labels = np.load(os.path.join(npy_dir, "labels.npy")).astype(np.int64)
  if corruptions is None:
    corruptions = sorted(f[:-4] for f in os.listdir(npy_dir)
                         if f.endswith(".npy") and f != "labels.npy")
  if not corruptions:
    raise FileNotFoundError(f"no <corruption>.npy files in {npy_dir}")
  written = []
  for corruption in corruptions:
    images = np.load(os.path.join(npy_dir, f"{corruption}.npy"))
    if images.dtype != np.uint8 or images.ndim != 4 or len(images) != len(labels):
      raise ValueError(
          f"{corruption}.npy must be uint8 (N, H, W, C) with as many rows as "
          f"labels.npy ({len(labels)}); got {images.dtype} {images.shape}")
    features = tfds.features.FeaturesDict({
        "image": tfds.features.Image(shape=images.shape[1:]),
        "label": tfds.features.ClassLabel(num_classes=num_classes),
    })
    for severity in range(1, NUM_SEVERITIES + 1):
      rows = {
          "image": _severity_rows(images, severity, f"{corruption}.npy"),
          "label": _severity_rows(labels, severity, "labels.npy"),
      }
      config = f"{corruption}_{severity}"
      tfds.dataset_builders.store_as_tfds_dataset(
          name=name, version=version, config=config, features=features,
          # (key, example) pairs; the keys keep the files' order.
          split_datasets={"test": [
              (i, {"image": image, "label": label})
              for i, (image, label) in enumerate(zip(rows["image"], rows["label"]))]},
          data_dir=data_dir, disable_shuffling=True)
      written.append(config)
  return written
