"""Pretrained weights in (`pretrained.loading`): the converted models compute timm's
own function, within 1e-4 relative in float32.

The references are fixtures (tests/fixtures/pretrained/, written by
scripts/make_pretrained_fixtures.py with torch and timm, which the suite never
needs): timm's logits for random weights regenerated here from their seeds
(`pretrained_fixtures.random_weights`)."""

import logging
import struct
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from safetensors.numpy import save_file

from tests.models import pretrained_fixtures as fx
from vit_spectral import errors
from vit_spectral.analysis import eigen
from vit_spectral.analysis.probe import probe
from vit_spectral.models import per_layer, posemb
from vit_spectral.models import TimmPreprocessing, timm_preprocessing
from vit_spectral.pretrained.loading import (TIMM_ARCHITECTURES, known_timm_names,
                                            load_big_vision, load_into, load_timm,
                                            timm_model_config)
from vit_spectral.pretrained.timm_preprocessing import timm_pretrained_names

TOLERANCE = 1e-4
SMALL = 64            # a cheap resolution: 4x4 patches + CLS


@pytest.fixture(scope="module")
def images():
  return jnp.asarray(fx.images().transpose(0, 2, 3, 1))          # NCHW -> NHWC


@pytest.fixture(scope="module")
def deit():
  fixture = fx.read_fixture("deit_small_patch16_224")
  assert fixture["image_seed"] == fx.IMAGE_SEED      # timm ran on fx.images()
  return fixture, fx.fixture_weights(fixture)


@pytest.fixture(scope="module")
def scanned_ti():
  fixture = fx.read_fixture("big_vision_scanned_ti16")
  return fixture, fx.fixture_weights(fixture)


@pytest.fixture(scope="module")
def deit_small_res(deit):
  """DeiT-S converted at 64² (the position embedding resampled), loop layout."""
  return load_timm(deit[1], "deit_small_patch16_224", image_size=SMALL, encoder_mode="loop")


# --- the anchors' functions ------------------------------------------------------------

def test_deit_small_from_safetensors_scan_layout_equals_timm(deit, images, tmp_path):
  fixture, weights = deit
  path = tmp_path / "model.safetensors"
  save_file(weights, str(path))
  model, variables = load_timm(str(path), "deit_small_patch16_224")
  assert model.encoder.mode == "scan"
  assert variables["params"]["encoder"]["encoderblock"]["mlp"]["fc1"]["kernel"].shape == (
      12, 384, 1536)
  logits = model.apply(variables, images)
  assert fx.relative_error(logits, fixture["logits"]) <= TOLERANCE


def test_vit_base_from_state_dict_loop_layout_equals_timm(images):
  fixture = fx.read_fixture("vit_base_patch16_224")
  model, variables = load_timm(fx.fixture_weights(fixture), "vit_base_patch16_224",
                               encoder_mode="loop")
  assert "encoderblock_11" in variables["params"]["encoder"]
  logits = model.apply(variables, images)
  assert fx.relative_error(logits, fixture["logits"]) <= TOLERANCE


def test_augreg_npz_with_erf_gelu_equals_timm_reading_it(images, tmp_path):
  fixture = fx.read_fixture("big_vision_augreg_b16")
  path = tmp_path / "ViT-B_16.npz"
  np.savez(path, **fx.fixture_weights(fixture))
  model, variables = load_big_vision(str(path), "B/16", block=dict(mlp_activation="gelu_erf"))
  assert model.pooling == "cls"
  assert fx.relative_error(model.apply(variables, images), fixture["logits"]) <= TOLERANCE


def test_scanned_big_vision_npz_equals_timm_and_differs_by_the_gelu_only(
    scanned_ti, images, tmp_path):
  fixture, weights = scanned_ti
  path = tmp_path / "big_vision.npz"
  np.savez(path, **weights)
  erf_model, variables = load_big_vision(str(path), "Ti/16", depth=3,
                                         block=dict(mlp_activation="gelu_erf"))
  assert erf_model.pooling == "mean"
  assert fx.relative_error(erf_model.apply(variables, images), fixture["logits"]) <= TOLERANCE
  # The default is flax's tanh GELU, the function big_vision trained: the same weights,
  # and logits 2.3e-4 (relative) from timm's exact-erf ones here, 3.1e-4 on the ViT-B/16
  # AugReg fixture (scripts/make_pretrained_fixtures.py --check); |gelu_tanh - gelu_erf|
  # <= 4.7e-4 per activation.
  tanh_model, tanh_variables = load_big_vision(str(path), "Ti/16", depth=3)
  jax.tree_util.tree_map(np.testing.assert_array_equal, tanh_variables, variables)
  gap = fx.relative_error(tanh_model.apply(tanh_variables, images), fixture["logits"])
  assert 1e-4 < gap < 1e-3, gap


# --- the pretrained families (DeiT-III, distilled DeiT, DINOv2, MAE, CLIP) ----------------

FAMILIES = ("deit3_small_patch16_224", "deit_tiny_distilled_patch16_224",
            "vit_small_patch14_dinov2", "vit_small_patch14_reg4_dinov2",
            "vit_base_patch16_224.mae", "vit_xsmall_patch16_clip_224",
            "vit_base_patch32_clip_quickgelu_224")


def _family(name, images=None):
  """(fixture, weights, model, variables) of a family's fixture; with `images`,
  first checks that the model computes timm's function."""
  fixture = fx.read_fixture(name)
  assert fixture["image_seed"] == fx.IMAGE_SEED
  weights = fx.fixture_weights(fixture)
  model, variables = load_timm(weights, name)
  if images is not None:
    out = model.apply(variables, images)
    assert out.shape == np.shape(fixture["logits"])
    assert fx.relative_error(out, fixture["logits"]) <= TOLERANCE
  return fixture, weights, model, variables


def _changed(variables, path, value):
  """A copy of `variables` with the parameter at `path` ("a/b/c") replaced."""
  params = jax.tree_util.tree_map(lambda a: a, variables["params"])
  *parents, leaf = path.split("/")
  node = params
  for key in parents:
    node[key] = dict(node[key])
    node = node[key]
  node[leaf] = value(node[leaf])
  return {"params": params}


@pytest.mark.extended   # three whole-size models: the mechanism tests below run the others
@pytest.mark.parametrize("name", ["vit_small_patch14_dinov2", "vit_base_patch16_224.mae",
                                  "vit_base_patch32_clip_quickgelu_224"])
def test_pretrained_family_equals_timm(name, images):
  """The other FAMILIES' tests below check this first, then a mechanism."""
  _, _, model, _ = _family(name, images)
  if name.endswith(".mae") or "dinov2" in name:
    assert model.num_classes == 0                    # features: the final-normed CLS token


def test_deit3_layer_scale_and_patch_only_position_embedding_matter(images):
  fixture, _, model, variables = _family("deit3_small_patch16_224", images)
  assert model.posemb_tokens == "patches" and variables["params"]["pos_embedding"].shape == (
      1, 196, 384)
  alpha = variables["params"]["encoder"]["encoderblock"]["alpha1"]
  assert alpha.shape == (12, 384) and abs(float(alpha.mean()) - 0.5) < 0.05   # the γ drawn
  no_scale = _changed(variables, "encoder/encoderblock/alpha1", jnp.ones_like)
  assert fx.relative_error(model.apply(no_scale, images), fixture["logits"]) > 1e-2


def test_distilled_deit_averages_the_two_heads(images):
  fixture, _, model, variables = _family("deit_tiny_distilled_patch16_224", images)
  assert model.distilled and set(variables["params"]) >= {"dist", "head_dist"}
  one_head = _changed(variables, "head_dist",
                      lambda _: variables["params"]["head"])      # both heads the CLS head's
  assert fx.relative_error(model.apply(one_head, images), fixture["logits"]) > 1e-2


def test_dinov2_registers_are_prefix_tokens_that_matter(images):
  name = "vit_small_patch14_reg4_dinov2"
  fixture, weights, model, variables = _family(name)
  assert model.register_tokens == 4 and model.num_classes == 0
  out, state = model.apply(variables, images, mutable=["intermediates"])
  assert fx.relative_error(out, fixture["logits"]) <= TOLERANCE
  blocks = per_layer(state["intermediates"])
  assert len(blocks) == 12 and blocks[0]["block_output"].shape == (2, 1 + 4 + 256, 384)
  no_registers = _changed(variables, "registers", jnp.zeros_like)
  assert fx.relative_error(model.apply(no_registers, images), fixture["logits"]) > 1e-2
  # Another resolution resamples the patch rows only (no prefix rows: no_embed_class).
  _, small = load_timm(weights, name, image_size=112)
  np.testing.assert_allclose(small["params"]["pos_embedding"],
                             posemb.resample(weights["pos_embed"], 0, (8, 8), method="bicubic"),
                             atol=1e-6)


def test_swiglu_mlp_equals_timms_swiglu_packed():
  """DINOv2 ViT-g's MLP (too large for a whole-model fixture): timm's SwiGLUPacked
  on seeded weights and inputs, against our MlpBlock(activation="swiglu")."""
  from vit_spectral.layers.mlp import MlpBlock  # noqa: PLC0415
  anchor = fx.read_fixture("swiglu_packed")
  weights = fx.fixture_weights(anchor)
  x = np.random.default_rng(anchor["input_seed"]).standard_normal(
      anchor["input_shape"], dtype=np.float32)
  params = {fc: {"kernel": weights[f"{fc}.weight"].T, "bias": weights[f"{fc}.bias"]}
            for fc in ("fc1", "fc2")}
  mlp = MlpBlock(mlp_dim=anchor["hidden_features"], activation="swiglu")
  assert fx.relative_error(mlp.apply({"params": params}, x), anchor["output"]) <= 1e-5


def test_clip_towers_activation_is_their_names(images):
  fixture, weights, model, _ = _family("vit_xsmall_patch16_clip_224", images)
  assert model.norm_pre and not model.stem_bias and model.block.norm_epsilon == 1e-5
  assert model.block.mlp_activation == "gelu_erf"
  assert timm_model_config("vit_base_patch32_clip_quickgelu_224")["block"][
      "mlp_activation"] == "quick_gelu"      # its logits: test_pretrained_family_equals_timm
  quick, quick_vars = load_timm(weights, "vit_xsmall_patch16_clip_224",
                                block=dict(mlp_activation="quick_gelu"))
  assert fx.relative_error(quick.apply(quick_vars, images), fixture["logits"]) > 1e-2


def test_a_family_tensor_under_another_name_is_refused():
  fixture = fx.read_fixture("deit3_small_patch16_224")
  weights = {n: np.zeros(s, np.float32) for n, s in fixture["tensors"]}
  weights["pos_embed"] = np.zeros((1, 197, 384), np.float32)
  with pytest.raises(errors.WeightsMismatchError,
                     match=r"'blocks\.0\.ls1\.gamma' belongs to LayerScale"):
    load_timm(weights, "deit_small_patch16_224")


def test_an_unknown_timm_name_names_the_nearest_known_one():
  with pytest.raises(ValueError, match=r"'vit_small_patch14_dinov3' is not supported \(the "
                                       r"nearest known name is 'vit_small_patch14_dinov2'\)"):
    load_timm({}, "vit_small_patch14_dinov3")


# --- timm's names: every size of each family, and the preprocessing each was trained with --

_ACTIVATIONS = {("Mlp", "GELU"): "gelu_erf", ("Mlp", "QuickGELU"): "quick_gelu",
                ("GluMlp", "SiLU"): "swiglu"}


def test_timm_architectures_are_every_name_timm_has_of_each_family():
  families = fx.read_fixture("timm_architectures")["families"]
  ours = set(TIMM_ARCHITECTURES)
  theirs = {n for f, names in families.items() if f not in ("cait", "swin") for n in names}
  assert ours == theirs, (sorted(ours - theirs), sorted(theirs - ours))
  assert set(known_timm_names()) == theirs | set(families["cait"]) | set(families["swin"])


def test_timm_model_config_is_the_model_timm_builds():
  for name, timm_arch in fx.read_fixture("timm_architectures")["architectures"].items():
    config = timm_model_config(name)
    block = config["block"]
    ours = dict(embed_dim=config["hidden_size"], depth=config["depth"],
                num_heads=config["num_heads"], mlp_hidden=config["mlp_dim"],
                patch_size=[config["patch_size"]] * 2,
                patch_bias=config.get("stem_bias", True), class_token=config["pooling"] == "cls",
                dist_token=config.get("distilled", False),
                reg_tokens=config.get("register_tokens", 0),
                no_embed_class=config.get("posemb_tokens", "all") == "patches",
                layer_scale="residual_alpha" in block, norm_pre=config.get("norm_pre", False),
                norm_eps=block["norm_epsilon"], global_pool="token", fc_norm=False,
                attn_pool=False, qk_norm=False)
    assert ours == {k: timm_arch[k] for k in ours}, name
    assert _ACTIVATIONS[timm_arch["mlp_class"], timm_arch["act"]] == block["mlp_activation"], name


def test_timm_preprocessing_is_timms_resolved_data_config():
  anchor = fx.read_fixture("timm_preprocessing")
  assert set(timm_pretrained_names()) == set(anchor["names"]) | set(anchor["default_tags"])
  for name, want in anchor["names"].items():
    got = timm_preprocessing(name)
    assert got == TimmPreprocessing(tuple(want["input_size"][1:]), tuple(want["mean"]),
                                    tuple(want["std"]), want["interpolation"],
                                    want["crop_pct"], want["crop_mode"]), name
  for arch, tag in anchor["default_tags"].items():
    assert timm_preprocessing(arch) == timm_preprocessing(f"{arch}.{tag}")
  assert timm_preprocessing("vit_small_patch14_dinov2").input_size == (518, 518)
  for arch in anchor["without_pretrained_weights"]:
    with pytest.raises(ValueError, match="no timm pretrained weights"):
      timm_preprocessing(arch)
  with pytest.raises(ValueError, match=r"'deit3_small_patch16_22' among the families "
                                       r"load_timm reads; the nearest known name is "
                                       r"'deit3_small_patch16_224'"):
    timm_preprocessing("deit3_small_patch16_22")


# --- our mechanisms on a converted model ---------------------------------------------

def test_attn_scale_and_feat_scale_leave_the_logits_unchanged(deit, deit_small_res, images):
  plain_model, plain = deit_small_res
  model, variables = load_timm(deit[1], "deit_small_patch16_224", image_size=SMALL,
                               encoder_mode="loop", attention=dict(name="attn_scale"),
                               block=dict(feat_scale=True))
  block = variables["params"]["encoder"]["encoderblock_0"]
  assert set(block) - set(plain["params"]["encoder"]["encoderblock_0"])   # FeatScale's s, t
  added = [np.asarray(v) for v in jax.tree_util.tree_leaves(block["attention"]["omega"])]
  assert added and all(not a.any() for a in added)
  x = jax.image.resize(images, (2, SMALL, SMALL, 3), "bicubic")
  np.testing.assert_allclose(model.apply(variables, x), plain_model.apply(plain, x),
                             rtol=1e-5, atol=1e-5)


def test_another_resolution_resamples_the_position_embedding_as_timm(deit, deit_small_res):
  model, variables = deit_small_res
  source = deit[1]["pos_embed"]
  got = np.asarray(variables["params"]["pos_embedding"])
  assert got.shape == (1, 17, 384)
  np.testing.assert_array_equal(got[:, :1], source[:, :1])                  # CLS row kept
  np.testing.assert_allclose(got, posemb.resample(source, 1, (4, 4), method="bicubic"),
                             atol=1e-6)
  logits = model.apply(variables, jnp.ones((2, SMALL, SMALL, 3)))
  assert logits.shape == (2, 1000) and np.isfinite(np.asarray(logits)).all()


@pytest.mark.parametrize("case", [0, 1], ids=["7x7->12x12", "14x14->10x10"])
def test_bicubic_resampling_equals_timm(case):
  anchor = fx.read_fixture("posemb_resample")
  spec = anchor["cases"][case]
  rng = np.random.default_rng(anchor["seed"])
  for earlier in anchor["cases"][:case]:     # the script drew the cases in order
    rng.standard_normal((1, 1 + earlier["old"] ** 2, earlier["width"]), dtype=np.float32)
  source = rng.standard_normal((1, 1 + spec["old"] ** 2, spec["width"]), dtype=np.float32)
  got = posemb.resample(source, 1, (spec["new"], spec["new"]), method="bicubic")
  assert fx.relative_error(got, spec["output"]) <= 1e-5


def test_linear_zoom_resampling_equals_an_independent_interpolation():
  """big_vision's scipy.ndimage.zoom(order=1): output index i samples the input at
  i·(n-1)/(m-1) (corners kept), linearly; computed here with np.interp per axis."""
  rng = np.random.default_rng(0)
  source = rng.standard_normal((1, 1 + 5 * 5, 3)).astype(np.float32)
  got = posemb.resample(source, 1, (8, 8), method="scipy_linear")
  grid = source[0, 1:].reshape(5, 5, 3)
  at = np.linspace(0, 4, 8)
  rows = np.stack([[np.interp(at, np.arange(5), grid[:, c, d]) for c in range(5)]
                   for d in range(3)], axis=-1)                    # (5 cols, 8 rows, 3)
  want = np.stack([[np.interp(at, np.arange(5), rows[:, r, d]) for r in range(8)]
                   for d in range(3)], axis=-1)                    # (8 rows, 8 cols, 3)
  np.testing.assert_allclose(got[0, 1:].reshape(8, 8, 3), want, atol=1e-5)
  np.testing.assert_array_equal(got[:, :1], source[:, :1])


# --- analysis of a converted model ---------------------------------------------------

def test_probe_and_eigen_analysis_run_on_a_converted_model(deit_small_res, images):
  model, variables = deit_small_res
  x = jax.image.resize(images, (2, SMALL, SMALL, 3), "bicubic")
  found = probe(model, variables, x)
  for key in ("hc_dc_ratio", "hc_proportion", "token_cosine_similarity",
              "attention_cosine_similarity"):
    assert found[key].shape == (12, 2) and np.isfinite(np.asarray(found[key])).all(), key
  kernels = eigen.layer_kernels(model, variables["params"])
  assert len(kernels) == 12 and kernels[0][0].shape == (384, 6, 64)
  spectra = [np.linalg.eigvals(eigen.h_matrix(*k)) for k in kernels]
  assert all(np.isfinite(s).all() and s.shape == (384,) for s in spectra)
  _, state = model.apply(variables, x, mutable=["intermediates"])
  maps = [np.asarray(l["attention/attention_weights"]) for l in per_layer(state["intermediates"])]
  counts = eigen.dominating_counts(spectra, maps)
  assert counts.total == 12 * 2


# --- files that do not fit ---------------------------------------------------------

def test_a_missing_tensor_is_named(deit):
  broken = {k: v for k, v in deit[1].items() if k != "blocks.3.attn.proj.weight"}
  with pytest.raises(errors.WeightsMismatchError,
                     match=r"no tensor for encoder/encoderblock_3/attention/out/kernel"):
    load_timm(broken, "deit_small_patch16_224")


def test_a_wrong_shape_is_named(deit):
  broken = dict(deit[1])
  broken["blocks.5.mlp.fc1.weight"] = np.zeros((1000, 384), np.float32)
  with pytest.raises(errors.WeightsMismatchError,
                     match=r"encoder/encoderblock_5/mlp/fc1/kernel "
                           r"\(blocks\.5\.mlp\.fc1\.weight\) has shape \(384, 1000\)"):
    load_timm(broken, "deit_small_patch16_224")


def test_a_deeper_file_than_the_model_is_refused(deit, scanned_ti):
  deeper = dict(deit[1], **{"blocks.12.norm1.weight": deit[1]["blocks.0.norm1.weight"]})
  with pytest.raises(errors.WeightsMismatchError,
                     match=r"blocks up to 12 \(13 or more layers\), the model has depth 12"):
    load_timm(deeper, "deit_small_patch16_224")
  with pytest.raises(errors.WeightsMismatchError,
                     match=r"blocks up to 2 \(3 or more layers\), the model has depth 2"):
    load_big_vision(scanned_ti[1], "Ti/16", depth=2)


def test_vit_base_weights_under_a_deit_small_name_are_refused():
  fixture = fx.read_fixture("vit_base_patch16_224")
  shapes = dict((n, s) for n, s in fixture["tensors"])
  weights = {n: np.zeros(s, np.float32) for n, s in shapes.items()}   # shapes matter only
  with pytest.raises(errors.WeightsMismatchError,
                     match=r"^pretrained weights do not fit: cls \(cls_token\) has shape "
                           r"\(1, 1, 768\), the model's cls needs \(1, 1, 384\)$"):
    load_timm(weights, "deit_small_patch16_224")


def test_a_distillation_token_is_refused(deit):
  weights = dict(deit[1], dist_token=np.zeros((1, 1, 384), np.float32))
  with pytest.raises(errors.WeightsMismatchError, match=r"'dist_token'.*distillation"):
    load_timm(weights, "deit_small_patch16_224")


def test_unused_tensors_are_reported(scanned_ti, caplog):
  weights = dict(scanned_ti[1], **{"extra/projection": np.ones(3, np.float32)})
  with caplog.at_level(logging.WARNING):
    model, _ = load_big_vision(weights, "Ti/16", depth=3)
  assert "unused tensors of the source: extra/projection" in caplog.text
  init = model.init(jax.random.key(0), jnp.zeros((1, 224, 224, 3)))["params"]
  params, report = load_into(weights, "big_vision", model, init, reinit_head=False)
  assert report.unused == ("extra/projection",)
  assert "encoder/encoderblock_2/mlp/fc2/kernel" in report.loaded
  np.testing.assert_array_equal(params["head"]["kernel"], weights["head/kernel"])


def test_a_damaged_safetensors_file_is_named(scanned_ti, tmp_path):
  path = tmp_path / "model.safetensors"
  save_file({"head.weight": scanned_ti[1]["head/kernel"].T.copy()}, str(path))
  data = path.read_bytes()
  path.write_bytes(data[:-100])
  with pytest.raises(ValueError, match=r"model\.safetensors: tensor 'head\.weight'.*truncated"):
    load_timm(str(path), "deit_small_patch16_224")


@pytest.mark.parametrize("header, message", [
    (b"[]", r"not a safetensors file: its header is a JSON list"),
    (b'{"head.weight": {"dtype": "F32"}}', r"tensor 'head\.weight' has header entry .*not one "
                                            r"with dtype, shape and data_offsets"),
    (b'{"head.weight"', r"not a safetensors file: unreadable header"),
], ids=["list", "entry", "json"])
def test_a_damaged_safetensors_header_is_named(header, message, tmp_path):
  path = tmp_path / "model.safetensors"
  path.write_bytes(struct.pack("<Q", len(header)) + header)
  with pytest.raises(ValueError, match=message):
    load_timm(str(path), "deit_small_patch16_224")


def test_a_pth_file_without_torch_says_install_or_convert(tmp_path, monkeypatch):
  path = tmp_path / "deit.pth"
  path.write_bytes(b"not read")
  monkeypatch.setitem(sys.modules, "torch", None)      # `import torch` raises ImportError
  with pytest.raises(ValueError, match=r"torch is not installed; install torch .*"
                                       r"convert the file to \.safetensors"):
    load_timm(str(path), "deit_small_patch16_224")
