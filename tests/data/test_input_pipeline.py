"""Tests for the digits builder, preprocessing ops and the input pipeline."""

import collections
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import ml_collections  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_datasets as tfds  # noqa: E402
from sklearn import datasets as sk_datasets  # noqa: E402
from sklearn import model_selection  # noqa: E402

from vit_spectral import data  # noqa: E402
from vit_spectral.data import preprocessing  # noqa: E402

NUM_TRAIN, NUM_TEST = 1437, 360


def make_cfg(**overrides) -> ml_collections.ConfigDict:
  cfg = ml_collections.ConfigDict(dict(
      dataset="digits",
      data_dir=None,
      download=False,
      train_split="train",
      eval_split="test",
      image_size=8,
      batch_size=64,
      eval_batch_size=48,
      shuffle_buffer=2000,
      train_augment="pad_crop",
      pad_crop_padding=1,
      flip=True,
      eval_resize="none",
      crop_fraction=0.875,
      mean=(0.5,),
      std=(0.25,),
  ))
  cfg.update(overrides)
  return cfg


@pytest.fixture(scope="session")
def digits_dir(tmp_path_factory):
  data_dir = str(tmp_path_factory.mktemp("tfds"))
  data.get_builder("digits", data_dir=data_dir)  # Prepares it once, offline.
  return data_dir


@pytest.fixture(scope="session")
def sklearn_digits():
  digits = sk_datasets.load_digits()
  # Independent of the builder's code: round-half-to-even, float32 maths.
  images = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
  return images[..., None], digits.target


def take(ds, n):
  return [batch for _, batch in zip(range(n), ds.as_numpy_iterator())]


def assert_streams_equal(a, b):
  assert len(a) == len(b)
  for x, y in zip(a, b):
    assert x.keys() == y.keys()
    for key in x:
      np.testing.assert_array_equal(x[key], y[key])


def example_key(image, label):
  return (np.asarray(image).tobytes(), int(label))


# ---------------------------------------------------------------------------
# digits builder.
# ---------------------------------------------------------------------------


def test_digits_builder_offline(digits_dir, sklearn_digits):
  builder = data.get_builder("digits", data_dir=digits_dir)
  assert builder.name == "digits"
  assert str(builder.version) == "1.0.0"
  assert builder.info.splits["train"].num_examples == NUM_TRAIN
  assert builder.info.splits["test"].num_examples == NUM_TEST
  assert builder.info.features["label"].num_classes == 10
  assert builder.info.features["image"].shape == (8, 8, 1)

  sk_images, sk_labels = sklearn_digits
  splits = {}
  for split in ("train", "test"):
    examples = list(tfds.as_numpy(builder.as_dataset(split=split)))
    for ex in examples:
      assert ex["image"].shape == (8, 8, 1) and ex["image"].dtype == np.uint8
    splits[split] = collections.Counter(
        example_key(ex["image"], ex["label"]) for ex in examples)

  # Together the splits are exactly sklearn's 1797 images, rescaled.
  everything = splits["train"] + splits["test"]
  assert sum(everything.values()) == 1797
  assert everything == collections.Counter(
      example_key(im, lab) for im, lab in zip(sk_images, sk_labels))

  # The test split is the documented stratified split (seed 0, 20%).
  _, test_idx = model_selection.train_test_split(
      np.arange(len(sk_labels)), test_size=0.2, random_state=0,
      stratify=sk_labels)
  assert splits["test"] == collections.Counter(
      example_key(sk_images[i], sk_labels[i]) for i in test_idx)
  test_labels = collections.Counter()
  for (_, label), n in splits["test"].items():
    test_labels[label] += n
  assert [test_labels[c] for c in range(10)] == [
      36, 36, 35, 37, 36, 37, 36, 36, 35, 36]


def test_digits_pixel_values_spot_check(digits_dir, sklearn_digits):
  sk_images, sk_labels = sklearn_digits
  builder = data.get_builder("digits", data_dir=digits_dir)
  by_image = {im.tobytes(): i for i, im in enumerate(sk_images)}
  examples = list(tfds.as_numpy(builder.as_dataset(split="test").take(5)))
  for ex in examples:
    i = by_image[ex["image"].tobytes()]
    assert ex["label"] == sk_labels[i]
    # An explicit value check on top of the byte match.
    expected = np.round(sk_datasets.load_digits().images[i] * 255 / 16)
    np.testing.assert_array_equal(ex["image"][..., 0], expected)
  assert 255 in sk_images and 0 in sk_images


def test_digits_parity_is_digits_mod_2(digits_dir):
  """Same images, splits and keys as `digits`; label = digit % 2, 2 classes."""
  parity = data.get_builder("digits_parity", data_dir=digits_dir)
  digits = data.get_builder("digits", data_dir=digits_dir)
  assert parity.info.features["label"].names == ["even", "odd"]
  for split in ("train", "test"):
    read = lambda b: {ex["tfds_id"]: ex for ex in tfds.as_numpy(b.as_dataset(  # noqa: E731
        split=split, read_config=tfds.ReadConfig(add_tfds_id=True)))}
    a, b = read(digits), read(parity)
    assert len(a) == len(b) == {"train": NUM_TRAIN, "test": NUM_TEST}[split]
    for key, ex in a.items():
      other = b[key.replace(b"digits", b"digits_parity", 1)]
      np.testing.assert_array_equal(other["image"], ex["image"])
      assert other["label"] == ex["label"] % 2
  meta = data.planned_meta(make_cfg(dataset="digits_parity", data_dir=str(digits_dir) + "x"))
  assert (meta.num_classes, meta.num_train_examples) == (2, NUM_TRAIN)


# ---------------------------------------------------------------------------
# Preprocessing ops.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("size", [5, 20])   # down (antialiased) and up
def test_bicubic_eval_resize_matches_pil(size):
  """input.eval_resize_method="bicubic" is PIL's bicubic (timm's eval resize),
  clipped to [0, 1]; it differs from the bilinear default."""
  from PIL import Image  # noqa: PLC0415
  image = np.random.default_rng(0).random((12, 9, 3)).astype(np.float32)
  bicubic = preprocessing.resize(tf.constant(image), size, "bicubic").numpy()
  bilinear = preprocessing.resize(tf.constant(image), size).numpy()
  pil = np.stack([np.asarray(Image.fromarray(image[..., c], mode="F").resize(
      (size, size), Image.BICUBIC)) for c in range(3)], axis=-1)
  assert pil.min() < 0 or pil.max() > 1 or size == 5   # upscaling overshoots
  np.testing.assert_allclose(bicubic, np.clip(pil, 0, 1), atol=2e-6)
  assert np.abs(bicubic - bilinear).max() > 0.05
  cfg = make_cfg(eval_resize="resize", image_size=size, eval_resize_method="bicubic")
  assert data.input_settings(cfg).eval_resize_method == "bicubic"
  with pytest.raises(ValueError, match=r"input.eval_resize_method='nearest'; choose one of "
                     r"\['bilinear', 'bicubic'\]"):
    data.input_settings(make_cfg(eval_resize_method="nearest"))


def test_preprocessing_ops():
  image = tf.random.stateless_uniform((20, 30, 3), seed=[1, 2])
  seed = tf.constant([3, 4], tf.int64)
  np.testing.assert_array_equal(preprocessing.pad_crop(image, 0, seed), image)
  shifted = preprocessing.pad_crop(image, 4, seed)
  assert shifted.shape == image.shape
  np.testing.assert_array_equal(shifted, preprocessing.pad_crop(image, 4, seed))

  crop = preprocessing.random_resized_crop(image, 16, seed)
  assert crop.shape == (16, 16, 3) and crop.dtype == tf.float32
  np.testing.assert_array_equal(
      crop, preprocessing.random_resized_crop(image, 16, seed))

  # 20x30 -> shorter side 16/0.8 = 20 (unchanged) -> central 16x16 crop.
  centre = preprocessing.resize_center_crop(image, 16, 0.8)
  np.testing.assert_allclose(centre, image[2:18, 7:23], atol=1e-6)

  flipped = [preprocessing.random_flip(image, tf.constant([s, 0]))
             for s in range(8)]
  assert any(np.array_equal(f, image[:, ::-1]) for f in flipped)
  assert any(np.array_equal(f, image) for f in flipped)

  norm = preprocessing.normalize(tf.ones((2, 2, 3)), (0.5,) * 3, (0.25,) * 3)
  np.testing.assert_allclose(norm, 2.0)
  uint8 = tf.constant([[[0], [255]]], tf.uint8)
  np.testing.assert_array_equal(preprocessing.to_float(uint8), [[[0.], [1.]]])


# ---------------------------------------------------------------------------
# Pipeline on mocked TFDS data.
# ---------------------------------------------------------------------------


def test_pipeline_mock_cifar10(tmp_path):
  cfg = make_cfg(dataset="cifar10", data_dir=str(tmp_path), download=True,
                 image_size=32, batch_size=16, eval_batch_size=8,
                 pad_crop_padding=4, mean=(0.5, 0.4, 0.3),
                 std=(0.25, 0.2, 0.1))
  low = (0 - np.array(cfg.mean)) / np.array(cfg.std)
  high = (1 - np.array(cfg.mean)) / np.array(cfg.std)
  # download=True is safe: mock_data turns download_and_prepare into a no-op.
  with tfds.testing.mock_data(num_examples=20):
    meta = data.dataset_meta(cfg)
    assert meta.num_classes == 10 and meta.image_shape == (32, 32, 3)
    train = data.create_train_dataset(cfg, seed=0, process_index=0,
                                      process_count=2)
    for batch in take(train, 3):
      assert batch["image"].shape == (8, 32, 32, 3)
      assert batch["image"].dtype == np.float32
      assert batch["label"].shape == (8,) and batch["label"].dtype == np.int32
      assert np.all(batch["image"] >= low - 1e-5)
      assert np.all(batch["image"] <= high + 1e-5)
      assert np.all((batch["label"] >= 0) & (batch["label"] < 10))

    evalds, num_batches = data.create_eval_dataset(cfg, process_index=1,
                                                   process_count=2)
    batches = list(evalds.as_numpy_iterator())
    assert len(batches) == num_batches == 5  # 20 examples, local batch 4.
    for batch in batches:
      assert batch["image"].shape == (4, 32, 32, 3)
      assert batch["image"].dtype == np.float32
      assert batch["label"].dtype == np.int32
      assert batch["mask"].dtype == bool and batch["mask"].all()
      assert np.all(batch["image"] >= low - 1e-5)
      assert np.all(batch["image"] <= high + 1e-5)


def test_pipeline_mock_imagenet(tmp_path):
  cfg = make_cfg(dataset="imagenet2012", data_dir=str(tmp_path), download=True,
                 eval_split="validation", image_size=32, batch_size=4,
                 eval_batch_size=4, train_augment="random_resized_crop",
                 eval_resize="resize_center_crop", mean=(0.5,) * 3,
                 std=(0.5,) * 3)
  with tfds.testing.mock_data(num_examples=6):
    train = data.create_train_dataset(cfg, seed=1, process_index=0,
                                      process_count=1)
    batch = take(train, 1)[0]
    assert batch["image"].shape == (4, 32, 32, 3)
    assert np.all(np.abs(batch["image"]) <= 1 + 1e-5)
    evalds, num_batches = data.create_eval_dataset(cfg, process_index=0,
                                                   process_count=1)
    batches = list(evalds.as_numpy_iterator())
    assert num_batches == len(batches) == 2
    assert batches[0]["image"].shape == (4, 32, 32, 3)
    assert batches[1]["mask"].tolist() == [True, True, False, False]

    # Variable-size images cannot be used at their stored size.
    cfg.eval_resize = "none"
    with pytest.raises(ValueError, match=r"input\.eval_resize='none'"):
      data.create_eval_dataset(cfg, process_index=0, process_count=1)


# ---------------------------------------------------------------------------
# Determinism and resume (real digits data).
# ---------------------------------------------------------------------------


def test_resume_is_exact(digits_dir):
  # 1437 examples, batch 64: epoch boundaries fall inside steps 22 and 44.
  cfg = make_cfg(data_dir=digits_dir)
  reference = take(data.create_train_dataset(
      cfg, seed=7, process_index=0, process_count=1), 48)
  for k in (1, 22, 23, 45):
    resumed = take(data.create_train_dataset(
        cfg, seed=7, start_step=k, process_index=0, process_count=1), 48 - k)
    assert_streams_equal(reference[k:], resumed)


def test_same_seed_same_stream_different_seed_different(digits_dir):
  cfg = make_cfg(data_dir=digits_dir)
  make = lambda seed: take(data.create_train_dataset(
      cfg, seed=seed, process_index=0, process_count=1), 25)
  first, again, other = make(3), make(3), make(4)
  assert_streams_equal(first, again)
  assert not np.array_equal(first[0]["label"], other[0]["label"])
  assert not np.array_equal(first[0]["image"], other[0]["image"])
  # Epochs are reshuffled: step 0 of epoch 0 differs from the start of epoch 1
  # (example 1437 = step 22, position 29).
  epoch1 = np.concatenate([b["label"] for b in first[22:24]])[29:29 + 64]
  assert not np.array_equal(first[0]["label"], epoch1)


def test_one_epoch_visits_every_example_once(digits_dir, sklearn_digits):
  # Without augmentation, one epoch of the stream is a permutation of the split.
  cfg = make_cfg(data_dir=digits_dir, train_augment="none", flip=False,
                 batch_size=479, mean=(0.0,), std=(1.0,))  # 3 * 479 = 1437
  batches = take(data.create_train_dataset(
      cfg, seed=0, process_index=0, process_count=1), 3)
  images = np.concatenate([b["image"] for b in batches])
  labels = np.concatenate([b["label"] for b in batches])
  seen = collections.Counter(
      example_key(np.round(im * 255).astype(np.uint8), lab)
      for im, lab in zip(images, labels))
  builder = data.get_builder("digits", data_dir=digits_dir)
  expected = collections.Counter(
      example_key(ex["image"], ex["label"])
      for ex in tfds.as_numpy(builder.as_dataset(split="train")))
  assert seen == expected


def test_processes_read_different_slices(digits_dir):
  cfg = make_cfg(data_dir=digits_dir, train_augment="none", flip=False)
  streams = [take(data.create_train_dataset(
      cfg, seed=0, process_index=i, process_count=2), 2) for i in range(2)]
  assert streams[0][0]["image"].shape == (32, 8, 8, 1)
  first = [np.concatenate([b["image"] for b in s]) for s in streams]
  # Slices are disjoint, so (apart from duplicate digits in the data) no
  # image of process 0's first batches appears in process 1's.
  keys0 = {im.tobytes() for im in first[0]}
  keys1 = {im.tobytes() for im in first[1]}
  assert len(keys0 & keys1) <= 2


def test_the_global_batch_does_not_depend_on_who_reads_it(digits_dir):
  """With S shard streams fixed, every process layout reads the same global
  batches: 2 shards read by one process (all rows), by two (the default
  layout, each its own shard), by two on a single shard's rows ([0, 32)
  split in [0, 12) and [12, 32): a shard cut mid-way, picked before
  decoding), and as ids in the split, which one epoch covers once."""
  cfg = make_cfg(data_dir=digits_dir)  # batch 64, 1437 examples
  stream = lambda **kw: take(data.create_train_dataset(  # noqa: E731
      cfg, seed=5, with_ids=True, **kw), 30)
  whole = stream(process_index=0, process_count=1, stream_shards=2)
  per_process = [stream(process_index=p, process_count=2) for p in range(2)]
  odd_rows = [stream(process_index=0, process_count=1, stream_shards=2, rows=rows)
              for rows in ((0, 12), (12, 40), (40, 64))]
  for k, batch in enumerate(whole):
    for key in ("image", "label", "id"):
      np.testing.assert_array_equal(
          batch[key], np.concatenate([b[k][key] for b in per_process]), err_msg=key)
      np.testing.assert_array_equal(
          batch[key], np.concatenate([b[k][key] for b in odd_rows]), err_msg=key)
  # Shard s reads slice s: ids [0, 719) then [719, 1437); the first 719
  # examples of shard 0 are one epoch, each of its records once.
  ids = np.stack([b["id"] for b in whole])
  assert (ids[:, :32] < 719).all() and (ids[:, 32:] >= 719).all()
  assert sorted(ids[:, :32].ravel()[:719].tolist()) == list(range(719))
  # The stream differs with S (another order), so S is fixed for a workdir.
  one_shard = stream(process_index=0, process_count=1, stream_shards=1)
  assert not np.array_equal(one_shard[0]["id"], whole[0]["id"])


def test_a_stream_resumes_at_any_example(digits_dir):
  """`start_example` E continues the stream at its E-th example of each
  shard, also off a batch boundary (a position converted from another batch
  size)."""
  cfg = make_cfg(data_dir=digits_dir, batch_size=32)
  reference = take(data.create_train_dataset(
      cfg, seed=1, process_index=0, process_count=1, stream_shards=2, with_ids=True), 60)
  ids = np.stack([b["id"] for b in reference])  # (60, 32): shard 0 then shard 1
  shard_ids = [ids[:, :16].ravel(), ids[:, 16:].ravel()]
  for start in (0, 7, 16, 700, 731):  # a shard's epoch is 719 or 718 examples
    resumed = take(data.create_train_dataset(
        cfg, seed=1, process_index=0, process_count=1, stream_shards=2,
        start_example=start, with_ids=True), 3)
    got = np.stack([b["id"] for b in resumed])
    for shard in range(2):
      np.testing.assert_array_equal(got[:, 16 * shard:16 * (shard + 1)].ravel(),
                                    shard_ids[shard][start:start + 48])


def test_stream_layout_errors_name_the_problem(digits_dir):
  cfg = make_cfg(data_dir=digits_dir)
  with pytest.raises(ValueError, match=r"batch_size=64 must be a multiple of the stream "
                     r"shards \(3\)"):
    data.create_train_dataset(cfg, seed=0, process_count=1, process_index=0, stream_shards=3)
  with pytest.raises(ValueError, match=r"rows=\(10, 70\) must be a non-empty range within "
                     r"the global batch \[0, 64\)"):
    data.create_train_dataset(cfg, seed=0, process_count=1, process_index=0, rows=(10, 70))
  with pytest.raises(ValueError, match="stream_shards=0 must be a positive integer"):
    data.create_train_dataset(cfg, seed=0, process_count=1, process_index=0, stream_shards=0)
  with pytest.raises(ValueError, match=r"input.batch_size=64 must be a multiple of "
                     r"input.stream_shards=3"):
    data.input_settings(make_cfg(data_dir=digits_dir, stream_shards=3))


# ---------------------------------------------------------------------------
# Evaluation.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("eval_split", ["test", "test[:359]"])
def test_eval_multi_process_covers_split_once(digits_dir, eval_split):
  cfg = make_cfg(data_dir=digits_dir, eval_split=eval_split,
                 eval_batch_size=48, mean=(0.0,), std=(1.0,))
  builder = data.get_builder("digits", data_dir=digits_dir)
  expected = collections.Counter(
      example_key(ex["image"], ex["label"])
      for ex in tfds.as_numpy(builder.as_dataset(split=eval_split)))

  seen = collections.Counter()
  all_num_batches = set()
  for process_index in range(3):
    ds, num_batches = data.create_eval_dataset(
        cfg, process_index=process_index, process_count=3)
    batches = list(ds.as_numpy_iterator())
    assert len(batches) == num_batches
    all_num_batches.add(num_batches)
    for batch in batches:
      assert batch["image"].shape == (16, 8, 8, 1)
      assert batch["mask"].dtype == bool
      for image, label, mask in zip(batch["image"], batch["label"],
                                    batch["mask"]):
        if mask:
          seen[example_key(np.round(image * 255).astype(np.uint8), label)] += 1
        else:
          assert not image.any() and label == 0
  assert all_num_batches == {8}  # ceil(120 / 16) for every process.
  assert seen == expected


# ---------------------------------------------------------------------------
# Errors.
# ---------------------------------------------------------------------------


def test_unprepared_dataset_fails_fast(tmp_path):
  start = time.monotonic()
  with pytest.raises(data.DatasetNotPreparedError) as info:
    data.get_builder("cifar100", data_dir=str(tmp_path), download=False)
  assert time.monotonic() - start < 10
  message = str(info.value)
  assert "cifar100" in message and str(tmp_path) in message
  assert f"tfds build cifar100 --data_dir={tmp_path}" in message
  assert "download=True" in message
  assert isinstance(info.value, FileNotFoundError)

  with pytest.raises(data.DatasetNotPreparedError, match="downloads/manual"):
    data.get_builder("imagenet2012", data_dir=str(tmp_path))


def test_unknown_dataset_and_bad_features(tmp_path):
  with pytest.raises(ValueError, match="not a known TFDS data set") as info:
    data.get_builder("no_such_dataset_xyz", data_dir=str(tmp_path))
  for name in data.SHIPPED_DATASETS:
    assert name in str(info.value)
  with pytest.raises(ValueError, match="no `image`"):
    data.get_builder("glue", data_dir=str(tmp_path))


def test_config_errors_name_the_field(digits_dir):
  with pytest.raises(ValueError, match=r"input\.batch_size=64.*\(3\)"):
    data.create_train_dataset(make_cfg(data_dir=digits_dir), seed=0,
                              process_index=0, process_count=3)
  with pytest.raises(ValueError, match=r"input\.eval_batch_size"):
    data.create_eval_dataset(make_cfg(data_dir=digits_dir, eval_batch_size=50),
                             process_index=0, process_count=3)
  with pytest.raises(ValueError,
                     match=r"input\.train_augment='crop'.*pad_crop"):
    data.create_train_dataset(make_cfg(data_dir=digits_dir,
                                       train_augment="crop"),
                              seed=0, process_index=0, process_count=1)
  with pytest.raises(ValueError, match=r"input\.mean"):
    data.create_train_dataset(make_cfg(data_dir=digits_dir, mean=(0.5,) * 3),
                              seed=0, process_index=0, process_count=1)
  with pytest.raises(ValueError, match=r"input\.train_augment='pad_crop'"):
    data.create_train_dataset(make_cfg(data_dir=digits_dir, image_size=16),
                              seed=0, process_index=0, process_count=1)
