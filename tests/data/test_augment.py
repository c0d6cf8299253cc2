"""RandAugment ops against PIL (what timm/DeiT run), random erasing, and the
pipeline's recipe options (repeated augmentation, train fraction, exact resume)."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
from PIL import Image, ImageEnhance, ImageOps  # noqa: E402

from tests.data.test_input_pipeline import digits_dir, make_cfg  # noqa: E402,F401
from vit_spectral import data  # noqa: E402
from vit_spectral.data import preprocessing  # noqa: E402
from vit_spectral.data import randaugment as ra  # noqa: E402

SIZE = 20
GREY = (128, 128, 128)


@pytest.fixture(scope="module")
def rgb():
  rng = np.random.default_rng(0)
  img = rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8)
  img[5:15, 5:15] = rng.integers(100, 140, (10, 10, 3))  # a low-contrast patch
  return img


def _ours(op, img, level, negate=False):
  x = tf.constant(img.astype(np.float32) / 255.0)
  out = op(x, tf.constant(level), tf.constant(negate), tf.constant([0.5] * 3))
  return np.round(out.numpy() * 255.0).astype(int)


def _max_diff(a, b):
  return int(np.abs(np.asarray(a, int) - np.asarray(b, int)).max())


def _pil_ops(level):
  """timm's op definitions at magnitude `level`, negate=False, through PIL."""
  factor = 1.0 + level / 10.0 * 0.9
  return {
      ra.invert: ImageOps.invert,
      ra.auto_contrast: ImageOps.autocontrast,
      ra.equalize: ImageOps.equalize,
      ra.posterize: lambda im: ImageOps.posterize(im, 4 - int(level / 10 * 4)),
      ra.solarize: lambda im: ImageOps.solarize(im, 256 - int(level / 10 * 256)),
      ra.color: lambda im: ImageEnhance.Color(im).enhance(factor),
      ra.contrast: lambda im: ImageEnhance.Contrast(im).enhance(factor),
      ra.brightness: lambda im: ImageEnhance.Brightness(im).enhance(factor),
      ra.sharpness: lambda im: ImageEnhance.Sharpness(im).enhance(factor),
  }


@pytest.mark.parametrize("level", [3.0, 7.0])
def test_intensity_ops_match_pil(rgb, level):
  pil = Image.fromarray(rgb)
  for op, reference in _pil_ops(level).items():
    # PIL rounds its blends in integer arithmetic: one level of slack.
    assert _max_diff(_ours(op, rgb, level), reference(pil)) <= 1, op.__name__


@pytest.mark.parametrize("level", [4.0, 9.0])  # PIL 13 rejects 0 bits
def test_default_op_set_matches_pil(rgb, level):
  """timm's default set: weaker as m grows for Posterize/Solarize, and the
  unsigned enhance factor 0.1 + 1.8 m / 10."""
  pil = Image.fromarray(rgb)
  ops = dict(zip(ra.OP_NAMES, ra.OP_SETS["default"]))
  factor = 0.1 + 1.8 * level / 10
  references = {
      "PosterizeIncreasing": ImageOps.posterize(pil, int(level / 10 * 4)),
      "SolarizeIncreasing": ImageOps.solarize(pil, int(level / 10 * 256)),
      "ColorIncreasing": ImageEnhance.Color(pil).enhance(factor),
      "ContrastIncreasing": ImageEnhance.Contrast(pil).enhance(factor),
      "BrightnessIncreasing": ImageEnhance.Brightness(pil).enhance(factor),
      "SharpnessIncreasing": ImageEnhance.Sharpness(pil).enhance(factor),
  }
  for name, reference in references.items():
    # The sign is not drawn in this set: negate must not matter.
    for negate in (False, True):
      assert _max_diff(_ours(ops[name], rgb, level, negate), reference) <= 1, name


def test_negated_enhance_uses_the_mirrored_factor(rgb):
  pil = Image.fromarray(rgb)
  factor = 1.0 - 0.7 * 0.9
  assert _max_diff(_ours(ra.contrast, rgb, 7.0, negate=True),
                   ImageEnhance.Contrast(pil).enhance(factor)) <= 1


def test_solarize_add_by_hand(rgb):
  add = int(7.0 / 10 * 110)
  expected = np.where(rgb < 128, np.minimum(rgb.astype(int) + add, 255), rgb)
  assert _max_diff(_ours(ra.solarize_add, rgb, 7.0), expected) == 0


def _pil_affine(pil, matrix):
  return pil.transform(pil.size, Image.AFFINE, matrix, resample=Image.BILINEAR,
                       fillcolor=GREY)


@pytest.mark.parametrize("name", ["shear_x", "shear_y", "translate_x",
                                  "translate_y", "rotate"])
def test_geometric_ops_match_pil_away_from_the_fill_edge(rgb, name):
  pil = Image.fromarray(rgb)
  level, s, t = 7.0, 0.7 * 0.3, 0.7 * 0.45 * SIZE
  reference = {
      "shear_x": lambda: _pil_affine(pil, (1, s, 0, 0, 1, 0)),
      "shear_y": lambda: _pil_affine(pil, (1, 0, 0, s, 1, 0)),
      "translate_x": lambda: _pil_affine(pil, (1, 0, t, 0, 1, 0)),
      "translate_y": lambda: _pil_affine(pil, (1, 0, 0, 0, 1, t)),
      "rotate": lambda: pil.rotate(0.7 * 30, resample=Image.BILINEAR, fillcolor=GREY),
  }[name]()
  ours = _ours(getattr(ra, name), rgb, level)
  ref = np.asarray(reference, int)
  bad = np.abs(ours - ref).max(-1) > 2
  # PIL and TF treat a sample straddling the image border differently (PIL
  # clamps, TF blends with the fill): only pixels next to PIL's fill may differ.
  fill = np.all(ref == GREY, axis=-1)
  near_fill = np.zeros_like(fill)
  for dy in (-1, 0, 1):
    for dx in (-1, 0, 1):
      near_fill |= np.roll(np.roll(fill, dy, 0), dx, 1)
  assert not np.any(bad & ~near_fill), name
  assert bad.mean() < 0.1


@pytest.mark.parametrize("channels", [1, 3])
def test_every_op_keeps_shape_dtype_and_range(channels):
  rng = np.random.default_rng(channels)
  image = tf.constant(rng.uniform(size=(8, 8, channels)).astype(np.float32))
  fill = tf.constant([0.5] * channels)
  for index, name in enumerate(ra.OP_NAMES):
    for negate in (False, True):
      out = ra.apply_op(image, tf.constant(index), tf.constant(9.0),
                        tf.constant(negate), fill)
      assert out.shape == image.shape and out.dtype == tf.float32, name
      assert 0.0 <= float(tf.reduce_min(out)) and float(tf.reduce_max(out)) <= 1.0


def test_randaugment_is_a_function_of_the_seed():
  rng = np.random.default_rng(1)
  image = tf.constant(rng.uniform(size=(8, 8, 3)).astype(np.float32))
  fn = tf.function(lambda s: ra.randaugment(image, s, num_layers=2, magnitude=9.0,
                                            magnitude_std=0.5, op_set="default"))
  outs = [fn(tf.constant([seed, 0], tf.int64)).numpy() for seed in range(6)]
  np.testing.assert_array_equal(outs[0], fn(tf.constant([0, 0], tf.int64)).numpy())
  assert len({o.tobytes() for o in outs}) > 1
  # No layers: the identity.
  same = ra.randaugment(image, tf.constant([3, 0], tf.int64), num_layers=0)
  np.testing.assert_array_equal(same, image)
  with pytest.raises(ValueError, match="randaugment_magnitude"):
    ra.randaugment(image, tf.constant([3, 0], tf.int64), magnitude=11.0)
  with pytest.raises(ValueError, match="randaugment_ops"):
    ra.randaugment(image, tf.constant([3, 0], tf.int64), op_set="fancy")


def test_random_erasing():
  rng = np.random.default_rng(2)
  image = tf.constant(rng.uniform(1.0, 2.0, size=(32, 32, 3)).astype(np.float32))
  for seed in range(5):
    key = tf.constant([seed, 1], tf.int64)
    out = preprocessing.random_erasing(image, 1.0, key).numpy()
    np.testing.assert_array_equal(
        out, preprocessing.random_erasing(image, 1.0, key).numpy())
    erased = np.any(out != image.numpy(), axis=-1)
    rows, cols = np.where(erased)
    box = erased[rows.min():rows.max() + 1, cols.min():cols.max() + 1]
    # One rectangle (noise equal to the old value is measure-zero)...
    assert box.all()
    # ... of area within the sampled range (h, w rounded separately).
    h, w = box.shape
    assert 0.02 * 0.7 <= h * w / 32**2 <= 1 / 3 * 1.3
    assert 0.3 / 1.6 <= h / w <= 1 / 0.3 * 1.6
    assert out.shape == image.shape and out.dtype == np.float32
  unchanged = preprocessing.random_erasing(image, 0.0, tf.constant([0, 1], tf.int64))
  np.testing.assert_array_equal(unchanged, image)
  with pytest.raises(ValueError, match="random_erasing"):
    preprocessing.random_erasing(image, 1.5, tf.constant([0, 1], tf.int64))


def _take(cfg, start_step, n):
  ds = data.create_train_dataset(cfg, seed=3, start_step=start_step,
                                 process_index=0, process_count=1)
  return [b for _, b in zip(range(n), ds.as_numpy_iterator())]


def test_recipe_stream_resumes_exactly(digits_dir):  # noqa: F811
  """RandAugment + erasing + repeated augmentation: resuming at step k gives
  the uninterrupted stream's batches from k on, across an epoch boundary."""
  cfg = make_cfg(data_dir=digits_dir, batch_size=100, randaugment_layers=2,
                 random_erasing=0.5, repeated_augment=3, train_fraction=0.1)
  # 144 records x 3 copies = 432 examples per epoch: step 4 starts inside
  # epoch 0, step 5 straddles the boundary, step 6 starts inside epoch 1.
  full = _take(cfg, 0, 8)
  for k in (4, 6):
    resumed = _take(cfg, k, 8 - k)
    for a, b in zip(full[k:], resumed):
      np.testing.assert_array_equal(a["image"], b["image"])
      np.testing.assert_array_equal(a["label"], b["label"])


def test_repeated_augment_and_fraction(digits_dir):  # noqa: F811
  plain = dict(data_dir=digits_dir, train_augment="none", flip=False,
               batch_size=48, train_fraction=0.1)
  meta = data.dataset_meta(make_cfg(**plain))
  assert meta.num_train_examples == round(0.1 * 1437)
  batches = _take(make_cfg(**plain, repeated_augment=3), 0, 9)  # 432 = 3 x 144
  images = np.concatenate([b["image"] for b in batches])
  triples = images.reshape(144, 3, -1)
  np.testing.assert_array_equal(triples[:, 0], triples[:, 1])
  np.testing.assert_array_equal(triples[:, 0], triples[:, 2])
  # One epoch covers exactly the first 144 training records, once each.
  builder = data.get_builder("digits", data_dir=digits_dir)
  first = builder.as_dataset(split="train[:144]")
  expected = sorted(
      ((ex["image"].numpy().astype(np.float32) / 255.0 - 0.5) / 0.25).tobytes()
      for ex in first)
  assert sorted(t.tobytes() for t in triples[:, 0]) == expected
  # Augmented copies differ from each other.
  aug = _take(make_cfg(**dict(plain, train_augment="pad_crop"), repeated_augment=3,
                       randaugment_layers=2), 0, 1)[0]["image"]
  assert not all(np.array_equal(aug[i], aug[i + 1]) for i in range(0, 45, 3))
  with pytest.raises(ValueError, match="train_fraction"):
    data.dataset_meta(make_cfg(data_dir=digits_dir, train_fraction=0.0))
  with pytest.raises(ValueError, match="repeated_augment"):
    _take(make_cfg(data_dir=digits_dir, repeated_augment=0), 0, 1)
