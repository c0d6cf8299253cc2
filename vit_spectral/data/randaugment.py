"""RandAugment (Cubuk et al., 2019) as DeiT uses it: timm's "rand-m9-mstd0.5-inc1"
(and timm's default op set, `op_set="default"`, as Park & Kim / paper 003 use).

Per image, `num_layers` ops are drawn uniformly (with replacement) from the 15
"increasing" ops below; each is applied with probability 1/2 at magnitude
m ~ N(magnitude, magnitude_std²) clipped to [0, 10] (drawn anew per op). The
papers' "(9, 0.5)" (004 Table 10) is magnitude 9, magnitude_std 0.5; DeiT's
`rand-m9-mstd0.5-inc1` uses 2 layers. Magnitude m maps to (timm's
`_LEVEL_DENOM` = 10):

  Rotate                 ±30·m/10 degrees
  ShearX/Y               ±0.3·m/10
  TranslateXRel/YRel     ±0.45·m/10 of the image side
  Posterize              keep 4 − int(4·m/10) bits
  Solarize               invert pixels ≥ 256 − int(256·m/10)
  SolarizeAdd            add int(110·m/10) to pixels < 128
  Color/Contrast/
  Brightness/Sharpness   blend factor 1 ± 0.9·m/10
  AutoContrast, Equalize, Invert   (no magnitude)

Signs are random (1/2 each). Geometric ops fill with `fill` (DeiT: the
data set's mean colour) and sample bilinearly.

Why written here rather than imported. `tf-models-official`'s
`official.vision.ops.augment.RandAugment` is a correct, well-kept tf.data
implementation, but (1) it draws with stateful `tf.random.uniform`, so the
ops cannot take our per-example stateless seeds and a resumed run would see
different augmentations, and (2) the package pins its own TensorFlow and pulls
in tens of dependencies (tf-text, opencv, pycocotools, ...), minutes of extra
install on a fresh CI machine and a TF version clash with ours.
keras-cv's RandAugment is a Keras 3 layer drawing from a seed-generator per
batch, also not per-example stateless. So the ops are written here with
stateless seeds, following timm's definitions (the ones DeiT trained with).

Every op maps a float32 (H, W, C) image in [0, 1] (C = 1 or 3) to the same
shape and range; intensity ops quantise to the 256 levels PIL works on.
"""

from __future__ import annotations

import math
from typing import Sequence

from vit_spectral.data.tensorflow_import import tf

# The names, defaults and checks (without TensorFlow, for the command line).
from vit_spectral.sections.augment import (  # noqa: E402,F401  (re-exported)
    MAGNITUDE, MAGNITUDE_STD, MAX_LEVEL, NUM_LAYERS, OP_NAMES, OP_SET, OP_SET_NAMES,
    check_randaugment)


# ---------------------------------------------------------------------------
# Helpers.
# ---------------------------------------------------------------------------


def _levels(image: tf.Tensor) -> tf.Tensor:
  """[0, 1] float -> the 256 integer levels, as float32 in [0, 255]."""
  return tf.round(tf.clip_by_value(image, 0.0, 1.0) * 255.0)


def _grayscale(image: tf.Tensor) -> tf.Tensor:
  """(H, W, C) -> (H, W, 1) luminance (ITU-R 601-2, as PIL's "L")."""
  if image.shape[-1] == 1:
    return image
  return tf.image.rgb_to_grayscale(image)


def _blend(degenerate: tf.Tensor, image: tf.Tensor, factor) -> tf.Tensor:
  """PIL ImageEnhance: degenerate + factor (image - degenerate), clipped."""
  return tf.clip_by_value(degenerate + factor * (image - degenerate), 0.0, 1.0)


def _affine(image: tf.Tensor, matrix: tf.Tensor, fill: tf.Tensor) -> tf.Tensor:
  """Samples image at A·(x, y, 1) for each output pixel (x, y), bilinearly.

  Args:
    image: float32 (H, W, C).
    matrix: float32 (6,) = (a0, a1, a2, b0, b1, b2): input x = a0 x + a1 y + a2,
      input y = b0 x + b1 y + b2 (PIL's `Image.transform(AFFINE)` convention).
    fill: float32 (C,), the colour outside the image.
  """
  transform = tf.concat([matrix, tf.zeros([2], tf.float32)], 0)[None]
  channels = []
  # ImageProjectiveTransformV3 fills with one scalar: transform per channel.
  for c in range(image.shape[-1]):
    out = tf.raw_ops.ImageProjectiveTransformV3(
        images=image[None, :, :, c:c + 1], transforms=transform,
        output_shape=tf.shape(image)[:2], fill_value=fill[c],
        interpolation="BILINEAR", fill_mode="CONSTANT")
    channels.append(out[0])
  return tf.concat(channels, -1)


def _signed(value: tf.Tensor, negate: tf.Tensor) -> tf.Tensor:
  return tf.where(negate, -value, value)


# ---------------------------------------------------------------------------
# The ops: op(image, level in [0, 10], negate: bool, fill) -> image.
# ---------------------------------------------------------------------------


def auto_contrast(image, level, negate, fill):
  del level, negate, fill
  lo = tf.reduce_min(_levels(image), axis=(0, 1))
  hi = tf.reduce_max(_levels(image), axis=(0, 1))
  scale = tf.where(hi > lo, 255.0 / tf.maximum(hi - lo, 1.0), 1.0)
  offset = tf.where(hi > lo, lo, 0.0)
  return tf.clip_by_value((_levels(image) - offset) * scale, 0.0, 255.0) / 255.0


def _equalize_channel(levels: tf.Tensor) -> tf.Tensor:
  """PIL's ImageOps.equalize on one (H, W) channel of integer levels."""
  values = tf.cast(levels, tf.int32)
  hist = tf.math.bincount(tf.reshape(values, [-1]), minlength=256, maxlength=256)
  nonzero = tf.boolean_mask(hist, hist > 0)
  step = (tf.reduce_sum(nonzero) - nonzero[-1]) // 255
  lut = (tf.cumsum(hist) + step // 2) // tf.maximum(step, 1)
  lut = tf.clip_by_value(tf.concat([[0], lut[:-1]], 0), 0, 255)
  equalized = tf.cast(tf.gather(lut, values), tf.float32)
  return tf.where(step > 0, equalized, levels)


def equalize(image, level, negate, fill):
  del level, negate, fill
  levels = _levels(image)
  channels = [_equalize_channel(levels[:, :, c]) for c in range(image.shape[-1])]
  return tf.stack(channels, -1) / 255.0


def invert(image, level, negate, fill):
  del level, negate, fill
  return 1.0 - image


def rotate(image, level, negate, fill):
  degrees = _signed(level / MAX_LEVEL * 30.0, negate)
  theta = degrees * (math.pi / 180.0)
  height = tf.cast(tf.shape(image)[0], tf.float32)
  width = tf.cast(tf.shape(image)[1], tf.float32)
  cx, cy = (width - 1.0) / 2.0, (height - 1.0) / 2.0
  cos, sin = tf.cos(theta), tf.sin(theta)
  # Output pixel p samples input x_in = cos·(x - cx)
  # - sin·(y - cy) + cx, y_in = sin·(x - cx) + cos·(y - cy) + cy: PIL's
  # `rotate(degrees)` (counter-clockwise on screen), centre at the image
  # centre ((W - 1) / 2 in index coordinates = W / 2 in PIL's).
  matrix = tf.stack([cos, -sin, cx - cos * cx + sin * cy,
                     sin, cos, cy - sin * cx - cos * cy])
  return _affine(image, matrix, fill)


def posterize(image, level, negate, fill):
  del negate, fill
  bits = 4 - tf.cast(level / MAX_LEVEL * 4.0, tf.int32)
  shift = tf.cast(8 - tf.clip_by_value(bits, 0, 8), tf.float32)
  bucket = tf.pow(2.0, shift)
  return tf.floor(_levels(image) / bucket) * bucket / 255.0


def solarize(image, level, negate, fill):
  del negate, fill
  threshold = 256.0 - tf.floor(level / MAX_LEVEL * 256.0)
  levels = _levels(image)
  return tf.where(levels >= threshold, 255.0 - levels, levels) / 255.0


def solarize_add(image, level, negate, fill):
  del negate, fill
  addition = tf.floor(level / MAX_LEVEL * 110.0)
  levels = _levels(image)
  added = tf.minimum(levels + addition, 255.0)
  return tf.where(levels < 128.0, added, levels) / 255.0


def _factor(level, negate):
  return 1.0 + _signed(level / MAX_LEVEL * 0.9, negate)


def color(image, level, negate, fill):
  del fill
  return _blend(_grayscale(image), image, _factor(level, negate))


def contrast(image, level, negate, fill):
  del fill
  mean = tf.reduce_mean(_levels(_grayscale(image))) / 255.0
  return _blend(tf.fill(tf.shape(image), mean), image, _factor(level, negate))


def brightness(image, level, negate, fill):
  del fill
  return _blend(tf.zeros_like(image), image, _factor(level, negate))


def sharpness(image, level, negate, fill):
  del fill
  # PIL's SMOOTH filter (1 1 1 / 1 5 1 / 1 1 1) / 13 on the interior; the
  # one-pixel border keeps the original values, as in PIL.
  kernel = tf.constant([[1., 1., 1.], [1., 5., 1.], [1., 1., 1.]]) / 13.0
  channels = image.shape[-1]
  kernel = tf.tile(kernel[:, :, None, None], [1, 1, channels, 1])
  smooth = tf.nn.depthwise_conv2d(image[None], kernel, [1, 1, 1, 1], "VALID")[0]
  smooth = tf.round(tf.clip_by_value(smooth, 0.0, 1.0) * 255.0) / 255.0
  degenerate = tf.pad(smooth - image[1:-1, 1:-1], [[1, 1], [1, 1], [0, 0]]) + image
  return _blend(degenerate, image, _factor(level, negate))


# PIL applies the affine map to pixel centres (x + 1/2, y + 1/2); in index
# coordinates a shear x' = x + s y therefore gains an offset s/2.


def shear_x(image, level, negate, fill):
  s = _signed(level / MAX_LEVEL * 0.3, negate)
  return _affine(image, tf.stack([1.0, s, s / 2.0, 0.0, 1.0, 0.0]), fill)


def shear_y(image, level, negate, fill):
  s = _signed(level / MAX_LEVEL * 0.3, negate)
  return _affine(image, tf.stack([1.0, 0.0, 0.0, s, 1.0, s / 2.0]), fill)


def translate_x(image, level, negate, fill):
  width = tf.cast(tf.shape(image)[1], tf.float32)
  t = _signed(level / MAX_LEVEL * 0.45, negate) * width
  return _affine(image, tf.stack([1.0, 0.0, t, 0.0, 1.0, 0.0]), fill)


def translate_y(image, level, negate, fill):
  height = tf.cast(tf.shape(image)[0], tf.float32)
  t = _signed(level / MAX_LEVEL * 0.45, negate) * height
  return _affine(image, tf.stack([1.0, 0.0, 0.0, 0.0, 1.0, t]), fill)


# timm's default ("rand-m9-n2-mstd0.5", no "inc1") set differs in five
# magnitude mappings: Posterize keeps int(4·m/10) bits, Solarize inverts pixels
# >= int(256·m/10) (both weaker as m grows), and the enhance ops use the
# unsigned factor 0.1 + 1.8·m/10.


def posterize_original(image, level, negate, fill):
  del negate, fill
  bits = tf.cast(level / MAX_LEVEL * 4.0, tf.int32)
  shift = tf.cast(8 - tf.clip_by_value(bits, 0, 8), tf.float32)
  bucket = tf.pow(2.0, shift)
  return tf.floor(_levels(image) / bucket) * bucket / 255.0


def solarize_original(image, level, negate, fill):
  del negate, fill
  threshold = tf.floor(level / MAX_LEVEL * 256.0)
  levels = _levels(image)
  return tf.where(levels >= threshold, 255.0 - levels, levels) / 255.0


def _unsigned_enhance(op):
  """`op` with factor 0.1 + 1.8·m/10: the (level, sign) whose `_factor` is it."""

  def original(image, level, negate, fill):
    del negate
    factor = 0.1 + 1.8 * level / MAX_LEVEL
    return op(image, tf.abs(factor - 1.0) / 0.09, factor < 1.0, fill)

  original.__name__ = f"{op.__name__}_original"
  return original


OP_SETS = {
    "increasing": (auto_contrast, equalize, invert, rotate, posterize, solarize,
                   solarize_add, color, contrast, brightness, sharpness, shear_x,
                   shear_y, translate_x, translate_y),
    "default": (auto_contrast, equalize, invert, rotate, posterize_original,
                solarize_original, solarize_add, _unsigned_enhance(color),
                _unsigned_enhance(contrast), _unsigned_enhance(brightness),
                _unsigned_enhance(sharpness), shear_x, shear_y, translate_x,
                translate_y),
}
assert all(len(ops) == len(OP_NAMES) for ops in OP_SETS.values())
assert tuple(OP_SETS) == OP_SET_NAMES


def apply_op(image: tf.Tensor, index, level, negate, fill,
             op_set: str = OP_SET) -> tf.Tensor:
  """Applies op number `index` (see OP_NAMES) of `op_set` with a traced index."""
  branches = [
      (lambda op=op: tf.ensure_shape(op(image, level, negate, fill), image.shape))
      for op in OP_SETS[op_set]
  ]
  return tf.switch_case(tf.cast(index, tf.int32), branches)


def check_settings(num_layers: int, magnitude: float, magnitude_std: float,
                   op_set: str = OP_SET) -> None:
  """Raises ValueError naming the bad `config.input.randaugment_*` field
  (`sections.augment.check_randaugment`)."""
  check_randaugment(num_layers, magnitude, magnitude_std, op_set)


def randaugment(image: tf.Tensor, seed: tf.Tensor, *, num_layers: int = NUM_LAYERS,
                magnitude: float = MAGNITUDE, magnitude_std: float = MAGNITUDE_STD,
                fill: Sequence[float] | None = None,
                apply_prob: float = 0.5, op_set: str = OP_SET) -> tf.Tensor:
  """RandAugment with a stateless seed (see the module docstring).

  Args:
    image: float32 (H, W, C) in [0, 1], C = 1 or 3, static shape.
    seed: int (2,) stateless seed; the same seed gives the same output.
    num_layers: ops applied in sequence (N).
    magnitude: M in [0, 10].
    magnitude_std: std of the Gaussian noise on M (0 = fixed M).
    fill: C values in [0, 1] for pixels that geometric ops bring in from
      outside the image (default: 0.5 grey).
    apply_prob: probability that each drawn op is applied (timm: 0.5).
    op_set: "increasing" (timm's "inc1", DeiT) or "default" (timm without
      "inc1", e.g. Park & Kim's rand-m9-n2-mstd0.5).

  Returns:
    float32 (H, W, C) in [0, 1].
  """
  check_settings(num_layers, magnitude, magnitude_std, op_set)
  channels = image.shape[-1]
  fill_t = tf.constant(fill if fill is not None else (0.5,) * channels, tf.float32)
  if fill_t.shape[0] != channels:
    raise ValueError(f"randaugment fill has {fill_t.shape[0]} values for "
                     f"{channels} channels")
  layer_seeds = tf.random.experimental.stateless_split(seed, max(num_layers, 1))
  for i in range(num_layers):
    op_seed, apply_seed, level_seed, sign_seed = tf.unstack(
        tf.random.experimental.stateless_split(layer_seeds[i], 4))
    index = tf.random.stateless_uniform([], op_seed, 0, len(OP_NAMES), tf.int32)
    level = magnitude + magnitude_std * tf.random.stateless_normal([], level_seed)
    level = tf.clip_by_value(level, 0.0, MAX_LEVEL)
    negate = tf.random.stateless_uniform([], sign_seed) < 0.5
    applied = tf.random.stateless_uniform([], apply_seed) < apply_prob
    image = tf.cond(applied,
                    lambda: apply_op(image, index, level, negate, fill_t, op_set),
                    lambda: image)
  return image
