"""probe / probe_stages on a model with stages and windowed attention: per-window
maps and per-stage figures, against a direct NumPy computation (test_probe's)."""

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.analysis.test_probe import direct_metrics
from vit_spectral.analysis import probe, probe_stages
from vit_spectral.layers import windows
from vit_spectral.models.intermediates import per_stage, stage_names
from vit_spectral.models.specs import BlockSpec, EncoderSpec
from vit_spectral.models.token_layouts import StripeLayout, WindowLayout
from vit_spectral.models.vit import Encoder


class TwoStages(nn.Module):
  """Stage 0: shifted 2×2 windows on a 4×4 grid, width 8; a 2×2 merge; stage 1:
  cross-shaped stripes of width 1 on the 2×2 grid, width 16."""

  @nn.compact
  def __call__(self, images, *, train=False):
    del train
    x = nn.Conv(8, (2, 2), strides=2, name="embed")(images)       # (B, 4, 4, 8)
    b = x.shape[0]
    x = x.reshape(b, 16, 8)
    block = BlockSpec(num_heads=2, mlp_dim=16)
    windows_then_shifted = (WindowLayout((4, 4), window=(2, 2)),
                            WindowLayout((4, 4), window=(2, 2), shift=(1, 1)))
    x = Stage(depth=2, block=block, layouts=windows_then_shifted, name="stage_0")(x)
    x = x.reshape(b, 2, 2, 2, 2, 8).transpose(0, 1, 3, 2, 4, 5).reshape(b, 4, 32)
    x = nn.Dense(16, name="merge")(x)
    x = Stage(depth=1, block=block, layouts=StripeLayout((2, 2), width=1), name="stage_1")(x)
    return nn.Dense(3)(x.mean(1))


class Stage(nn.Module):
  depth: int
  block: BlockSpec
  layouts: Any      # one token layout for every layer, or one per layer

  @nn.compact
  def __call__(self, x):
    return Encoder(depth=self.depth, block=self.block, spec=EncoderSpec(mode="loop"),
                   layouts=self.layouts, final_norm=False, name="encoder")(x)


@pytest.fixture(scope="module")
def model_and_state():
  model = TwoStages()
  images = jax.random.normal(jax.random.key(0), (2, 8, 8, 1))
  params = model.init(jax.random.key(1), images)["params"]
  rng = np.random.default_rng(0)
  params = jax.tree_util.tree_map(lambda p: p + 0.3 * rng.standard_normal(p.shape, np.float32),
                                  params)
  _, state = model.apply({"params": params}, images, mutable=["intermediates"])
  return model, {"params": params}, images, state["intermediates"]


def test_stage_names_in_numeric_order_and_a_clear_error_without_encoders():
  assert stage_names({"stage_10": {"encoder": {}}, "stage_2": {"encoder": {}}, "head": {}}
                     ) == ["stage_2", "stage_10"]
  assert stage_names({"encoder": {}, "stage_0": {"encoder": {}}}) == [None]
  with pytest.raises(KeyError, match="no 'encoder'"):
    stage_names({"head": {}})


def test_probe_stages_matches_a_direct_computation_per_window(model_and_state):
  model, variables, images, inter = model_and_state
  stages = probe_stages(model, variables, images)
  assert [s["name"] for s in stages] == ["stage_0", "stage_1"]
  sown = dict(per_stage(inter))
  # Stage 0: 4 windows of 2×2 per image; the maps are per window, (B·nW, H, N, N).
  assert stages[0]["attention_weights"].shape == (2, 8, 2, 4, 4)
  assert stages[0]["hc_dc_ratio"].shape == (2, 2)
  for layer, found in enumerate(sown["stage_0"]):
    a = np.asarray(found["attention/attention_weights"], np.float64)
    x = np.asarray(found["block_output"], np.float64)
    expected = direct_metrics(x, np.ones((2, 1, 16, 16)))
    for key in ("hc_dc_ratio", "token_cosine_similarity", "hc_proportion"):
      np.testing.assert_allclose(stages[0][key][layer], expected[key], rtol=2e-4, err_msg=key)
    per_window = direct_metrics(np.ones((8, 4, 1)), a)
    for key in ("attention_cosine_similarity", "attention_spectrum"):
      np.testing.assert_allclose(stages[0][key][layer], per_window[key], rtol=2e-4,
                                 atol=1e-6, err_msg=key)
  # The shifted layer (1): tokens from different regions of a rolled window never mix.
  mask = windows.shifted_window_mask((4, 4), (2, 2), (1, 1))
  maps = np.asarray(stages[0]["attention_weights"][1]).reshape(2, 4, 2, 4, 4)  # b, w, h
  across = np.broadcast_to(~mask[None, :, None], maps.shape)
  assert across.any() and np.all(maps[across] == 0)
  assert np.all(maps[~across] > 0)
  # Stage 1: two head groups of one head each, stripes of 1×2 and 2×1 tokens.
  assert stages[1]["attention_rows/attention_weights"].shape == (1, 4, 1, 2, 2)
  assert stages[1]["attention_cols/attention_weights"].shape == (1, 4, 1, 2, 2)
  assert "attention_weights" not in stages[1]


def test_probe_stacks_the_token_figures_over_every_stage(model_and_state):
  model, variables, images, _ = model_and_state
  result = probe(model, variables, images)
  stages = result["stages"]
  np.testing.assert_array_equal(result["stage"], [0, 0, 1])
  np.testing.assert_allclose(result["hc_dc_ratio"],
                             np.concatenate([s["hc_dc_ratio"] for s in stages]), rtol=1e-6)
  assert result["token_cosine_similarity"].shape == (3, 2)
