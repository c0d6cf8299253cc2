"""Layers that differ (`model.layer_overrides`): segments, names, scan = loop, checks."""

import jax
import numpy as np
import pytest

from vit_spectral.configs import digits_vit
from vit_spectral.training import config_checks
from vit_spectral.models import (BlockSpec, build_model, loop_to_scan, model_layout, per_layer,
                                 scan_to_loop)
from vit_spectral.models.segments import layer_specs, segments, star_overrides
from vit_spectral.training.optim import weight_decay_mask

IMAGES = jax.random.normal(jax.random.key(0), (2, 8, 8, 1))


def tiny(**kw):
  fields = dict(patch_size=4, hidden_size=8, depth=4, num_heads=2, mlp_dim=16)
  return build_model(dict(fields, **kw), 3)


def init_params(model):
  return jax.jit(model.init)(jax.random.key(1), IMAGES)["params"]


def test_segments_group_consecutive_identical_layers():
  base = BlockSpec(num_heads=2, mlp_dim=16, attention="dot_product",
                   attention_kwargs={"qkv_bias": False})
  overrides = [{"start": 0, "stop": 2, "attention": {"value_output": "minus"}},
               {"start": 4, "stop": 6, "block": {"mlp_dim": 7}},
               {"start": 5, "stop": 6, "attention": {"name": "cosine", "learnable_tau": False}}]
  layers = layer_specs(6, base, overrides)
  segs = segments(layers)
  assert [(s.start, s.stop) for s in segs] == [(0, 2), (2, 4), (4, 5), (5, 6)]
  assert [s.spec for s in segs] == [layers[0], layers[2], layers[4], layers[5]]
  assert layers[0].attention_kwargs == {"qkv_bias": False, "value_output": "minus"}
  assert layers[3] == base
  assert layers[4].mlp_dim == 7 and layers[4].attention_kwargs == {"qkv_bias": False}
  # Another variant replaces the shared options instead of merging into them.
  assert layers[5].attention == "cosine" and layers[5].attention_kwargs == {"learnable_tau": False}
  same = layer_specs(6, base, [{"start": 1, "stop": 3, "attention": {"qkv_bias": False}}])
  assert len(segments(same)) == 1


def test_no_op_overrides_keep_the_single_stack_names():
  plain = init_params(tiny())["encoder"]
  same = init_params(tiny(layer_overrides=({"start": 1, "stop": 3, "block": {"mlp_dim": 16}},)))[
      "encoder"]
  assert sorted(plain) == sorted(same) == ["encoder_norm", "encoderblock"]
  chex_equal = jax.tree_util.tree_map(lambda p, q: np.array_equal(p, q), plain, same)
  assert all(jax.tree_util.tree_leaves(chex_equal))


def test_star_model_scan_equals_loop_and_layouts_round_trip():
  scan, loop = tiny(layer_overrides=star_overrides(4)), tiny(
      layer_overrides=star_overrides(4), encoder_mode="loop")
  params = init_params(scan)
  assert sorted(params["encoder"]) == ["encoder_norm", "encoderblock_segment0",
                                       "encoderblock_segment1"]
  assert "h_theta" in params["encoder"]["encoderblock_segment0"]["attention"]
  assert "value" in params["encoder"]["encoderblock_segment1"]["attention"]
  looped = scan_to_loop(params)
  assert sorted(looped["encoder"]) == ["encoder_norm"] + [f"encoderblock_{i}" for i in range(4)]
  assert "h_theta" in looped["encoder"]["encoderblock_1"]["attention"]
  assert "value" in looped["encoder"]["encoderblock_2"]["attention"]

  def run(model, p):
    return jax.jit(lambda p: model.apply({"params": p}, IMAGES, mutable=["intermediates"]))(p)[1]

  s_scan, s_loop = run(scan, params), run(loop, looped)
  l_scan, l_loop = per_layer(s_scan["intermediates"]), per_layer(s_loop["intermediates"])
  assert len(l_scan) == len(l_loop) == 4
  for a, b in zip(l_scan, l_loop):
    np.testing.assert_allclose(a["block_output"], b["block_output"], atol=1e-5)

  assert model_layout(scan) == (2, 2)
  back = loop_to_scan(looped, model_layout(scan))
  same = jax.tree_util.tree_map(lambda p, q: np.array_equal(p, q), back, params)
  assert all(jax.tree_util.tree_leaves(same))
  with pytest.raises(ValueError, match="segment_lengths"):
    loop_to_scan(looped, [3, 2])


def test_weight_decay_skips_1d_parameters_of_every_segment():
  params = jax.eval_shape(lambda: tiny(layer_overrides=star_overrides(4)).init(
      jax.random.key(1), IMAGES))["params"]
  mask = weight_decay_mask(params)["encoder"]
  seg0, seg1 = mask["encoderblock_segment0"], mask["encoderblock_segment1"]
  assert seg0["attention"]["h_theta"] and not seg0["attention"]["h_psi"]
  assert not seg0["attention"]["out_bias"] and not seg1["attention"]["out"]["bias"]
  assert seg1["attention"]["out"]["kernel"]


def config_with(**model):
  config = digits_vit.get_config()
  for key, value in model.items():
    config.model[key] = value
  return config


def test_config_checks_name_bad_fields():
  good = config_with(attention=dict(name="dot_product", value_output="plus_ns"),
                     layer_overrides=star_overrides(4))
  config_checks.validate_config(good)
  cases = [
      (dict(attention=dict(name="dot_product", value_output="minuss")), "value_output"),
      (dict(layer_overrides=({"start": 2, "stop": 9},)), r"layer_overrides\[0\].*depth=4"),
      (dict(layer_overrides=({"stop": 2, "attn": {}},)), "unknown keys"),
      (dict(layer_overrides=({"stop": 2, "attention": {"value_outptu": "x"}},)), "unknown options"),
      (dict(layer_overrides=({"stop": 2, "attention": {"value_output": "x"}},)), "value_output"),
      (dict(layer_overrides=({"stop": 2, "block": {"nope": 1}},)), r"layer_overrides\[0\].block"),
  ]
  for model, match in cases:
    with pytest.raises(ValueError, match=match):
      config_checks.validate_config(config_with(**model))


def test_build_model_passes_layer_overrides():
  model = build_model(dict(config_with(layer_overrides=star_overrides(4)).model), 10)
  assert model.layer_overrides == star_overrides(4)
