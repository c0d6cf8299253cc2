"""The ledger's in-memory digits trainer: a rate given at run time equals the
same rate in the config, and a method inserted into trained parameters starts
as the same function."""

from flax import traverse_util
import jax
import numpy as np
import pytest

from benchmarks.claims import digits_runs
from benchmarks.claims.digits_runs import digits, train
from benchmarks.claims.paper000 import method_config


def _config(lr: float, steps: int, method: str = "baseline"):
  config = method_config(method, depth=1, width=8, steps=steps)
  config.optim.learning_rate = lr
  config.optim.warmup_steps = 2
  return config


@pytest.mark.extended
def test_a_rate_given_at_run_time_trains_as_that_rate_in_the_config():
  steps = 6
  want = train(_config(3e-3, steps), seed=0, steps=steps, batch_size=16, chunk=3)
  got = train(_config(1e-2, steps), seed=0, steps=steps, batch_size=16, chunk=3,
              learning_rate=3e-3)
  np.testing.assert_allclose(got.losses, want.losses, rtol=1e-5)
  for a, b in zip(jax.tree.leaves(got.params), jax.tree.leaves(want.params)):
    # Adam amplifies round-off on leaves whose gradient is ~0 (the zero-initialised
    # head): within 1 % of the 6 steps × 3e-3 a parameter can move.
    np.testing.assert_allclose(a, b, atol=2e-4)
  # A different rate really trains differently (the scale is not ignored).
  other = train(_config(1e-2, steps), seed=0, steps=steps, batch_size=16, chunk=3)
  assert not np.allclose(other.losses[1:], want.losses[1:])


def test_a_rate_at_run_time_is_refused_where_the_update_is_not_linear_in_it():
  config = _config(1e-2, 4)
  config.optim.end_learning_rate = 1e-5
  with pytest.raises(ValueError, match="optim.end_learning_rate=0"):
    train(config, seed=0, steps=4, batch_size=8, learning_rate=1e-3)


@pytest.mark.parametrize("method", ["attn_scale", "feat_scale"])
def test_a_method_inserted_into_trained_plain_parameters_is_the_same_function(method):
  plain = train(_config(1e-2, 4), seed=0, steps=4, batch_size=16)
  inserted = train(_config(1e-2, 4, method), seed=1, steps=4, batch_size=16,
                   init_from=plain.params)
  images = digits().test_images[:32]
  want = plain.model.apply({"params": plain.params}, images, train=False)
  got = inserted.model.apply({"params": inserted.init_params}, images, train=False)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  # The method's own parameters (ω, or s and t) are the only new ones, all at 0.
  plain_flat = traverse_util.flatten_dict(dict(plain.params))
  inserted_flat = traverse_util.flatten_dict(dict(inserted.init_params))
  extra = set(inserted_flat) - set(plain_flat)
  assert extra and {path[-1] for path in extra} <= {"omega", "dc_scale", "hc_scale"}
  assert all(not np.any(inserted_flat[path]) for path in extra)


def test_init_from_refuses_a_tree_of_other_shapes_or_paths():
  fresh = {"dense": {"kernel": np.zeros((2, 3))}}
  with pytest.raises(ValueError, match="dense/kernel has shape"):
    digits_runs._start_from(fresh, {"dense": {"kernel": np.zeros((3, 3))}})
  with pytest.raises(ValueError, match="shares no parameter path"):
    digits_runs._start_from(fresh, {"other": {"kernel": np.zeros((2, 3))}})


@pytest.mark.extended
def test_mnist1d_is_generated_balanced_reproducibly_and_leaves_the_global_streams_alone():
  import random  # noqa: PLC0415
  np.random.seed(7)
  random.seed(7)
  want_numpy, want_python = np.random.rand(), random.random()
  np.random.seed(7)
  random.seed(7)
  data = digits_runs.mnist1d.__wrapped__(100)
  # The generator seeds both global streams; they come back as they were.
  assert np.random.rand() == want_numpy and random.random() == want_python
  assert data.train_images.shape == (digits_runs.MNIST1D_TRAIN_EXAMPLES,
                                     *digits_runs.MNIST1D_IMAGE_SHAPE)
  assert data.test_images.shape == (100, *digits_runs.MNIST1D_IMAGE_SHAPE)
  assert data.train_images.dtype == np.float32 and data.train_labels.dtype == np.int32
  # Every class the same number of times over train + test (the generator's
  # num_samples // 10 per class), the standardisation over all signals.
  labels = np.concatenate([data.train_labels, data.test_labels])
  np.testing.assert_array_equal(np.bincount(labels), np.full(10, len(labels) // 10))
  signals = np.concatenate([data.train_images, data.test_images]).reshape(len(labels), -1)
  assert abs(signals.mean()) < 1e-3 and abs(signals.std() - 1) < 1e-3
  again = digits_runs.mnist1d.__wrapped__(100)
  np.testing.assert_array_equal(again.test_images, data.test_images)
  # Against the package's own output: token i (a pixel of the (1, 20, 2) image)
  # holds samples 2i and 2i + 1 of the signal.
  from mnist1d.data import get_dataset_args, make_dataset  # noqa: PLC0415
  args = get_dataset_args()
  args.num_samples, args.train_split = 4100, 4000 / 4100
  raw = make_dataset(args)
  np.testing.assert_array_equal(data.test_labels, raw["y_test"])
  np.testing.assert_allclose(data.test_images[:, 0, 3, 0], raw["x_test"][:, 6], rtol=1e-6)
  np.testing.assert_allclose(data.test_images[:, 0, 3, 1], raw["x_test"][:, 7], rtol=1e-6)


def test_training_on_a_subset_keeps_the_test_images():
  data = digits()
  keep = np.arange(0, len(data.train_labels), 10)
  subset = data.with_training(keep)
  assert len(subset.train_labels) == len(keep) and subset.test_images is data.test_images
  np.testing.assert_array_equal(subset.train_images[1], data.train_images[10])
