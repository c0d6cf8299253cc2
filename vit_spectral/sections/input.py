"""`config.input`: the one definition of the input pipeline's settings.

`InputSettings` holds every field of `config.input` with its default (the only
place a default is written) and every check that needs no data set. The
checks that need the TFDS builder (channels against mean/std, stored image
size against the modes that keep it, prepared or not) live in
`input_pipeline`, next to the builder.

  settings = input_settings(config.input)               # at the edge, once
  config.input = configs.common.input_config("cifar10", image_size=32, ...)
"""

from __future__ import annotations

import dataclasses
from typing import Any

from vit_spectral import settings as settings_lib
from vit_spectral.sections import augment as randaugment
from vit_spectral.sections.augment import RESIZE_METHODS

TRAIN_AUGMENTS = ("none", "pad_crop", "random_resized_crop", "resize")
EVAL_RESIZES = ("none", "resize", "resize_center_crop")


def _field(name: str) -> str:
  return f"{InputSettings.SECTION}.{name}"


@dataclasses.dataclass(frozen=True)
class InputSettings:
  """Settings of the tf.data input pipeline (`config.input`).

  With every recipe option at its default (RandAugment off, no erasing, one
  copy per example, the whole split), the training stream is the plain
  crop-and-flip one.

  Attributes:
    dataset: TFDS name, optionally with config/version ("cifar10:3.0.2").
    image_size: side H = W of the images the model sees.
    batch_size: global training batch (all processes together).
    eval_batch_size: global eval batch; None means "= batch_size" (resolved
      when the settings are built, so the config holds the number).
    data_dir: TFDS data_dir; None = the TFDS default.
    download: allow TFDS to download and prepare a missing data set.
    train_split: TFDS split to train on.
    eval_split: TFDS split to evaluate on.
    shuffle_buffer: records in the shuffle buffer (>= 1).
    train_augment: one of TRAIN_AUGMENTS: "none" keeps the stored image (its
      size must be image_size), "pad_crop" pads by pad_crop_padding and crops
      back (stored size too), "random_resized_crop" is Inception's crop,
      "resize" resizes the whole image to image_size² (bilinear; e.g. the
      8×8 digits at 16×16 for a fine-tuning test).
    pad_crop_padding: pixels of zero padding for "pad_crop" (>= 0).
    flip: random horizontal flips.
    eval_resize: one of EVAL_RESIZES: "none" (stored size must be
      image_size), "resize" to image_size², or "resize_center_crop": shorter
      side to image_size / crop_fraction, then the central image_size².
    crop_fraction: in (0, 1], see eval_resize.
    eval_resize_method: one of RESIZE_METHODS, the kernel of eval_resize
      (antialiased when downscaling): "bilinear", or "bicubic" (Keys a = -0.5,
      PIL's and so timm's eval kernel; the output is clipped to [0, 1], the
      range of the uint8 input, as PIL's uint8 resize clips).
    mean: per-channel mean subtracted after scaling to [0, 1] (C values).
    std: per-channel std divided by (C positive values, as many as mean).
    randaugment_layers: RandAugment N; 0 = off.
    randaugment_magnitude: RandAugment M in [0, 10].
    randaugment_magnitude_std: std of the noise on M per op (>= 0).
    randaugment_ops: op set, a key of `randaugment.OP_SETS`.
    random_erasing: probability of erasing one box per image, in [0, 1].
    repeated_augment: copies of each record per epoch (>= 1; 1 = off).
    train_fraction: train on the first round(f·N) examples of train_split,
      f in (0, 1]; only with an unsliced train_split.
    device_prefetch: global training batches the trainer keeps transferred
      to the devices ahead of the step (`training.device_prefetch`), >= 0;
      0 = each batch is transferred when its step asks for it. Changes
      neither the stream nor its order.
    stream_shards: the shard streams each global batch is drawn from
      (`input_pipeline.create_train_dataset`); None = the process count of
      the run that starts the workdir. Fixed for the workdir's life (saved
      with its checkpoints): a resume on another process or device count
      sees the same examples. Must divide batch_size.
  """

  SECTION = "input"

  dataset: str
  image_size: int
  batch_size: int
  eval_batch_size: int | None = None
  data_dir: str | None = None
  download: bool = False
  train_split: str = "train"
  eval_split: str = "test"
  shuffle_buffer: int = 10_000
  train_augment: str = "pad_crop"
  pad_crop_padding: int = 4
  flip: bool = True
  eval_resize: str = "none"
  crop_fraction: float = 0.875
  eval_resize_method: str = "bilinear"
  mean: tuple[float, ...] = (0.5,)
  std: tuple[float, ...] = (0.5,)
  randaugment_layers: int = 0
  randaugment_magnitude: float = randaugment.MAGNITUDE
  randaugment_magnitude_std: float = randaugment.MAGNITUDE_STD
  randaugment_ops: str = randaugment.OP_SET
  random_erasing: float = 0.0
  repeated_augment: int = 1
  train_fraction: float = 1.0
  device_prefetch: int = 2
  stream_shards: int | None = None

  def __post_init__(self):
    if self.eval_batch_size is None:
      object.__setattr__(self, "eval_batch_size", self.batch_size)
    for name in ("mean", "std"):
      object.__setattr__(self, name, tuple(float(v) for v in getattr(self, name)))
    for name in ("crop_fraction", "randaugment_magnitude", "randaugment_magnitude_std",
                 "random_erasing", "train_fraction"):
      object.__setattr__(self, name, float(getattr(self, name)))
    require = settings_lib.require
    require(isinstance(self.dataset, str) and bool(self.dataset),
            f"{_field('dataset')}={self.dataset!r} must be a TFDS name")
    for name in ("image_size", "batch_size", "eval_batch_size", "shuffle_buffer",
                 "repeated_augment"):
      settings_lib.check_range(getattr(self, name), _field(name), 1)
    require(isinstance(self.device_prefetch, int) and not isinstance(self.device_prefetch, bool),
            f"{_field('device_prefetch')}={self.device_prefetch!r} must be an int >= 0")
    settings_lib.check_range(self.device_prefetch, _field("device_prefetch"), 0)
    settings_lib.check_range(self.pad_crop_padding, _field("pad_crop_padding"), 0)
    settings_lib.check_choice(self.train_augment, TRAIN_AUGMENTS,
                              _field("train_augment"))
    settings_lib.check_choice(self.eval_resize, EVAL_RESIZES, _field("eval_resize"))
    settings_lib.check_choice(self.eval_resize_method, RESIZE_METHODS,
                              _field("eval_resize_method"))
    settings_lib.check_range(self.crop_fraction, _field("crop_fraction"), 0.0, 1.0,
                             low_open=True)
    require(len(self.mean) >= 1 and len(self.mean) == len(self.std),
            f"{_field('mean')}={self.mean} and {_field('std')}={self.std} must "
            "have one value per channel each (the same length)")
    require(all(s > 0 for s in self.std),
            f"{_field('std')}={self.std} must be positive")
    settings_lib.check_range(self.random_erasing, _field("random_erasing"), 0.0, 1.0)
    settings_lib.check_range(self.train_fraction, _field("train_fraction"), 0.0, 1.0,
                             low_open=True)
    require(self.train_fraction == 1.0 or "[" not in self.train_split,
            f"{_field('train_fraction')}={self.train_fraction} cannot be combined "
            f"with the sliced {_field('train_split')}={self.train_split!r}; slice "
            "one way")
    randaugment.check_randaugment(self.randaugment_layers, self.randaugment_magnitude,
                                  self.randaugment_magnitude_std, self.randaugment_ops)
    if self.stream_shards is not None:
      settings_lib.check_range(self.stream_shards, _field("stream_shards"), 1)
      require(self.batch_size % self.stream_shards == 0,
              f"{_field('batch_size')}={self.batch_size} must be a multiple of "
              f"{_field('stream_shards')}={self.stream_shards} (each global batch takes "
              "batch_size / stream_shards examples from each shard stream)")


def input_settings(section: Any) -> InputSettings:
  """`section` (an InputSettings, a `config.input` ConfigDict or a Mapping) as
  InputSettings; missing fields take their defaults."""
  return settings_lib.as_settings(InputSettings, section)
