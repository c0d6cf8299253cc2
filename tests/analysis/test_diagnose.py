"""diagnose() on a user-written Flax ViT through the sow protocol: its numbers
against an independent NumPy computation, streaming, one compile, tidy frames."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_spectral import analysis
from vit_spectral.analysis import diagnosis as diagnosis_lib

TRACES = {"count": 0}


class UserBlock(nn.Module):
  """A pre-norm block written as a user would, with flax's own attention."""
  heads: int = 2

  @nn.compact
  @analysis.diagnosable
  def __call__(self, x):
    y = nn.LayerNorm()(x)
    x = x + nn.MultiHeadDotProductAttention(num_heads=self.heads)(y, sow_weights=True)
    y = nn.Dense(2 * x.shape[-1])(nn.LayerNorm()(x))
    return x + nn.Dense(x.shape[-1])(nn.gelu(y))


class UserViT(nn.Module):
  """Not built from vit_spectral.models: a CLS token, 2x2 patches, 3 blocks."""

  @nn.compact
  def __call__(self, images, deterministic: bool = False):
    TRACES["count"] += 1
    x = nn.Conv(16, (2, 2), strides=2)(images)
    x = x.reshape(x.shape[0], -1, 16)
    cls = self.param("cls", nn.initializers.normal(1.0), (1, 1, 16))
    x = jnp.concatenate([jnp.broadcast_to(cls, (x.shape[0], 1, 16)), x], axis=1)
    x = x + self.param("pos", nn.initializers.normal(0.5), x.shape[1:])
    for i in range(3):
      x = UserBlock(name=f"block_{i}")(x)
    return nn.Dense(10)(x[:, 0])


# Independent NumPy (float64) forms of the metrics, from the papers' definitions.
def _cos_offdiagonal(rows):                       # (..., n, d): eqs. 75-76
  unit = rows / np.linalg.norm(rows, axis=-1, keepdims=True)
  gram = np.abs(unit @ np.swapaxes(unit, -1, -2))
  n = rows.shape[-2]
  return (gram.sum(axis=(-2, -1)) - np.trace(gram, axis1=-2, axis2=-1)) / (n * (n - 1))


def _norm_1_inf(m):                               # paper 004, eq. 24
  m = np.abs(m)
  return np.sqrt(m.sum(axis=-2).max(axis=-1) * m.sum(axis=-1).max(axis=-1))


def numpy_metrics(x, a):
  """x (B, T, D) block output, a (B, H, T, T) map -> per-image values."""
  mean = x.mean(axis=1, keepdims=True)
  hc = np.linalg.norm(x - mean, axis=(1, 2))
  n = a.shape[-1]
  f = np.exp(-2j * np.pi * np.outer(np.arange(n), np.arange(n)) / n) / np.sqrt(n)
  spectrum = np.linalg.norm(np.einsum("kn,bhnm,ml->bhkl", f, a, f.conj().T), axis=-1)
  logs = np.log(np.where(a > 0, a, 1.0))
  return {
      "hc_dc_ratio": hc / np.linalg.norm(np.broadcast_to(mean, x.shape), axis=(1, 2)),
      "hc_proportion": hc / np.linalg.norm(x, axis=(1, 2)),
      "token_cosine_similarity": _cos_offdiagonal(x),
      "rank_residual_ratio": _norm_1_inf(x - mean) / _norm_1_inf(x),
      "attention_cosine_similarity": _cos_offdiagonal(np.swapaxes(a, -1, -2)),   # (B, H)
      "attention_entropy": (-a * logs).sum(-1).mean(-1),
      "attention_spectrum_dc": spectrum[..., 0],
      "attention_spectrum_hf": spectrum[..., 1:].mean(-1),
      "attention_spectrum_hf_dc": spectrum[..., 1:].mean(-1) / spectrum[..., 0],
  }


@pytest.fixture(scope="module")
def user_model():
  model = UserViT()
  images = np.asarray(jax.random.normal(jax.random.key(1), (5, 8, 8, 3)), np.float32)
  variables = model.init(jax.random.key(0), images[:1], deterministic=True)
  return model, variables, images


def _reference(model, variables, images):
  """Flax's own capture of every block's output (not our sow) and the maps
  flax's attention sowed, in float64."""
  _, state = model.apply(variables, images, deterministic=True, capture_intermediates=True,
                         mutable=["intermediates"])
  tree = state["intermediates"]
  out = []
  for i in range(3):
    block = tree[f"block_{i}"]
    x = np.asarray(block["__call__"][0], np.float64)
    a = np.asarray(block["MultiHeadDotProductAttention_0"]["attention_weights"][0], np.float64)
    out.append(numpy_metrics(x, a))
  return out


def test_user_vit_through_the_protocol_equals_numpy(user_model):
  model, variables, images = user_model
  # Batches of 2 over 5 images: two full batches and one padded.
  d = analysis.diagnose(model, variables, images, batch_size=2, per_image=True, name="user")
  want = _reference(model, variables, images)
  assert d.num_layers == 3 and d.stage.tolist() == [0, 0, 0] and d.stage_names == (None,)
  for layer, (got, got_images, expected) in enumerate(zip(d.layers, d.per_image, want)):
    for metric, values in expected.items():
      np.testing.assert_allclose(got_images[metric], values, rtol=2e-4, atol=1e-6,
                                 err_msg=f"{metric}, layer {layer}")
      np.testing.assert_allclose(got[metric], values.mean(axis=0), rtol=2e-4, atol=1e-6,
                                 err_msg=f"{metric}, layer {layer}")
  # The metrics really change with depth (the comparison is not of constants).
  assert len({round(layer["hc_dc_ratio"], 4) for layer in d.layers}) == 3
  assert d.maps is None


def test_compiled_once_for_several_calls(user_model):
  model, variables, images = user_model
  analysis.diagnose(model, variables, images, batch_size=2)
  traced = TRACES["count"]
  for _ in range(2):
    analysis.diagnose(model, variables, images[::-1], batch_size=2)
  assert TRACES["count"] == traced


def test_tidy_frame_per_layer_csv_and_compare(user_model, tmp_path):
  model, variables, images = user_model
  d = analysis.diagnose(model, variables, images, batch_size=4, name="user",
                        metrics=["hc_dc_ratio", "attention_entropy"], keep_maps=True)
  frame = d.to_frame()
  assert list(frame.columns) == ["model", "layer", "stage", "head", "metric", "value"]
  # 3 layers x (1 token value + 2 heads of entropy)
  assert len(frame) == 3 * 3
  assert frame[frame.metric == "hc_dc_ratio"]["head"].isna().all()
  assert sorted(frame[frame.metric == "attention_entropy"]["head"].unique()) == [0, 1]
  wide = d.per_layer()
  np.testing.assert_allclose(wide["attention_entropy"], [np.mean(l["attention_entropy"])
                                                        for l in d.layers], rtol=1e-6)
  assert d.maps[0]["MultiHeadDotProductAttention_0"].shape == (5, 2, 17, 17)
  path = d.to_csv(str(tmp_path / "d.csv"))
  assert open(path).readline().strip() == "model,layer,stage,head,metric,value"

  other = analysis.diagnose(model, jax.tree_util.tree_map(lambda p: 2 * p, variables), images,
                            batch_size=4, metrics=["hc_dc_ratio", "attention_entropy"])
  both = analysis.compare({"init": d, "doubled": other})
  assert set(both.to_frame()["model"]) == {"init", "doubled"}
  assert both.per_layer().index.names == ["model", "layer"]
  fig = both.plot()
  assert [ax.get_title() for ax in fig.axes if ax.get_visible()][:2] == [
      "‖HC‖/‖DC‖ of the block output (000 Def. 1)", "attention entropy, nats (004 App. I)"]
  assert [len(ax.lines) for ax in fig.axes if ax.get_visible()] == [2, 2]


class Silent(nn.Module):
  @nn.compact
  def __call__(self, x):
    return nn.Dense(3)(x.reshape(x.shape[0], -1))


def test_bad_input_names_what_is_wrong(user_model):
  model, variables, images = user_model
  with pytest.raises(ValueError, match=r"unknown metric 'hc_dc'; did you mean 'hc_dc_ratio'"):
    analysis.diagnose(model, variables, images, metrics=["hc_dc"])
  with pytest.raises(ValueError, match=r"images must be \(N, H, W, C\); got shape \(8, 8, 3\)"):
    analysis.diagnose(model, variables, images[0])
  with pytest.raises(ValueError, match="batch_size=0 must be a positive int"):
    analysis.diagnose(model, variables, images, batch_size=0)
  silent = Silent()
  with pytest.raises(KeyError, match=r"no block sowed 'block_output'.*diagnosable"):
    analysis.diagnose(silent, silent.init(jax.random.key(0), images[:1]), images)
  d = analysis.diagnose(model, variables, images, metrics=["hc_dc_ratio"])
  with pytest.raises(KeyError, match=r"has the metric 'attention_entropy'; it has \['hc_dc_ratio'\]"):
    d.values("attention_entropy")


def test_the_trainers_layer_means_are_diagnose_means(user_model):
  model, variables, images = user_model
  d = analysis.diagnose(model, variables, images, batch_size=2)
  means = jax.jit(lambda v, x: diagnosis_lib.layer_means(model, v, x))(variables, images)
  for got, layer in zip(means, d.layers):
    assert "attention_spectrum" not in got
    for metric, value in got.items():
      np.testing.assert_allclose(value, np.mean(layer[metric]), rtol=1e-5, err_msg=metric)
