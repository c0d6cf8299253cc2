"""probe(): per-layer diagnostics read from what the blocks sow, against direct numpy."""

import jax
import numpy as np
import pytest

from vit_spectral.analysis import probe
from vit_spectral.models import build_model, per_layer, scan_to_loop

FIELDS = dict(patch_size=2, hidden_size=16, depth=2, num_heads=2, mlp_dim=32,
              attention=dict(name="attn_scale"), block=dict(feat_scale=True))


def direct_metrics(x, a):
  """x: (B, n, d) block output, a: (B, H, n, n) map -> the probe's numbers, by hand."""
  b, n, _ = x.shape
  mean = x.mean(1, keepdims=True)
  ratio = np.linalg.norm(x - mean, axis=(1, 2)) / np.linalg.norm(np.broadcast_to(mean, x.shape), axis=(1, 2))
  proportion = np.linalg.norm(x - mean, axis=(1, 2)) / np.linalg.norm(x, axis=(1, 2))
  cos = lambda u, v: abs(u @ v) / (np.linalg.norm(u) * np.linalg.norm(v))
  pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
  tokens = [np.mean([cos(x[k, i], x[k, j]) for i, j in pairs]) for k in range(b)]
  attn = [np.mean([np.mean([cos(a[k, h][:, i], a[k, h][:, j]) for i, j in pairs])
                   for h in range(a.shape[1])]) for k in range(b)]
  f = np.exp(-2j * np.pi * np.outer(np.arange(n), np.arange(n)) / n) / np.sqrt(n)
  spectrum = np.linalg.norm(np.einsum("kn,bhnm,ml->bhkl", f, a, f.conj().T), axis=-1)
  return dict(hc_dc_ratio=ratio, hc_proportion=proportion, token_cosine_similarity=tokens,
              attention_cosine_similarity=attn, attention_spectrum=spectrum)


@pytest.fixture(scope="module")
def trained_like():
  """A tiny AttnScale + FeatScale ViT with random (non-neutral) parameters."""
  model = build_model(FIELDS, num_classes=10)
  images = jax.random.normal(jax.random.key(1), (2, 8, 8, 1))
  params = jax.jit(model.init)(jax.random.key(0), images)["params"]
  rng = np.random.default_rng(0)
  params = jax.tree_util.tree_map(lambda p: p + 0.3 * rng.standard_normal(p.shape, np.float32), params)
  return model, params, images


def test_probe_matches_a_direct_computation_per_layer(trained_like):
  model, params, images = trained_like
  result = probe(model, {"params": params}, images)
  _, state = jax.jit(lambda p: model.apply({"params": p}, images, mutable=["intermediates"]))(params)
  layers = per_layer(state["intermediates"])
  assert len(layers) == 2
  for key, shape in [("hc_dc_ratio", (2, 2)), ("attention_spectrum", (2, 2, 2, 17)),
                     ("attention_weights", (2, 2, 2, 17, 17))]:
    assert result[key].shape == shape
  for l, layer in enumerate(layers):
    x = np.asarray(layer["block_output"], np.float64)
    a = np.asarray(layer["attention/attention_weights"], np.float64)
    np.testing.assert_allclose(result["attention_weights"][l], a, rtol=1e-5, atol=1e-6)
    for key, value in direct_metrics(x, a).items():
      np.testing.assert_allclose(result[key][l], value, rtol=2e-4, atol=1e-5, err_msg=key)


def test_probe_reads_scan_and_loop_encoders_alike_and_ignores_old_intermediates(trained_like):
  model, params, images = trained_like
  scan = probe(model, {"params": params}, images)
  loop_model = build_model(dict(FIELDS, encoder_mode="loop"), num_classes=10)
  _, stale = model.apply({"params": params}, images, mutable=["intermediates"])
  loop = probe(loop_model, {"params": scan_to_loop(params), **stale}, images)
  for key in scan:
    np.testing.assert_allclose(loop[key], scan[key], rtol=1e-4, atol=1e-5, err_msg=key)
