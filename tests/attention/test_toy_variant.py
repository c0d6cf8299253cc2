"""A new attention variant needs its own file only: a toy variant defined here
(scores scaled by a learned per-head temperature) overrides one hook of the
pipeline, declares its parameter's logical axes and its logged scalar, and
then trains two steps with the library's trainer on a (data, fsdp, model)
mesh: its parameter is split with the heads, and the diagnostics log its
scalar for every layer. Nothing in vit_spectral/ names it."""

import flax.linen as nn
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from vit_spectral.attention import Attention, register_attention, registry, scaled_dot_logits
from vit_spectral.configs import digits_vit
from vit_spectral.training import trainer
from vit_spectral.training.event_files import layer_series, read_scalars

NAME = "toy_temperature"


@pytest.fixture
def toy_variant():
  """Registers the toy for one test, then removes it from the registry (other
  tests list the registered variants)."""

  @register_attention(NAME)
  class ToyTemperatureAttention(Attention):
    """softmax(t_h · q kᵀ/√Dh) V, one learned temperature t_h per head (init 1)."""
    PARAM_AXES = {"temperature": ("heads",)}
    LOGGED_PARAMS = {"temperature": "toy_temperature"}

    def scores(self, q, k, x):
      del x
      t = self.param("temperature", nn.initializers.ones, (self.num_heads,), self.param_dtype)
      return scaled_dot_logits(q, k) * t.astype(jnp.float32)[:, None, None]

  yield ToyTemperatureAttention
  registry._REGISTRY.pop(NAME)


@pytest.mark.extended  # a training run (~20 s): .ci/run's extended step
def test_a_toy_variant_trains_sharded_and_logs_its_scalar(toy_variant, tmp_path):
  config = digits_vit.get_config("steps=2")
  config.model = ml_collections.ConfigDict(dict(
      patch_size=2, hidden_size=8, depth=2, num_heads=2, mlp_dim=16,
      attention=dict(name=NAME), encoder_mode="scan"))
  config.mesh = dict(data=-1, fsdp=2, model=2)
  config.input.batch_size = 8
  config.input.eval_batch_size = 120
  config.log_every = config.eval_every = config.checkpoint_every = 2
  config.optim.warmup_steps = 1
  config.diagnostics.every = 2
  config.diagnostics.num_images = 4

  # The shardings the trainer lays its state out with (`trainer.set_up`
  # builds them as `train_and_evaluate` does): t (depth, H) splits its heads
  # over "model"; (2,) cannot split further over "fsdp"; the moments follow.
  state_sharding = trainer.set_up(config).steps.state_sharding
  block = state_sharding.params["encoder"]["encoderblock"]["attention"]
  assert block["temperature"].spec == P(None, "model")
  assert block["query"]["kernel"].spec == P(None, "fsdp", "model", None)
  mu = state_sharding.opt_state[1][0].mu["encoder"]["encoderblock"]["attention"]
  assert mu["temperature"].spec == P(None, "model")

  trainer.train_and_evaluate(config, str(tmp_path))
  scalars = read_scalars(str(tmp_path))
  for stem in ("toy_temperature_mean", "toy_temperature_min", "toy_temperature_max"):
    steps, values = layer_series(scalars, stem)
    np.testing.assert_array_equal(steps, [0, 2], err_msg=stem)
    assert values.shape == (2, 2), stem            # (logged steps, layers)
    np.testing.assert_array_equal(values[0], [1.0, 1.0], err_msg=stem)  # t = 1 at init
