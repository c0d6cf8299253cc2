"""Images to analyse a model on: a run's own eval images, or a folder, a TFDS
split or the built-in digits read raw and transformed as the model was
evaluated (`vit-spectral-analyse`).

    model, variables, config = analysis.load_workdir("workdir/digits_vit")
    images = data.eval_images(config.input, num_images=64)        # (64, 8, 8, 1)

    transform = timm_transform("deit_small_patch16_224")   # as timm evaluated it
    images = transform(folder_images("my_images/", count=64))     # (N, 224, 224, 3)

The transform is the eval path of the input pipeline (`data.preprocessing`:
resize or resize-and-centre-crop with the same kernels, then per-channel
normalisation), applied to uint8 images one by one, so a timm or big_vision
checkpoint sees the preprocessing it was trained with and a trainer run the
one it was evaluated with. Images whose channel count differs from the
model's are converted: grey to RGB by repeating the channel, RGB to grey by
the ITU-R 601 luma weights (PIL's "L").
"""

from __future__ import annotations

import dataclasses
import os
from typing import Sequence

import numpy as np

__all__ = ["EvalTransform", "IMAGE_SUFFIXES", "big_vision_transform", "dataset_images",
           "eval_images", "eval_transform", "folder_images", "timm_transform"]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")
_LUMA = np.array([0.299, 0.587, 0.114])


@dataclasses.dataclass(frozen=True)
class EvalTransform:
  """uint8 (H, W, C) images -> float32 (N, size, size, channels) model inputs.

  Attributes:
    size: the side the model takes.
    crop_fraction: None = resize the whole image to size²; else resize the
      shorter side to size / crop_fraction and keep the central size².
    method: "bilinear" or "bicubic" (`data.preprocessing.RESIZE_METHODS`).
    mean, std: per-channel normalisation in [0, 1] units (one value each, or
      one per channel).
    channels: the channels the model takes.
  """
  size: int
  crop_fraction: float | None = None
  method: str = "bilinear"
  mean: Sequence[float] = (0.0,)
  std: Sequence[float] = (1.0,)
  channels: int = 3

  def __call__(self, images: Sequence[np.ndarray]) -> np.ndarray:
    from vit_spectral.data.tensorflow_import import tf   # the input pipeline's kernels (on use)

    from vit_spectral.data import preprocessing

    mean = np.broadcast_to(np.asarray(self.mean, np.float32), (self.channels,))
    std = np.broadcast_to(np.asarray(self.std, np.float32), (self.channels,))
    out = []
    for image in images:
      image = tf.constant(_with_channels(np.asarray(image), self.channels))
      image = preprocessing.to_float(image)
      if self.crop_fraction is None:
        image = preprocessing.resize(image, self.size, self.method)
      else:
        image = preprocessing.resize_center_crop(image, self.size, self.crop_fraction,
                                                 self.method)
      out.append(preprocessing.normalize(image, mean, std).numpy())
    return np.stack(out).astype(np.float32)


def eval_transform(cfg) -> EvalTransform:
  """The eval preprocessing of a run's `config.input` (InputSettings or its
  ConfigDict), for images that do not come through its input pipeline."""
  from vit_spectral.sections.input import input_settings

  cfg = input_settings(cfg)
  crop = cfg.crop_fraction if cfg.eval_resize == "resize_center_crop" else None
  return EvalTransform(size=int(cfg.image_size), crop_fraction=crop,
                       method=cfg.eval_resize_method, mean=tuple(cfg.mean), std=tuple(cfg.std),
                       channels=len(cfg.mean))


def timm_transform(name: str, image_size: int | None = None) -> EvalTransform:
  """The eval preprocessing timm's pretrained cfg gives `name`
  (`pretrained.timm_preprocessing`: side, crop, interpolation, mean, std);
  `image_size` another side.

  Raises:
    ValueError: an unknown name, or a resizing the input pipeline lacks.
  """
  from vit_spectral.pretrained import timm_preprocessing

  pre = timm_preprocessing(name)
  if pre.interpolation not in ("bilinear", "bicubic"):
    raise ValueError(f"{name} was evaluated with {pre.interpolation!r} resizing; the "
                     "input pipeline has bilinear and bicubic")
  return EvalTransform(size=image_size or int(pre.input_size[0]), crop_fraction=pre.crop_pct,
                       method=pre.interpolation, mean=tuple(pre.mean), std=tuple(pre.std))


def big_vision_transform(size: int = 224) -> EvalTransform:
  """big_vision's ViT evaluation: a resize to `size`², values in [-1, 1]."""
  return EvalTransform(size=size, crop_fraction=None, method="bilinear", mean=(0.5,),
                       std=(0.5,))


def eval_images(cfg, num_images: int = 64, *, split: str | None = None) -> np.ndarray:
  """The first `num_images` images of a run's eval split, read and
  preprocessed by its own eval pipeline (`input_pipeline.create_eval_dataset`).

  Args:
    cfg: the run's `config.input` (InputSettings or its ConfigDict, e.g. from
      `analysis.load_workdir`).
    num_images: how many (fewer when the split is smaller).
    split: another split of the same data set (None: `cfg.eval_split`).

  Returns:
    float32 (N, image_size, image_size, C), N = min(num_images, split size).

  Raises:
    data.DatasetNotPreparedError: the data set is not prepared (names the
      `tfds build` command; nothing is downloaded).
    ValueError: `num_images` is not positive.
  """
  from vit_spectral.data import input_pipeline
  from vit_spectral.sections.input import input_settings

  if num_images <= 0:
    raise ValueError(f"num_images={num_images}; it must be positive")
  cfg = input_settings(cfg)
  # Analysis never downloads: an unprepared set fails at once with the
  # `tfds build` command (get_builder prepares the offline digits itself).
  cfg = dataclasses.replace(cfg, download=False, eval_split=split or cfg.eval_split)
  input_pipeline.get_builder(cfg.dataset, cfg.data_dir, False, download_setting=None)
  dataset, num_batches = input_pipeline.create_eval_dataset(cfg, process_index=0,
                                                            process_count=1)
  images, count = [], 0
  for batch in dataset.take(num_batches).as_numpy_iterator():
    images.append(batch["image"][batch["mask"]])        # padding rows dropped
    count += len(images[-1])
    if count >= num_images:
      break
  return np.concatenate(images)[:num_images]


def _with_channels(image: np.ndarray, channels: int) -> np.ndarray:
  """uint8 (H, W) or (H, W, C) -> (H, W, channels)."""
  if image.ndim == 2:
    image = image[..., None]
  if image.shape[-1] == 4:                        # RGBA: drop alpha
    image = image[..., :3]
  if image.shape[-1] == channels:
    return image
  if image.shape[-1] == 1:
    return np.repeat(image, channels, axis=-1)
  if channels == 1 and image.shape[-1] == 3:
    return np.round(image @ _LUMA)[..., None].astype(np.uint8)
  raise ValueError(f"an image with {image.shape[-1]} channels cannot feed a model of "
                   f"{channels} channels")


def folder_images(path: str, count: int) -> list[np.ndarray]:
  """The first `count` readable images of `path` (sorted by name, not
  recursive), as uint8 arrays.

  Raises:
    FileNotFoundError: `path` is not a directory, or nothing in it is a
      readable image (names what it tried).
  """
  from PIL import Image

  if not os.path.isdir(path):
    raise FileNotFoundError(f"--images={path} is not a directory")
  names = sorted(n for n in os.listdir(path) if n.lower().endswith(IMAGE_SUFFIXES))
  images, unreadable = [], []
  for name in names:
    try:
      with Image.open(os.path.join(path, name)) as image:
        images.append(np.asarray(image.convert("RGB" if image.mode not in ("L", "RGB")
                                               else image.mode)))
    except OSError:
      unreadable.append(name)
    if len(images) == count:
      break
  if not images:
    tried = (f"{len(names)} image files, none readable ({', '.join(unreadable[:3])})" if names
             else f"no file ending in {', '.join(IMAGE_SUFFIXES)}")
    raise FileNotFoundError(f"--images={path} has no readable image: {tried}")
  return images


def dataset_images(name: str, split: str, count: int, data_dir: str | None = None
                   ) -> tuple[list[np.ndarray], np.ndarray]:
  """The first `count` images of a prepared TFDS split (or the built-in
  "digits") as uint8 arrays, and their labels.

  Raises:
    data.DatasetNotPreparedError: the data set is not prepared (one line
      saying how to prepare it).
  """
  from vit_spectral.data import input_pipeline
  from vit_spectral.data.tensorflow_import import tfds

  builder = input_pipeline.get_builder(name, data_dir, False, download_setting=None)
  dataset = builder.as_dataset(split=split, shuffle_files=False)
  images, labels = [], []
  for example in tfds.as_numpy(dataset.take(count)):
    images.append(example["image"])
    labels.append(example.get("label", -1))
  if not images:
    raise ValueError(f"--dataset={name} split {split!r} has no images")
  return images, np.asarray(labels)
