"""FeatScale (paper 000, eqs. 10-12) as a Block option: maths, neutrality, decay, config."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_spectral.configs import digits_vit
from vit_spectral.training.config_checks import validate_model
from vit_spectral.layers import FeatScale
from vit_spectral.models import build_model, scan_to_loop
from vit_spectral.models.build import model_spec
from vit_spectral.training.optim import param_path, weight_decay_mask

FIELDS = dict(patch_size=2, hidden_size=16, depth=2, num_heads=2, mlp_dim=32)


def vit(**fields):
  """The small ViT (10 classes) with `fields` (config form) changed."""
  return build_model(dict(FIELDS, **fields), num_classes=10)


def test_feat_scale_reweights_dc_and_hc_per_channel():
  rng = np.random.default_rng(0)
  y = rng.standard_normal((2, 5, 3))
  s, t = rng.standard_normal(3), rng.standard_normal(3)
  out = FeatScale().apply({"params": {"dc_scale": s, "hc_scale": t}}, jnp.asarray(y))
  # Eqs. 10-12 with explicit loops: DC = token mean in every row, HC = the rest.
  expected = np.empty_like(y)
  for b in range(2):
    for c in range(3):
      mean = sum(y[b, i, c] for i in range(5)) / 5
      for i in range(5):
        expected[b, i, c] = mean * (1 + s[c]) + (y[b, i, c] - mean) * (1 + t[c])
  np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("attention", ["dot_product", "attn_scale"])
def test_zero_scales_give_exactly_the_plain_block_with_any_attention(attention):
  x = jax.random.normal(jax.random.key(1), (2, 8, 8, 1))
  plain = vit(attention=dict(name=attention))
  scaled = vit(attention=dict(name=attention), block=dict(feat_scale=True))
  params = jax.jit(plain.init)(jax.random.key(0), x)["params"]
  params["head"]["kernel"] = jax.random.normal(jax.random.key(2), params["head"]["kernel"].shape)
  init = jax.jit(scaled.init)(jax.random.key(0), x)["params"]["encoder"]["encoderblock"]["feat_scale"]
  assert {k: v.shape for k, v in init.items()} == {"dc_scale": (2, 16), "hc_scale": (2, 16)}
  assert not any(np.any(v) for v in init.values())  # s = t = 0 at init
  with_scales = jax.tree_util.tree_map(lambda a: a, params)
  with_scales["encoder"]["encoderblock"]["feat_scale"] = init
  y_plain = jax.jit(plain.apply)({"params": params}, x)
  y_scaled = jax.jit(scaled.apply)({"params": with_scales}, x)
  np.testing.assert_array_equal(y_plain, y_scaled)
  with_scales["encoder"]["encoderblock"]["feat_scale"] = jax.tree_util.tree_map(
      lambda a: a + 0.5, init)
  assert not np.allclose(jax.jit(scaled.apply)({"params": with_scales}, x), y_plain)


def test_scale_parameters_are_never_weight_decayed_in_scan_or_loop_layout():
  x = jnp.zeros((1, 8, 8, 1))
  model = vit(attention=dict(name="attn_scale"), block=dict(feat_scale=True))
  shapes = jax.eval_shape(model.init, jax.random.key(0), x)["params"]
  params = jax.tree_util.tree_map(lambda a: np.zeros(a.shape, a.dtype), shapes)
  for tree in (params, scan_to_loop(params)):
    decided = {param_path(p): d for p, d in
               jax.tree_util.tree_flatten_with_path(weight_decay_mask(tree))[0]}
    scales = {k: d for k, d in decided.items() if k.endswith(("omega", "dc_scale", "hc_scale"))}
    assert len(scales) == 3 * (1 if tree is params else 2) and not any(scales.values())
    assert any(decided.values())  # kernels are still decayed


def test_feat_scale_config_is_checked():
  config = digits_vit.get_config()
  config.model.block = dict(feat_scale=True)
  validate_model(model_spec(config.model), 8)
  config.model.block = dict(featscale=True)
  with pytest.raises(ValueError, match="feat_scale"):
    validate_model(model_spec(config.model), 8)
  with pytest.raises(ValueError, match="model.block.feat_scale='yes'"):
    bad = vit(block=dict(feat_scale="yes"))
    jax.eval_shape(bad.init, jax.random.key(0), jnp.zeros((1, 8, 8, 1)))


def test_authors_deit_form_adds_the_reweighted_parts_twice():
  """The authors' DeiT featscale.py, line by line in NumPy: x_attn = x_attn + x_d·s
  + x_h·t, then the residual branch is x_attn + x_d·s + x_h·t; that is eqs. 10-12
  with s and t doubled."""
  rng = np.random.default_rng(3)
  y = rng.standard_normal((2, 5, 4))
  s, t = rng.standard_normal(4), rng.standard_normal(4)
  variables = {"params": {"dc_scale": s, "hc_scale": t}}
  out = FeatScale(form="authors_deit").apply(variables, jnp.asarray(y))
  x_d = y.mean(axis=-2, keepdims=True) * s
  x_h = (y - y.mean(axis=-2, keepdims=True)) * t
  x_attn = y + x_d + x_h
  np.testing.assert_allclose(out, x_attn + x_d + x_h, rtol=1e-5, atol=1e-5)
  mean = y.mean(axis=-2, keepdims=True)
  doubled = mean * (1 + 2 * s) + (y - mean) * (1 + 2 * t)       # eqs. 10-12, 2s and 2t
  np.testing.assert_allclose(out, doubled, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(FeatScale().apply(variables, jnp.asarray(y)),
                             mean * (1 + s) + (y - mean) * (1 + t), rtol=1e-5, atol=1e-5)


def test_authors_deit_form_in_a_vit_equals_the_equations_with_doubled_scales():
  x = jax.random.normal(jax.random.key(4), (2, 8, 8, 1))
  forms = {form: vit(block=dict(feat_scale=True, feat_scale_form=form))
           for form in ("equations", "authors_deit")}
  params = jax.jit(forms["equations"].init)(jax.random.key(0), x)["params"]
  params["head"]["kernel"] = jax.random.normal(jax.random.key(2), params["head"]["kernel"].shape)
  block = params["encoder"]["encoderblock"]
  block["feat_scale"] = jax.tree_util.tree_map(
      lambda a: 0.3 * jax.random.normal(jax.random.key(5), a.shape), block["feat_scale"])
  doubled = jax.tree_util.tree_map(lambda a: a, params)
  doubled["encoder"]["encoderblock"]["feat_scale"] = jax.tree_util.tree_map(
      lambda a: 2 * a, block["feat_scale"])
  authors = jax.jit(forms["authors_deit"].apply)({"params": params}, x)
  np.testing.assert_allclose(authors, jax.jit(forms["equations"].apply)({"params": doubled}, x),
                             rtol=1e-5, atol=1e-5)
  assert not np.allclose(authors, jax.jit(forms["equations"].apply)({"params": params}, x))


def test_feat_scale_form_is_reachable_from_config_and_checked():
  config = digits_vit.get_config()
  config.model.block = dict(feat_scale=True, feat_scale_form="authors_deit")
  validate_model(model_spec(config.model), 8)
  config.model.block = dict(feat_scale=True, feat_scale_form="authors")
  with pytest.raises(ValueError, match=r"model.block.feat_scale_form='authors' \(did you mean "
                     r"'authors_deit'\?\); choose one "
                     r"of \['equations', 'authors_deit'\]"):
    validate_model(model_spec(config.model), 8)
  with pytest.raises(ValueError, match=r"FeatScale.form='twice'; choose one of"):
    FeatScale(form="twice").init(jax.random.key(0), jnp.zeros((1, 3, 2)))
