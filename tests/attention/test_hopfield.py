"""Hopfield attention (paper 004): neutral coefficients, eqs. (10)/(32) directly,
gradient through the carried state, masks, and the block placements."""

import importlib

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_spectral.training import config_checks
from vit_spectral.attention import causal_mask, get_attention, padding_mask
from vit_spectral.models import (BlockSpec, Encoder, EncoderSpec, ViT, build, build_model,
                                  model_kwargs, per_layer, scan_to_loop)

HEADS, WIDTH, TOKENS, DEPTH = 2, 16, 5, 3


def tokens(seed=0, batch=2):
  return jax.random.normal(jax.random.key(seed), (batch, TOKENS, WIDTH))


def encoder(mode="scan", attention="hopfield", alpha=0.5, alpha_hidden=0.5, **block):
  kwargs = {} if attention != "hopfield" else dict(alpha=alpha, alpha_hidden=alpha_hidden)
  return Encoder(depth=DEPTH, spec=EncoderSpec(mode=mode), block=BlockSpec(
      num_heads=HEADS, mlp_dim=2 * WIDTH, attention=attention, attention_kwargs=kwargs,
      **block))


def perturbed_init(model, x, seed=1):
  """Init, then noise on every parameter so biases and norms are not neutral."""
  params = model.init(jax.random.key(0), x)["params"]
  rng = np.random.default_rng(seed)
  return jax.tree_util.tree_map(
      lambda a: a + 0.3 * rng.standard_normal(a.shape).astype(np.float32), params)


def layer_params(params, i, mode):
  if mode == "loop":
    return params[f"encoderblock_{i}"]
  return jax.tree_util.tree_map(lambda a: a[i], params["encoderblock"])


# --- Neutral coefficients -------------------------------------------------------

@pytest.mark.parametrize("mode", ["scan", "loop"])
def test_zero_alphas_are_standard_attention_bit_for_bit(mode):
  images = jax.random.normal(jax.random.key(3), (2, 8, 8, 1))
  vit = lambda **kw: build_model(dict(patch_size=2, hidden_size=WIDTH, depth=DEPTH,
                                      num_heads=HEADS, mlp_dim=2 * WIDTH, encoder_mode=mode,
                                      **kw), num_classes=10)
  hop = dict(attention=dict(name="hopfield", alpha=0.0, alpha_hidden=0.0))
  pairs = [  # (Hopfield with α = α' = 0, the standard model it must equal)
      (vit(**hop), vit()),  # inner placement: the standard pre-norm block
      # replacing placement: α·x is the whole skip, so α = 0 is attention
      # without residual, i.e. the standard block with attention_residual="none".
      (vit(**hop, block=dict(attention_residual="replace")),
       vit(block=dict(attention_residual="none"))),
  ]
  for hopfield, standard in pairs:
    params = perturbed_init(standard, images)
    out_h = jax.jit(hopfield.apply)({"params": params}, images)
    out_s = jax.jit(standard.apply)({"params": params}, images)
    np.testing.assert_array_equal(out_h, out_s)
    assert float(jnp.abs(out_s).max()) > 0
  # And the Hopfield variant with memory differs from the standard model.
  memory = vit(attention=dict(name="hopfield", alpha=0.0, alpha_hidden=0.5))
  assert not np.allclose(jax.jit(memory.apply)({"params": params}, images), out_s)


# --- Eqs. (10) and (32) against a direct computation ----------------------------

def layer_norm(x, p, eps=1e-6):
  mu = x.mean(-1, keepdims=True)
  var = ((x - mu) ** 2).mean(-1, keepdims=True)
  return (x - mu) / np.sqrt(var + eps) * p["scale"] + p["bias"]


def project(x, p):
  """x (B, T, D), DenseGeneral params (D, H, Dh) -> (B, H, T, Dh)."""
  return np.einsum("btd,dhe->bhte", x, p["kernel"]) + p["bias"][None, :, None, :]


@pytest.mark.parametrize("residual,mode", [("none", "scan"), ("replace", "loop")])
def test_attention_only_encoder_matches_eqs_10_and_32(residual, mode):
  alpha, alpha_h = 0.3, 0.6
  model = encoder(mode, alpha=alpha, alpha_hidden=alpha_h, attention_residual=residual,
                  use_mlp=False)
  x = tokens()
  params = perturbed_init(model, x)
  assert not any("mlp" in k or "norm2" in k for k in layer_params(params, 0, mode))
  out, state = jax.jit(lambda p: model.apply({"params": p}, x, mutable=["intermediates"]))(params)
  layers = per_layer({"encoder": state["intermediates"]})

  params = jax.tree_util.tree_map(np.asarray, params)
  xs, scores = [np.asarray(x, np.float64)], []
  for ell in range(DEPTH):
    p = layer_params(params, ell, mode)
    y = layer_norm(xs[-1], p["norm1"])
    q, k, v = (project(y, p["attention"][n]) for n in ("query", "key", "value"))
    scores.append(q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1]))  # s_m
    # eq. (32): h_ℓ = (1 - α') Σ_{m ≤ ℓ} α'^{ℓ-m} s_m
    hidden = (1 - alpha_h) * sum(alpha_h ** (ell - m) * s for m, s in enumerate(scores))
    weights = np.exp(hidden - hidden.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    np.testing.assert_allclose(layers[ell]["attention/attention_weights"], weights,
                               rtol=1e-4, atol=1e-5)
    out_p = p["attention"]["out"]
    attended = np.einsum("bhte,hed->btd", weights @ v, out_p["kernel"]) + out_p["bias"]
    skip = y if residual == "none" else xs[-1]  # eq. (10): α·skip + (1 - α)·attention
    xs.append(alpha * skip + (1 - alpha) * attended)
    np.testing.assert_allclose(layers[ell]["block_output"], xs[-1], rtol=1e-4, atol=1e-4)
  final = layer_norm(xs[-1], params["encoder_norm"])
  np.testing.assert_allclose(out, final, rtol=1e-4, atol=1e-4)


# --- The gradient flows through the carried state -------------------------------

def test_last_layer_loss_reaches_layer_one_query_and_key_through_h():
  x = tokens(4)
  grads = {}
  scan_params = perturbed_init(encoder("scan", alpha=0.0), x)
  for mode in ("scan", "loop"):
    for alpha_h in (0.0, 0.5):
      model = encoder(mode, alpha=0.0, alpha_hidden=alpha_h)
      params = scan_params if mode == "scan" else scan_to_loop({"encoder": scan_params})["encoder"]
      params = jax.tree_util.tree_map(jnp.array, params)  # a copy to edit
      # Layer 1's output no longer depends on its W_Q, W_K (zero output
      # projection): any gradient they get must come through h.
      if mode == "loop":
        params["encoderblock_0"]["attention"]["out"]["kernel"] *= 0
      else:
        params["encoderblock"]["attention"]["out"]["kernel"] = (
            params["encoderblock"]["attention"]["out"]["kernel"].at[0].set(0.0))
      loss = lambda p: jnp.sum(jnp.sin(model.apply({"params": p}, x)))
      g = jax.jit(jax.grad(loss))(params)
      first = layer_params(g, 0, mode)["attention"]
      grads[mode, alpha_h] = (first["query"]["kernel"], first["key"]["kernel"])
  for mode in ("scan", "loop"):
    for g in grads[mode, 0.0]:
      np.testing.assert_array_equal(g, 0.0)  # no memory: no path
    for g in grads[mode, 0.5]:
      assert float(jnp.abs(g).max()) > 1e-4
  chex.assert_trees_all_close(grads["scan", 0.5], grads["loop", 0.5], rtol=1e-4, atol=1e-6)


# --- Masks --------------------------------------------------------------------------

@pytest.mark.parametrize("residual,mode", [("add", "scan"), ("replace", "loop")])
def test_causal_mask_future_tokens_never_change_earlier_outputs(residual, mode):
  model = encoder(mode, attention_residual=residual)
  x = tokens(5)
  params = perturbed_init(model, x)
  cut = 2
  x_future = x.at[:, cut:].set(jax.random.normal(jax.random.key(9), x[:, cut:].shape) * 3)
  mask = causal_mask(TOKENS)
  apply = jax.jit(lambda x: model.apply({"params": params}, x, mask=mask))
  y, y_future = apply(x), apply(x_future)
  np.testing.assert_allclose(y[:, :cut], y_future[:, :cut], rtol=0, atol=1e-6)
  assert not np.allclose(y[:, cut:], y_future[:, cut:])
  # Without the mask the early tokens do see the future.
  unmasked = jax.jit(lambda x: model.apply({"params": params}, x))
  assert not np.allclose(unmasked(x)[:, :cut], unmasked(x_future)[:, :cut])


def test_masked_scores_are_dropped_from_the_carried_state_and_padding_is_ignored():
  cls = get_attention("hopfield")
  module = cls(num_heads=HEADS, alpha=0.5, alpha_hidden=0.5)
  x = tokens(6)
  params = perturbed_init(module, x)
  # A previous state full of large values everywhere (as if unmasked).
  state = 50.0 * jax.random.normal(jax.random.key(7), (2, HEADS, TOKENS, TOKENS))
  valid = jnp.array([[True] * TOKENS, [True] * (TOKENS - 2) + [False] * 2])
  mask = jnp.logical_and(causal_mask(TOKENS), padding_mask(valid))
  apply = jax.jit(lambda x, s: module.apply({"params": params}, x, s, mask))
  y, new_state = apply(x, state)
  chex.assert_shape(new_state, (2, HEADS, TOKENS, TOKENS))
  assert new_state.dtype == jnp.float32
  np.testing.assert_array_equal(jnp.where(mask, 0.0, new_state), 0.0)
  assert bool(jnp.all(jnp.where(mask, new_state != 0, True)))  # kept entries kept
  # Padded keys of the second example: changing them changes no valid output.
  x_pad = x.at[1, -2:].set(100.0)
  y_pad, _ = apply(x_pad, state)
  np.testing.assert_allclose(y[1, :-2], y_pad[1, :-2], rtol=0, atol=1e-6)
  assert causal_mask(3).shape == (1, 1, 3, 3) and bool(causal_mask(3)[0, 0, 0, 1]) is False


def test_initial_state_is_float32_zeros_per_head_map():
  state = get_attention("hopfield").initial_state(3, 7, 2)
  chex.assert_shape(state, (3, 2, 7, 7))
  assert state.dtype == jnp.float32 and not np.any(state)
  assert get_attention("dot_product").initial_state(3, 7, 2) is None


# --- Errors ---------------------------------------------------------------------------

def model_config(**fields):
  base = dict(hidden_size=WIDTH, depth=2, num_heads=HEADS, mlp_dim=32, patch_size=2,
              attention=dict(name="hopfield"))
  base.update(fields)
  return base


@pytest.mark.parametrize("fields,message", [
    (dict(block=dict(attention_residual="skip")), "model.block.attention_residual='skip'"),
    (dict(attention=dict(name="dot_product"), block=dict(attention_residual="replace")),
     "needs an attention variant with its own skip"),
    (dict(attention=dict(name="hopfield", alpha=1.5)), "model.attention.alpha=1.5"),
    (dict(attention=dict(name="hopfield", alpha_hidden=-0.1)), "model.attention.alpha_hidden=-0.1"),
    (dict(attention=dict(name="hopfield", beta=0.5)), "unknown options ['beta']"),
])
def test_bad_options_raise_naming_the_field(fields, message):
  with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(")):
    config_checks.validate_model(build.model_spec(model_config(**fields)), image_size=8)
    model = build_model(model_config(**fields), num_classes=10)
    jax.eval_shape(model.init, jax.random.key(0), jnp.zeros((1, 8, 8, 1)))


# --- Recipes ------------------------------------------------------------------------

@pytest.mark.parametrize("config_file,arg,depth,block", [
    ("hopfield_vit", "size=L,alpha=0.7,dataset=cifar100,placement=replace", 24,
     dict(attention_residual="replace")),
    ("hopfield_vit", "size=B,dataset=imagenet2012", 12, dict()),
    ("hopfield_attention_only", "depth=2,attention=dot_product", 2,
     dict(attention_residual="none", use_mlp=False)),
])
def test_paper_004_recipes_validate(config_file, arg, depth, block):
  config = importlib.import_module(f"vit_spectral.configs.{config_file}").get_config(arg)
  config_checks.validate_config(config)
  fields = model_kwargs(config.model)
  assert fields["depth"] == depth
  # Exactly these block options differ from the defaults (the old block_options).
  options = build.block_options(ViT)
  spec, default = fields["block"], BlockSpec()
  assert {k: getattr(spec, k) for k in options} == dict(
      {k: getattr(default, k) for k in options}, **block)
  if "alpha=0.7" in arg:  # α' follows α unless set
    assert fields["block"].attention_kwargs == dict(alpha=0.7, alpha_hidden=0.7)
