"""Every analysis function that reads parameters, on the scan, the loop and a
two-segment encoder: the same weights give the same per-layer results."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_spectral.analysis import (degenerate_heads, gaussian_heads, plot_attention_centres,
                                   prune_heads, remove_heads, vit_lipschitz_bound)
from vit_spectral.analysis.eigen import layer_kernels
from vit_spectral.attention.value_output import ValueOutput, value_output_kernels
from vit_spectral.models import build_model, layer_fields, layer_trees, model_layout, to_layout

LAYOUTS = {"scan": (2,), "segments": (1, 1), "loop": None}


def three_layouts(params):
  """The same weights in the three layouts (params of a depth-2 model)."""
  return {name: to_layout(params, layout) for name, layout in LAYOUTS.items()}


# --- Gaussian heads (paper 002): centres, degenerate heads, pruning, the plot.

HEADS = 4
DEGENERATE = [[1], [2, 3]]        # set below: a uniform head, then two stripes


def gaussian_vit(layout_name, **attention):
  """Depth 2; "segments" differs from "scan" only by an eval-time no-op override."""
  model = build_model(dict(patch_size=2, hidden_size=16, depth=2, num_heads=HEADS,
                           mlp_dim=16, stem="space_to_depth", pooling="mean", posemb="none",
                           attention=dict(name="gaussian", full_width_heads=True, **attention)),
                      num_classes=10)
  if layout_name == "segments":
    return model.clone(layer_overrides=({"start": 1, "stop": 2, "block": {"dropout_rate": 0.1}},))
  if layout_name == "loop":
    return model.clone(encoder=model.encoder.replace(mode="loop"))
  return model


@functools.lru_cache(maxsize=None)
def gaussian_params(shared_value: bool):
  """Scan-layout params with the DEGENERATE heads and a non-zero classifier."""
  images = jnp.zeros((1, 8, 8, 1))
  params = jax.jit(gaussian_vit("scan", shared_value=shared_value).init)(
      jax.random.key(1), images)["params"]
  params = jax.tree_util.tree_map(np.array, params)
  s = params["encoder"]["encoderblock"]["attention"]["inv_sqrt_cov"]     # (L, H, 2, 2)
  s[0, 1] = 1e-3 * np.eye(2)               # Σ⁻¹ = 1e-6 I: largest eigenvalue < 1e-5
  s[1, 2] = np.diag([1.0, 1e-4])           # condition number 1e8
  s[1, 3] = np.diag([1e-4, 2.0])
  params["head"]["kernel"] = np.random.default_rng(0).normal(size=(16, 10)).astype(np.float32)
  return params


def test_gaussian_heads_and_degenerate_heads_in_every_layout(tmp_path):
  params = gaussian_params(False)
  scan = params["encoder"]["encoderblock"]["attention"]
  for name, p in three_layouts(params).items():
    heads = gaussian_heads(p)
    assert len(heads) == 2, name
    for layer, found in enumerate(heads):
      np.testing.assert_array_equal(found["centers"], scan["centers"][layer])
      s = scan["inv_sqrt_cov"][layer].astype(np.float64)
      np.testing.assert_allclose(found["precision"], s @ np.swapaxes(s, -1, -2), rtol=1e-6)
    assert [d.tolist() for d in degenerate_heads(p)] == DEGENERATE, name
  fig = plot_attention_centres(three_layouts(params)["segments"], path=str(tmp_path / "c.png"))
  panels = [ax for ax in fig.axes if ax.lines]
  assert len(panels) == 2
  for layer, ax in enumerate(panels):       # one marker per head, at (column, row) shift
    drawn = np.array([line.get_xydata()[0] for line in ax.lines])
    np.testing.assert_allclose(drawn, scan["centers"][layer][:, ::-1], rtol=1e-6)


def kept_heads_model(params, removed):
  """An independent network: each layer has only its kept heads (a ViT whose
  layers have fewer heads, loop layout), their parameters sliced from `params`.

  Full-width heads keep Dh = D whatever the head count. Head axes: centers (H, 2),
  inv_sqrt_cov (H, 2, 2), value kernel (D, H, Dh) and bias (H, Dh), out kernel
  (H, Dh, D); shared_value (D, Dh) and the out bias have none.
  """
  head_axis = {("centers",): 0, ("inv_sqrt_cov",): 0, ("value", "kernel"): 1,
               ("value", "bias"): 0, ("out", "kernel"): 0,
               ("shared_value", "kernel"): None, ("shared_value", "bias"): None,
               ("out", "bias"): None}
  stacked = params["encoder"]["encoderblock"]
  encoder = {"encoder_norm": params["encoder"]["encoder_norm"]}
  kept = [[h for h in range(HEADS) if h not in r] for r in removed]
  for layer, heads in enumerate(kept):
    block = jax.tree_util.tree_map(lambda a: a[layer], stacked)

    def slice_heads(path, leaf, heads=heads):
      keys = tuple(k.key for k in path)
      axis = head_axis[keys]             # an unknown parameter fails here
      return leaf if axis is None else np.take(leaf, heads, axis=axis)

    block["attention"] = jax.tree_util.tree_map_with_path(slice_heads, block["attention"])
    encoder[f"encoderblock_{layer}"] = block
  model = gaussian_vit("loop", shared_value="shared_value" in stacked["attention"])
  model = model.clone(layer_overrides=tuple(
      {"start": l, "stop": l + 1, "block": {"num_heads": len(h)}} for l, h in enumerate(kept)))
  return model, dict(params, encoder=encoder)


@pytest.mark.parametrize("shared_value", [False, True])
def test_pruned_model_equals_the_network_without_those_heads(shared_value):
  params = gaussian_params(shared_value)
  images = jax.random.normal(jax.random.key(0), (2, 8, 8, 1))
  reference_model, reference_params = kept_heads_model(params, DEGENERATE)
  reference = reference_model.apply({"params": reference_params}, images)
  for name, p in three_layouts(params).items():
    model = gaussian_vit(name, shared_value=shared_value)
    variables = {"params": p}
    pruned = prune_heads(variables, degenerate_heads(p))
    # Same collections, same layout: the model carries nothing for pruning.
    chex.assert_trees_all_equal_structs(pruned, variables)
    apply = jax.jit(model.apply)
    logits = apply(pruned, images)
    np.testing.assert_allclose(logits, reference, rtol=1e-5, atol=1e-6, err_msg=name)
    assert np.abs(logits - apply(variables, images)).max() > 1e-3, name
  with pytest.raises(ValueError, match="out of range"):
    prune_heads({"params": params}, [[HEADS], []])



@pytest.mark.parametrize("shared_value", [False, True])
def test_removed_heads_give_the_network_without_them_with_fewer_parameters(shared_value):
  """remove_heads (the model the paper trains on, Fig. 8) equals the
  independent network with only the kept heads, in every layout."""
  params = gaussian_params(shared_value)
  images = jax.random.normal(jax.random.key(0), (2, 8, 8, 1))
  reference_model, reference_params = kept_heads_model(params, DEGENERATE)
  reference = reference_model.apply({"params": reference_params}, images)
  count = lambda tree: sum(np.size(x) for x in jax.tree_util.tree_leaves(tree))
  for name, p in three_layouts(params).items():
    model = gaussian_vit(name, shared_value=shared_value)
    smaller, variables = remove_heads(model, {"params": p}, DEGENERATE, (8, 8, 1))
    np.testing.assert_allclose(smaller.apply(variables, images), reference,
                               rtol=1e-5, atol=1e-6, err_msg=name)
    assert [f["num_heads"] for f in layer_fields(smaller)] == [3, 2]
    assert count(variables["params"]) < count(p)
    # Loop stays loop; a scanned encoder stores one stack per head count.
    assert model_layout(smaller) == (None if name == "loop" else (1, 1))


def test_remove_heads_refuses_a_variant_with_carried_state():
  model = build_model(dict(patch_size=4, hidden_size=16, depth=2, num_heads=2, mlp_dim=16,
                           attention=dict(name="hopfield")), num_classes=3)
  params = jax.eval_shape(model.init, jax.random.key(0), jnp.zeros((1, 8, 8, 1)))["params"]
  with pytest.raises(ValueError, match="model.attention='hopfield'.*carries per-head state"):
    remove_heads(model, {"params": params}, [[0], []], (8, 8, 1))

# --- Eigen kernels (paper 003): each layer's own value_output settings.

def test_layer_kernels_read_each_layers_settings_in_every_layout():
  clipped = ValueOutput("minus", clip=True, eps=0.5)
  model = build_model(dict(patch_size=4, hidden_size=16, depth=2, num_heads=2, mlp_dim=16,
                           attention=dict(name="dot_product", value_output="minus"),
                           layer_overrides=({"start": 1, "stop": 2,
                                             "attention": {"value_output_clip": True,
                                                           "value_output_eps": clipped.eps}},)),
                      num_classes=3)
  assert model_layout(model) == (1, 1)
  params = jax.jit(model.init)(jax.random.key(0), jnp.zeros((1, 8, 8, 1)))["params"]
  results = {name: layer_kernels(model, p) for name, p in three_layouts(params).items()}
  for name, kernels in results.items():
    chex.assert_trees_all_close(kernels, results["segments"], rtol=1e-6, atol=1e-7)
  trees = layer_trees(params)
  expected = [value_output_kernels(trees[0]["attention"], "minus", 2),
              value_output_kernels(trees[1]["attention"], clipped, 2)]
  chex.assert_trees_all_close(results["segments"], expected, rtol=1e-6, atol=1e-7)
  # The override matters: ψ ~ U(0, 1], so the clip at −0.5 changes layer 1.
  unclipped = value_output_kernels(trees[1]["attention"], "minus", 2)[1]
  assert np.abs(np.asarray(unclipped) - np.asarray(expected[1][1])).max() > 1e-2


# --- Lipschitz bound (paper 001): per-layer parameters and per-layer fields.

def test_lipschitz_bound_in_every_layout_respects_layer_overrides():
  model = build_model(dict(patch_size=2, hidden_size=16, depth=2, num_heads=2, mlp_dim=32,
                           norm="center_norm", attention=dict(name="cosine", tau=2.0, epsilon=1.0),
                           kernel_init="spectral",
                           layer_overrides=({"start": 1, "stop": 2, "attention": {"tau": 6.0}},)),
                      num_classes=0)
  assert model_layout(model) == (1, 1)
  params = jax.jit(model.init)(jax.random.key(0), jnp.zeros((1, 4, 4, 1)))["params"]
  reports = {name: vit_lipschitz_bound(model, p, num_tokens=5)
             for name, p in three_layouts(params).items()}
  for name, report in reports.items():
    assert len(report.block_bounds) == 2, name
    np.testing.assert_allclose(report.block_bounds, reports["segments"].block_bounds, rtol=1e-9)
    np.testing.assert_allclose(report.network_bound, reports["segments"].network_bound,
                               rtol=1e-9)
  # Layer 1's τ = 6 (not the shared 2) enters its bound; layer 0 keeps τ = 2.
  shared = vit_lipschitz_bound(model.clone(layer_overrides=None), to_layout(params, None),
                               num_tokens=5)
  ours = reports["loop"]
  assert ours.block_bounds[0] == pytest.approx(shared.block_bounds[0], rel=1e-9)
  assert ours.block_bounds[1] > 1.5 * shared.block_bounds[1]
