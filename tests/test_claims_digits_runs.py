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
