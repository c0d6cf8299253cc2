"""model.encoder_residuals and model.encoder_unroll: the scanned encoder with the CPU
default (residuals "dots") and unrolled computes the loop's numbers (logits and
gradients) with the same stacked parameters; unroll >= depth leaves no while loop;
bad values name the field. (Scan with every residual == loop: tests/models/test_vit.py.)"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_spectral import backends
from vit_spectral.models import EncoderSpec, build_model, loop_to_scan, scan_to_loop
from vit_spectral.models.build import model_spec

TINY = dict(patch_size=4, hidden_size=8, depth=3, num_heads=2, mlp_dim=16)
IMAGES = np.random.default_rng(0).standard_normal((4, 8, 8, 1)).astype(np.float32)
LABELS = jnp.arange(4) % 5


def tiny(**fields):
  """The tiny ViT (5 classes) with `fields` (config form) changed."""
  return build_model(dict(TINY, **fields), num_classes=5)


def loss_and_grads(model, params):
  def loss(p):
    logits = model.apply({"params": p}, IMAGES)
    return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(4), LABELS]), logits
  (value, logits), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(params)
  return value, logits, grads


def test_scan_with_the_cpu_residuals_equals_the_loop():
  loop = tiny(encoder_mode="loop")
  rng = np.random.default_rng(1)   # host arrays: no compile per parameter shape
  params = jax.tree_util.tree_map(   # a non-zero head, so every gradient is non-zero
      lambda a: 0.3 * rng.standard_normal(a.shape).astype(np.float32),
      jax.eval_shape(loop.init, jax.random.key(0), IMAGES)["params"])
  want_loss, want_logits, want_grads = loss_and_grads(loop, params)
  assert tiny().encoder.residuals == "dots"   # the build writes in the CPU's default
  assert EncoderSpec().residual_policy() == "dots"
  loss, logits, grads = loss_and_grads(tiny(), loop_to_scan(params))
  np.testing.assert_allclose(logits, want_logits, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(loss, want_loss, rtol=1e-6)
  jax.tree_util.tree_map(
      lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6),
      scan_to_loop(jax.device_get(grads)), want_grads)


def test_unroll_to_depth_leaves_no_loop():
  assert jax.default_backend() == "cpu"
  params = jax.eval_shape(tiny().init, jax.random.key(0), IMAGES)

  def program(unroll):
    return jax.jit(tiny(encoder_unroll=unroll).apply).lower(params, IMAGES).as_text()

  assert "stablehlo.while" not in program(3)
  assert "stablehlo.while" in program(1)


@pytest.mark.parametrize("fields, message", [
    (dict(encoder_unroll=0), r"model\.encoder_unroll=0 must be an int >= 1"),
    (dict(encoder_unroll=True), r"model\.encoder_unroll=True must be an int >= 1"),
    (dict(encoder_unroll=2, encoder_mode="loop"),
     r"model\.encoder_unroll=2 applies to model\.encoder_mode='scan' only"),
    (dict(encoder_residuals="some"),
     r"model\.encoder_residuals='some'; choose one of \['all', 'dots'\] or None"),
    (dict(encoder_residuals="dots", remat=True),
     r"model\.encoder_residuals='dots' applies without model\.remat"),
])
def test_bad_unroll_names_the_field(fields, message):
  with pytest.raises(ValueError, match=message):
    tiny(**fields).init(jax.random.key(0), IMAGES)


@pytest.mark.parametrize("platform, unroll", [("cpu", 1), ("gpu", TINY["depth"]), ("tpu", 1)])
def test_the_build_writes_in_the_backend_passed_not_the_hosts(platform, unroll):
  """`ModelSpec.build(backend=...)` resolves the defaults for the platform it is
  handed (a dry run's target), whatever this process runs on (issue 44): the
  scan saves the Dense and attention-kernel outputs everywhere, and a GPU
  runs every block in one iteration (the loop's program, the scan's layout)."""
  backend = backends.Backend(platform)
  model = model_spec(TINY).build(5, backend)
  assert model.encoder.residuals == backend.encoder_residuals("scan") == "dots"
  assert model.encoder.unroll == unroll
  assert model.block.platform == platform
  assert model_spec(dict(TINY, encoder_unroll=2)).build(5, backend).encoder.unroll == 2
  assert model_spec(dict(TINY, encoder_mode="loop")).build(5, backend).encoder.residuals == "all"
  assert model_spec(dict(TINY, remat=True)).build(5, backend).encoder.residuals is None
  explicit = model_spec(dict(TINY, encoder_residuals="all")).build(5, backends.Backend("cpu"))
  assert explicit.encoder.residuals == "all"        # a setting the config makes is kept
