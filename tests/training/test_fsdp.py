"""FSDP: parameters and optimizer state sharded over "fsdp" cut ViT-L/16's
per-device state about 8× on 8 devices; train steps on (data, fsdp) and
(data, fsdp, model) meshes equal the one-device step for a model with the
paper variants' parameters; every such parameter has a tensor-parallel rule;
bad `mesh.fsdp` values name the field. (Checkpoints restoring onto fsdp
shardings: tests/training/test_sharding.py.)"""

import functools
import re

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import PartitionSpec as P

from vit_spectral.attention import token_attentions
from vit_spectral.configs import common
from vit_spectral.models import build_model
from vit_spectral.training import optim, sharding, steps
from vit_spectral.training.optim import param_path
from vit_spectral.training.train_state import TrainState

OPTIM = common.optim_config("adamw", learning_rate=1e-2, warmup_steps=1, grad_clip_norm=1.0)
# Parameters that papers 000 and 003 add, in one block: AttnScale's ω (per
# head), the eigen value/output's Θ, ψ, value_bias and out_bias, FeatScale's s, t.
VARIANT_MODEL = common.model_config(
    hidden_size=16, depth=2, num_heads=2, mlp_dim=32, patch_size=4,
    attention=dict(name="attn_scale", value_output="minus"), block=dict(feat_scale=True))
BASE = dict(hidden_size=32, depth=2, num_heads=4, mlp_dim=64, patch_size=2)
# Every registered variant, with the options that add parameters.
VARIANTS = {
    "dot_product_eigen": dict(attention=dict(name="dot_product", value_output="minus")),
    "dot_product_eigen_ns": dict(attention=dict(name="dot_product", value_output="plus_ns")),
    "attn_scale_feat_scale": dict(attention=dict(name="attn_scale"), block=dict(feat_scale=True)),
    "cosine": dict(attention=dict(name="cosine", learnable_tau=True, learnable_nu=True)),
    "lipsformer": dict(attention=dict(name="cosine"), norm="center_norm",
                       block=dict(block_order="lipsformer", residual_alpha=0.3,
                                  conv_block=True, conv_kernel_size=3)),
    "quadratic": dict(attention=dict(name="quadratic")),
    "quadratic_shared_value": dict(attention=dict(name="quadratic", shared_value=True)),
    "gaussian": dict(attention=dict(name="gaussian")),
    "relative_learned": dict(attention=dict(name="relative_learned", content=True)),
    "hopfield": dict(attention=dict(name="hopfield")),
}
# Parameters of no single head or hidden unit: the same on every "model" device.
WHOLE = re.compile(r"/(norm\d/(scale|bias)|attention/(h_theta|h_vectors|out_bias|out/bias|tau|nu"
                   r"|row_embedding|col_embedding|shared_value/\w+)|mlp/fc2/bias"
                   r"|conv_pw/conv/bias|alpha(1|2|_conv)|feat_scale/(dc|hc)_scale)$")


def axes(entry):
  """The mesh axes of one PartitionSpec entry."""
  return () if entry is None else tuple(entry) if isinstance(entry, tuple) else (entry,)


def abstract_state(model, tx, image_shape=(8, 8, 1)):
  def init(rng):
    params = model.init(rng, jnp.zeros((1, *image_shape)))["params"]
    return TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params))
  return init, jax.eval_shape(init, jax.random.key(0))


def run_two_steps(mesh, initial=None):
  """(state after two train steps on `mesh`, last loss, abstract state, initial
  state on the host, the compiled step's HLO text); `initial` (host arrays) is
  placed on the mesh, else the state is initialised there."""
  model = build_model(VARIANT_MODEL, num_classes=10)
  tx, schedule = optim.make_optimizer(OPTIM, total_steps=10)
  init, abstract = abstract_state(model, tx)
  state_sharding = sharding.tree_shardings(abstract, mesh)
  if initial is None:
    state = jax.jit(init, out_shardings=state_sharding)(jax.random.key(0))
    initial = jax.device_get(state)
  else:
    state = jax.device_put(initial, state_sharding)
  data = sharding.batch_sharding(mesh)
  step = jax.jit(sharding.split_blocks_by_batch(functools.partial(
      steps.train_step, model=model, tx=tx, schedule=schedule, base_rng=jax.random.key(1)), mesh),
      in_shardings=(state_sharding, data),
      out_shardings=(state_sharding, sharding.replicated(mesh)))
  rng = np.random.default_rng(0)
  local = {"image": rng.standard_normal((16, 8, 8, 1)).astype(np.float32),
           "label": rng.integers(0, 10, 16).astype(np.int32)}
  batch = sharding.global_batch(local, mesh)
  compiled = step.lower(state, batch).compile()
  for _ in range(2):
    state, metrics = compiled(state, batch)
  return state, float(metrics.loss.compute()), abstract, initial, compiled.as_text()


def all_gathers(hlo: str) -> tuple[set[str], set[str]]:
  """Result shapes ("f32[16,32]") of the all-gathers in `hlo`: (those in a
  while loop's body or what it calls, the others)."""
  computations, name = {}, None
  for line in hlo.splitlines():
    header = re.match(r"(ENTRY )?%(\S+) ", line)
    if header:
      name = header.group(2)
      computations[name] = []
    elif name:
      computations[name].append(line)
  calls = {c: set(re.findall(r"(?:body|condition|calls|to_apply)=%([\w.\-]+)", "\n".join(lines)))
           for c, lines in computations.items()}
  in_loop = set()
  todo = [body for lines in computations.values()
          for body in re.findall(r"body=%([\w.\-]+)", "\n".join(lines))]
  while todo:
    c = todo.pop()
    if c not in in_loop:
      in_loop.add(c)
      todo.extend(calls.get(c, ()))
  inside, outside = set(), set()
  for c, lines in computations.items():
    for line in lines:
      gather = re.search(r"= (\w+\[[\d,]*\])\S* all-gather(-start)?\(", line)
      if gather:
        (inside if c in in_loop else outside).add(gather.group(1))
  return inside, outside


@pytest.fixture(scope="module")
def one_device():
  return run_two_steps(sharding.make_mesh({"data": 1}, devices=jax.devices()[:1]))


@pytest.fixture(scope="module")
def fsdp_4_data_2(one_device):
  return run_two_steps(sharding.make_mesh({"data": 2, "fsdp": 4}), initial=one_device[3])


@pytest.mark.parametrize("mesh_shape", [{"data": 2, "fsdp": 4}, {"data": 2, "fsdp": 2, "model": 2}])
def test_fsdp_steps_equal_the_one_device_step(one_device, fsdp_4_data_2, mesh_shape):
  if mesh_shape == {"data": 2, "fsdp": 4}:
    state, loss, *_ = fsdp_4_data_2
  else:
    state, loss, *_ = run_two_steps(sharding.make_mesh(mesh_shape), initial=one_device[3])
  ref_state, ref_loss, *_ = one_device
  np.testing.assert_allclose(loss, ref_loss, rtol=1e-5)
  chex.assert_trees_all_close(jax.device_get(state.params), jax.device_get(ref_state.params),
                              rtol=1e-5, atol=1e-6)
  # Laid out as asked: fc1 (depth, D, M) has M on "model" (its rule) and D,
  # the largest dimension left, on "fsdp"; the depth axis is never split.
  fc1 = state.params["encoder"]["encoderblock"]["mlp"]["fc1"]["kernel"]
  assert fc1.sharding.spec == P(None, "fsdp", "model")
  mu = state.opt_state[1][0].mu["encoder"]["encoderblock"]["mlp"]["fc1"]["kernel"]
  assert mu.sharding.spec == fc1.sharding.spec
  # fc1's bias (depth, M) has no dimension left: "fsdp" joins "model" on M.
  bias = state.params["encoder"]["encoderblock"]["mlp"]["fc1"]["bias"]
  assert bias.sharding.spec == P(None, ("model", "fsdp"))
  assert {s.data.shape for s in fc1.addressable_shards} == {
      (2, 16 // mesh_shape["fsdp"], 32 // mesh_shape.get("model", 1))}


def test_vit_l16_state_per_device_falls_8x_with_fsdp():
  """Bytes of the parameters and AdamW state on each device, from the compiled
  memory analysis of a jitted optimizer update that takes exactly that state
  (lowered on ShapeDtypeStructs: nothing is allocated). The update, not the
  whole train step, keeps the test to two cheap compiles; its arguments are
  the same state arrays with the same shardings."""
  model = build_model(common.model_config(variant="L/16"), num_classes=1000)
  tx, _ = optim.make_optimizer(common.optim_config("adamw", learning_rate=1e-3), total_steps=10)
  _, abstract = abstract_state(model, tx, image_shape=(224, 224, 3))

  def update(state):  # the parameters stand in for the gradients
    updates, opt_state = tx.update(state.params, state.opt_state, state.params)
    return state.replace(params=optax.apply_updates(state.params, updates), opt_state=opt_state)

  def state_bytes_per_device(mesh_shape):
    mesh = sharding.make_mesh(mesh_shape)
    shardings = sharding.tree_shardings(abstract, mesh)
    state = jax.tree_util.tree_map(
        lambda leaf, s: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=s),
        abstract, shardings)
    compiled = jax.jit(update, in_shardings=(shardings,), out_shardings=shardings,
                       donate_argnums=0).lower(state).compile()
    return compiled.memory_analysis().argument_size_in_bytes

  data_parallel = state_bytes_per_device({"data": 8})
  fsdp = state_bytes_per_device({"data": 1, "fsdp": 8})
  num_params = sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(abstract.params))
  assert 300e6 < num_params < 310e6  # ViT-L/16
  # Replicated: params + AdamW's two moments, float32, on every device.
  assert data_parallel == pytest.approx(3 * 4 * num_params, rel=1e-3)
  assert data_parallel / fsdp == pytest.approx(8, rel=1e-3)  # only the step counters stay whole


def test_fsdp_gathers_each_layers_weights_inside_the_scan(fsdp_4_data_2):
  """With the blocks' token stream split by batch (`split_blocks_by_batch`),
  XLA gathers one layer's weights per loop step, forward and backward; never
  a whole (depth, ...) stack before the loop, never the batch."""
  inside, outside = all_gathers(fsdp_4_data_2[4])
  # One layer: fc1 (D, M), fc2 (M, D), query and key (D, H, Dh), the eigen Θ (D, D).
  layer = {"f32[16,32]", "f32[32,16]", "f32[16,2,8]", "f32[16,16]"}
  assert layer <= inside, inside
  stacks = {f"f32[2,{shape[4:]}" for shape in layer}
  assert not stacks & (inside | outside)
  # Activations (…, T = 5 tokens, …): none gathered; only the position
  # embedding (1, T, D), a parameter.
  tokens = {shape for shape in inside | outside if "5" in shape[4:-1].split(",")}
  assert tokens <= {"f32[1,5,16]", "f32[5,16]"}, tokens


# Every registered token variant, at its defaults where VARIANTS has no case
# for it: a new variant is covered without editing this file.
CASES = dict({name: dict(attention=dict(name=name)) for name in token_attentions()}, **VARIANTS)


def test_the_cases_cover_every_registered_attention():
  assert {v["attention"]["name"] for v in CASES.values()} == set(token_attentions())


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_variant_parameter_has_a_rule_and_shards_on_a_2x2x2_mesh(name):
  model = build_model(common.model_config(**BASE, **CASES[name]), num_classes=10)
  params = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((1, 8, 8, 3)))["params"])
  mesh = sharding.make_mesh({"data": 2, "fsdp": 2, "model": 2})
  specs = {param_path(path): s.spec for path, s in jax.tree_util.tree_flatten_with_path(
      sharding.tree_shardings(params, mesh))[0]}
  blocks = [p for p in specs if p.startswith("encoder/encoderblock/")]
  for path in blocks:
    rules = [axes_ for pattern, axes_ in sharding.tensor_parallel_rules()
             if re.search(pattern, path)]
    ruled = bool(rules)
    # Whole on every "model" device: named above, or declared so (a rule with no "model").
    whole = bool(WHOLE.search(path)) or (ruled and "model" not in rules[0])
    assert ruled or whole, f"{name}: {path} matches no tensor-parallel rule"
    on_model = any("model" in axes(e) for e in specs[path])
    assert on_model != whole, f"{name}: {path} {specs[path]}"
    assert specs[path][:1] in ((), (None,)), f"{name}: the depth axis of {path} is split"
  # Everything but scalars (per layer) and odd sizes is sharded over fsdp.
  assert any("fsdp" in axes(e) for p in blocks for e in specs[p])


@pytest.mark.parametrize("mesh,match", [
    ({"fsdp": 0}, r"mesh.fsdp=0 must be positive or -1"),
    ({"fsdp": -3}, r"mesh.fsdp=-3 must be positive or -1"),
    ({"fsdp": 2.5}, r"mesh.fsdp=2.5 must be positive or -1 \(an integer"),
    ({"data": -1, "fsdp": -1}, r"at most one axis may be -1, got mesh.data and mesh.fsdp"),
    ({"data": 2, "fsdp": 3}, r"config.mesh=\{'data': 2, 'fsdp': 3, 'model': 1\} needs 6 devices"),
    ({"data": -1, "fsdp": 3}, r"8 devices are not divisible by 3"),
])
def test_bad_fsdp_settings_name_the_field(mesh, match):
  with pytest.raises(ValueError, match=match):
    sharding.make_mesh(mesh)
