"""Mixup/CutMix on device and the parameter EMA, against direct computations."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from vit_spectral import settings
from vit_spectral.training import mixing, steps
from vit_spectral.sections.run import RunSettings
from vit_spectral.models import build_model
from vit_spectral.training.train_state import TrainState

B, H, W, C, K = 6, 8, 8, 3, 5
# One compile per settings (MixSettings is hashable).
_mix = jax.jit(mixing.mix_batch, static_argnums=(3, 4))


def _batch(seed=0):
  rng = np.random.default_rng(seed)
  images = rng.normal(size=(B, H, W, C)).astype(np.float32)
  labels = np.array([0, 1, 2, 3, 4, 4], np.int32)  # differs from its reverse
  return jnp.asarray(images), jnp.asarray(labels)


def _pair_weight(out_labels, labels):
  """lam per example: the weight of the example's own class."""
  return np.asarray(out_labels)[np.arange(B), np.asarray(labels)]


@pytest.mark.parametrize("settings", [
    mixing.MixSettings(mixup_alpha=0.8),
    mixing.MixSettings(cutmix_alpha=1.0),
    mixing.MixSettings(mixup_alpha=0.8, cutmix_alpha=1.0, switch_prob=0.5),
    mixing.MixSettings(mixup_alpha=0.8, cutmix_alpha=1.0, prob=0.5),
])
def test_shapes_dtypes_and_label_sums(settings):
  images, labels = _batch()
  for step in range(4):
    out, soft = _mix(jax.random.key(step), images, labels, K, settings)
    assert out.shape == images.shape and out.dtype == images.dtype
    assert soft.shape == (B, K) and soft.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(soft).sum(-1), 1.0, rtol=1e-6)
    # Soft labels in: the sums are kept.
    _, soft2 = _mix(jax.random.key(step), images, soft, K, settings)
    np.testing.assert_allclose(np.asarray(soft2).sum(-1), 1.0, rtol=1e-6)


def test_deterministic_given_the_key():
  images, labels = _batch()
  settings = mixing.MixSettings(mixup_alpha=0.8, cutmix_alpha=1.0)
  base = jax.random.key(7)
  a = _mix(jax.random.fold_in(base, 3), images, labels, K, settings)
  b = _mix(jax.random.fold_in(base, 3), images, labels, K, settings)
  c = _mix(jax.random.fold_in(base, 4), images, labels, K, settings)
  np.testing.assert_array_equal(a[0], b[0])
  np.testing.assert_array_equal(a[1], b[1])
  assert not np.array_equal(a[1], c[1])


def test_mixup_is_the_convex_combination_of_its_labels():
  images, labels = _batch()
  settings = mixing.MixSettings(mixup_alpha=0.8)
  for seed in range(3):
    out, soft = _mix(jax.random.key(seed), images, labels, K, settings)
    lam = _pair_weight(soft, labels)
    assert np.allclose(lam, lam[0])  # one draw per batch
    expected = lam[0] * np.asarray(images) + (1 - lam[0]) * np.asarray(images)[::-1]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_cutmix_pastes_a_box_whose_area_is_one_minus_lam():
  images, labels = _batch()
  settings = mixing.MixSettings(cutmix_alpha=1.0)
  x, flipped = np.asarray(images), np.asarray(images)[::-1]
  for seed in range(5):
    out, soft = _mix(jax.random.key(seed), images, labels, K, settings)
    out = np.asarray(out)
    from_flip = np.all(out == flipped, axis=-1)  # (B, H, W)
    from_self = np.all(out == x, axis=-1)
    assert np.all(from_flip | from_self)
    pasted = from_flip[0]
    assert np.all(from_flip == pasted[None])  # the same box for the whole batch
    if pasted.any():  # the pasted pixels form one rectangle
      rows, cols = np.where(pasted)
      assert pasted[rows.min():rows.max() + 1, cols.min():cols.max() + 1].all()
    lam = _pair_weight(soft, labels)
    np.testing.assert_allclose(lam, 1.0 - pasted.mean(), rtol=1e-6)


def test_switch_and_prob():
  images, labels = _batch()
  both = mixing.MixSettings(mixup_alpha=0.8, cutmix_alpha=1.0, switch_prob=0.5)
  kinds = set()
  for seed in range(12):
    out, _ = _mix(jax.random.key(seed), images, labels, K, both)
    exact = np.all((np.asarray(out) == np.asarray(images)) |
                   (np.asarray(out) == np.asarray(images)[::-1]))
    kinds.add("cutmix" if exact else "mixup")
  assert kinds == {"cutmix", "mixup"}
  never = mixing.MixSettings(mixup_alpha=0.8, cutmix_alpha=1.0, prob=0.0)
  assert mixing.make_mix_fn({"mixup_alpha": 0.8, "prob": 0.0}, K) is None
  out, soft = _mix(jax.random.key(0), images, labels, K, never)
  np.testing.assert_array_equal(out, images)
  np.testing.assert_array_equal(soft, jax.nn.one_hot(labels, K))


def test_bad_settings_raise():
  with pytest.raises(ValueError, match="mixup.prob"):
    mixing.MixSettings(prob=1.5)
  with pytest.raises(ValueError, match="cutmix_alpha"):
    mixing.MixSettings(cutmix_alpha=-1)
  with pytest.raises(ValueError, match="unknown fields"):
    settings.from_config(mixing.MixSettings, {"alpha": 1.0})
  with pytest.raises(ValueError, match="config.ema_decay=1.0"):
    RunSettings(total_steps=1, ema_decay=1.0)


def test_ema_matches_closed_form_over_steps():
  """ema_n = d^n p_0 + (1 - d) sum_t d^(n-t) p_t, from the params of each step."""
  model = build_model(dict(hidden_size=16, depth=1, num_heads=2, mlp_dim=16,
                           patch_size=4), num_classes=K)
  images, labels = _batch()
  params = model.init(jax.random.key(0), images[:1], train=False)["params"]
  tx = optax.sgd(0.5)
  schedule = optax.constant_schedule(0.5)
  decay = 0.8
  step = jax.jit(functools.partial(
      steps.train_step, model=model, tx=tx, schedule=schedule,
      base_rng=jax.random.key(1), ema_decay=decay))
  state = TrainState(step=jnp.zeros((), jnp.int32), params=params,
                     opt_state=tx.init(params), ema_params=params)
  history = [params]
  for _ in range(4):
    state, _ = step(state, {"image": images, "label": labels})
    history.append(state.params)
  n = len(history) - 1

  def closed_form(*leaves):
    leaves = [np.asarray(x, np.float64) for x in leaves]
    total = decay**n * leaves[0]
    for t in range(1, n + 1):
      total = total + (1 - decay) * decay**(n - t) * leaves[t]
    return total

  expected = jax.tree_util.tree_map(closed_form, *history)
  jax.tree_util.tree_map(
      lambda got, want: np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6),
      state.ema_params, expected)
  # The params moved, so the EMA is neither the first nor the last params.
  leaf = lambda t: jax.tree_util.tree_leaves(t)[-1]
  assert not np.allclose(leaf(state.ema_params), leaf(state.params))
