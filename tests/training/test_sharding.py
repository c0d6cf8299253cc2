"""A train step on 8 devices (data and tensor parallel) equals the 1-device step;
checkpoints written on one mesh restore onto another (fsdp included)."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from vit_spectral.configs import common
from vit_spectral.durability import checkpointing
from vit_spectral.training import optim, sharding, steps
from vit_spectral.models import build_model
from vit_spectral.training.train_state import TrainState

MODEL = common.model_config(hidden_size=32, depth=2, num_heads=4, mlp_dim=64, patch_size=2)
OPTIM = common.optim_config("adamw", learning_rate=1e-2, warmup_steps=1, grad_clip_norm=1.0)


def make_step(mesh):
  model = build_model(MODEL, num_classes=10)
  tx, schedule = optim.make_optimizer(OPTIM, total_steps=10)

  def init(rng):
    params = model.init(rng, jnp.zeros((1, 8, 8, 1)))["params"]
    return TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params))

  abstract = jax.eval_shape(init, jax.random.key(0))
  state_sharding = sharding.tree_shardings(abstract, mesh)
  state = jax.jit(init, out_shardings=state_sharding)(jax.random.key(0))
  step = jax.jit(functools.partial(steps.train_step, model=model, tx=tx, schedule=schedule,
                                   base_rng=jax.random.key(1)),
                 in_shardings=(state_sharding, sharding.batch_sharding(mesh)),
                 out_shardings=(state_sharding, sharding.replicated(mesh)))
  return state, step, abstract, state_sharding


def batch(mesh):
  rng = np.random.default_rng(0)
  local = {"image": rng.standard_normal((16, 8, 8, 1)).astype(np.float32),
           "label": rng.integers(0, 10, 16).astype(np.int32)}
  return sharding.global_batch(local, mesh)


def run_two_steps(mesh):
  state, step, _, _ = make_step(mesh)
  for _ in range(2):
    state, metrics = step(state, batch(mesh))
  return state, float(metrics.loss.compute())


@pytest.fixture(scope="module")
def single_device_result():
  mesh = sharding.make_mesh({"data": 1, "model": 1}, devices=jax.devices()[:1])
  return run_two_steps(mesh)


@pytest.mark.parametrize("mesh_shape", [{"data": 8, "model": 1}, {"data": 2, "model": 4}])
def test_sharded_steps_match_one_device(single_device_result, mesh_shape):
  mesh = sharding.make_mesh(mesh_shape)
  state, loss = run_two_steps(mesh)
  ref_state, ref_loss = single_device_result
  np.testing.assert_allclose(loss, ref_loss, rtol=1e-5)
  chex.assert_trees_all_close(jax.device_get(state.params), jax.device_get(ref_state.params),
                              rtol=1e-4, atol=1e-6)
  # The layout is the one asked for: heads split over "model" when it exists.
  qkv = state.params["encoder"]["encoderblock"]["attention"]["query"]["kernel"]
  assert qkv.sharding.spec == P(None, None, "model", None)
  heads_per_shard = {s.data.shape[2] for s in qkv.addressable_shards}
  assert heads_per_shard == {4 // mesh_shape["model"]}


def test_checkpoint_from_a_2x4_mesh_restores_onto_an_fsdp_mesh(tmp_path):
  mesh_a = sharding.make_mesh({"data": 2, "model": 4})
  state, step, abstract, _ = make_step(mesh_a)
  state, _ = step(state, batch(mesh_a))
  ckpt = checkpointing.Checkpointer(str(tmp_path), save_every=1)
  ckpt.save(1, state)
  ckpt.wait_until_finished()

  # Parameters and optimizer state sharded over "fsdp" (orbax reads each
  # device's slice straight into the target sharding).
  mesh_b = sharding.make_mesh({"data": 2, "fsdp": 4})
  shardings_b = sharding.tree_shardings(abstract, mesh_b)
  restored = checkpointing.Checkpointer(str(tmp_path), save_every=1).restore(1, abstract, shardings_b)
  chex.assert_trees_all_equal(jax.device_get(restored), jax.device_get(state))
  chex.assert_trees_all_equal(jax.tree_util.tree_map(lambda a: a.sharding, restored), shardings_b)
  kernel = restored.params["encoder"]["encoderblock"]["mlp"]["fc1"]["kernel"]
  assert kernel.sharding == NamedSharding(mesh_b, P(None, "fsdp", "model"))
  assert kernel.sharding.mesh.shape == {"data": 2, "fsdp": 4, "model": 1}
  assert {s.data.shape for s in kernel.addressable_shards} == {(2, 32 // 4, 64)}


@pytest.mark.parametrize("mesh,match", [
    ({"data": 3, "model": 1}, "needs 3 devices"),
    ({"data": -1, "model": -1}, "at most one axis"),
    ({"data": -1, "pipeline": 2}, r"unknown fields \['pipeline'\]"),
    ({"data": 0}, "mesh.data=0 must be positive or -1"),
    ({"data": -1, "model": 3}, "not divisible"),
])
def test_bad_meshes_are_rejected(mesh, match):
  with pytest.raises(ValueError, match=match):
    sharding.make_mesh(mesh)


def test_a_rule_that_cannot_divide_a_parameter_names_it():
  mesh = sharding.make_mesh({"data": 2, "model": 4})
  tree = {"encoder": {"encoderblock": {"mlp": {"fc1": {"kernel": jnp.zeros((2, 32, 6))}}}}}
  with pytest.raises(ValueError, match="mlp/fc1/kernel"):
    sharding.tree_shardings(tree, mesh)
