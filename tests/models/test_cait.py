"""CaiT (models.cait, pretrained.cait_timm), talking heads and class attention."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.models import pretrained_fixtures as fx
from vit_spectral import errors
from vit_spectral.analysis.probe import probe
from vit_spectral.attention import get_attention
from vit_spectral.configs import common
from vit_spectral.pretrained import cait_timm, loading as pretrained
from vit_spectral.models.build import build_model
from vit_spectral.models.cait import CaiT
from vit_spectral.models.swin import Swin

# timm 1.0.31: sum(p.numel() for p in timm.create_model(name).parameters()),
# name = "cait_xxs24_224" / "cait_s24_224" (1000 classes); the paper's 12.0M / 46.9M.
TIMM_PARAMS = {"CaiT-XXS24": 11_956_264, "CaiT-S24": 46_916_200}

# A CaiT name's defaults (timm's GELU and ε) at a tiny shape, in config form.
TINY = dict(variant="CaiT-XXS24", patch_size=2, hidden_size=16, depth=2, num_heads=2, mlp_dim=32)
TINY_IMAGES = jnp.asarray(np.random.default_rng(0).standard_normal((2, 8, 8, 3)), jnp.float32)


def random_variables(model, images, seed=1, scale=0.3):
  """N(0, scale²) parameters of `model`'s shapes (LayerScale γ included, so
  every block matters), from NumPy."""
  shapes = jax.eval_shape(model.init, jax.random.key(0), images)
  rng = np.random.default_rng(seed)
  return jax.tree_util.tree_map(
      lambda s: jnp.asarray(scale * rng.standard_normal(s.shape), s.dtype), shapes)


def tiny_cait(**fields):
  """The tiny CaiT with `fields` (config form) changed."""
  return build_model(dict(TINY, **fields), num_classes=5)


def count(tree):
  return sum(int(np.prod(a.shape)) for a in jax.tree_util.tree_leaves(tree))


@pytest.mark.parametrize("variant", sorted(TIMM_PARAMS))
def test_parameter_counts_are_timms(variant):
  model = build_model({"variant": variant}, num_classes=1000)
  image = jax.ShapeDtypeStruct((1, 224, 224, 3), jnp.float32)
  params = jax.eval_shape(lambda x: model.init(jax.random.key(0), x), image)["params"]
  assert count(params) == TIMM_PARAMS[variant]


@pytest.fixture(scope="module")
def images():
  return jnp.asarray(fx.images().transpose(0, 2, 3, 1))


@pytest.mark.parametrize("name", [pytest.param("cait_s24_224", marks=pytest.mark.extended),
                                  "cait_xxs24_224"])
def test_random_weight_logits_equal_timms(name, images):
  """LayerScale γ ~ 0.5 and talking heads ~ N(0, 0.5²) in the fixture, so a
  wrong layout would show (a transposed proj_l alone: 1e-2)."""
  fixture = fx.read_fixture(name)
  model, variables = pretrained.load_timm(fx.fixture_weights(fixture), name)
  assert isinstance(model, CaiT)
  logits = jax.jit(model.apply)(variables, images)
  assert fx.relative_error(logits, fixture["logits"]) <= 1e-4


@pytest.fixture(scope="module")
def xxs_weights():
  """The XXS24 fixture's first 2 SA blocks (load with depth=2: fast)."""
  weights = fx.fixture_weights(fx.read_fixture("cait_xxs24_224"))
  return {k: v for k, v in weights.items()
          if not (k.startswith("blocks.") and int(k.split(".")[1]) >= 2)}


def test_attn_scale_and_feat_scale_at_zero_leave_the_logits_unchanged(xxs_weights):
  """At their initial zero scales AttnScale (after the talking heads' mixing)
  and FeatScale, added together to the converted SA stage, compute CaiT's
  function."""
  images = jnp.asarray(np.random.default_rng(2).standard_normal((2, 32, 32, 3)), jnp.float32)
  plain, plain_vars = cait_timm.load_timm(xxs_weights, "cait_xxs24_224", image_size=32,
                                          depth=2)
  model, variables = pretrained.load_timm(
      xxs_weights, "cait_xxs24_224", image_size=32, depth=2,
      attention=dict(name="attn_scale"), block=dict(feat_scale=True))
  block = variables["params"]["encoder"]["encoderblock"]
  scales = [block["attention"]["omega"], *jax.tree_util.tree_leaves(block["feat_scale"])]
  assert len(scales) == 3 and not any(np.any(s) for s in scales)       # ω, s, t: zeros
  np.testing.assert_allclose(jax.jit(model.apply)(variables, images),
                             jax.jit(plain.apply)(plain_vars, images),
                             rtol=1e-5, atol=1e-5)
  _, fresh_head = cait_timm.load_timm(xxs_weights, "cait_xxs24_224", image_size=32, depth=2,
                                     num_classes=7)
  assert fresh_head["params"]["head"]["kernel"].shape == (192, 7)
  assert not np.any(fresh_head["params"]["head"]["kernel"])             # zero init


def test_timm_errors_name_the_tensor_or_the_supported_names(xxs_weights):
  with pytest.raises(ValueError, match=r"'cait_m36_384' is not a supported CaiT.*cait_s24_224"):
    cait_timm.load_timm(xxs_weights, "cait_m36_384")
  missing = {k: v for k, v in xxs_weights.items() if k != "blocks_token_only.1.gamma_2"}
  with pytest.raises(errors.WeightsMismatchError, match="class_stage/classblock_1/alpha2"):
    cait_timm.load_timm(missing, "cait_xxs24_224", image_size=32, depth=2)
  deeper = dict(xxs_weights, **{"blocks.2.gamma_1": xxs_weights["blocks.0.gamma_1"]})
  with pytest.raises(errors.WeightsMismatchError, match=r"blocks\.2\.gamma_1"):
    cait_timm.load_timm(deeper, "cait_xxs24_224", image_size=32, depth=2)
  with pytest.raises(errors.WeightsMismatchError, match=r"talking_heads_.*blocks\.0\.attn\.proj_"):
    cait_timm.load_timm(xxs_weights, "cait_xxs24_224", image_size=32, depth=2,
                        talking_heads=False)
  with pytest.raises(errors.WeightsMismatchError, match="'blocks.0.attn.q_norm.weight'"):
    cait_timm.load_timm(dict(xxs_weights, **{"blocks.0.attn.q_norm.weight": np.ones(48)}),
                        "cait_xxs24_224")


# --- talking heads ------------------------------------------------------------------

def numpy_attention(params, x, heads, omega=None):
  """One attention call in NumPy: qkv, scores, talking heads (if present),
  softmax, AttnScale's Â = 1/T + (1 + ω)(A − 1/T) (if ω), values, out."""
  p = jax.tree_util.tree_map(np.asarray, params)
  proj = lambda name: np.einsum("btd,dhk->bthk", x, p[name]["kernel"]) + p[name]["bias"]  # noqa
  q, k, v = proj("query"), proj("key"), proj("value")
  logits = np.einsum("bthk,bshk->bhts", q, k) / np.sqrt(q.shape[-1])
  talking = "talking_heads_logits" in p
  mix = lambda a, name: (np.einsum("bhts,hg->bgts", a, p[name]["kernel"])  # noqa: E731
                         + p[name]["bias"][None, :, None, None])
  if talking:
    logits = mix(logits, "talking_heads_logits")
  a = np.exp(logits - logits.max(-1, keepdims=True))
  a = a / a.sum(-1, keepdims=True)
  if talking:
    a = mix(a, "talking_heads_weights")
  if omega is not None:
    low = 1.0 / a.shape[-1]
    a = low + (1.0 + omega[None, :, None, None]) * (a - low)
  y = np.einsum("bhts,bshk->bthk", a, v)
  return np.einsum("bthk,hkd->btd", y, p["out"]["kernel"]) + p["out"]["bias"], a


@pytest.mark.parametrize("name", ["dot_product", "attn_scale"])
def test_talking_heads_equal_an_independent_numpy_computation(name):
  x = np.random.default_rng(3).standard_normal((2, 5, 8)).astype(np.float32)
  module = get_attention(name)(num_heads=2, talking_heads=True)
  variables = random_variables(module, jnp.asarray(x), scale=0.7)
  (y, _), state = module.apply(variables, jnp.asarray(x), mutable=["intermediates"])
  omega = np.asarray(variables["params"]["omega"]) if name == "attn_scale" else None
  want_y, want_a = numpy_attention(variables["params"], x, 2, omega)
  np.testing.assert_allclose(y, want_y, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(state["intermediates"]["attention_weights"][0], want_a,
                             rtol=1e-4, atol=1e-6)
  with pytest.raises(ValueError, match="talking heads mix the attention map across heads"):
    get_attention(name)(num_heads=2, talking_heads=True, implementation="fused").apply(
        variables, jnp.asarray(x))


def test_talking_heads_off_adds_no_parameters_and_keeps_the_numbers():
  x = np.random.default_rng(4).standard_normal((2, 5, 8)).astype(np.float32)
  module = get_attention("dot_product")(num_heads=2)
  variables = random_variables(module, jnp.asarray(x), scale=0.7)
  assert sorted(variables["params"]) == ["key", "out", "query", "value"]
  np.testing.assert_allclose(module.apply(variables, jnp.asarray(x))[0],
                             numpy_attention(variables["params"], x, 2)[0], rtol=1e-4, atol=1e-5)


# --- the model ----------------------------------------------------------------------

def test_class_stage_leaves_the_patch_tokens_as_the_sa_stage_made_them():
  """The final norm's patch rows are LayerNorm(SA-stage output): the class
  stage reads the patches and writes only the class token."""
  model = tiny_cait(encoder_mode="loop")
  variables = random_variables(model, TINY_IMAGES)
  _, state = jax.jit(lambda v, x: model.apply(v, x, capture_intermediates=True))(
      variables, TINY_IMAGES)
  inter = state["intermediates"]
  patches = np.asarray(inter["encoder"]["__call__"][0])           # (B, N, D)
  normed = np.asarray(inter["norm"]["__call__"][0])               # (B, 1 + N, D)
  norm = jax.tree_util.tree_map(np.asarray, variables["params"]["norm"])
  mean, var = patches.mean(-1, keepdims=True), patches.var(-1, keepdims=True)
  want = (patches - mean) / np.sqrt(var + 1e-6) * norm["scale"] + norm["bias"]
  np.testing.assert_allclose(normed[:, 1:], want, rtol=1e-4, atol=1e-4)
  cls = np.asarray(inter["class_stage"]["__call__"][0])
  assert cls.shape == (2, 1, 16)


def test_scan_and_loop_compute_the_same_logits():
  scan, loop = tiny_cait(), tiny_cait(encoder_mode="loop")
  variables = random_variables(scan, TINY_IMAGES)
  looped = {"params": dict(variables["params"], encoder={
      f"encoderblock_{i}": jax.tree_util.tree_map(lambda a, i=i: a[i],
                                                  variables["params"]["encoder"]["encoderblock"])
      for i in range(TINY["depth"])})}
  np.testing.assert_allclose(jax.jit(scan.apply)(variables, TINY_IMAGES),
                             jax.jit(loop.apply)(looped, TINY_IMAGES), rtol=1e-5, atol=1e-5)


def test_hopfield_runs_in_the_sa_stage_and_is_refused_in_the_class_stage():
  model = tiny_cait(attention=dict(name="hopfield"), encoder_mode="loop")
  variables = random_variables(model, TINY_IMAGES)
  logits, state = jax.jit(lambda v, x: model.apply(v, x, mutable=["intermediates"]))(
      variables, TINY_IMAGES)
  assert np.isfinite(logits).all()
  assert "memory_norm" in state["intermediates"]["encoder"]["encoderblock_1"]["attention"]
  with pytest.raises(ValueError, match="class_attention='hopfield' cannot apply: .*1×T"):
    tiny_cait(class_attention="hopfield").init(jax.random.key(0), TINY_IMAGES)


@pytest.mark.parametrize("make,match", [
    (lambda: tiny_cait(class_attention="dot_product"),
     r"class_attention='dot_product' gives one output per token.*\['class_attention'\]"),
    (lambda: tiny_cait(class_attention="nope"), "'nope' is not a registered attention"),
    (lambda: tiny_cait(attention=dict(name="nope")), "'nope' is not a registered attention"),
    (lambda: tiny_cait(attention=dict(name="dot_product", talking_heads=False)),
     "model.attention.talking_heads is set by CaiT: use model.talking_heads"),
    (lambda: build_model(dict(patch_size=4, hidden_size=8, depth=1, num_heads=2, mlp_dim=8,
                              attention=dict(name="class_attention")), num_classes=2),
     "'class_attention' updates the class token only and cannot run in a Block"),
])
def test_bad_settings_raise_clearly(make, match):
  with pytest.raises(ValueError, match=match):
    jax.eval_shape(make().init, jax.random.key(0), TINY_IMAGES)


def test_config_names_build_and_probe_reads_the_sa_stage():
  config = common.model_config(variant="CaiT-S24", attention=dict(name="attn_scale"))
  assert config.talking_heads and config.layer_scale_init == 1e-5 and config.depth == 24
  model = build_model(dict(config, depth=2, hidden_size=16, num_heads=2, mlp_dim=32,
                           patch_size=2), num_classes=5)
  assert isinstance(model, CaiT) and model.block.attention == "attn_scale"
  variables = random_variables(model, TINY_IMAGES)
  out = probe(model, variables, TINY_IMAGES)
  assert out["attention_weights"].shape == (2, 2, 2, 16, 16)      # (L, B, H, N, N)
  assert out["hc_dc_ratio"].shape == (2, 2)


def test_imagenet_rows_are_paper_000_table_1s():
  from vit_spectral.configs import imagenet_cait
  rows = {row: imagenet_cait.get_config(row) for row in ("baseline", "attn_scale", "feat_scale")}
  assert rows["baseline"].model.variant == "CaiT-S24"
  assert rows["attn_scale"].model.attention.name == "attn_scale"
  assert rows["feat_scale"].model.block.feat_scale
  assert not rows["baseline"].model.block and rows["baseline"].model.attention.name == "dot_product"
  assert {c.model.drop_path_rate for c in rows.values()} == {0.1}
  assert imagenet_cait.get_config("row=feat_scale,variant=CaiT-XXS24").model.drop_path_rate == 0.05
  for number in ("82.6", "83.2"):
    assert number in imagenet_cait.__doc__
  with pytest.raises(ValueError, match=r"row='nope'; choose one of \['attn_scale', 'baseline'"):
    imagenet_cait.get_config("nope")


def test_init_from_fits_timms_cait_file_to_the_finetune_recipes_model(images, tmp_path):
  """`config.init_from` on a CaiT (paper 000 App. G.1): timm's cait_xxs24_224
  file (the fixture's random weights) fitted by `load_into` to the fine-tuning
  recipe's CaiT-XXS24 + FeatScale computes timm's logits; only s, t (zeros)
  are not from the file."""
  from safetensors.numpy import save_file  # noqa: PLC0415
  from vit_spectral.configs import cait_finetune_fourier  # noqa: PLC0415
  from vit_spectral.training import init_from  # noqa: PLC0415
  fixture = fx.read_fixture("cait_xxs24_224")
  path = tmp_path / "cait_xxs24_224.safetensors"
  save_file(fx.fixture_weights(fixture), str(path))
  config = cait_finetune_fourier.get_config(
      f"variant=CaiT-XXS24,method=feat_scale,path={path},dtype=float32")
  model = build_model(config.model, 1000)
  init_params = jax.jit(model.init)(jax.random.key(0), images[:1])["params"]
  params, report = init_from.load(init_from.InitFromSettings(**config.init_from), model,
                                  init_params)
  assert sorted(report.initialised) == sorted(
      f"encoder/encoderblock_{i}/feat_scale/{n}" for i in range(24)
      for n in ("dc_scale", "hc_scale"))
  assert not report.unused and not report.resampled and not report.reinitialised
  logits = jax.jit(model.apply)({"params": params}, images)
  assert fx.relative_error(logits, fixture["logits"]) <= 1e-4


def test_init_from_fits_a_cait_run_of_our_own_in_the_other_layout():
  """`init_from.format="vit_spectral"` (a plain CaiT run, scan layout) into a
  CaiT + FeatScale in the loop layout: the same function at s = t = 0."""
  plain = tiny_cait()
  variables = random_variables(plain, TINY_IMAGES)
  scaled = tiny_cait(block={"feat_scale": True}, encoder_mode="loop")
  init = jax.jit(scaled.init)(jax.random.key(0), TINY_IMAGES)["params"]
  params, report = pretrained.load_into(jax.device_get(variables["params"]), "vit_spectral",
                                        scaled, init, reinit_head=False)
  assert report.initialised and all("feat_scale" in p for p in report.initialised)
  np.testing.assert_allclose(jax.jit(scaled.apply)({"params": params}, TINY_IMAGES),
                             jax.jit(plain.apply)(variables, TINY_IMAGES), rtol=1e-5, atol=1e-5)


def test_init_from_names_what_it_cannot_fit():
  with pytest.raises(ValueError, match="fits weights to the ViT and CaiT, not to Swin"):
    pretrained.load_into({}, "vit_spectral", Swin(num_classes=0, embed_dim=8, depths=(2,),
                                                  num_heads=(2,)), {}, reinit_head=False)
  with pytest.raises(ValueError, match="init_from.format='big_vision' holds ViT checkpoints; "
                     "a CaiT loads from 'timm' or 'vit_spectral'"):
    pretrained.load_into("x.npz", "big_vision", tiny_cait(), {}, reinit_head=False)
