"""Shapes, exact parameter counts, scan/loop equivalence and errors of the ViT."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_spectral import models
from vit_spectral.models import MODEL_NAMES, build_model, loop_to_scan, per_layer, scan_to_loop

# Parameter counts published for the DeiT/ViT ImageNet models (224², 1000 classes,
# CLS token, learned position embedding), as listed by timm.
PUBLISHED_COUNTS = {"Ti/16": 5_717_416, "S/16": 22_050_664, "B/16": 86_567_656,
                    "L/16": 304_326_632}


def count_by_formula(name: str, image: int, channels: int, classes: int) -> int:
  """Independent count: patch embedding, CLS, position embedding, blocks, norm, head."""
  f = models.variant_fields(name)
  d, m, p, depth = f["hidden_size"], f["mlp_dim"], f["patch_size"], f["depth"]
  tokens = (image // p) ** 2 + 1
  block = 2 * 2 * d + 4 * (d * d + d) + (d * m + m) + (m * d + d)
  return (p * p * channels * d + d) + d + tokens * d + depth * block + 2 * d + (d * classes + classes)


def image_size_for(name: str) -> int:
  return 224 if int(name.split("/")[1]) >= 16 else 32


def n_params(tree) -> int:
  return sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(tree))


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_every_registered_model_has_exact_param_count_and_output_shape(name):
  image = image_size_for(name)
  model = build_model({"variant": name}, num_classes=1000)
  x = jax.ShapeDtypeStruct((2, image, image, 3), jnp.float32)
  variables = jax.eval_shape(lambda r, x: model.init(r, x), jax.random.key(0), x)
  out = jax.eval_shape(lambda v, x: model.apply(v, x), variables, x)
  chex.assert_shape(out, (2, 1000))
  assert n_params(variables["params"]) == count_by_formula(name, image, 3, 1000)
  if name in PUBLISHED_COUNTS:
    assert n_params(variables["params"]) == PUBLISHED_COUNTS[name]


def test_every_registered_name_is_tested():
  # The parametrised test above runs over MODEL_NAMES; a size with no published
  # count must at least have the formula check, which it does by construction.
  tested = {n for n in MODEL_NAMES}
  assert set(PUBLISHED_COUNTS) <= tested
  assert {n.split("/")[0] for n in MODEL_NAMES} == set(models.SIZES)


def tiny_vit(**kw):
  fields = dict(patch_size=2, hidden_size=32, depth=3, num_heads=4, mlp_dim=64)
  fields.update(kw)
  return build_model(fields, num_classes=10)


@pytest.mark.parametrize("pooling,posemb", [("cls", "learned"), ("mean", "sincos2d")])
def test_scan_and_loop_agree_through_the_layout_converters(pooling, posemb):
  x = jax.random.normal(jax.random.key(1), (2, 8, 8, 1))
  scan = tiny_vit(encoder_mode="scan", pooling=pooling, posemb=posemb)
  loop = tiny_vit(encoder_mode="loop", pooling=pooling, posemb=posemb)
  params = jax.jit(scan.init)(jax.random.key(0), x)["params"]
  rng = np.random.default_rng(2)
  params = jax.tree_util.tree_map(lambda a: a + 0.01 * rng.standard_normal(a.shape, np.float32), params)  # non-zero head
  y_scan, inter_scan = jax.jit(lambda p: scan.apply({"params": p}, x, mutable=["intermediates"]))(params)
  loop_params = scan_to_loop(params)
  y_loop, inter_loop = jax.jit(lambda p: loop.apply({"params": p}, x, mutable=["intermediates"]))(loop_params)
  np.testing.assert_allclose(y_scan, y_loop, rtol=1e-5, atol=1e-6)
  assert float(jnp.abs(y_scan).max()) > 0
  # Round trip is exact, and the loop layout initialises with the same tree.
  chex.assert_trees_all_equal(loop_to_scan(loop_params), params)
  chex.assert_trees_all_equal_shapes(jax.eval_shape(loop.init, jax.random.key(0), x)["params"], loop_params)
  # Both modes sow the same per-layer attention maps.
  layers_scan = per_layer(inter_scan["intermediates"])
  layers_loop = per_layer(inter_loop["intermediates"])
  assert len(layers_scan) == len(layers_loop) == 3
  tokens = 16 + (pooling == "cls")
  for a, b in zip(layers_scan, layers_loop):
    chex.assert_shape(a["attention/attention_weights"], (2, 4, tokens, tokens))
    np.testing.assert_allclose(a["attention/attention_weights"], b["attention/attention_weights"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a["attention/attention_weights"].sum(-1), 1.0, rtol=1e-5)


def test_remat_does_not_change_outputs_or_gradients():
  x = jax.random.normal(jax.random.key(1), (2, 8, 8, 1))
  plain, remat = tiny_vit(), tiny_vit(remat=True)
  params = jax.jit(plain.init)(jax.random.key(0), x)["params"]
  loss = lambda m: lambda p: jnp.sum(m.apply({"params": p}, x) ** 2 + m.apply({"params": p}, x))
  g1, g2 = jax.jit(jax.grad(loss(plain)))(params), jax.jit(jax.grad(loss(remat)))(params)
  chex.assert_trees_all_close(g1, g2, rtol=1e-5, atol=1e-7)


def test_drop_path_and_dropout_only_act_in_training():
  x = jax.random.normal(jax.random.key(1), (4, 8, 8, 1))
  model = tiny_vit(drop_path_rate=0.5, dropout_rate=0.2)
  params = jax.jit(model.init)(jax.random.key(0), x)["params"]
  params["head"]["kernel"] = jnp.ones_like(params["head"]["kernel"])
  apply = jax.jit(model.apply, static_argnames="train")
  eval1, eval2 = apply({"params": params}, x), apply({"params": params}, x)
  np.testing.assert_array_equal(eval1, eval2)
  train = apply({"params": params}, x, train=True, rngs={"dropout": jax.random.key(3)})
  assert not np.allclose(train, eval1)


def test_bfloat16_compute_keeps_float32_params_and_logits():
  x = jnp.ones((2, 8, 8, 1))
  model = tiny_vit(dtype="bfloat16")
  variables = jax.eval_shape(model.init, jax.random.key(0), x)
  assert all(a.dtype == jnp.float32 for a in jax.tree_util.tree_leaves(variables))
  assert jax.eval_shape(model.apply, variables, x).dtype == jnp.float32


@pytest.mark.parametrize("fields,match", [
    (dict(variant="X/16"), "model.variant='X/16'"),
    (dict(variant="Ti/16", attention=dict(name="nope")), "dot_product"),
    (dict(variant="Ti/16", norm="batch_norm"), "layer_norm"),
    (dict(hidden_size=32, depth=2, num_heads=4), "patch_size"),
    (dict(variant="Ti/16", register_tokens=-1), r"model\.register_tokens=-1 must be an int >= 0"),
    (dict(variant="Ti/16", posemb_tokens="cls"), r"model\.posemb_tokens='cls'; choose one of"),
    (dict(variant="Ti/16", posemb="sincos2d", posemb_tokens="patches"), r"posemb='sincos2d'"),
    (dict(variant="Ti/16", distilled=True, pooling="mean"),
     r"distilled=True .* model\.pooling='cls'"),
    (dict(variant="Ti/16", block=dict(mlp_activation="relu")), r"mlp_activation='relu'"),
    (dict(variant="Ti/16", mlp_dim=767, block=dict(mlp_activation="swiglu")),
     r"mlp_dim=767 must be even"),
])
def test_bad_model_configs_raise_clear_errors(fields, match):
  with pytest.raises(ValueError, match=match):
    model = build_model(fields, num_classes=10)
    jax.eval_shape(model.init, jax.random.key(0), jnp.ones((1, 32, 32, 3)))


def test_patch_size_that_does_not_divide_the_image_raises():
  with pytest.raises(ValueError, match="patch_size=3"):
    jax.eval_shape(tiny_vit(patch_size=3).init, jax.random.key(0), jnp.ones((1, 8, 8, 1)))


def test_pretrained_family_options_default_to_the_plain_vit_and_add_named_parameters():
  x = jnp.ones((1, 8, 8, 1))
  plain = jax.eval_shape(tiny_vit().init, jax.random.key(0), x)["params"]
  model = tiny_vit(distilled=True, register_tokens=3, posemb_tokens="patches", norm_pre=True,
                   stem_bias=False)
  params = jax.eval_shape(model.init, jax.random.key(0), x)["params"]
  assert set(params) - set(plain) == {"dist", "registers", "head_dist", "norm_pre"}
  assert "bias" not in params["embedding"] and params["registers"].shape[:2] == (1, 3)
  assert params["pos_embedding"].shape[1] == plain["pos_embedding"].shape[1] - 1  # no CLS row


def test_mlp_activations_are_their_formulas():
  """quick_gelu: x·σ(1.702x) (timm's quick_gelu); swiglu: SiLU(a)·b of fc1's halves
  (timm's SwiGLUPacked = GluMlp(act_layer=SiLU, gate_last=False))."""
  from vit_spectral.layers.mlp import MlpBlock
  x = jax.random.normal(jax.random.key(0), (2, 5, 6))
  for activation, mlp_dim in (("quick_gelu", 8), ("swiglu", 8)):
    mlp = MlpBlock(mlp_dim=mlp_dim, activation=activation)
    params = mlp.init(jax.random.key(1), x)["params"]
    h = np.asarray(x) @ np.asarray(params["fc1"]["kernel"]) + np.asarray(params["fc1"]["bias"])
    if activation == "quick_gelu":
      h = h / (1 + np.exp(-1.702 * h))
    else:
      a, b = h[..., :mlp_dim // 2], h[..., mlp_dim // 2:]
      h = a / (1 + np.exp(-a)) * b
    assert params["fc2"]["kernel"].shape == (h.shape[-1], 6)
    want = h @ np.asarray(params["fc2"]["kernel"]) + np.asarray(params["fc2"]["bias"])
    np.testing.assert_allclose(mlp.apply({"params": params}, x), want, rtol=1e-5, atol=1e-5)
