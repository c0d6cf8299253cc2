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
from vit_spectral.analysis.diagnosis import layer_means
from vit_spectral.models import build_model, per_layer

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
  """x (B, T, D) float32."""
  return jnp.asarray(np.random.default_rng(0).standard_normal((BATCH, TOKENS, WIDTH)),
                     jnp.float32)


def masks():
  """No mask; padding (the second example has no valid key at all) and causal."""
  valid = np.array([[True, True, True, False, True], [False] * TOKENS])
  return [None, attention.combine_masks(attention.padding_mask(valid),
                                        attention.causal_mask(TOKENS))]


def random_params(module, *args):
  """Parameters of `module.init(key, *args)`'s shapes, N(0, 0.5²) from NumPy.

  Not the initial values (ω, a head start at zero) and nothing to compile:
  only the applies are compiled."""
  shapes = jax.eval_shape(module.init, jax.random.key(0), *args)["params"]
  rng = np.random.default_rng(1)
  return jax.tree.map(lambda s: jnp.asarray(0.5 * rng.standard_normal(s.shape), s.dtype),
                      shapes)


@pytest.fixture
def fused_calls(monkeypatch):
  """Counts the calls (traces, under jit) of jax.nn.dot_product_attention."""
  calls = []
  original = jax.nn.dot_product_attention

  def spy(*args, **kwargs):
    calls.append(kwargs)
    return original(*args, **kwargs)
  monkeypatch.setattr(jax.nn, "dot_product_attention", spy)
  return calls


@pytest.mark.parametrize("variant", FUSED_VARIANTS)
def test_fused_equals_explicit_float32(variant, fused_calls):
  name, fields = FUSED_VARIANTS[variant]
  explicit, fused = make(name, fields, "explicit"), make(name, fields, "fused")
  x = inputs()
  state = type(explicit).initial_state(BATCH, TOKENS, HEADS)
  params = random_params(explicit, x, state)

  @jax.jit
  def both(params, x, state):
    return [(explicit.apply({"params": params}, x, state, m)[0],
             fused.apply({"params": params}, x, state, m)[0]) for m in masks()]

  outputs = both(params, x, state)
  assert len(fused_calls) == len(masks())       # once per fused apply, never in explicit
  for (want, got), mask in zip(outputs, masks()):
    assert got.dtype == want.dtype == jnp.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * float(jnp.abs(want).max()),
                               err_msg=f"{variant}, mask {None if mask is None else mask.shape}")


@pytest.mark.parametrize("name", ["dot_product", "attn_scale"])
def test_fused_gradients_equal_explicit(name, fused_calls):
  explicit, fused = make(name, {}, "explicit"), make(name, {}, "fused")
  x = inputs()
  mask = attention.padding_mask(jnp.array([[True, True, True, False, True]] * BATCH))
  weights = jnp.asarray(np.random.default_rng(3).standard_normal(x.shape), jnp.float32)
  params = random_params(explicit, x)

  @jax.jit
  def grads(params, x):
    def loss(module):
      return lambda p, x: jnp.sum(weights * module.apply({"params": p}, x, None, mask)[0])
    return [jax.grad(loss(m), argnums=(0, 1))(params, x) for m in (explicit, fused)]

  want, got = grads(params, x)
  assert len(fused_calls) == 1
  scale = max(float(jnp.abs(w).max()) for w in jax.tree.leaves(want))
  for path, w in jax.tree_util.tree_leaves_with_path(want):
    g = dict(jax.tree_util.tree_leaves_with_path(got))[path]
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6 * scale,
                               err_msg=jax.tree_util.keystr(path))
  if name == "attn_scale":                           # ω's gradient goes through the rescaling
    assert np.abs(got[0]["omega"]).min() > 0


def test_auto_is_fused_unless_the_maps_are_recorded(fused_calls):
  # Traced only (jax.eval_shape): which path runs is decided while tracing.
  model = build_model(dict(patch_size=4, hidden_size=WIDTH, depth=2, num_heads=HEADS,
                           mlp_dim=8, attention=dict(name="attn_scale")),  # implementation "auto"
                      num_classes=3)
  images = jax.ShapeDtypeStruct((BATCH, 8, 8, 3), jnp.float32)
  variables = {"params": jax.eval_shape(model.init, jax.random.key(0), images)["params"]}
  fused_calls.clear()                                # (init may take either path)

  logits = jax.eval_shape(model.apply, variables, images)
  assert fused_calls and logits.shape == (BATCH, 3)  # the fused path ran
  fused_calls.clear()

  _, state = jax.eval_shape(lambda v, im: model.apply(v, im, mutable=["intermediates"]),
                            variables, images)
  maps = [layer["attention/attention_weights"] for layer in per_layer(state["intermediates"])]
  assert not fused_calls                             # recording: the explicit path
  assert [m.shape for m in maps] == [(BATCH, HEADS, TOKENS, TOKENS)] * 2

  result = jax.eval_shape(lambda v, im: layer_means(model, v, im), variables, images)
  assert not fused_calls                             # the diagnostics still get the maps
  assert len(result) == 2 and "attention_entropy" in result[0]   # one entry per block


def test_fused_while_recording_the_maps_raises():
  module = make("dot_product", {}, "fused")
  x = inputs()
  variables = {"params": random_params(module, x)}
  with pytest.raises(ValueError, match=r"implementation='fused'.*\(intermediates\)"):
    jax.eval_shape(lambda v, x: module.apply(v, x, mutable=["intermediates"]), variables, x)


@pytest.mark.parametrize("name", ["dot_product", "cosine"])
def test_attention_dropout_needs_the_map(name, fused_calls):
  x = inputs()
  rngs = {"dropout": jax.random.key(7)}
  on = dict(dropout_rate=0.1, deterministic=False)
  variables = {"params": random_params(make(name, {}, "explicit"), x)}
  apply = lambda module: jax.eval_shape(
      lambda v, x: module.apply(v, x, rngs=rngs), variables, x)
  with pytest.raises(ValueError, match=r"'fused'.*attention dropout is active \(rate 0.1\)"):
    apply(make(name, {}, "fused", **on))
  apply(make(name, {}, "auto", **on))
  assert not fused_calls                             # "auto" took the explicit path
  apply(make(name, {}, "auto", dropout_rate=0.1, deterministic=True))
  assert len(fused_calls) == 1                       # dropout off (evaluation): fused


@pytest.mark.parametrize("variant", EXPLICIT_ONLY)
def test_no_fused_path_auto_is_explicit_fused_raises(variant, fused_calls):
  name, fields = EXPLICIT_ONLY[variant]
  x = inputs()
  state = attention.get_attention(name).initial_state(BATCH, TOKENS, HEADS)
  variables = {"params": random_params(make(name, fields, "explicit"), x, state)}
  apply = lambda module: jax.eval_shape(module.apply, variables, x, state)
  apply(make(name, fields, "auto"))
  assert not fused_calls
  reason = {"hopfield": "carries attention state",
            "relative_learned": "content=False scores by position only and has no fused path",
            }.get(name, f"{attention.get_attention(name).__name__} has no fused path")
  with pytest.raises(ValueError, match=rf"implementation='fused' cannot be used here: .*{reason}"):
    apply(make(name, fields, "fused"))


@pytest.mark.parametrize("name", attention.registered_attentions())
def test_unknown_implementation_raises_in_every_variant(name):
  x = inputs()
  state = attention.get_attention(name).initial_state(BATCH, TOKENS, HEADS)
  with pytest.raises(ValueError, match=r"model\.attention\.implementation='flash'; "
                                       r"choose one of \['auto', 'fused', 'explicit'\]"):
    jax.eval_shape(make(name, {}, "flash").init, jax.random.key(1), x, state)


def test_bfloat16_fused_scores_and_softmax_are_float32(fused_calls):
  """In bf16 the fused call's scores (a bf16 × bf16 product) and softmax are
  float32, as on the explicit path, and the two paths agree to bf16 rounding."""
  explicit = make("dot_product", {}, "explicit", dtype=jnp.bfloat16)
  fused = make("dot_product", {}, "fused", dtype=jnp.bfloat16)
  x = inputs()
  params = random_params(explicit, x)
  traced = jax.jit(lambda p, x: (explicit.apply({"params": p}, x)[0],
                                 fused.apply({"params": p}, x)[0])).trace(params, x)
  want, got = traced.lower().compile()(params, x)
  assert got.dtype == want.dtype == jnp.bfloat16
  np.testing.assert_allclose(np.float32(got), np.float32(want), rtol=2e-2, atol=2e-2)

  fused_eqns = list(equations(jax.make_jaxpr(fused.apply)({"params": params}, x).jaxpr))
  exps = [e.invars[0].aval.dtype for e in fused_eqns if e.primitive.name == "exp"]
  assert exps and all(d == jnp.float32 for d in exps), exps
  scores = [e.outvars[0].aval.dtype for e in fused_eqns if e.primitive.name == "dot_general"
            and e.outvars[0].aval.shape.count(TOKENS) == 2]   # (…, T, …, S): q·kᵀ
  assert scores == [jnp.float32], scores             # bf16 q and k, float32 scores
  assert len(fused_calls) == 2


def equations(jaxpr):
  """Every equation of `jaxpr` and of the jaxprs inside it (softmax's custom_jvp, ...)."""
  for eqn in jaxpr.eqns:
    yield eqn
    for param in eqn.params.values():
      for sub in param if isinstance(param, (tuple, list)) else (param,):
        if isinstance(sub, jax.extend.core.ClosedJaxpr):
          yield from equations(sub.jaxpr)
        elif isinstance(sub, jax.extend.core.Jaxpr):
          yield from equations(sub)
