"""The fused call's kernels (`attention/fused.py`), checked on the CPU.

cuDNN's contract, padded tokens and the true lengths passed, is run through
XLA's implementation of the same call (`padded_attention(implementation=None)`);
splash attention runs in Pallas' interpreter, on one device and mapped over a
mesh of 8. Every variant with a fused path goes through each kernel's route
(platform "gpu" / "tpu") and equals its explicit path. That the GPU and TPU
compilers take the kernels is checked by CI's target dry runs
(.ci/check_target_dry_runs.py), which need their plugins.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.attention.test_fused_attention import (BATCH, FUSED_VARIANTS, HEADS, TOKENS, make,
                                                  masks, random_params)
from vit_spectral import backends
from vit_spectral.attention import fused
from vit_spectral.planning import hlo_costs, jaxpr_costs


def qkv(batch=3, tokens=13, heads=2, head_dim=8, keys=None, seed=0):
  rng = np.random.default_rng(seed)
  shape = lambda t: (batch, t, heads, head_dim)  # noqa: E731
  return tuple(jnp.asarray(rng.standard_normal(shape(t)), jnp.float32)
               for t in (tokens, keys or tokens, keys or tokens))


@pytest.mark.parametrize("platform, dtype, head_dim, bias, tokens, want", [
    ("gpu", jnp.bfloat16, 64, False, 197, "cudnn"),
    ("gpu", jnp.float16, 128, True, 56, "cudnn"),
    ("gpu", jnp.float32, 64, False, 197, "xla"),       # cuDNN takes bf16/fp16 only
    ("gpu", jnp.bfloat16, 12, False, 197, "xla"),      # head width not a multiple of 8
    ("gpu", jnp.bfloat16, 256, False, 197, "xla"),     # wider than 128
    ("tpu", jnp.float32, 64, False, 197, "splash"),    # 197 -> 256: 1.30x padding
    ("tpu", jnp.bfloat16, 64, False, 98, "splash"),    # CSwin-T stage 3: 98 -> 128, 1.31x
    ("tpu", jnp.bfloat16, 64, False, 256, "splash"),   # no padding
    ("tpu", jnp.bfloat16, 64, False, 56, "xla"),       # CSwin-T stripes: 56 -> 128, 2.29x
    ("tpu", jnp.bfloat16, 64, False, 49, "xla"),       # a 7x7 window: 2.61x
    ("tpu", jnp.bfloat16, 64, True, 197, "xla"),       # splash takes no bias
    ("cpu", jnp.bfloat16, 64, False, 197, "xla"),
])
def test_kernel_for_each_platform(platform, dtype, head_dim, bias, tokens, want):
  assert fused.kernel_for(platform, dtype=dtype, head_dim=head_dim, has_bias=bias,
                          has_mask=False, num_queries=tokens, num_keys=tokens) == want


def test_splash_padding_bound_reads_queries_and_keys():
  """One over-padded side is enough to leave splash (class attention: 1 query)."""
  bound = fused.SPLASH_MAX_PADDING
  kwargs = dict(dtype=jnp.bfloat16, head_dim=64, has_bias=False, has_mask=False)
  assert fused.kernel_for("tpu", num_queries=1, num_keys=256, **kwargs) == "xla"
  assert fused.kernel_for("tpu", num_queries=256, num_keys=1, **kwargs) == "xla"
  # Just inside and just outside the bound.
  inside = int(np.ceil(fused.SPLASH_BLOCK / bound))
  assert fused.kernel_for("tpu", num_queries=inside, num_keys=inside, **kwargs) == "splash"
  assert fused.kernel_for("tpu", num_queries=inside - 1, num_keys=inside - 1, **kwargs) == "xla"


def test_kernel_for_an_unknown_platform_names_the_choices():
  with pytest.raises(ValueError, match=r"platform='xpu'; choose one of \['cpu', 'gpu', 'tpu'\]"):
    fused.kernel_for("xpu", dtype=jnp.float32, head_dim=8, has_bias=False, has_mask=False,
                     num_queries=8, num_keys=8)


@pytest.mark.parametrize("tokens, keys", [(13, None), (16, None), (1, 13)])
def test_padded_attention_equals_unpadded_with_bias_and_mask(tokens, keys):
  """Tokens padded to a multiple of 16 with the true lengths passed: the same
  output (the padding masked exactly, padded queries sliced off), a bias and a
  mask (one example with no valid key at all) padded along."""
  q, k, v = qkv(tokens=tokens, keys=keys)
  s = k.shape[1]
  rng = np.random.default_rng(1)
  bias = jnp.asarray(rng.standard_normal((1, 2, tokens, s)), jnp.float32)
  mask = jnp.asarray(rng.random((3, 1, tokens, s)) < 0.7).at[2].set(False)
  for b, m in [(None, None), (bias, None), (None, mask), (bias, mask)]:
    want = jax.nn.dot_product_attention(q, k, v, bias=b, mask=m)
    got = fused.padded_attention(q, k, v, scale=8 ** -0.5, bias=b, mask=m, multiple=16,
                                 implementation=None)
    assert got.shape == q.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_padded_attention_gradients_equal_unpadded():
  q, k, v = qkv()
  bias = jnp.asarray(np.random.default_rng(2).standard_normal((1, 2, 13, 13)), jnp.float32)
  weights = jnp.asarray(np.random.default_rng(3).standard_normal(q.shape), jnp.float32)

  def loss(attend):
    return lambda q, k, v, b: jnp.sum(weights * attend(q, k, v, b))

  plain = lambda q, k, v, b: jax.nn.dot_product_attention(q, k, v, bias=b)  # noqa: E731
  padded = functools.partial(fused.padded_attention, scale=8 ** -0.5, multiple=16,
                             implementation=None)
  want = jax.grad(loss(plain), argnums=(0, 1, 2, 3))(q, k, v, bias)
  got = jax.grad(loss(lambda q, k, v, b: padded(q, k, v, bias=b)),
                 argnums=(0, 1, 2, 3))(q, k, v, bias)
  for g, w, name in zip(got, want, "qkvb"):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=name)


def test_splash_equals_xla_forward_and_backward():
  q, k, v = qkv(tokens=13)
  weights = jnp.asarray(np.random.default_rng(4).standard_normal(q.shape), jnp.float32)
  splash = functools.partial(fused.splash_attention, scale=8 ** -0.5, interpret=True)
  want = jax.nn.dot_product_attention(q, k, v)
  np.testing.assert_allclose(splash(q, k, v), want, rtol=1e-5, atol=1e-6)
  loss = lambda f: lambda q, k, v: jnp.sum(weights * f(q, k, v))  # noqa: E731
  got = jax.grad(loss(splash), argnums=(0, 1, 2))(q, k, v)
  want = jax.grad(loss(jax.nn.dot_product_attention), argnums=(0, 1, 2))(q, k, v)
  for g, w, name in zip(got, want, "qkv"):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=name)


def test_splash_is_mapped_over_the_context_mesh():
  """Under a mesh (the trainer's `blocks_split_by_batch` sets it), XLA cannot
  partition the Pallas kernel: it runs per device on its examples, and the
  result is the unsharded one."""
  mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
  q, k, v = qkv(batch=8, tokens=13)
  sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
  q, k, v = (jax.device_put(t, sharding) for t in (q, k, v))

  @jax.jit
  def attend(q, k, v):
    with jax.sharding.use_abstract_mesh(mesh.abstract_mesh):
      assert fused._batch_split(q.shape[0]) == ("data", "model")
      return fused.splash_attention(q, k, v, scale=8 ** -0.5, interpret=True)

  np.testing.assert_allclose(attend(q, k, v), jax.nn.dot_product_attention(q, k, v),
                             rtol=1e-5, atol=1e-6)
  assert "shard_map" in str(jax.make_jaxpr(attend)(q, k, v))
  assert fused._batch_split(8) == ()        # no context mesh: called as it is


@pytest.mark.parametrize("variant", FUSED_VARIANTS)
@pytest.mark.parametrize("platform", ["gpu", "tpu"])
def test_every_fused_variant_through_each_kernel_equals_explicit(variant, platform,
                                                                monkeypatch):
  """The platform's route with each variant's scale, bias and mask: cuDNN's
  padding contract (in bf16, the dtype it takes) and splash (interpreted)."""
  calls = []
  if platform == "gpu":
    original = fused.padded_attention

    def padded(*args, **kwargs):
      calls.append(kwargs["implementation"])
      return original(*args, **dict(kwargs, implementation=None))
    monkeypatch.setattr(fused, "padded_attention", padded)
    dtype, tolerance = jnp.bfloat16, 3e-2
  else:
    original = fused.splash_attention

    def splash(*args, **kwargs):
      calls.append("splash")
      return original(*args, **kwargs, interpret=True)
    monkeypatch.setattr(fused, "splash_attention", splash)
    # TOKENS is far from a 128 multiple: lift the padding bound so splash runs.
    monkeypatch.setattr(fused, "SPLASH_MAX_PADDING", float("inf"))
    dtype, tolerance = jnp.float32, 1e-5
  name, fields = FUSED_VARIANTS[variant]
  explicit = make(name, fields, "explicit", dtype=dtype)
  kernel = make(name, fields, "fused", dtype=dtype, platform=platform)
  x = jnp.asarray(np.random.default_rng(0).standard_normal((BATCH, TOKENS, 16)), jnp.float32)
  state = type(explicit).initial_state(BATCH, TOKENS, HEADS)
  params = random_params(explicit, x, state)
  for mask in masks()[:1] if platform == "tpu" else masks():
    want = explicit.apply({"params": params}, x, state, mask)[0]
    got = kernel.apply({"params": params}, x, state, mask)[0]
    scale = float(jnp.abs(jnp.float32(want)).max())
    np.testing.assert_allclose(np.float32(got), np.float32(want), rtol=tolerance,
                               atol=tolerance * scale, err_msg=f"{variant} on {platform}")
  if platform == "tpu" and variant.startswith("relative_learned"):
    assert not calls     # a position bias: splash takes none, XLA's path runs
  else:
    assert calls and set(calls) == ({"cudnn"} if platform == "gpu" else {"splash"})


def test_backend_of_devices_and_its_defaults():
  cpu = backends.for_devices(jax.devices())
  assert cpu.platform == "cpu" and cpu.attention_kernel == "xla"
  assert cpu.encoder_residuals("scan") == "dots" and cpu.encoder_residuals("loop") == "all"
  assert not cpu.unrolls_encoder("scan")
  gpu = backends.Backend("gpu", "NVIDIA H100 80GB HBM3")
  assert gpu.defaults("scan") == {"platform": "gpu", "device_kind": "NVIDIA H100 80GB HBM3",
                                  "encoder_residuals": "dots", "encoder_unrolled": True,
                                  "attention_kernel": "cudnn"}
  assert not gpu.unrolls_encoder("loop")
  assert backends.Backend("tpu").attention_kernel == "splash"
  with pytest.raises(ValueError, match="at least one device"):
    backends.for_devices([])


def test_splash_matmul_flops_count_as_xlas():
  """`jaxpr_costs.matmul_flops` counts a splash kernel's products (forward 2,
  backward 4 of B·H·T·S·Dh at the padded lengths), not one block's body."""
  q = jax.ShapeDtypeStruct((2, 256, 2, 64), jnp.float32)
  splash = functools.partial(fused.splash_attention, scale=0.125, interpret=True)
  for attend in (splash, jax.nn.dot_product_attention):
    loss = lambda q, k, v, attend=attend: attend(q, k, v).sum()  # noqa: E731
    forward = jaxpr_costs.matmul_flops(jax.make_jaxpr(loss)(q, q, q))
    both = jaxpr_costs.matmul_flops(jax.make_jaxpr(jax.grad(loss, argnums=(0, 1, 2)))(q, q, q))
    unit = 2 * 2 * 256 * 256 * 64
    assert forward == 4 * unit
    assert both == pytest.approx(12 * unit, rel=1e-2)


def test_attention_kernels_are_found_in_compiled_text():
  text = "\n".join([
      "HloModule step",
      "%body (p: f32[2]) -> f32[2] {",
      '  %a = (bf16[2,208,6,64]{3,2,1,0}, f32[2,6,208]{2,1,0}) custom-call(%q, %k, %v), '
      'custom_call_target="__cudnn$fmhaSoftmax", backend_config={}',
      '  %b = bf16[2,208,6,64]{3,2,1,0} custom-call(%q), '
      'custom_call_target="__cudnn$fmhaSoftmaxBackward"',
      "  ROOT %p = f32[2] parameter(0)",
      "}",
      "ENTRY %main (x: f32[2]) -> f32[2] {",
      '  %splash_mha_fwd_segmented.1 = f32[8,128] custom-call(%c), '
      'custom_call_target="tpu_custom_call", backend_config={"custom_call_config": {"body": "',
      '}}", "x": 1}',       # a kernel's text spans lines; a "}}" line closes nothing
      "  ROOT %x = f32[2] parameter(0)",
      "}",
  ])
  assert hlo_costs.attention_kernels(text) == {"cudnn": 2, "splash": 1}
  module = hlo_costs.HloModule.parse(text)
  assert [i.name for i in module.computations["main"]] == ["splash_mha_fwd_segmented.1", "x"]
  assert hlo_costs.attention_kernels("ENTRY %m {\n ROOT %x = f32[] dot(%a, %b)\n}") == {}


def test_the_dots_policy_saves_the_kernels_forward_only():
  """encoder_residuals="dots" keeps a fused kernel's forward outputs
  (`fused.is_kernel_forward`), so its backward does not run the forward again."""
  q = jax.ShapeDtypeStruct((1, 128, 1, 64), jnp.float32)
  splash = functools.partial(fused.splash_attention, scale=0.125, interpret=True)
  jaxpr = jax.make_jaxpr(jax.grad(lambda q: splash(q, q, q).sum()))(q)
  calls = {}
  for eqn, _ in jaxpr_costs._eqns(jaxpr.jaxpr):    # pylint: disable=protected-access
    name = fused.kernel_call(eqn.primitive, eqn.params)
    if name:
      calls[name] = fused.is_kernel_forward(eqn.primitive, **eqn.params)
  assert calls == {"splash_mha_fwd": True, "splash_mha_dkv": False, "splash_mha_dq": False}
