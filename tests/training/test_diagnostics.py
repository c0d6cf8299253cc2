"""config.diagnostics: the trainer logs the papers' per-layer scalars, they read
back from the workdir's TensorBoard files and equal an independent NumPy
computation on the saved parameters; the Hopfield memory norm; layouts agree."""

import time

import jax
import numpy as np
import pytest
from clu import metric_writers

from vit_spectral import errors, settings
from vit_spectral.analysis.eigen import layer_kernels
from vit_spectral.configs import digits_vit
from vit_spectral.data import create_eval_dataset
from vit_spectral.models import build_model, per_layer
from vit_spectral.models.layouts import layer_trees, loop_to_scan
from vit_spectral.durability import checkpointing
from vit_spectral.training import config_checks, trainer
from vit_spectral.training.diagnostics import (DiagnosticsSettings, fixed_images,
                                               layer_diagnostics)
from vit_spectral.training.event_files import layer_series, read_scalars

NUM_IMAGES = 12
TOKEN_METRICS = ("hc_dc_ratio", "token_cosine_similarity", "attention_cosine_similarity",
                 "rank_residual_ratio", "attention_entropy")


# Independent NumPy (float64) forms of the metrics, from the papers' definitions.
def _hc_dc(x):                                        # paper 000, Def. 1
  dc = x.mean(axis=1, keepdims=True)
  return np.linalg.norm(x - dc, axis=(1, 2)) / np.linalg.norm(np.broadcast_to(dc, x.shape), axis=(1, 2))


def _mean_abs_offdiagonal_cos(rows):                  # (..., n, d)
  unit = rows / np.linalg.norm(rows, axis=-1, keepdims=True)
  gram = np.abs(unit @ np.swapaxes(unit, -1, -2))
  n = rows.shape[-2]
  return (gram.sum(axis=(-2, -1)) - np.trace(gram, axis1=-2, axis2=-1)) / (n * (n - 1))


def _rank_residual(x):                                # paper 004, eqs. 24 and 61
  def norm_1_inf(m):
    m = np.abs(m)
    return np.sqrt(m.sum(axis=1).max(axis=-1) * m.sum(axis=2).max(axis=-1))
  return norm_1_inf(x - x.mean(axis=1, keepdims=True)) / norm_1_inf(x)


def _entropy(a):                                      # paper 004, App. I
  # Only positive entries count (0 log 0 = 0; AttnScale's sown Â has a few
  # negative ones, which `attention_entropy` skips the same way).
  terms = -a * np.log(np.where(a > 0, a, 1.0))
  return np.where(a > 0, terms, 0.0).sum(axis=-1).mean(axis=-1)


def _expected_token_metrics(model, params, images):
  _, state = model.apply({"params": params}, images, train=False, mutable=["intermediates"])
  out = []
  for layer in per_layer(state["intermediates"]):
    x = np.asarray(layer["block_output"], np.float64)
    a = np.asarray(layer["attention/attention_weights"], np.float64)
    out.append({
        "hc_dc_ratio": _hc_dc(x).mean(),
        "token_cosine_similarity": _mean_abs_offdiagonal_cos(x).mean(),
        "attention_cosine_similarity": _mean_abs_offdiagonal_cos(np.swapaxes(a, -1, -2)).mean(),
        "rank_residual_ratio": _rank_residual(x).mean(),
        "attention_entropy": _entropy(a).mean(),
    })
  return out


@pytest.mark.extended  # a training run (~20 s): .ci/run's extended step
def test_trainer_logs_diagnostics_that_read_back_and_match_numpy(tmp_path):
  config = digits_vit.get_config("depth=2,width=16,heads=2,steps=4")
  config.log_every = config.eval_every = config.checkpoint_every = 2
  config.optim.warmup_steps = 1
  config.diagnostics.every = 2
  config.diagnostics.num_images = NUM_IMAGES
  # AttnScale + eigen ViT⁻ + FeatScale: every family of metric in one model.
  config.model.attention = dict(name="attn_scale", value_output="minus")
  config.model.block = dict(feat_scale=True)
  trainer.train_and_evaluate(config, str(tmp_path))

  scalars = read_scalars(str(tmp_path))
  params, step = checkpointing.latest_params(str(tmp_path))
  assert step == 4
  input_config = config_checks.validate_config(config).input
  dataset, _ = create_eval_dataset(input_config)
  images = next(dataset.as_numpy_iterator())["image"][:NUM_IMAGES]
  model = build_model(config.model, num_classes=10)

  expected = _expected_token_metrics(model, params, images)
  trees = layer_trees(params)
  for index, ((w_v, w_proj), tree) in enumerate(zip(layer_kernels(model, params), trees)):
    h = np.einsum("dhk,hke->de", np.asarray(w_v, np.float64), np.asarray(w_proj, np.float64)).T
    lam = -np.square(np.asarray(tree["attention"]["h_psi"], np.float64))   # ViT⁻: Λ = −ψ²
    expected[index].update(
        h_cond=np.linalg.cond(h),
        h_asymmetry=np.linalg.norm(h - h.T) / np.linalg.norm(h + h.T),
        h_eig_min=lam.min(), h_eig_max=lam.max())
    for name, value in (("attn_scale_omega", tree["attention"]["omega"]),
                        ("feat_scale_s", tree["feat_scale"]["dc_scale"]),
                        ("feat_scale_t", tree["feat_scale"]["hc_scale"])):
      expected[index].update({f"{name}_mean": np.mean(value), f"{name}_min": np.min(value),
                              f"{name}_max": np.max(value)})

  assert len(expected) == 2
  for metric in expected[0]:
    steps, values = layer_series(scalars, metric)
    np.testing.assert_array_equal(steps, [0, 2, 4], err_msg=metric)
    assert values.shape == (3, 2)
    want = np.array([layer[metric] for layer in expected])
    np.testing.assert_allclose(values[-1], want, rtol=2e-4, atol=1e-6, err_msg=metric)
  # The learned scales moved off zero (so the comparison above is not 0 == 0).
  assert np.all(layer_series(scalars, "attn_scale_omega_max")[1][0] == 0)
  assert np.any(layer_series(scalars, "attn_scale_omega_max")[1][-1] != 0)
  assert "hopfield_memory_norm" not in {t.split("/")[1] for t in scalars if "/" in t}
  assert scalars["eval_accuracy"][0].tolist() == [2, 4]   # the trainer's own scalars too


def test_hopfield_memory_norm_and_layouts_agree():
  model_config = digits_vit.get_config("depth=3,width=16,heads=2").model
  model_config.attention = dict(name="hopfield", alpha=0.5, alpha_hidden=0.5)
  model_config.encoder_mode = "loop"
  loop = build_model(model_config, num_classes=10)
  model_config.encoder_mode = "scan"
  scan = build_model(model_config, num_classes=10)
  images = np.random.default_rng(0).standard_normal((4, 8, 8, 1)).astype(np.float32)
  params = loop.init(jax.random.key(1), images[:1], train=False)["params"]

  got = jax.jit(lambda p, x: layer_diagnostics(loop, p, x))(params, images)
  got_scan = jax.jit(lambda p, x: layer_diagnostics(scan, p, x))(loop_to_scan(params), images)

  # Independent: the carried state h_ℓ is the second output of each layer's
  # attention call (captured, not sown); ‖h_ℓ‖_F per image, averaged.
  _, state = loop.apply({"params": params}, images, train=False, capture_intermediates=True,
                        mutable=["intermediates"])
  blocks = state["intermediates"]["encoder"]
  for index in range(3):
    (_, hidden), = blocks[f"encoderblock_{index}"]["attention"]["__call__"]
    norm = np.sqrt(np.square(np.asarray(hidden, np.float64)).sum(axis=(1, 2, 3))).mean()
    assert norm > 0
    np.testing.assert_allclose(got[index]["hopfield_memory_norm"], norm, rtol=1e-5)
  assert [sorted(layer) for layer in got] == [sorted(layer) for layer in got_scan]
  for layer, layer_scan in zip(got, got_scan):
    for metric in layer:
      np.testing.assert_allclose(layer_scan[metric], layer[metric], rtol=1e-5, err_msg=metric)
  # h_ℓ carries h_{ℓ−1}: the layers' norms differ (no layer is a copy of another).
  norms = [float(layer["hopfield_memory_norm"]) for layer in got]
  assert len(set(np.round(norms, 6))) == 3


@pytest.mark.parametrize("fields, message", [
    ({"every": 0}, r"config\.diagnostics\.every=0 must be positive"),
    ({"every": 5, "num_images": 0}, r"config\.diagnostics\.num_images=0 must be positive"),
    ({"evry": 5}, r"config\.diagnostics has unknown fields \['evry'\]"),
])
def test_bad_settings_name_the_field(fields, message):
  with pytest.raises(ValueError, match=message):
    settings.from_config(DiagnosticsSettings, fields)


def test_default_is_off_and_due_steps():
  assert not settings.from_config(DiagnosticsSettings, digits_vit.get_config().diagnostics).enabled
  on = DiagnosticsSettings(every=500)
  assert [s for s in range(0, 1201) if on.due(s, total_steps=1200)] == [0, 500, 1000, 1200]


def test_more_images_than_the_eval_split_is_a_config_error():
  input_config = config_checks.validate_config(digits_vit.get_config()).input
  with pytest.raises(errors.ConfigError, match=r"num_images=361, but .*'test'.* has 360 images"):
    fixed_images(input_config, 361)
  assert fixed_images(input_config, 5).shape == (5, 8, 8, 1)


def test_read_scalars_keeps_the_last_write_of_a_step(tmp_path):
  with pytest.raises(FileNotFoundError, match="no TensorBoard event files"):
    read_scalars(str(tmp_path))
  first = metric_writers.create_default_writer(str(tmp_path))
  first.write_scalars(1, {"diagnostics/a/layer_00": 1.0, "diagnostics/a/layer_01": 2.0,
                          "train_loss": 3.0})
  first.write_scalars(2, {"diagnostics/a/layer_00": 4.0})
  first.close()
  time.sleep(1.1)  # a later wall time and a new event file (a resumed run)
  second = metric_writers.create_default_writer(str(tmp_path))
  second.write_scalars(1, {"diagnostics/a/layer_00": 5.0, "diagnostics/a/layer_01": 6.0})
  second.close()
  scalars = read_scalars(str(tmp_path))
  assert scalars["train_loss"][0].tolist() == [1] and scalars["train_loss"][1].tolist() == [3.0]
  steps, values = layer_series(scalars, "a")
  assert steps.tolist() == [1]                       # step 2 lacks layer 1
  assert values.tolist() == [[5.0, 6.0]]
  with pytest.raises(KeyError, match=r"no diagnostics/b/layer_\* scalars; .*\['a'\]"):
    layer_series(scalars, "b")


@pytest.mark.extended
def test_a_staged_backbone_is_diagnosed_over_all_its_stages():
  from vit_spectral import analysis
  from vit_spectral.configs import digits_swin
  config = digits_swin.get_config()
  model = build_model(config.model, num_classes=10)
  images = np.random.default_rng(0).standard_normal((3, 8, 8, 1)).astype(np.float32)
  params = model.init(jax.random.key(1), images[:1])["params"]
  got = jax.jit(lambda p, x: layer_diagnostics(model, p, x))(params, images)
  want = analysis.diagnose(model, {"params": params}, images)
  assert len(got) == sum(model.depths) == want.num_layers
  assert want.stage.tolist() == [s for s, d in enumerate(model.depths) for _ in range(d)]
  for layer, expected in zip(got, want.layers):
    assert {"hc_dc_ratio", "attention_entropy", "h_cond"} <= set(layer)
    for metric, value in layer.items():
      np.testing.assert_allclose(value, np.mean(expected[metric]), rtol=1e-5, err_msg=metric)
