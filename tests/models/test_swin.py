"""Swin and LipsFormer-Swin (`models.swin`), its timm converter (`pretrained.swin_timm`)
and the relative position bias (`attention.base.Attention.relative_position_bias`).

Parameter counts by `jax.eval_shape`; the invariants on tiny models; the
function against timm's through a fixture (tests/fixtures/pretrained/,
scripts/make_pretrained_fixtures.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.models import pretrained_fixtures as fx
from vit_spectral import errors
from vit_spectral.analysis import probe
from vit_spectral.attention import get_attention
from vit_spectral.layers.windows import relative_position_index
from vit_spectral.models.build import build_model
from vit_spectral.models.layouts import layer_trees, to_layout, tree_layout
from vit_spectral.pretrained import load_timm
from vit_spectral.models.specs import BlockSpec, EncoderSpec
from vit_spectral.models.swin import Swin
from vit_spectral.models.token_layouts import WindowLayout
from vit_spectral.models.vit import Block

# timm 1.0.31, `sum(p.numel() for p in timm.create_model(name).parameters())` for
# swin_{tiny,small,base}_patch4_window7_224 (1000 classes); published 28.3M / 49.6M / 87.8M.
TIMM_COUNTS = {"Swin-T": 28_288_354, "Swin-S": 49_606_258, "Swin-B": 87_768_224}
# Ours; the paper (001, App. Table 5) rounds it to 31M. The official code's
# architecture (Swin's linear merging, two depth-wise convolutions per block and
# four α vectors) counts 30_908_578 by the same arithmetic: 226_560 more.
LIPSFORMER_SWIN_T = 30_682_018

TINY = dict(embed_dim=8, depths=(2, 2), num_heads=(2, 4), patch_size=2, window_size=2)


def tiny_swin(block=BlockSpec(), mode="loop", **fields):
  """The tiny Swin (no head) with `fields` changed, its encoders in `mode`."""
  return Swin(num_classes=0, block=block, encoder=EncoderSpec(mode=mode), **dict(TINY, **fields))


def count(model, side=224):
  image = jax.ShapeDtypeStruct((1, side, side, 3), jnp.float32)
  shapes = jax.eval_shape(lambda x: model.init(jax.random.key(0), x), image)["params"]
  return sum(int(np.prod(a.shape)) for a in jax.tree_util.tree_leaves(shapes))


def flat(tree, prefix=""):
  out = {}
  for k, v in tree.items():
    out.update(flat(v, f"{prefix}{k}/") if isinstance(v, dict) else {f"{prefix}{k}": v})
  return out


def tiny_images(side=16, batch=2, seed=0):
  return jax.random.normal(jax.random.key(seed), (batch, side, side, 3))


@pytest.mark.parametrize("name", list(TIMM_COUNTS) + ["LipsFormer-Swin-T"])
def test_parameter_counts(name):
  expected = TIMM_COUNTS.get(name, LIPSFORMER_SWIN_T)
  assert count(build_model({"variant": name}, num_classes=1000)) == expected


@pytest.fixture(scope="module")
def swin_t_fixture():
  """The Swin-T fixture and its random weights (28M, drawn once for the module)."""
  fixture = fx.read_fixture("swin_tiny_patch4_window7_224")
  return fixture, fx.fixture_weights(fixture)


def test_swin_t_with_random_weights_equals_timm(swin_t_fixture):
  fixture, weights = swin_t_fixture
  model, variables = load_timm(dict(weights), "swin_tiny_patch4_window7_224")
  logits = jax.jit(model.apply)(variables, jnp.asarray(fx.images().transpose(0, 2, 3, 1)))
  assert fx.relative_error(logits, np.asarray(fixture["logits"])) <= 1e-4


def test_a_missing_swin_tensor_is_named(swin_t_fixture):
  weights = dict(swin_t_fixture[1])
  del weights["layers.2.downsample.reduction.weight"]
  with pytest.raises(errors.WeightsMismatchError, match="stage_2/merge/reduction/kernel"):
    load_timm(weights, "swin_tiny_patch4_window7_224")


def shifted_block():
  """A Block on a 4x4 grid, 2x2 windows shifted by (1, 1), no MLP, with the bias."""
  spec = BlockSpec(num_heads=2, mlp_dim=8, use_mlp=False,
                   attention_kwargs={"relative_position_bias": True,
                                     "implementation": "explicit"})
  return Block(spec, WindowLayout((4, 4), window=(2, 2), shift=(1, 1)))


def region(pos, shift=1, window=2):
  """The shifted window of a grid position in the image (no wrap-around)."""
  return tuple((p - shift) // window for p in pos)


def test_shifted_windows_attend_within_their_region_only():
  """The sown maps (per window, after the roll) are zero exactly between tokens
  of different shifted windows of the image: across a window border or
  brought together by the cyclic shift."""
  block = shifted_block()
  x = jax.random.normal(jax.random.key(1), (1, 16, 8))
  variables = jax.jit(block.init)(jax.random.key(2), (x, None), 0.0)
  _, state = jax.jit(lambda v: block.apply(v, (x, None), 0.0, mutable=["intermediates"]))(
      variables)
  maps = np.asarray(state["intermediates"]["attention"]["attention_weights"][0])  # (4, H, 4, 4)
  assert maps.shape == (4, 2, 4, 4)
  for w in range(4):
    for i in range(4):
      for j in range(4):
        # window w, local token i -> rolled grid position -> image position (+ shift)
        pos = [((w // 2) * 2 + t // 2 + 1) % 4 for t in (i, j)]
        col = [((w % 2) * 2 + t % 2 + 1) % 4 for t in (i, j)]
        same = region((pos[0], col[0])) == region((pos[1], col[1]))
        assert (maps[w, :, i, j] > 0).all() if same else (maps[w, :, i, j] == 0).all(), \
            (w, i, j)
  # tokens of the rolled-in border are in the window but masked apart
  assert (maps[3] == 0).sum() > 0


def numpy_shifted_attention(params, x):
  """The attention branch of `shifted_block()` on one image x (16, 8), merged
  back onto the 4x4 grid: global attention over the image restricted to each
  token's shifted window, plus the bias of the image offset; (16, 8)."""
  p = jax.tree_util.tree_map(np.asarray, params)
  a = p["attention"]
  xn = np.asarray(x, np.float64)
  xn = (xn - xn.mean(-1, keepdims=True)) / np.sqrt(xn.var(-1, keepdims=True) + 1e-6)
  xn = xn * p["norm1"]["scale"] + p["norm1"]["bias"]
  q, k, v = (np.einsum("td,dhk->thk", xn, a[n]["kernel"]) + a[n]["bias"]
             for n in ("query", "key", "value"))
  table = a["relative_position_bias_table"]                      # (3·3, H)
  coords = [(r, c) for r in range(4) for c in range(4)]
  logits = np.einsum("thk,shk->hts", q, k) / np.sqrt(4)
  for t, (rt, ct) in enumerate(coords):
    for s, (rs, cs) in enumerate(coords):
      if region((rt, ct)) != region((rs, cs)):
        logits[:, t, s] = -np.inf
      else:
        logits[:, t, s] += table[(rt - rs + 1) * 3 + (ct - cs + 1)]
  weights = np.exp(logits - logits.max(-1, keepdims=True))
  weights /= weights.sum(-1, keepdims=True)
  mixed = np.einsum("hts,shk->thk", weights, v)
  return np.einsum("thk,hkd->td", mixed, a["out"]["kernel"]) + a["out"]["bias"]


def test_shifted_window_attention_equals_a_numpy_masked_global_attention():
  """Windowed attention with shift and bias = global attention over the image
  restricted to each token's shifted window, plus the bias of the image offset."""
  block = shifted_block()
  x = jax.random.normal(jax.random.key(3), (1, 16, 8))
  params = jax.jit(block.init)(jax.random.key(4), (x, None), 0.0)["params"]
  (out, _), _ = jax.jit(block.apply)({"params": params}, (x, None), 0.0)
  expected = np.asarray(x[0]) + numpy_shifted_attention(params, x[0])
  np.testing.assert_allclose(np.asarray(out[0]), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("form,gain", [("equations", 1), ("authors_deit", 2)])
def test_feat_scale_on_shifted_windows_takes_the_mean_of_the_merged_stage_map(form, gain):
  """FeatScale on a shifted-window block re-weights the attention output after
  the windows are merged and the shift undone: its DC is the mean over all 16
  tokens of the image (the authors' swin_featscale.py), not over each window's
  4. NumPy: the merged attention output M, then M + DC·s + (M − DC)·t."""
  form_field = {} if form == "equations" else {"feat_scale_form": form}   # the default
  block = shifted_block()
  block = block.clone(spec=block.spec.replace(feat_scale=True, **form_field))
  x = jax.random.normal(jax.random.key(3), (2, 16, 8))
  params = jax.jit(block.init)(jax.random.key(4), (x, None), 0.0)["params"]
  assert set(params["feat_scale"]) == {"dc_scale", "hc_scale"}    # where they always were
  rng = np.random.default_rng(0)
  s, t = rng.standard_normal(8), rng.standard_normal(8)
  params = dict(params, feat_scale={"dc_scale": jnp.asarray(s, jnp.float32),
                                    "hc_scale": jnp.asarray(t, jnp.float32)})
  (out, _), _ = jax.jit(block.apply)({"params": params}, (x, None), 0.0)
  for b in range(2):
    merged = numpy_shifted_attention(params, x[b])               # (16, 8)
    dc = merged.mean(axis=0, keepdims=True)                      # the whole 4x4 map
    expected = np.asarray(x[b]) + merged + gain * (dc * s + (merged - dc) * t)
    np.testing.assert_allclose(np.asarray(out[b]), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["dot_product", "attn_scale", "cosine"])
def test_relative_position_bias_equals_numpy_on_both_paths(name):
  """The bias added to the logits is table[index] (NumPy, from the offsets), on the
  explicit path (the sown map) and on the fused path (same output)."""
  grid = (2, 3)
  x = jax.random.normal(jax.random.key(5), (2, 6, 8))
  kw = dict(num_heads=2, grid_size=grid, relative_position_bias=True)
  explicit = get_attention(name)(implementation="explicit", **kw)
  params = jax.jit(explicit.init)(jax.random.key(6), x)["params"]
  table = np.asarray(params["relative_position_bias_table"])
  assert table.shape == (3 * 5, 2) and 0 < table.std() < 0.05
  (y, _), state = jax.jit(lambda p: explicit.apply({"params": p}, x, mutable=["intermediates"]))(
      params)
  fused, _ = jax.jit(get_attention(name)(implementation="fused", **kw).apply)(
      {"params": params}, x)
  np.testing.assert_allclose(fused, y, rtol=1e-5, atol=1e-6)
  without = {k: v for k, v in params.items() if k != "relative_position_bias_table"}
  plain = get_attention(name)(num_heads=2, grid_size=grid, implementation="explicit")
  _, plain_state = jax.jit(lambda p: plain.apply({"params": p}, x, mutable=["intermediates"]))(
      without)
  if name == "dot_product":   # log-probabilities differ by the bias, up to a row constant
    bias = np.stack([[table[relative_position_index(grid)[i, j]] for j in range(6)]
                     for i in range(6)]).transpose(2, 0, 1)
    diff = (np.log(state["intermediates"]["attention_weights"][0])
            - np.log(plain_state["intermediates"]["attention_weights"][0]))
    diff = diff - bias[None]
    np.testing.assert_allclose(diff - diff[..., :1], 0, atol=1e-4)


def test_relative_position_bias_off_adds_no_parameters_and_changes_nothing():
  x = jax.random.normal(jax.random.key(7), (1, 6, 8))
  attention = get_attention("dot_product")(num_heads=2, grid_size=(2, 3))
  params = jax.eval_shape(attention.init, jax.random.key(0), x)["params"]
  assert set(params) == {"query", "key", "value", "out"}
  model = tiny_swin(relative_position_bias=False)
  shapes = jax.eval_shape(lambda v: model.init(jax.random.key(0), v),
                          jax.ShapeDtypeStruct((1, 16, 16, 3), jnp.float32))
  assert not [p for p in flat(shapes["params"]) if "relative_position" in p]


def test_attn_scale_and_feat_scale_at_zero_leave_swin_unchanged():
  """At their init (ω = 0, FeatScale's s = t = 0) AttnScale and FeatScale leave
  the function of the plain Swin: both models on the shared parameters agree.
  One compile for the extended model (init and apply), one for the plain apply."""
  images = tiny_images()
  base = tiny_swin()
  old = flat(jax.eval_shape(base.init, jax.random.key(0), images)["params"])
  both = tiny_swin(BlockSpec(attention="attn_scale", feat_scale=True))

  @jax.jit
  def init_and_apply(key):
    variables = both.init(key, images)
    return variables["params"], both.apply(variables, images)

  params, out_both = init_and_apply(jax.random.key(1))
  new = flat(params)
  added = sorted(set(new) - set(old))
  assert added and all("omega" in p or "feat_scale" in p for p in added)
  assert {p: new[p].shape for p in old} == {p: v.shape for p, v in old.items()}
  # The plain Swin on the parameters the two share.
  tree = {}
  for path in old:
    node = tree
    *parents, leaf = path.split("/")
    for key in parents:
      node = node.setdefault(key, {})
    node[leaf] = new[path]
  np.testing.assert_allclose(out_both, jax.jit(base.apply)({"params": tree}, images),
                             rtol=1e-6, atol=1e-6)


def test_scan_and_loop_layouts_give_the_same_logits():
  images = tiny_images(side=32)
  fields = dict(window_size=4, depths=(3, 2))
  loop = tiny_swin(mode="loop", **fields)
  scan = tiny_swin(mode="scan", **fields)
  # The loop model's init and its logits in one compile.
  params, loop_logits = jax.jit(lambda key: (lambda v: (v["params"], loop.apply(v, images)))(
      loop.init(key, images)))(jax.random.key(0))
  abstract = jax.eval_shape(lambda v: scan.init(jax.random.key(0), v), images)["params"]
  stacked = {k: (to_layout(v, tree_layout(abstract[k])) if k.startswith("stage_") else v)
             for k, v in params.items()}
  assert len(layer_trees(stacked["stage_0"])) == 3 == len(layer_trees(params["stage_0"]))
  np.testing.assert_allclose(jax.jit(scan.apply)({"params": stacked}, images), loop_logits,
                             rtol=1e-5, atol=1e-6)


@pytest.mark.extended
def test_lipsformer_swin_and_eigen_value_output_run():
  images = tiny_images()
  lips = build_model({"variant": "LipsFormer-Swin-T", **TINY, "encoder_mode": "loop"},
                     num_classes=3)
  # Each model's init and logits in one compile.
  init_and_apply = lambda model: jax.jit(  # noqa: E731
      lambda key: (lambda v: (v, model.apply(v, images)))(model.init(key, images)))
  variables, logits = init_and_apply(lips)(jax.random.key(0))
  assert "reduction" in variables["params"]["stage_1"]["merge"]
  assert variables["params"]["stage_1"]["merge"]["reduction"]["kernel"].shape == (2, 2, 8, 16)
  assert logits.shape == (2, 3) and np.isfinite(logits).all()
  figures = probe(lips, variables, images)     # the token figures of all 4 blocks, by stage
  assert figures["hc_dc_ratio"].shape == (4, 2) and list(figures["stage"]) == [0, 0, 1, 1]
  eigen = tiny_swin(BlockSpec(attention_kwargs={"value_output": "minus"}))
  _, out = init_and_apply(eigen)(jax.random.key(0))
  assert np.isfinite(out).all()


@pytest.mark.parametrize("fields, side, message", [
    ({"block": BlockSpec(attention="hopfield")}, 16,
     "cannot cross stages whose token counts differ"),
    ({}, 18, "must be divisible by"),
    ({}, 12, "does not tile stage 1's 3x3 token grid"),
    ({"block": BlockSpec(attention_kwargs={"relative_position_bias": False})}, 16,
     "use model.relative_position_bias"),
    ({"merge": "pool"}, 16, "model.merge='pool'"),
])
def test_clear_errors(fields, side, message):
  model = tiny_swin(**fields)
  with pytest.raises(ValueError, match=message):
    model.init(jax.random.key(0), tiny_images(side=side))
