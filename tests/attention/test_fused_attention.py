"""The fused attention path (`Attention.implementation`, `attention/fused.py`).

Fused and explicit agree in float32 for every variant with a fused path (with
and without masks, one example fully padded), gradients too; "auto" takes the
explicit path exactly when the map is needed, and "fused" says why it cannot.
Which path ran is seen by a spy on `jax.nn.dot_product_attention`, the call
only the fused path makes.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_spectral import attention
from vit_spectral.analysis import probe
from vit_spectral.models import ViT, per_layer

BATCH, WIDTH, HEADS = 2, 6, 2             # head width 3: 1/√3 is no power of two
GRID, PREFIX = (2, 2), 1
TOKENS = PREFIX + GRID[0] * GRID[1]

# Every configuration with a fused path: registered name, fields.
FUSED_VARIANTS = {
    "dot_product": ("dot_product", {}),
    "attn_scale": ("attn_scale", {}),
    "cosine_learned": ("cosine", dict(learnable_tau=True, learnable_nu=True)),
    "cosine_raw_value": ("cosine", dict(tau=10.0, normalize_value=False)),
    "relative_learned": ("relative_learned", dict(content=True)),
    "relative_learned_shared": ("relative_learned", dict(content=True, shared_value=True)),
    "hopfield": ("hopfield", dict(alpha=0.3, alpha_hidden=0.0)),
}
# Registered configurations without one.
EXPLICIT_ONLY = {
    "quadratic": ("quadratic", {}),
    "gaussian": ("gaussian", {}),
    "relative_learned_positional": ("relative_learned", dict(content=False)),
    "hopfield_carried": ("hopfield", dict(alpha_hidden=0.5)),
}


def make(name, fields, implementation, **extra):
  cls = attention.get_attention(name)
  return cls(num_heads=HEADS, grid_size=GRID, num_prefix_tokens=PREFIX,
             implementation=implementation, **fields, **extra)


def inputs():
  x = jax.random.normal(jax.random.key(0), (BATCH, TOKENS, WIDTH))
  return x, None


def masks():
  """No mask; padding (the second example has no valid key at all) and causal."""
  valid = jnp.array([[True, True, True, False, True], [False] * TOKENS])
  return [None, attention.combine_masks(attention.padding_mask(valid),
                                        attention.causal_mask(TOKENS))]


def perturbed_params(module, x, state):
  """Initial parameters plus noise, so ω, τ, ν, ... are not at their init."""
  return noisy(module.init(jax.random.key(1), x, state)["params"])


def noisy(params):
  """params + N(0, 0.3²) noise (ω and a ViT's head start at zero)."""
  leaves, tree = jax.tree.flatten(params)
  keys = jax.random.split(jax.random.key(2), len(leaves))
  return jax.tree.unflatten(tree, [p + 0.3 * jax.random.normal(k, p.shape, p.dtype)
                                   for p, k in zip(leaves, keys)])


@pytest.fixture
def fused_calls(monkeypatch):
  """Counts the calls (traces, under jit) of jax.nn.dot_product_attention."""
  calls = []
  original = jax.nn.dot_product_attention

  def spy(*args, **kwargs):
    calls.append(kwargs.get("mask"))
    return original(*args, **kwargs)
  monkeypatch.setattr(jax.nn, "dot_product_attention", spy)
  return calls


@pytest.mark.parametrize("variant", FUSED_VARIANTS)
def test_fused_equals_explicit_float32(variant, fused_calls):
  name, fields = FUSED_VARIANTS[variant]
  explicit, fused = make(name, fields, "explicit"), make(name, fields, "fused")
  x, _ = inputs()
  state = type(explicit).initial_state(BATCH, TOKENS, HEADS)

  @jax.jit
  def both(x, state):
    params = perturbed_params(explicit, x, state)
    return [(explicit.apply({"params": params}, x, state, m)[0],
             fused.apply({"params": params}, x, state, m)[0]) for m in masks()]

  outputs = both(x, state)
  assert len(fused_calls) == len(masks())       # once per fused apply, never in explicit
  for (want, got), mask in zip(outputs, masks()):
    assert got.dtype == want.dtype == jnp.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * float(jnp.abs(want).max()),
                               err_msg=f"{variant}, mask {None if mask is None else mask.shape}")


@pytest.mark.parametrize("name", ["dot_product", "attn_scale"])
def test_fused_gradients_equal_explicit(name, fused_calls):
  explicit, fused = make(name, {}, "explicit"), make(name, {}, "fused")
  x, _ = inputs()
  mask = attention.padding_mask(jnp.array([[True, True, True, False, True]] * BATCH))
  weights = jax.random.normal(jax.random.key(3), (BATCH, TOKENS, WIDTH))

  @jax.jit
  def grads(x):
    params = perturbed_params(explicit, x, None)
    def loss(module):
      return lambda p, x: jnp.sum(weights * module.apply({"params": p}, x, None, mask)[0])
    return [jax.grad(loss(m), argnums=(0, 1))(params, x) for m in (explicit, fused)]

  want, got = grads(x)
  assert len(fused_calls) == 1
  scale = max(float(jnp.abs(w).max()) for w in jax.tree.leaves(want))
  for path, w in jax.tree_util.tree_leaves_with_path(want):
    g = dict(jax.tree_util.tree_leaves_with_path(got))[path]
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6 * scale,
                               err_msg=jax.tree_util.keystr(path))
  if name == "attn_scale":                           # ω's gradient goes through the rescaling
    assert np.abs(got[0]["omega"]).min() > 0


def test_auto_is_fused_unless_the_maps_are_recorded(fused_calls):
  model = ViT(num_classes=3, patch_size=4, hidden_size=WIDTH, depth=1, num_heads=HEADS,
              mlp_dim=8, attention="attn_scale", encoder_mode="loop")  # implementation "auto"
  images = jax.random.normal(jax.random.key(4), (BATCH, 8, 8, 3))
  variables = jax.jit(model.init)(jax.random.key(5), images)
  variables = {"params": noisy(variables["params"])}
  fused_calls.clear()                                # (init may take either path)

  fused_logits = jax.jit(model.apply)(variables, images)
  assert len(fused_calls) == 1                       # the fused path ran

  recorded_logits, state = jax.jit(lambda v, im: model.apply(
      v, im, mutable=["intermediates"]))(variables, images)
  maps = [layer["attention/attention_weights"] for layer in per_layer(state["intermediates"])]
  assert len(fused_calls) == 1                       # not called again: explicit
  assert [m.shape for m in maps] == [(BATCH, HEADS, TOKENS, TOKENS)]
  np.testing.assert_allclose(fused_logits, recorded_logits, rtol=1e-5, atol=1e-6)

  result = probe(model, variables, images)           # the diagnostics still get the maps
  assert len(fused_calls) == 1
  assert result["hc_dc_ratio"].shape[0] == 1          # one number per block


def test_fused_while_recording_the_maps_raises():
  module = make("dot_product", {}, "fused")
  x, _ = inputs()
  variables = module.init(jax.random.key(1), x)
  with pytest.raises(ValueError, match=r"implementation='fused'.*\(intermediates\)"):
    module.apply(variables, x, mutable=["intermediates"])


def test_attention_dropout_needs_the_map(fused_calls):
  x, _ = inputs()
  rngs = {"dropout": jax.random.key(7)}
  for name in ("dot_product", "cosine"):
    fields = dict(dropout_rate=0.1, deterministic=False)
    variables = make(name, {}, "explicit", **fields).init(jax.random.key(1), x)
    with pytest.raises(ValueError, match=r"'fused'.*attention dropout is active \(rate 0.1\)"):
      make(name, {}, "fused", **fields).apply(variables, x, rngs=rngs)
    make(name, {}, "auto", **fields).apply(variables, x, rngs=rngs)
    assert not fused_calls                           # "auto" took the explicit path
    # Dropout off (evaluation): "auto" is fused again.
    make(name, {}, "auto", dropout_rate=0.1, deterministic=True).apply(variables, x)
    assert len(fused_calls) == 1
    fused_calls.clear()


@pytest.mark.parametrize("variant", EXPLICIT_ONLY)
def test_no_fused_path_auto_is_explicit_fused_raises(variant, fused_calls):
  name, fields = EXPLICIT_ONLY[variant]
  x, _ = inputs()
  state = attention.get_attention(name).initial_state(BATCH, TOKENS, HEADS)
  variables = make(name, fields, "explicit").init(jax.random.key(1), x, state)
  make(name, fields, "auto").apply(variables, x, state)
  assert not fused_calls
  reason = ("carries attention state" if name == "hopfield"
            else f"{attention.get_attention(name).__name__} has no fused path")
  with pytest.raises(ValueError, match=rf"implementation='fused' cannot be used here: .*{reason}"):
    make(name, fields, "fused").apply(variables, x, state)


@pytest.mark.parametrize("name", attention.registered_attentions())
def test_unknown_implementation_raises_in_every_variant(name):
  x, _ = inputs()
  state = attention.get_attention(name).initial_state(BATCH, TOKENS, HEADS)
  with pytest.raises(ValueError, match=r"model\.attention\.implementation='flash'; "
                                       r"choose one of \['auto', 'fused', 'explicit'\]"):
    make(name, {}, "flash").init(jax.random.key(1), x, state)


def test_bfloat16_fused_close_to_explicit(fused_calls):
  explicit = make("dot_product", {}, "explicit", dtype=jnp.bfloat16)
  fused = make("dot_product", {}, "fused", dtype=jnp.bfloat16)
  x, _ = inputs()
  params = explicit.init(jax.random.key(1), x)["params"]
  want = jax.jit(explicit.apply)({"params": params}, x)[0]
  got = jax.jit(fused.apply)({"params": params}, x)[0]
  assert got.dtype == want.dtype == jnp.bfloat16
  np.testing.assert_allclose(np.float32(got), np.float32(want), rtol=2e-2, atol=2e-2)
