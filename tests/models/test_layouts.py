"""models.layouts: one walker over the encoder's layers in the scan, segmented-scan
and loop layouts, its inverse, and each layer's Block fields."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_spectral.models import (Block, BlockSpec, TokenLayout, build_model, layer_fields,
                                 layer_trees, loop_to_scan, model_layout, per_layer,
                                 scan_to_loop, to_layout, tree_layout, with_layer_trees)

IMAGES = jax.random.normal(jax.random.key(0), (2, 8, 8, 1))
TINY = dict(patch_size=4, hidden_size=16, depth=3, num_heads=2, mlp_dim=16)


def tiny(**fields):
  """The tiny ViT (3 classes) with `fields` (config form) changed."""
  return build_model(dict(TINY, **fields), num_classes=3)


def looped(model):
  """`model` with its encoder in loop mode."""
  return model.clone(encoder=model.encoder.replace(mode="loop"))


def hand_tree(depth=4):
  """A params-like tree in the loop layout; layer i's leaves hold i (and 10 + i)."""
  layers = [{"attention": {"w": np.full((3, 2), i, np.float32)},
             "norm": {"scale": np.full((2,), 10 + i, np.float32)}} for i in range(depth)]
  encoder = {"encoder_norm": {"scale": np.ones(2, np.float32)},
             **{f"encoderblock_{i}": layer for i, layer in enumerate(layers)}}
  return {"encoder": encoder, "head": {"kernel": np.zeros((2, 3), np.float32)}}, layers


@pytest.mark.parametrize("layout,names", [
    (None, [f"encoderblock_{i}" for i in range(4)]),
    ((4,), ["encoderblock"]),
    ((1, 3), ["encoderblock_segment0", "encoderblock_segment1"]),
])
def test_the_walker_reads_back_what_it_wrote_in_every_layout(layout, names):
  loop, layers = hand_tree()
  tree = with_layer_trees(loop, layers, layout)
  assert sorted(tree["encoder"]) == sorted(["encoder_norm", *names])
  assert tree["head"] is loop["head"] and tree["encoder"]["encoder_norm"] is loop[
      "encoder"]["encoder_norm"]
  assert tree_layout(tree) == layout
  chex.assert_trees_all_equal(layer_trees(tree), layers)
  chex.assert_trees_all_equal(to_layout(tree, None), loop)
  chex.assert_trees_all_equal(scan_to_loop(tree), loop)
  for other in (None, (4,), (2, 2), (1, 1, 2)):
    chex.assert_trees_all_equal(to_layout(to_layout(tree, other), layout), tree)


def test_a_scanned_leaf_stacks_the_layers_of_its_segment():
  loop, layers = hand_tree()
  seg = with_layer_trees(loop, layers, (1, 3))["encoder"]
  assert seg["encoderblock_segment0"]["attention"]["w"].shape == (1, 3, 2)
  np.testing.assert_array_equal(seg["encoderblock_segment1"]["attention"]["w"][:, 0, 0], [1, 2, 3])
  np.testing.assert_array_equal(seg["encoderblock_segment1"]["norm"]["scale"][:, 0], [11, 12, 13])


def test_sown_values_and_abstract_trees_walk_too():
  sown = {"encoder": {"encoderblock_segment0": {"block_output": (np.arange(6).reshape(2, 3),)},
                      "encoderblock_segment1": {"block_output": (np.arange(3)[None] + 10,)}}}
  assert [l["block_output"][0].tolist() for l in layer_trees(sown)] == [
      [0, 1, 2], [3, 4, 5], [10, 11, 12]]
  assert [l["block_output"].tolist() for l in per_layer(sown)] == [
      [0, 1, 2], [3, 4, 5], [10, 11, 12]]
  loop, _ = hand_tree()
  abstract = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), loop)
  stacked = to_layout(abstract, (4,))
  assert stacked["encoder"]["encoderblock"]["attention"]["w"].shape == (4, 3, 2)
  assert layer_trees(stacked)[2]["norm"]["scale"] == jax.ShapeDtypeStruct((2,), np.float32)


def test_malformed_trees_are_refused():
  loop, layers = hand_tree()
  with pytest.raises(KeyError, match="no 'encoder'"):
    layer_trees(loop["encoder"])
  with pytest.raises(KeyError, match="no 'encoderblock'"):
    layer_trees({"encoder": {"encoder_norm": {}}})
  mixed = dict(loop["encoder"], encoderblock={"w": np.zeros((2, 1))})
  with pytest.raises(ValueError, match="mixes"):
    layer_trees({"encoder": mixed})
  gap = {k: v for k, v in loop["encoder"].items() if k != "encoderblock_1"}
  with pytest.raises(ValueError, match="numbered"):
    layer_trees({"encoder": gap})
  ragged = {"encoderblock": {"a": np.zeros((2, 1)), "b": np.zeros((3, 1))}}
  with pytest.raises(ValueError, match="not a scanned stack"):
    layer_trees({"encoder": ragged})
  with pytest.raises(ValueError, match="segment_lengths"):
    with_layer_trees(loop, layers, (3, 2))
  with pytest.raises(ValueError, match="segment_lengths"):
    loop_to_scan(loop, [4, 0])


def test_layer_fields_merge_block_options_and_overrides_and_build_the_models_blocks():
  model = tiny(depth=4, attention=dict(name="dot_product", qkv_bias=False),
               block={"feat_scale": True},
               layer_overrides=({"start": 1, "stop": 3, "block": {"mlp_dim": 24},
                                 "attention": {"value_output": "minus"}},))
  fields = layer_fields(model)
  assert [f["mlp_dim"] for f in fields] == [16, 24, 24, 16]
  assert [f["attention_kwargs"] for f in fields] == [
      {"qkv_bias": False}, *[{"qkv_bias": False, "value_output": "minus"}] * 2, {"qkv_bias": False}]
  assert all(f["feat_scale"] and f["num_heads"] == 2 for f in fields)
  assert model_layout(model) == (1, 2, 1)
  assert model_layout(looped(model)) is None
  assert model_layout(tiny()) == (3,)
  params = jax.eval_shape(model.init, jax.random.key(0), IMAGES)["params"]
  assert tree_layout(params) == model_layout(model)
  # Blocks built from the fields have exactly the model's per-layer parameters.
  x = jnp.zeros((2, 5, 16))
  for fields_i, tree in zip(fields, layer_trees(params)):
    block = Block(BlockSpec(**fields_i), TokenLayout((2, 2), 1))
    shapes = jax.eval_shape(block.init, jax.random.key(0), (x, None), 0.0)["params"]
    chex.assert_trees_all_equal_shapes(shapes, tree)


def test_one_models_weights_in_three_layouts_give_the_same_network():
  """One stack, two segments (an override that changes nothing at eval) and the
  loop: the converted weights compute the same logits and sow the same layers."""
  scan = tiny()
  segmented = scan.clone(layer_overrides=({"start": 1, "stop": 3, "block": {"dropout_rate": 0.1}},))
  loop = looped(scan)
  params = jax.jit(scan.init)(jax.random.key(1), IMAGES)["params"]
  rng = np.random.default_rng(0)
  params = jax.tree_util.tree_map(lambda a: a + 0.05 * rng.standard_normal(a.shape, np.float32),
                                  params)                         # a non-zero head
  outputs = []
  for model in (scan, segmented, loop):
    p = to_layout(params, model_layout(model))
    chex.assert_trees_all_equal_structs(p, jax.eval_shape(model.init, jax.random.key(1),
                                                          IMAGES)["params"])
    outputs.append(jax.jit(lambda p, m=model: m.apply({"params": p}, IMAGES,
                                                       mutable=["intermediates"]))(p))
  (logits, sown), others = outputs[0], outputs[1:]
  assert float(jnp.abs(logits).max()) > 0
  layers = per_layer(sown["intermediates"])
  assert len(layers) == 3
  for other_logits, other_sown in others:
    np.testing.assert_allclose(other_logits, logits, rtol=1e-5, atol=1e-6)
    for a, b in zip(per_layer(other_sown["intermediates"]), layers, strict=True):
      chex.assert_trees_all_close(a, b, rtol=1e-5, atol=1e-6)
  seg_params = to_layout(params, (1, 2))
  assert sorted(seg_params["encoder"]) == ["encoder_norm", "encoderblock_segment0",
                                           "encoderblock_segment1"]
  chex.assert_trees_all_equal(scan_to_loop(seg_params), scan_to_loop(params))
  chex.assert_trees_all_equal(loop_to_scan(scan_to_loop(seg_params), [1, 2]), seg_params)
  chex.assert_trees_all_equal(loop_to_scan(seg_params), params)
