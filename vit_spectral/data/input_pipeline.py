"""tf.data input pipeline for image classification on any TFDS data set.

Works unchanged for `digits`, `fashion_mnist`, `mnist`, `cifar10`, `cifar100`,
`imagenet2012` and any prepared TFDS data set with an `image` (uint8 Image)
and a `label` (ClassLabel) feature. Every entry point takes `config.input` as `cfg`: an
`InputSettings` (what the trainer passes) or the ConfigDict section, converted
once at entry.

Determinism: the training stream is a pure function of (data set, split,
process_index, process_count, cfg, seed): shuffling uses explicit per-epoch
seeds and augmentation uses stateless ops seeded per example, so resuming at
step k reproduces the uninterrupted stream exactly (see `create_train_dataset`).
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

from vit_spectral.data import digits as digits_lib
from vit_spectral.data import idx_files
from vit_spectral.data import preprocessing
from vit_spectral.data import randaugment as randaugment_lib
# EVAL_RESIZES and TRAIN_AUGMENTS are defined with InputSettings and stay
# importable from here.
from vit_spectral.sections.input import (  # noqa: F401
    EVAL_RESIZES, TRAIN_AUGMENTS, InputSettings, input_settings)
from vit_spectral.data.tensorflow_import import tf, tfds
from vit_spectral.errors import RunError

# The data sets we ship recipes for (any other prepared TFDS name works) and
# their split sizes (the TFDS catalog's; digits.py's), for `planned_meta`.
_DIGITS_SPLIT_SIZES = {"train": digits_lib.NUM_TRAIN_EXAMPLES,
                       "test": digits_lib.NUM_TEST_EXAMPLES}
SHIPPED_SPLIT_SIZES = {
    "digits": _DIGITS_SPLIT_SIZES,
    "digits_parity": _DIGITS_SPLIT_SIZES,
    "fashion_mnist": {"train": 60_000, "test": 10_000},
    "mnist": {"train": 60_000, "test": 10_000},
    "cifar10": {"train": 50_000, "test": 10_000},
    "cifar100": {"train": 50_000, "test": 10_000},
    "imagenet2012": {"train": 1_281_167, "validation": 50_000},
    # Paper 004's transfer sets (Table 5; configs/transfer_linear_probe.py).
    "oxford_flowers102": {"train": 1020, "validation": 1020, "train+validation": 2040,
                          "test": 6149},
    "food101": {"train": 75_750, "validation": 25_250},
    "stanford_dogs": {"train": 12_000, "test": 8580},
    "cars196": {"train": 8144, "test": 8041},
}
SHIPPED_DATASETS = tuple(SHIPPED_SPLIT_SIZES)

# Independent random streams derived from the user's seed, so that changing
# how examples are shuffled never changes how they are augmented and v.v.
_SHUFFLE_STREAM = 1
_AUGMENT_STREAM = 2
# Per-example seeds of the optional ops are folded from the example's seed
# with these ids, so adding them leaves the crop and flip seeds unchanged.
_RANDAUGMENT_OP = 3
_ERASING_OP = 4
# The builders that prepare themselves offline (scikit-learn's digits).
OFFLINE_BUILDERS = {"digits": digits_lib.Digits, "digits_parity": digits_lib.DigitsParity}
# Shuffle seeds are drawn from [1, 2**31 - 1): positive and non-zero, because
# tf.data treats a (0, 0) seed pair as "pick a random seed".
_MAX_SHUFFLE_SEED = 2**31 - 1


# What lets a training run download a missing data set (the not-prepared
# message names it; a caller without it passes its own or None).
DOWNLOAD_SETTING = "config.input.download=True"


class DatasetNotPreparedError(RunError, FileNotFoundError):
  """The TFDS data set is not in data_dir and downloading was not allowed."""


@dataclasses.dataclass(frozen=True)
class DatasetMeta:
  """Static facts about the data set as the model will see it.

  Attributes:
    name: the TFDS name, as in `cfg.dataset`.
    num_classes: number of label classes.
    image_shape: (H, W, C) after preprocessing: (image_size, image_size, C).
    num_train_examples: examples in `cfg.train_split` (cut to
      `cfg.train_fraction`), all processes together.
    num_eval_examples: examples in `cfg.eval_split`, all processes together.
  """

  name: str
  num_classes: int
  image_shape: tuple[int, int, int]
  num_train_examples: int
  num_eval_examples: int


# ---------------------------------------------------------------------------
# Builders.
# ---------------------------------------------------------------------------


def _not_prepared_message(dataset: str, builder: tfds.core.DatasetBuilder,
                          download_setting: str | None) -> str:
  root = str(builder.data_dir_root)
  nothing = ("so nothing was downloaded" if download_setting is None else
             f"and {download_setting.split('=')[0]} is False, so nothing was downloaded")
  lines = [
      f"TFDS data set {dataset!r} is not prepared in data_dir {root!r} "
      f"(looked for {builder.data_path}), {nothing}.",
  ]
  if builder.name == "imagenet2012":
    or_setting = ("" if download_setting is None else
                  f" (or set {download_setting} to prepare it from those files)")
    lines.append(
        "imagenet2012 cannot be downloaded automatically: place "
        "ILSVRC2012_img_train.tar and ILSVRC2012_img_val.tar in "
        f"{root}/downloads/manual, then run "
        f"`tfds build {dataset} --data_dir={root}`{or_setting}."
    )
  else:
    or_setting = "" if download_setting is None else f", or set {download_setting}"
    lines.append(
        f"To prepare it, run `tfds build {dataset} --data_dir={root}` on a "
        f"machine with internet access (and copy the directory here){or_setting}."
    )
  return " ".join(lines)


def _check_features(dataset: str, builder: tfds.core.DatasetBuilder) -> None:
  """Raises ValueError unless the builder has uint8 `image` and a ClassLabel."""
  features = builder.info.features
  names = sorted(features.keys()) if hasattr(features, "keys") else []
  image = features["image"] if "image" in names else None
  label = features["label"] if "label" in names else None
  if not isinstance(image, tfds.features.Image):
    raise ValueError(
        f"TFDS data set {dataset!r} has no `image` Image feature (features: "
        f"{names}); the input pipeline needs `image` and `label`."
    )
  if image.np_dtype != tf.uint8.as_numpy_dtype:
    raise ValueError(
        f"TFDS data set {dataset!r}: `image` has dtype {image.np_dtype}; "
        "the input pipeline supports uint8 images only."
    )
  if not isinstance(label, tfds.features.ClassLabel):
    raise ValueError(
        f"TFDS data set {dataset!r} has no `label` ClassLabel feature "
        f"(features: {names}); the input pipeline needs `image` and `label`."
    )


def unprepared_builder(
    dataset: str, data_dir: str | None = None
) -> tfds.core.DatasetBuilder:
  """The TFDS builder of `dataset`, prepared or not (its features are known
  from code; reading needs `get_builder`).

  Raises:
    ValueError: unknown TFDS name, or no `image`/`label` features.
  """
  if dataset in OFFLINE_BUILDERS:
    builder = OFFLINE_BUILDERS[dataset](data_dir=data_dir)
  else:
    try:
      # try_gcs=False: never look for the data set on the network here.
      builder = tfds.builder(dataset, data_dir=data_dir, try_gcs=False)
    except tfds.core.registered.DatasetNotFoundError as e:
      raise ValueError(
          f"config.input.dataset={dataset!r} is not a known TFDS data set. "
          f"We ship recipes for {', '.join(SHIPPED_DATASETS)}; any other "
          "registered TFDS name with `image` and `label` features also works."
      ) from e
  _check_features(dataset, builder)
  return builder


def get_builder(
    dataset: str, data_dir: str | None = None, download: bool = False, *,
    download_setting: str | None = DOWNLOAD_SETTING,
) -> tfds.core.DatasetBuilder:
  """Returns a prepared TFDS builder for `dataset`.

  `digits` is prepared offline on first use (a few seconds); `fashion_mnist`
  and `mnist` from idx files found on this machine (`idx_files`, about a
  minute). Every other data set must already be prepared in `data_dir` unless
  `download` is True.

  Args:
    dataset: a TFDS name, optionally with config/version ("cifar10:3.0.2").
    data_dir: the TFDS data_dir; None means the TFDS default
      (~/tensorflow_datasets or $TFDS_DATA_DIR).
    download: allow TFDS to download and prepare a missing data set.
    download_setting: what lets the caller download, named in the
      not-prepared message; None for a caller that has no such setting (a
      command that never downloads: the message names `tfds build` only).

  Returns:
    A builder whose `as_dataset` can be called.

  Raises:
    ValueError: unknown TFDS name, or no `image`/`label` features.
    DatasetNotPreparedError: not prepared and `download` is False. Raised
      without touching the network, so within seconds.
  """
  builder = unprepared_builder(dataset, data_dir)
  if dataset in OFFLINE_BUILDERS:
    if not _has_dataset_info(builder):
      # Nothing to fetch; disabling the GCS probe keeps this fully offline.
      builder.download_and_prepare(
          download_config=tfds.download.DownloadConfig(try_download_gcs=False)
      )
    return builder
  if not _has_dataset_info(builder):   # is_prepared() without TFDS's WARNING
    root = str(builder.data_dir_root)
    if builder.name in idx_files.SOURCES:   # TFDS's own builder, fed local idx files
      try:
        if idx_files.prepare(builder.name, root):
          return unprepared_builder(dataset, data_dir)
      except idx_files.IdxFilesError as e:
        raise DatasetNotPreparedError(str(e)) from e
      if not download:
        raise DatasetNotPreparedError(idx_files.missing_message(builder.name, root))
    if not download:
      raise DatasetNotPreparedError(_not_prepared_message(dataset, builder, download_setting))
    builder.download_and_prepare()
  return builder


# ---------------------------------------------------------------------------
# Checks that need the process count or the data set (the others are
# InputSettings').
# ---------------------------------------------------------------------------


def _local_batch_size(global_size: int, process_count: int, field: str,
                      what: str = "process count") -> int:
  if global_size % process_count:
    raise ValueError(
        f"config.input.{field}={global_size} must be a multiple of the {what} "
        f"({process_count})."
    )
  return global_size // process_count


def _process_info(
    process_index: int | None, process_count: int | None
) -> tuple[int, int]:
  # jax is imported lazily so the data package stays importable (and its
  # tests runnable) without initialising a JAX backend.
  if process_index is None or process_count is None:
    import jax  # pylint: disable=g-import-not-at-top

    if process_index is None:
      process_index = jax.process_index()
    if process_count is None:
      process_count = jax.process_count()
  if process_count < 1 or not 0 <= process_index < process_count:
    raise ValueError(
        f"process_index={process_index} must be in [0, process_count="
        f"{process_count})."
    )
  return process_index, process_count


def _channels(builder: tfds.core.DatasetBuilder) -> int:
  channels = builder.info.features["image"].shape[-1]
  if channels is None:
    raise ValueError(
        f"TFDS data set {builder.name!r}: the `image` feature has an unknown "
        "channel count; the pipeline needs a fixed one."
    )
  return channels


def _check_normalization(cfg: InputSettings, channels: int) -> None:
  for field in ("mean", "std"):
    values = getattr(cfg, field)
    if len(values) != channels:
      raise ValueError(
          f"config.input.{field} has {len(values)} values but the data set "
          f"{cfg.dataset!r} has {channels} channel(s)."
      )


def _check_native_size(
    builder: tfds.core.DatasetBuilder, image_size: int, field: str, value: str
) -> None:
  """Modes that keep the stored size need images of exactly image_size."""
  height, width = builder.info.features["image"].shape[:2]
  if (height, width) != (image_size, image_size):
    raise ValueError(
        f"config.input.{field}={value!r} keeps the stored image size, but "
        f"{builder.name!r} images are {height}x{width} (None = varies) and "
        f"config.input.image_size={image_size}. Choose a resizing mode or set "
        "image_size to the stored size."
    )


# ---------------------------------------------------------------------------
# Reading.
# ---------------------------------------------------------------------------


def _read_records(builder: tfds.core.DatasetBuilder, split) -> tf.data.Dataset:
  """Undecoded (image_bytes, label) records of `split`, in a fixed order.

  Images are left encoded (SkipDecoding) so that records can be shuffled
  cheaply and skipped on resume without paying for decoding.
  """
  ds = builder.as_dataset(
      split=split,
      shuffle_files=False,
      decoders={"image": tfds.decode.SkipDecoding()},
  )
  return ds.map(lambda ex: (ex["image"], ex["label"]))


def _num_examples(ds: tf.data.Dataset, what: str) -> int:
  count = int(ds.cardinality())
  if count < 0:
    raise ValueError(f"{what}: TFDS did not report the number of examples.")
  if count == 0:
    raise ValueError(f"{what} is empty.")
  return count


def _decode(builder: tfds.core.DatasetBuilder, image_bytes: tf.Tensor):
  """Encoded image -> float32 (H, W, C) in [0, 1]."""
  image = builder.info.features["image"].decode_example(image_bytes)
  return preprocessing.to_float(image)


def _options() -> tf.data.Options:
  """Deterministic order; fixed parallelism (one thread per usable CPU core)
  instead of tf.data's autotuner (why: docs/design.md#datainput_pipelinepy)."""
  options = tf.data.Options()
  options.deterministic = True
  options.autotune.enabled = False
  # The cores this process may use (a container's or taskset's share).
  cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
           else os.cpu_count() or 1)
  options.autotune.initial_parallelism = cores
  return options


# ---------------------------------------------------------------------------
# Public API.
# ---------------------------------------------------------------------------


def train_split(cfg: InputSettings | Any, builder: tfds.core.DatasetBuilder) -> str:
  """`cfg.train_split`, cut to its first round(f · N) examples in TFDS order,
  f = `train_fraction` (paper 003, Table 2: 10% / 50% / 100% of CIFAR-100's
  training split; the same subset on every run and process count)."""
  cfg = input_settings(cfg)
  if cfg.train_fraction == 1.0:
    return cfg.train_split
  total = _num_examples(_read_records(builder, cfg.train_split),
                        "config.input.train_split")
  return f"{cfg.train_split}[:{fraction_count(cfg.train_fraction, total)}]"


def fraction_count(fraction: float, total: int) -> int:
  """How many of `total` examples a `train_fraction` keeps: round(f * N), >= 1."""
  return max(int(round(fraction * total)), 1)


def dataset_meta(cfg: InputSettings | Any) -> DatasetMeta:
  """Returns the DatasetMeta for `cfg` (prepares `digits` if needed).

  Example counts are those TFDS reports for the splits (no data is read).
  """
  cfg = input_settings(cfg)
  builder = get_builder(cfg.dataset, cfg.data_dir, cfg.download)
  channels = _channels(builder)
  return DatasetMeta(
      name=cfg.dataset,
      num_classes=builder.info.features["label"].num_classes,
      image_shape=(cfg.image_size, cfg.image_size, channels),
      num_train_examples=_num_examples(
          _read_records(builder, train_split(cfg, builder)),
          "config.input.train_split"
      ),
      num_eval_examples=_num_examples(
          _read_records(builder, cfg.eval_split), "config.input.eval_split"
      ),
  )


def _shipped_split_size(builder: tfds.core.DatasetBuilder, split: str,
                        field: str) -> int:
  sizes = SHIPPED_SPLIT_SIZES.get(builder.name, {})
  if split not in sizes:
    raise DatasetNotPreparedError(
        f"config.input.{field}={split!r} of {builder.name!r}: its size is known "
        f"only from the prepared data set (known without it: "
        f"{ {name: sorted(s) for name, s in SHIPPED_SPLIT_SIZES.items()} }). "
        + _not_prepared_message(builder.name, builder, DOWNLOAD_SETTING))
  return sizes[split]


def planned_meta(cfg: InputSettings | Any) -> DatasetMeta:
  """The DatasetMeta of `cfg` without reading, preparing or downloading the
  data (`train.py --dry_run`): classes and channels from the builder's
  features, example counts from SHIPPED_SPLIT_SIZES where both splits are
  there (cut to `train_fraction`), else from the prepared data set's
  metadata (`dataset_meta`).

  Raises:
    DatasetNotPreparedError: not prepared, and a split's size is not known.
  """
  cfg = input_settings(cfg)
  builder = unprepared_builder(cfg.dataset, cfg.data_dir)
  shipped = SHIPPED_SPLIT_SIZES.get(builder.name, {})
  if cfg.train_split not in shipped or cfg.eval_split not in shipped:
    if _has_dataset_info(builder):
      return dataset_meta(cfg)
    for split, field in ((cfg.train_split, "train_split"), (cfg.eval_split, "eval_split")):
      _shipped_split_size(builder, split, field)   # raises for the unknown one
  return DatasetMeta(
      name=cfg.dataset,
      num_classes=builder.info.features["label"].num_classes,
      image_shape=(cfg.image_size, cfg.image_size, _channels(builder)),
      num_train_examples=fraction_count(cfg.train_fraction, shipped[cfg.train_split]),
      num_eval_examples=shipped[cfg.eval_split],
  )


def _has_dataset_info(builder: tfds.core.DatasetBuilder) -> bool:
  """`builder.is_prepared()` without the WARNING that TFDS logs when it is
  not: the version's folder holds dataset_info.json."""
  return (builder.data_path / "dataset_info.json").exists()


def _seed_key(seed: int, stream: int, process_index: int) -> tf.Tensor:
  """A (2,) int64 stateless key for one random stream of one process."""
  if not -(2**63) <= seed < 2**63:
    raise ValueError(f"seed={seed} does not fit in int64.")
  key = tf.constant([seed, stream], tf.int64)
  return tf.random.experimental.stateless_fold_in(key, process_index)


@dataclasses.dataclass(frozen=True)
class StreamStart:
  """Where the training stream of one process starts, for `start_step`.

  The stream is epochs of `records_per_epoch` shuffled records, each record
  repeated `repeats` times in a row (repeated augmentation), so an epoch is
  `examples_per_epoch` = records_per_epoch · repeats examples; batches of
  `local_batch` run across epoch boundaries.

  Attributes:
    first_example: g of the first example, start_step · local_batch.
    start_epoch: the epoch that example is in.
    record_offset: shuffled records of start_epoch to skip.
    copy_offset: copies of the next record to skip (< repeats).
    examples_per_epoch: records_per_epoch · repeats.
  """

  first_example: int
  start_epoch: int
  record_offset: int
  copy_offset: int
  examples_per_epoch: int


def stream_start(start_step: int, local_batch: int, records_per_epoch: int,
                 repeats: int = 1) -> StreamStart:
  """The StreamStart after `start_step` batches of `local_batch` examples."""
  if start_step < 0:
    raise ValueError(f"start_step={start_step} must be >= 0.")
  if local_batch < 1:
    raise ValueError(f"local_batch={local_batch} must be >= 1.")
  return stream_start_at(start_step * local_batch, records_per_epoch, repeats)


def stream_start_at(first_example: int, records_per_epoch: int,
                    repeats: int = 1) -> StreamStart:
  """The StreamStart after `first_example` examples of the stream (any count:
  a position converted from another batch size need not end a batch)."""
  if first_example < 0:
    raise ValueError(f"first_example={first_example} must be >= 0.")
  if min(records_per_epoch, repeats) < 1:
    raise ValueError(
        f"records_per_epoch={records_per_epoch} and repeats={repeats} must be >= 1.")
  examples_per_epoch = records_per_epoch * repeats
  start_epoch, offset = divmod(first_example, examples_per_epoch)
  # Within the start epoch: whole records to skip, then copies of the next.
  record_offset, copy_offset = divmod(offset, repeats)
  return StreamStart(first_example, start_epoch, record_offset, copy_offset,
                     examples_per_epoch)


def _epochs(records: tf.data.Dataset, start: StreamStart, repeats: int,
            shuffle_buffer: int, shuffle_key: tf.Tensor) -> tf.data.Dataset:
  """Epochs start.start_epoch, start.start_epoch + 1, ... of shuffled records
  (each repeated `repeats` times), the first cut at `start`: infinite."""

  def epoch(e: tf.Tensor) -> tf.data.Dataset:
    epoch_seed = tf.random.stateless_uniform(
        [],
        seed=tf.random.experimental.stateless_fold_in(shuffle_key, e),
        minval=1,
        maxval=_MAX_SHUFFLE_SEED,
        dtype=tf.int64,
    )
    shuffled = records.shuffle(
        shuffle_buffer, seed=epoch_seed, reshuffle_each_iteration=False
    )
    is_start = tf.equal(e, start.start_epoch)
    skip = tf.where(is_start, tf.constant(start.record_offset, tf.int64), 0)
    if repeats == 1:
      return shuffled.skip(skip)
    copies = shuffled.skip(skip).flat_map(
        lambda *record: tf.data.Dataset.from_tensors(record).repeat(repeats))
    return copies.skip(
        tf.where(is_start, tf.constant(start.copy_offset, tf.int64), 0))

  ds = tf.data.Dataset.counter(start.start_epoch).flat_map(epoch)
  return ds.apply(
      tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY)
  )


def _train_preprocess(cfg: InputSettings, builder: tfds.core.DatasetBuilder,
                      channels: int, augment_key: tf.Tensor):
  """`preprocess(g, (image_bytes, label[, id]))` for example number g: decode, crop,
  flip, RandAugment, normalise, erase, each from a seed derived from
  (augment_key, g), so the same g gets the same augmentation on any run."""
  size = cfg.image_size
  mean, std = cfg.mean, cfg.std
  shape = (size, size, channels)

  def preprocess(g, record):
    image_bytes, label = record[:2]
    example_seed = tf.random.experimental.stateless_fold_in(augment_key, g)
    crop_seed, flip_seed = tf.unstack(
        tf.random.experimental.stateless_split(example_seed, 2)
    )
    image = _decode(builder, image_bytes)
    if cfg.train_augment == "pad_crop":
      image = preprocessing.pad_crop(image, cfg.pad_crop_padding, crop_seed)
    elif cfg.train_augment == "random_resized_crop":
      image = preprocessing.random_resized_crop(image, size, crop_seed)
    elif cfg.train_augment == "resize":
      image = preprocessing.resize(image, size)
    if cfg.flip:
      image = preprocessing.random_flip(image, flip_seed)
    if cfg.randaugment_layers:
      image = tf.ensure_shape(image, shape)
      image = randaugment_lib.randaugment(
          image,
          tf.random.experimental.stateless_fold_in(example_seed, _RANDAUGMENT_OP),
          num_layers=cfg.randaugment_layers,
          magnitude=cfg.randaugment_magnitude,
          magnitude_std=cfg.randaugment_magnitude_std,
          fill=mean, op_set=cfg.randaugment_ops)
    image = preprocessing.normalize(image, mean, std)
    if cfg.random_erasing:
      image = tf.ensure_shape(image, shape)
      image = preprocessing.random_erasing(
          image, cfg.random_erasing,
          tf.random.experimental.stateless_fold_in(example_seed, _ERASING_OP))
    image = tf.ensure_shape(image, shape)
    example = {"image": image, "label": tf.cast(label, tf.int32)}
    if len(record) == 3:  # with_ids: the record's index in the split
      example["id"] = record[2]
    return example

  return preprocess


def create_train_dataset(
    cfg: InputSettings | Any,
    *,
    seed: int,
    start_step: int = 0,
    process_index: int | None = None,
    process_count: int | None = None,
    stream_shards: int | None = None,
    start_example: int | None = None,
    rows: tuple[int, int] | None = None,
    with_ids: bool = False,
) -> tf.data.Dataset:
  """Infinite, deterministic, resumable training stream: this process's rows
  of every global batch.

  The global batch of B = `cfg.batch_size` examples takes b = B / S
  consecutive examples from each of S = `stream_shards` shard streams (shard
  s on rows [s·b, (s+1)·b)). Shard s is slice s of S of the train split
  (`tfds.split_for_jax_process`); its epoch e is that slice shuffled with a
  seed derived statelessly from (seed, s, e) (`_epochs`), and its example g
  (counted across epochs) is decoded and augmented with a seed from (seed, s,
  g) (`_train_preprocess`). Batches run across epoch boundaries. So a step's
  global batch is a function of (data set, seed, S, B, position) alone;
  `rows` only picks which rows this process reads (before decoding).

  Resume: `start_example` = E examples already consumed per shard stream
  gives exactly the stream of `start_example=0` without its first E examples
  (`stream_start_at`), skipping undecoded records.

  Recipe options (off by default): RandAugment after crop and flip, random
  erasing after normalisation, repeated augmentation (Hoffer et al., 2020;
  DeiT's RASampler: r = repeated_augment copies of each record, each its own
  g); `train_fraction` restricts the split first (`train_split`).

  Leave TF's global seed unset (`tf.random.set_seed`): tf.data combines it
  with the shuffle seed. Design notes: docs/design.md#datainput_pipelinepy

  Args:
    cfg: `config.input` (InputSettings or its ConfigDict).
    seed: data seed; same seed, same stream.
    start_step: number of global batches already consumed (ignored when
      `start_example` is given).
    process_index: this process; defaults to jax.process_index().
    process_count: number of processes; defaults to jax.process_count().
    stream_shards: S, the number of shard streams (default process_count);
      must divide the batch size.
    start_example: examples already consumed from each shard stream.
    rows: the [start, stop) rows of the global batch this process reads
      (default its equal share).
    with_ids: also yield "id": int32 (rows,), each example's index in the
      train split (for checks that runs see the same examples).

  Returns:
    A tf.data.Dataset yielding {"image": float32 (R, H, W, C),
    "label": int32 (R,)} forever, R = stop - start rows (B / process_count
    by default), H = W = cfg.image_size.
  """
  cfg = input_settings(cfg)
  process_index, process_count = _process_info(process_index, process_count)
  shards = process_count if stream_shards is None else stream_shards
  if not isinstance(shards, int) or shards < 1:
    raise ValueError(f"stream_shards={shards!r} must be a positive integer.")
  per_shard = _local_batch_size(cfg.batch_size, shards, "batch_size", "stream shards")
  if rows is None:
    local = _local_batch_size(cfg.batch_size, process_count, "batch_size")
    rows = (process_index * local, (process_index + 1) * local)
  if not 0 <= rows[0] < rows[1] <= cfg.batch_size:
    raise ValueError(f"rows={tuple(rows)} must be a non-empty range within the "
                     f"global batch [0, {cfg.batch_size}).")
  if start_example is None:
    if start_step < 0:
      raise ValueError(f"start_step={start_step} must be >= 0.")
    start_example = start_step * per_shard
  builder = get_builder(cfg.dataset, cfg.data_dir, cfg.download)
  channels = _channels(builder)
  _check_normalization(cfg, channels)
  if cfg.train_augment in ("none", "pad_crop"):
    _check_native_size(builder, cfg.image_size, "train_augment", cfg.train_augment)

  split = train_split(cfg, builder)
  parts = []
  for shard in range(shards):
    first, stop = max(rows[0], shard * per_shard), min(rows[1], (shard + 1) * per_shard)
    if first < stop:
      parts.append(_shard_stream(
          cfg, builder, channels, split, seed, shard, shards, start_example, per_shard,
          (first - shard * per_shard, stop - shard * per_shard), with_ids))
  ds = parts[0] if len(parts) == 1 else tf.data.Dataset.zip(tuple(parts)).map(
      lambda *batches: {k: tf.concat([b[k] for b in batches], 0) for k in batches[0]})
  ds = ds.prefetch(tf.data.AUTOTUNE)
  return ds.with_options(_options())


def _shard_stream(cfg: InputSettings, builder: tfds.core.DatasetBuilder, channels: int,
                  split: str, seed: int, shard: int, shards: int, start_example: int,
                  per_shard: int, rows: tuple[int, int], with_ids: bool) -> tf.data.Dataset:
  """Batches of rows [rows[0], rows[1]) of shard `shard`'s b = `per_shard`
  examples per global batch, from example `start_example` of its stream
  (`create_train_dataset`)."""
  shard_split = tfds.split_for_jax_process(split, process_index=shard,
                                           process_count=shards)
  records = _read_records(builder, shard_split)
  num_local = _num_examples(
      records, f"config.input.train_split={cfg.train_split!r} slice {shard}/{shards}")
  if with_ids:  # the record's index in the split: the slices before, then its own
    offset = sum(_num_examples(_read_records(builder, tfds.split_for_jax_process(
        split, process_index=other, process_count=shards)), "slice")
                 for other in range(shard))
    records = records.enumerate(start=offset).map(
        lambda i, record: (*record, tf.cast(i, tf.int32)))
  start = stream_start_at(start_example, num_local, cfg.repeated_augment)
  ds = _epochs(records, start, cfg.repeated_augment, cfg.shuffle_buffer,
               _seed_key(seed, _SHUFFLE_STREAM, shard))
  ds = ds.enumerate(start=start.first_example)
  if rows != (0, per_shard):  # part of each batch: picked before decoding
    first, stop = rows
    ds = ds.filter(lambda g, record: tf.logical_and(
        (g - start_example) % per_shard >= first, (g - start_example) % per_shard < stop))
  preprocess = _train_preprocess(
      cfg, builder, channels, _seed_key(seed, _AUGMENT_STREAM, shard))
  ds = ds.map(
      preprocess, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
  )
  return ds.batch(rows[1] - rows[0], drop_remainder=True)


def _eval_preprocess(cfg: InputSettings, builder: tfds.core.DatasetBuilder,
                     channels: int):
  """`preprocess(image_bytes, label)`: decode, resize, normalise, mask True."""
  size = cfg.image_size

  def preprocess(image_bytes, label):
    image = _decode(builder, image_bytes)
    if cfg.eval_resize == "resize":
      image = preprocessing.resize(image, size, cfg.eval_resize_method)
    elif cfg.eval_resize == "resize_center_crop":
      image = preprocessing.resize_center_crop(image, size, cfg.crop_fraction,
                                               cfg.eval_resize_method)
    image = preprocessing.normalize(image, cfg.mean, cfg.std)
    image = tf.ensure_shape(image, (size, size, channels))
    return {
        "image": image,
        "label": tf.cast(label, tf.int32),
        "mask": tf.constant(True),
    }

  return preprocess


def create_eval_dataset(
    cfg: InputSettings | Any,
    *,
    process_index: int | None = None,
    process_count: int | None = None,
) -> tuple[tf.data.Dataset, int]:
  """One padded pass over this process's slice of `cfg.eval_split`.

  Every process returns the same number of batches (enough for the largest
  slice), so collective eval steps line up; the tail is filled with zero
  images, label 0 and mask False. Across processes, every real example
  appears exactly once with mask True.

  Args:
    cfg: `config.input` (InputSettings or its ConfigDict).
    process_index: this process; defaults to jax.process_index().
    process_count: number of processes; defaults to jax.process_count().

  Returns:
    (dataset, num_batches). The dataset yields exactly num_batches dicts
    {"image": float32 (B, H, W, C), "label": int32 (B,), "mask": bool (B,)},
    B = cfg.eval_batch_size // process_count, H = W = cfg.image_size.
  """
  cfg = input_settings(cfg)
  process_index, process_count = _process_info(process_index, process_count)
  local_batch = _local_batch_size(
      cfg.eval_batch_size, process_count, "eval_batch_size"
  )
  builder = get_builder(cfg.dataset, cfg.data_dir, cfg.download)
  channels = _channels(builder)
  _check_normalization(cfg, channels)
  if cfg.eval_resize == "none":
    _check_native_size(builder, cfg.image_size, "eval_resize", cfg.eval_resize)

  slices = [
      _read_records(
          builder,
          tfds.split_for_jax_process(
              cfg.eval_split, process_index=i, process_count=process_count
          ),
      )
      for i in range(process_count)
  ]
  counts = [
      _num_examples(ds, f"config.input.eval_split={cfg.eval_split!r} slice "
                    f"{i}/{process_count}")
      for i, ds in enumerate(slices)
  ]
  num_batches = math.ceil(max(counts) / local_batch)
  num_padding = num_batches * local_batch - counts[process_index]

  size = cfg.image_size
  real = slices[process_index].map(
      _eval_preprocess(cfg, builder, channels),
      num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
  )
  padding = tf.data.Dataset.from_tensors({
      "image": tf.zeros((size, size, channels), tf.float32),
      "label": tf.constant(0, tf.int32),
      "mask": tf.constant(False),
  }).repeat(num_padding)
  ds = real.concatenate(padding).batch(local_batch, drop_remainder=True)
  ds = ds.prefetch(tf.data.AUTOTUNE)
  return ds.with_options(_options()), num_batches
