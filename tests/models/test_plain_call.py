"""The plain call form of attention (`return_state=False`) and of `Block`
(`y = block(x)`), for users' own modules.

Each plain call is checked against the carry form on the same parameters
(every registered attention, blocks with the papers' options, a block stack
against the encoder's scan), dot-product attention against a NumPy
computation from its weights, and a small model of one's own for its
parameter names. Stateful calls (Hopfield with alpha_hidden > 0) must refuse
the plain form and say how to call them.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_spectral import attention
from vit_spectral.models import Block, BlockSpec, Encoder, EncoderSpec, TokenLayout

BATCH, WIDTH, HEADS, MLP = 2, 8, 2, 16
GRID, PREFIX = (2, 2), 1
TOKENS = PREFIX + GRID[0] * GRID[1]

# Fields that make each registered variant's call stateless (the others' defaults are).
STATELESS_FIELDS = {"hopfield": dict(alpha=0.3, alpha_hidden=0.0)}


def inputs(seed=0, shape=(BATCH, TOKENS, WIDTH)):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), jnp.float32)


def causal_padding_mask():
  """(B, 1, T, T): causal, and the second example's last key padded."""
  valid = np.ones((BATCH, TOKENS), bool)
  valid[1, -1] = False
  return attention.combine_masks(attention.padding_mask(valid), attention.causal_mask(TOKENS))


def random_params(module, *args, **kwargs):
  """Parameters of `module.init`'s shapes, N(0, 0.5²) from NumPy (not the
  initial values: ω, α, FeatScale's scales start at zero)."""
  shapes = jax.eval_shape(lambda k: module.init(k, *args, **kwargs), jax.random.key(0))
  rng = np.random.default_rng(1)
  return jax.tree.map(lambda s: jnp.asarray(0.5 * rng.standard_normal(s.shape), s.dtype),
                      shapes["params"])


def make_attention(name, **extra):
  cls = attention.get_attention(name)
  return cls(num_heads=HEADS, grid_size=GRID, num_prefix_tokens=PREFIX,
             **STATELESS_FIELDS.get(name, {}), **extra)


@pytest.mark.parametrize("name", attention.registered_attentions())
def test_plain_attention_equals_the_carry_form(name):
  carry, plain = make_attention(name), make_attention(name, return_state=False)
  rows = PREFIX if carry.updates_prefix_only else TOKENS     # the queries
  x, mask = inputs(), causal_padding_mask()[:, :, :rows]
  # The same parameter tree, and the same initial values from the same key.
  init_carry = carry.init(jax.random.key(3), x)["params"]
  init_plain = plain.init(jax.random.key(3), x)["params"]
  assert jax.tree.structure(init_plain) == jax.tree.structure(init_carry)
  jax.tree.map(np.testing.assert_array_equal, init_plain, init_carry)

  params = random_params(carry, x)
  for m in (None, mask):
    y_carry, _ = carry.apply({"params": params}, x, None, m)
    y_plain = plain.apply({"params": params}, x, mask=m)
    assert not isinstance(y_plain, tuple)
    assert y_plain.shape == (BATCH, rows, WIDTH)
    np.testing.assert_array_equal(y_plain, y_carry)
  # Under jit with the explicit path recorded: the same numbers, the map sown.
  y_plain, sown = jax.jit(lambda p: plain.apply({"params": p}, x, mask=mask,
                                                mutable=["intermediates"]))(params)
  np.testing.assert_allclose(y_plain, carry.apply({"params": params}, x, None, mask)[0],
                             rtol=1e-5, atol=1e-6)
  assert "attention_weights" in sown["intermediates"]


def test_plain_hopfield_mixes_its_skip_as_the_carry_form():
  carry, plain = make_attention("hopfield"), make_attention("hopfield", return_state=False)
  x, skip = inputs(), inputs(seed=5)
  params = random_params(carry, x)
  y_carry, _ = carry.apply({"params": params}, x, None, skip=skip)
  y_plain = plain.apply({"params": params}, x, skip=skip)
  np.testing.assert_array_equal(y_plain, y_carry)
  # α = 0.3 mixes the skip in: a different skip changes the output.
  assert not np.allclose(y_plain, plain.apply({"params": params}, x))


def test_plain_dot_product_is_softmax_attention_of_its_weights():
  module = attention.DotProductAttention(num_heads=HEADS, return_state=False)
  x, mask = inputs(), causal_padding_mask()
  params = random_params(module, x)
  p = jax.tree.map(np.asarray, params)
  xn = np.asarray(x, np.float64)
  q, k, v = (np.einsum("btd,dhk->bthk", xn, p[n]["kernel"]) + p[n]["bias"]
             for n in ("query", "key", "value"))
  logits = np.einsum("bthk,bshk->bhts", q, k) / np.sqrt(WIDTH // HEADS)
  logits = np.where(np.asarray(mask), logits, -np.inf)
  weights = np.exp(logits - logits.max(-1, keepdims=True))
  weights /= weights.sum(-1, keepdims=True)
  mixed = np.einsum("bhts,bshk->bthk", weights, v)
  want = np.einsum("bthk,hkd->btd", mixed, p["out"]["kernel"]) + p["out"]["bias"]
  np.testing.assert_allclose(module.apply({"params": params}, x, mask=mask), want,
                             rtol=1e-5, atol=1e-5)


def test_a_carried_state_refuses_the_plain_call_and_names_the_carry_form():
  stateful = attention.HopfieldAttention(num_heads=HEADS, alpha_hidden=0.5, return_state=False)
  x = inputs()
  with pytest.raises(ValueError, match=r"initial_state\(batch, tokens, num_heads\)"):
    stateful.init(jax.random.key(0), x)
  stateless = make_attention("dot_product", return_state=False)
  with pytest.raises(TypeError, match="takes no state"):
    stateless.init(jax.random.key(0), x, jnp.zeros((BATCH, HEADS, TOKENS, TOKENS)))


def test_the_carry_form_reads_no_state_as_the_initial_state():
  # The contract (attention.registry): a state of None is the variant's initial state.
  module = attention.HopfieldAttention(num_heads=HEADS, alpha_hidden=0.5)
  x = inputs()
  params = random_params(module, x)
  start = module.initial_state(BATCH, TOKENS, HEADS)
  y_none, h_none = module.apply({"params": params}, x, None)
  y_start, h_start = module.apply({"params": params}, x, start)
  np.testing.assert_array_equal(y_none, y_start)
  np.testing.assert_array_equal(h_none, h_start)


# Block specs: the default, and the papers' block options.
BLOCK_CASES = {
    "default": dict(),
    "attn_scale_feat_scale": dict(attention="attn_scale", feat_scale=True),
    "lipsformer_cosine": dict(block_order="lipsformer", residual_alpha=0.25,
                              norm="center_norm", attention="cosine",
                              attention_kwargs=dict(tau=12.0), kernel_init="spectral",
                              conv_block=True, conv_kernel_size=3),
    "hopfield_replace_stateless": dict(attention="hopfield",
                                       attention_kwargs=dict(alpha=0.3, alpha_hidden=0.0),
                                       attention_residual="replace"),
}


def make_block(case, **kwargs):
  spec = BlockSpec(num_heads=HEADS, mlp_dim=MLP, **BLOCK_CASES[case])
  return Block(spec, TokenLayout(GRID, PREFIX), **kwargs)


@pytest.mark.parametrize("case", BLOCK_CASES)
def test_plain_block_equals_the_carry_form(case):
  block = make_block(case)
  x, mask = inputs(), causal_padding_mask()
  init_carry = block.init(jax.random.key(3), (x, None), 0.0)["params"]
  init_plain = block.init(jax.random.key(3), x)["params"]
  assert jax.tree.structure(init_plain) == jax.tree.structure(init_carry)
  jax.tree.map(np.testing.assert_array_equal, init_plain, init_carry)

  params = random_params(block, (x, None), 0.0)
  for m in (None, mask):
    (y_carry, state), _ = block.apply({"params": params}, (x, None), 0.0, m)
    y_plain = block.apply({"params": params}, x, mask=m)
    assert state is None and y_plain.shape == x.shape
    np.testing.assert_array_equal(y_plain, y_carry)


def test_plain_block_in_training_draws_the_same_dropout_and_drop_path():
  block = Block(BlockSpec(num_heads=HEADS, mlp_dim=MLP, dropout_rate=0.3,
                          attention_dropout_rate=0.2),
                TokenLayout(GRID, PREFIX), deterministic=False)
  x = inputs()
  params = random_params(block, (x, None), 0.0)
  rngs = {"dropout": jax.random.key(7)}
  (y_carry, _), _ = block.apply({"params": params}, (x, None), 0.5, rngs=rngs)
  y_plain = block.apply({"params": params}, x, 0.5, rngs=rngs)
  np.testing.assert_array_equal(y_plain, y_carry)
  y_eval = block.clone(deterministic=True).apply({"params": params}, x, 0.5)
  assert not np.allclose(y_plain, y_eval)          # the train flag did act


@pytest.mark.parametrize("case", ["default", "attn_scale_feat_scale", "lipsformer_cosine"])
def test_plain_blocks_in_sequence_equal_the_encoders_scan(case):
  spec, depth = BlockSpec(num_heads=HEADS, mlp_dim=MLP, **BLOCK_CASES[case]), 2
  encoder = Encoder(depth=depth, block=spec, spec=EncoderSpec(mode="scan"),
                    layouts=TokenLayout(GRID, PREFIX), final_norm=False)
  x = inputs()
  params = random_params(encoder, x)
  want = encoder.apply({"params": params}, x)
  stacked = params["encoderblock"]                 # (depth, ...) leaves
  y = x
  for i in range(depth):
    layer = jax.tree.map(lambda a, i=i: a[i], stacked)
    y = Block(spec, TokenLayout(GRID, PREFIX)).apply({"params": layer}, y)
  np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def test_a_plain_block_with_a_carried_state_raises_and_names_the_carry_form():
  spec = BlockSpec(num_heads=HEADS, mlp_dim=MLP, attention="hopfield",
                   attention_kwargs=dict(alpha_hidden=0.5))
  block = Block(spec, TokenLayout(GRID, PREFIX))
  x = inputs()
  with pytest.raises(ValueError, match=r"block\(\(x, state\), drop_path_rate, mask\)"):
    block.init(jax.random.key(0), x)
  # The carry form runs it (from the initial state).
  state = attention.HopfieldAttention.initial_state(BATCH, TOKENS, HEADS)
  variables = block.init(jax.random.key(0), (x, state), 0.0)
  (_, new_state), _ = block.apply(variables, (x, state), 0.0)
  assert new_state.shape == (BATCH, HEADS, TOKENS, TOKENS)


def test_return_state_is_no_attention_option_of_a_block():
  # The block carries the state on itself: the spec's checks refuse the option
  # (`Attention.SET_BY_BLOCK`).
  with pytest.raises(ValueError, match="return_state"):
    spec = BlockSpec(num_heads=HEADS, mlp_dim=MLP, attention_kwargs=dict(return_state=False))
    Block(spec).init(jax.random.key(0), inputs())


class TinyModel(nn.Module):
  """A model of one's own: patch embedding, plain Blocks, mean-pooled head."""
  depth: int = 2

  @nn.compact
  def __call__(self, images, train: bool = False):
    x = nn.Conv(WIDTH, (2, 2), strides=2, name="embedding")(images)   # (B, 2, 2, D)
    batch, rows, cols, width = x.shape
    x = x.reshape(batch, rows * cols, width)                           # (B, N, D)
    spec = BlockSpec(num_heads=HEADS, mlp_dim=MLP, attention="attn_scale", feat_scale=True)
    for i in range(self.depth):
      x = Block(spec, TokenLayout((rows, cols)), deterministic=not train,
                name=f"block_{i}")(x)
    return nn.Dense(3, name="head")(x.mean(axis=1))                   # (B, 3)


def test_a_model_of_ones_own_has_the_expected_parameters_and_numbers():
  model, images = TinyModel(), inputs(shape=(BATCH, 4, 4, 3))
  params = random_params(model, images)
  assert set(params) == {"embedding", "block_0", "block_1", "head"}
  for i in range(2):
    assert set(params[f"block_{i}"]) == {"norm1", "attention", "feat_scale", "norm2", "mlp"}
    assert set(params[f"block_{i}"]["attention"]) == {"query", "key", "value", "out", "omega"}
    assert set(params[f"block_{i}"]["feat_scale"]) == {"dc_scale", "hc_scale"}
    assert set(params[f"block_{i}"]["mlp"]) == {"fc1", "fc2"}
  logits = model.apply({"params": params}, images)
  assert logits.shape == (BATCH, 3)

  # The same numbers written out with the blocks' carry form and flax layers.
  x = nn.Conv(WIDTH, (2, 2), strides=2).apply({"params": params["embedding"]}, images)
  x = x.reshape(BATCH, 4, WIDTH)
  spec = BlockSpec(num_heads=HEADS, mlp_dim=MLP, attention="attn_scale", feat_scale=True)
  for i in range(2):
    (x, _), _ = Block(spec, TokenLayout((2, 2))).apply({"params": params[f"block_{i}"]},
                                                        (x, None), 0.0)
  want = x.mean(axis=1) @ params["head"]["kernel"] + params["head"]["bias"]
  np.testing.assert_allclose(logits, want, rtol=1e-5, atol=1e-5)


def test_blocks_without_names_take_flax_auto_names():
  class Unnamed(nn.Module):
    @nn.compact
    def __call__(self, x):
      spec = BlockSpec(num_heads=HEADS, mlp_dim=MLP)
      return Block(spec)(Block(spec)(x))

  params = jax.eval_shape(Unnamed().init, jax.random.key(0), inputs())["params"]
  assert set(params) == {"Block_0", "Block_1"}
