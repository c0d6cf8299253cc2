"""Per-example image ops for the input pipeline (TensorFlow, graph-safe).

Every op takes a single image (H, W, C) and, where it is random, an explicit
stateless seed: an int32/int64 tensor of shape (2,). Nothing here touches TF's
global or op-level random state, so the same seed always gives the same
output, independent of thread scheduling, which is what makes the training
stream bit-for-bit reproducible and resumable.

All resizes are antialiased, so that downscaling (e.g. ImageNet to 224) does
not alias; training resizes are bilinear, evaluation resizes bilinear by
default (the kernel training used) or bicubic (`input.eval_resize_method`:
timm evaluates pretrained models with PIL's bicubic, clipped to the uint8
range).
"""

from __future__ import annotations

import math
from typing import Sequence

from vit_spectral.data.tensorflow_import import tf

# Inception-style random-resized-crop defaults (Szegedy et al., 2015).
RRC_SCALE = (0.08, 1.0)
RRC_RATIO = (3.0 / 4.0, 4.0 / 3.0)
# How many boxes to sample before falling back to the full image; the value
# used by the Inception/ResNet reference pipelines.
RRC_MAX_ATTEMPTS = 10


def to_float(image: tf.Tensor) -> tf.Tensor:
  """Maps uint8 [0, 255] to float32 [0, 1].

  Args:
    image: uint8 (H, W, C).

  Returns:
    float32 (H, W, C) in [0, 1].
  """
  if image.dtype != tf.uint8:
    raise TypeError(f"to_float expects a uint8 image, got {image.dtype}.")
  return tf.cast(image, tf.float32) / 255.0


def pad_crop(image: tf.Tensor, padding: int, seed: tf.Tensor) -> tf.Tensor:
  """Zero-pads by `padding` pixels per side, random-crops back (CIFAR style).

  Args:
    image: float32 (H, W, C), in [0, 1] (padding with 0 means black).
    padding: pixels added on each of the four sides; 0 makes this a no-op.
    seed: int (2,) stateless seed.

  Returns:
    float32 (H, W, C), a translation of the input by up to `padding` pixels.
  """
  if padding < 0:
    raise ValueError(f"pad_crop padding must be >= 0, got {padding}.")
  shape = tf.shape(image)
  padded = tf.pad(image, [[padding, padding], [padding, padding], [0, 0]])
  return tf.image.stateless_random_crop(padded, size=shape, seed=seed)


def random_resized_crop(
    image: tf.Tensor,
    size: int,
    seed: tf.Tensor,
    scale: Sequence[float] = RRC_SCALE,
    ratio: Sequence[float] = RRC_RATIO,
) -> tf.Tensor:
  """Inception-style crop: random area fraction and aspect ratio, then resize.

  Samples a box covering `scale` of the image area with width/height in
  `ratio`. If no such box is found within RRC_MAX_ATTEMPTS tries (rare; only
  for extreme aspect ratios), TF's sampler returns the whole image, as in the
  reference Inception pipeline.

  Args:
    image: float32 (H, W, C), any H, W.
    size: output height and width.
    seed: int (2,) stateless seed.
    scale: (min, max) fraction of the image area covered by the crop.
    ratio: (min, max) aspect ratio width / height of the crop.

  Returns:
    float32 (size, size, C).
  """
  begin, crop_size, _ = tf.image.stateless_sample_distorted_bounding_box(
      tf.shape(image),
      # No object boxes: with use_image_if_no_bounding_boxes the whole image
      # is the object, and min_object_covered=0 leaves `scale` in control.
      bounding_boxes=tf.zeros([1, 0, 4], tf.float32),
      seed=seed,
      min_object_covered=0.0,
      aspect_ratio_range=tuple(ratio),
      area_range=tuple(scale),
      max_attempts=RRC_MAX_ATTEMPTS,
      use_image_if_no_bounding_boxes=True,
  )
  crop = tf.slice(image, begin, crop_size)
  return resize(crop, size)


def random_flip(image: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
  """Flips left-right with probability 1/2.

  Args:
    image: (H, W, C).
    seed: int (2,) stateless seed.

  Returns:
    (H, W, C), same dtype.
  """
  return tf.image.stateless_random_flip_left_right(image, seed=seed)


from vit_spectral.sections.augment import RESIZE_METHODS  # noqa: E402,F401  (re-exported)


def _resize_to(image: tf.Tensor, shape, method: str) -> tf.Tensor:
  """Antialiased resize of float32 (H, W, C) in [0, 1] to `shape` (h, w) with
  `method` (RESIZE_METHODS); bicubic overshoots, so its output is clipped to
  [0, 1] (as PIL clips a uint8 image's)."""
  if method not in RESIZE_METHODS:
    raise ValueError(f"resize method={method!r}; choose one of "
                     f"{list(RESIZE_METHODS)}")
  resized = tf.cast(tf.image.resize(image, shape, method=method, antialias=True),
                    tf.float32)
  if method == "bicubic":
    resized = tf.clip_by_value(resized, 0.0, 1.0)
  return resized


def resize(image: tf.Tensor, size: int, method: str = "bilinear") -> tf.Tensor:
  """Resizes to (size, size), ignoring the aspect ratio.

  Args:
    image: float32 (H, W, C) in [0, 1].
    size: output height and width.
    method: one of RESIZE_METHODS (antialiased; bicubic clipped to [0, 1]).

  Returns:
    float32 (size, size, C).
  """
  return _resize_to(image, (size, size), method)


def resize_center_crop(
    image: tf.Tensor, size: int, crop_fraction: float, method: str = "bilinear"
) -> tf.Tensor:
  """Resizes the shorter side to round(size / crop_fraction), centre-crops.

  E.g. size=224, crop_fraction=0.875: shorter side to 256, then the central
  224x224 (the standard ImageNet eval transform).

  Args:
    image: float32 (H, W, C), any H, W.
    size: output height and width.
    crop_fraction: in (0, 1]; the fraction of the resized shorter side kept.
    method: one of RESIZE_METHODS (as `resize`).

  Returns:
    float32 (size, size, C).
  """
  if not 0.0 < crop_fraction <= 1.0:
    raise ValueError(
        f"input.crop_fraction must be in (0, 1], got {crop_fraction}."
    )
  short_target = int(round(size / crop_fraction))
  shape = tf.shape(image)
  height = tf.cast(shape[0], tf.float64)
  width = tf.cast(shape[1], tf.float64)
  factor = short_target / tf.minimum(height, width)
  # max(.., size) guards against rounding the longer side below the crop.
  new_h = tf.maximum(tf.cast(tf.round(height * factor), tf.int32), size)
  new_w = tf.maximum(tf.cast(tf.round(width * factor), tf.int32), size)
  resized = _resize_to(image, tf.stack([new_h, new_w]), method)
  top = (new_h - size) // 2
  left = (new_w - size) // 2
  return tf.image.crop_to_bounding_box(resized, top, left, size, size)


def normalize(
    image: tf.Tensor, mean: Sequence[float], std: Sequence[float]
) -> tf.Tensor:
  """Per-channel (image - mean) / std.

  Args:
    image: float32 (H, W, C) in [0, 1].
    mean: C values, in [0, 1] units.
    std: C positive values, in [0, 1] units.

  Returns:
    float32 (H, W, C).
  """
  mean_t = tf.constant(mean, tf.float32)
  std_t = tf.constant(std, tf.float32)
  return (image - mean_t) / std_t


# Random erasing defaults (Zhong et al., 2020, as timm's RandomErasing, which
# DeiT uses with probability 0.25, mode "pixel", one box).
ERASE_AREA = (0.02, 1.0 / 3.0)
ERASE_ASPECT = (0.3, 1.0 / 0.3)
ERASE_MAX_ATTEMPTS = 10


def random_erasing(
    image: tf.Tensor,
    probability: float,
    seed: tf.Tensor,
    area: Sequence[float] = ERASE_AREA,
    aspect: Sequence[float] = ERASE_ASPECT,
) -> tf.Tensor:
  """With `probability`, replaces one random box by N(0, 1) noise per pixel.

  timm's RandomErasing(mode="pixel", max_count=1), applied after
  normalisation (so the noise has the data's normalised scale): up to
  ERASE_MAX_ATTEMPTS boxes are drawn with area fraction ~ U(area) and log
  aspect ratio ~ U(log aspect), h = round(sqrt(A·r)), w = round(sqrt(A/r));
  the first that fits strictly inside the image (h < H, w < W) is erased at a
  uniform position. If none fits, the image is unchanged.

  Args:
    image: float32 (H, W, C), normalised.
    probability: chance of erasing, in [0, 1].
    seed: int (2,) stateless seed.
    area: (min, max) fraction of the image area.
    aspect: (min, max) height / width of the box.

  Returns:
    float32 (H, W, C).
  """
  if not 0.0 <= probability <= 1.0:
    raise ValueError(
        f"config.input.random_erasing={probability} must be in [0, 1].")
  shape = tf.shape(image)
  height, width = shape[0], shape[1]
  h_f, w_f = tf.cast(height, tf.float32), tf.cast(width, tf.float32)
  s_apply, s_area, s_aspect, s_top, s_left, s_noise = tf.unstack(
      tf.random.experimental.stateless_split(seed, 6))
  n = ERASE_MAX_ATTEMPTS
  target = tf.random.stateless_uniform([n], s_area, area[0], area[1]) * h_f * w_f
  ratio = tf.exp(tf.random.stateless_uniform(
      [n], s_aspect, math.log(aspect[0]), math.log(aspect[1])))
  box_h = tf.cast(tf.round(tf.sqrt(target * ratio)), tf.int32)
  box_w = tf.cast(tf.round(tf.sqrt(target / ratio)), tf.int32)
  fits = (box_h < height) & (box_w < width)
  first = tf.argmax(tf.cast(fits, tf.int32), output_type=tf.int32)
  box_h, box_w = box_h[first], box_w[first]
  # Uniform integer positions in [0, H - h] and [0, W - w].
  top = tf.random.stateless_uniform(
      [], s_top, 0, tf.maximum(height - box_h + 1, 1), tf.int32)
  left = tf.random.stateless_uniform(
      [], s_left, 0, tf.maximum(width - box_w + 1, 1), tf.int32)
  rows = tf.range(height)[:, None]
  cols = tf.range(width)[None, :]
  inside = ((rows >= top) & (rows < top + box_h) &
            (cols >= left) & (cols < left + box_w))
  erase = (tf.random.stateless_uniform([], s_apply) < probability) & fits[first]
  noise = tf.random.stateless_normal(shape, s_noise, dtype=image.dtype)
  return tf.where(erase & inside[:, :, None], noise, image)
