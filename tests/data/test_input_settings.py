"""InputSettings (`config.input`): defaults, checks, command-line overrides, and
the resume arithmetic of the training stream."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import dataclasses  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from absl import flags  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from vit_spectral.configs import common  # noqa: E402
from vit_spectral import data, settings  # noqa: E402
from vit_spectral.data import input_pipeline  # noqa: E402
from tests.data.test_input_pipeline import digits_dir, make_cfg, take  # noqa: E402,F401

REQUIRED = dict(dataset="digits", image_size=8, batch_size=64)


@pytest.mark.parametrize("field,value", [
    ("train_augment", "crop"),
    ("eval_resize", "center"),
    ("train_fraction", 0.0),
    ("train_fraction", 1.5),
    ("random_erasing", 1.5),
    ("random_erasing", -0.1),
    ("repeated_augment", 0),
    ("randaugment_layers", -1),
    ("randaugment_magnitude", 11.0),
    ("randaugment_magnitude_std", -0.5),
    ("randaugment_ops", "fancy"),
    ("batch_size", 0),
    ("eval_batch_size", -8),
    ("shuffle_buffer", 0),
    ("image_size", 0),
    ("pad_crop_padding", -1),
    ("crop_fraction", 0.0),
    ("std", (0.0,)),
    ("dataset", ""),
])
def test_bad_field_raises_naming_it(field, value):
  with pytest.raises(ValueError, match=rf"input\.{field}="):
    data.InputSettings(**{**REQUIRED, field: value})


def test_choice_errors_list_the_choices():
  # The nearest choice is named when one is close (`settings.check_choice`).
  with pytest.raises(ValueError, match=r"input\.train_augment='crop' \(did you mean "
                     r"'pad_crop'\?\); choose one of "
                     r"\['none', 'pad_crop', 'random_resized_crop', 'resize'\]"):
    data.InputSettings(**REQUIRED, train_augment="crop")
  with pytest.raises(ValueError, match=r"input\.eval_resize='center'; choose one of"):
    data.InputSettings(**REQUIRED, eval_resize="center")


def test_mean_and_std_lengths_and_sliced_fraction():
  with pytest.raises(ValueError, match=r"input\.mean=.*input\.std=.*same length"):
    data.InputSettings(**REQUIRED, mean=(0.5, 0.5, 0.5), std=(0.5,))
  with pytest.raises(ValueError, match=r"input\.train_fraction=0\.5.*sliced"):
    data.InputSettings(**REQUIRED, train_fraction=0.5, train_split="train[:50%]")


def test_unknown_field_and_section_conversion():
  with pytest.raises(ValueError, match=r"config\.input has unknown fields \['shuffle'\]"):
    data.input_settings(dict(REQUIRED, shuffle=True))
  with pytest.raises(ValueError, match=r"unknown input fields \['shuffle'\]"):
    common.input_config("digits", image_size=8, batch_size=64, shuffle=True)
  # A section without the recipe options gets InputSettings' defaults.
  from_section = data.input_settings(make_cfg())
  assert from_section == data.InputSettings(**{
      k: v for k, v in make_cfg().items()})
  assert data.input_settings(from_section) is from_section


def test_input_config_writes_every_field_and_resolves_eval_batch():
  config = common.input_config("cifar10", image_size=32, batch_size=96)
  assert sorted(config.keys()) == sorted(settings.field_names(data.InputSettings))
  assert config.eval_batch_size == 96
  built = data.input_settings(config)
  for field in dataclasses.fields(data.InputSettings):
    assert getattr(built, field.name) == config[field.name]


def test_data_dir_is_overridable_from_the_command_line():
  """`--config.input.data_dir=/x` as ml_collections.config_flags parses it."""
  config = common.base_config()
  config.input = common.input_config("digits", image_size=8, batch_size=8)
  argv = ["train.py", "--config.input.data_dir=/tmp/x",
          "--config.input.randaugment_layers=2"]
  flag_values = flags.FlagValues()
  config_flags.DEFINE_config_dict("config", config, flag_values=flag_values,
                                  sys_argv=argv)
  flag_values(argv)
  assert flag_values.config.input.data_dir == "/tmp/x"
  assert flag_values.config.input.randaugment_layers == 2


@pytest.mark.parametrize("start_step,local_batch,records,repeats", [
    (0, 4, 10, 1), (3, 4, 10, 1), (5, 7, 10, 1), (13, 5, 9, 3), (4, 100, 144, 3),
    (6, 100, 144, 3), (11, 3, 2, 4)])
def test_stream_start_matches_an_enumerated_stream(start_step, local_batch, records,
                                                   repeats):
  """stream_start locates example start_step·B in the stream spelled out as
  (epoch, record, copy) triples."""
  epochs = start_step * local_batch // (records * repeats) + 2
  stream = [(e, r, c) for e in range(epochs) for r in range(records)
            for c in range(repeats)]
  start = data.stream_start(start_step, local_batch, records, repeats)
  assert start.first_example == start_step * local_batch
  assert start.examples_per_epoch == records * repeats
  assert (start.start_epoch, start.record_offset, start.copy_offset) == stream[
      start_step * local_batch]


def test_stream_start_rejects_bad_arguments():
  with pytest.raises(ValueError, match="start_step=-1"):
    data.stream_start(-1, 4, 10)
  with pytest.raises(ValueError, match="repeats=0"):
    data.stream_start(0, 4, 10, 0)


def test_pipeline_takes_settings_or_section(digits_dir):  # noqa: F811
  section = make_cfg(data_dir=digits_dir, randaugment_layers=1)
  typed = data.input_settings(section)
  a = take(input_pipeline.create_train_dataset(section, seed=1, process_index=0,
                                               process_count=1), 1)[0]
  b = take(input_pipeline.create_train_dataset(typed, seed=1, process_index=0,
                                               process_count=1), 1)[0]
  np.testing.assert_array_equal(a["image"], b["image"])
  assert data.dataset_meta(typed) == data.dataset_meta(section)
