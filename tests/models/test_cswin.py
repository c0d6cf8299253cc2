"""CSwin and LipsFormer-CSwin (`models.cswin`): exact parameter counts against
the official layer lists, one block against an independent NumPy forward
(cross-shaped stripes + LePE), stripe isolation, LePE on every attention
variant, AttnScale at zero, scan = loop, and the clear errors.

timm (1.0.31, /tmp/torchvenv) has no CSwin (`timm.list_models("*cswin*")` is
empty), so the reference is the NumPy forward below, written from the
official code's algorithm (microsoft/CSWin-Transformer, models/cswin.py:
`img2windows`, `get_lepe`, `LePEAttention.forward`, `CSWinBlock.forward`).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import erf

from vit_spectral.attention import get_attention, token_attentions
from vit_spectral.models import layouts
from vit_spectral.models.build import build_model, model_config, model_kwargs
from vit_spectral.models.cswin import CSwin, VARIANTS
from vit_spectral.models.specs import BlockSpec, EncoderSpec
from vit_spectral.models.token_layouts import StripeLayout
from vit_spectral.models.vit import Block


# ---------------------------------------------------------------- parameter counts

def official_cswin_count(dim, depths, classes=1000):
  """Parameters of the official CSWinTransformer (models/cswin.py), layer by layer.

  stem Conv2d(3, C, 7) + LayerNorm; per block of width d: norm1, qkv Linear
  d->3d (bias), proj Linear d->d, the LePE convs Conv2d(d', d', 3, groups=d')
  (d' = d/2 for each of two branches, d for one: 10d either way), norm2, Mlp
  d->4d->d; Merge_Block Conv2d(d, 2d, 3) + LayerNorm(2d); final LayerNorm; head.
  """
  total = 3 * 49 * dim + dim + 2 * dim
  for k, depth in enumerate(depths):
    d = dim * 2 ** k
    if k:
      total += 9 * (d // 2) * d + d + 2 * d                          # merge
    block = 2 * d + (3 * d * d + 3 * d) + (d * d + d) + 10 * d + 2 * d + (8 * d * d + 5 * d)
    total += depth * block
  d = dim * 2 ** (len(depths) - 1)
  return total + 2 * d + d * classes + classes


def official_lipsformer_cswin_count(dim, depths, classes=1000):
  """Parameters of the authors' LipsFormer-CSwin (IDEA-Research/LipsFormer,
  models/cswin.py, dw_conv_layer=2): stem Conv2d(3, C, 4, 4) + CenterNorm;
  per block: norm1 (declared) and norm2 CenterNorms, qkv, proj, LePE (10d),
  Mlp, two depth-wise 7×7 convs (with bias) and their two ScaleLayers, the
  1×1 `nin` conv, alpha1 and alpha2; merges Conv2d(d, 2d, 2, 2) + CenterNorm;
  no final norm; head."""
  total = 3 * 16 * dim + dim + 2 * dim
  for k, depth in enumerate(depths):
    d = dim * 2 ** k
    if k:
      total += 4 * (d // 2) * d + d + 2 * d
    block = (4 * d + (3 * d * d + 3 * d) + (d * d + d) + 10 * d + (8 * d * d + 5 * d)
             + 2 * (49 * d + d) + 2 * d + (d * d + d) + 2 * d)
    total += depth * block
  d = dim * 2 ** (len(depths) - 1)
  return total + d * classes + classes


# name -> (exact count, the formula's arguments). Published: CSwin 23M / 35M /
# 78M (paper and README) where the released code's layer list gives 22.3M /
# 34.6M / 77.4M (T and B round up there, or count another version: the code is
# what is matched); LipsFormer-CSwin 24M / 38M / 83M (paper 001, Table 4).
COUNTS = {
    "CSwin-T": (22_320_552, official_cswin_count, 64, (1, 2, 21, 1)),
    "CSwin-S": (34_643_304, official_cswin_count, 64, (2, 4, 32, 2)),
    "CSwin-B": (77_382_184, official_cswin_count, 96, (2, 4, 32, 2)),
    "LipsFormer-CSwin-T": (23_780_136, official_lipsformer_cswin_count, 64, (1, 2, 21, 1)),
    "LipsFormer-CSwin-S": (37_505_832, official_lipsformer_cswin_count, 64, (2, 4, 32, 2)),
    "LipsFormer-CSwin-B": (83_052_232, official_lipsformer_cswin_count, 96, (2, 4, 32, 2)),
}


def _count(model, image_size=224):
  shapes = jax.eval_shape(lambda: model.init(jax.random.key(0),
                                             jnp.zeros((1, image_size, image_size, 3))))
  return sum(math.prod(leaf.shape) for leaf in jax.tree_util.tree_leaves(shapes["params"]))


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_parameter_count_matches_the_official_layer_list(name):
  expected, formula, dim, depths = COUNTS[name]
  assert formula(dim, depths) == expected
  assert _count(build_model({"variant": name}, num_classes=1000)) == expected


def test_variants_build_from_config_with_their_fields():
  cfg = model_config(variant="LipsFormer-CSwin-T", drop_path_rate=0.2)
  kwargs = model_kwargs(cfg)
  assert kwargs["depths"] == (1, 2, 21, 1) and kwargs["embedding"] == "patch"
  assert kwargs["block"].attention == "cosine" and kwargs["block"].attention_kwargs["lepe"]
  assert kwargs["block"].extra_depthwise_branch
  assert kwargs["encoder"].drop_path_rate == 0.2
  assert set(VARIANTS) == {f"{f}CSwin-{s}" for f in ("", "LipsFormer-") for s in "TSB"}
  with pytest.raises(ValueError, match="stripe_width"):   # set per stage by the model
    model_kwargs(dict(cfg, block={"stripe_width": 2}))


# ---------------------------------------------------------------- one block vs NumPy

def _layer_norm(x, p, eps):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * p["scale"] + p["bias"]


def _depthwise3x3(img, kernel, bias):
  """img (h, w, c), zero padding outside it; kernel (3, 3, 1, c)."""
  h, w, _ = img.shape
  padded = np.pad(img, ((1, 1), (1, 1), (0, 0)))
  return bias + sum(padded[a:a + h, b:b + w] * kernel[a, b, 0] for a in range(3) for b in range(3))


def _group(y, p, grid, window, heads):
  """One LePEAttention branch on its stripes: (B, N, D) -> (B, N, C'), before proj."""
  (rows, cols), (wh, ww) = grid, window
  proj = {n: (y @ p[n]["kernel"].reshape(y.shape[-1], -1) + p[n]["bias"].reshape(-1))
          for n in ("query", "key", "value")}
  batch, width = y.shape[0], proj["value"].shape[-1]
  dh = width // heads
  q, k, v = (proj[n].reshape(batch, rows, cols, width) for n in ("query", "key", "value"))
  out = np.zeros_like(q)
  for b in range(batch):
    for i0 in range(0, rows, wh):
      for j0 in range(0, cols, ww):
        sl = (b, slice(i0, i0 + wh), slice(j0, j0 + ww))
        lepe = _depthwise3x3(v[sl], p["lepe"]["conv"]["kernel"], p["lepe"]["conv"]["bias"])
        qw, kw, vw = (t[sl].reshape(wh * ww, width) for t in (q, k, v))
        mixed = np.zeros_like(qw)
        for h in range(heads):
          c = slice(h * dh, (h + 1) * dh)
          scores = qw[:, c] @ kw[:, c].T / np.sqrt(dh)
          a = np.exp(scores - scores.max(-1, keepdims=True))
          mixed[:, c] = (a / a.sum(-1, keepdims=True)) @ vw[:, c]
        out[sl] = mixed.reshape(wh, ww, width) + lepe
  return out.reshape(batch, rows * cols, width)


def numpy_cswin_block(x, p, grid, stripe, heads, eps=1e-5, feat_scale_gain=1.0):
  """The official CSWinBlock.forward on our parameters (see the module docstring);
  with "feat_scale" parameters, FeatScale on the attention output Y (both groups'
  projection, the stage map): Y + gain·(DC·s + (Y − DC)·t), DC = Y's token mean."""
  y = _layer_norm(x, p["norm1"], eps)
  rows, cols = grid
  if stripe >= max(grid):
    mixed = _group(y, p["attention"], grid, grid, heads)
    w_out, b_out = p["attention"]["out"]["kernel"], p["attention"]["out"]["bias"]
  else:
    mixed = np.concatenate([_group(y, p["attention_rows"], grid, (stripe, cols), heads // 2),
                            _group(y, p["attention_cols"], grid, (rows, stripe), heads // 2)], -1)
    w_out = np.concatenate([p["attention_rows"]["out"]["kernel"],
                            p["attention_cols"]["out"]["kernel"]], 0)
    b_out = p["attention_rows"]["out"]["bias"]       # one bias: the official proj's
  y = mixed @ w_out.reshape(-1, x.shape[-1]) + b_out
  if "feat_scale" in p:
    dc = y.mean(axis=1, keepdims=True)                       # (B, 1, D): all rows·cols tokens
    y = y + feat_scale_gain * (dc * p["feat_scale"]["dc_scale"]
                               + (y - dc) * p["feat_scale"]["hc_scale"])
  x = x + y
  z = _layer_norm(x, p["norm2"], eps)
  hidden = z @ p["mlp"]["fc1"]["kernel"] + p["mlp"]["fc1"]["bias"]
  hidden = 0.5 * hidden * (1 + erf(hidden / np.sqrt(2)))
  return x + hidden @ p["mlp"]["fc2"]["kernel"] + p["mlp"]["fc2"]["bias"]


def _random_block(stripe, key=0, grid=(4, 4), width=16, heads=4, **options):
  spec = BlockSpec(num_heads=heads, mlp_dim=2 * width, attention_kwargs={"lepe": True},
                   mlp_activation="gelu_erf", norm_epsilon=1e-5, **options)
  block = Block(spec, StripeLayout(grid, width=stripe))
  x = jax.random.normal(jax.random.key(key), (2, grid[0] * grid[1], width))
  params = block.init(jax.random.key(key + 1), (x, None), 0.0)["params"]
  leaves, tree = jax.tree_util.tree_flatten(params)
  keys = jax.random.split(jax.random.key(key + 2), len(leaves))
  params = jax.tree_util.tree_unflatten(  # every parameter random, biases and LePE included
      tree, [0.4 * jax.random.normal(k, leaf.shape) for k, leaf in zip(keys, leaves)])
  return block, params, x


@pytest.mark.parametrize("stripe", [1, 2, 4])
def test_block_matches_numpy_cswin_block(stripe):
  block, params, x = _random_block(stripe)
  assert ("attention" in params) == (stripe == 4)
  assert "bias" not in params.get("attention_cols", {}).get("out", {})
  (ours, _), _ = block.apply({"params": params}, (x, None), 0.0)
  expected = numpy_cswin_block(np.asarray(x, np.float64),
                               jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), params),
                               (4, 4), stripe, 4)
  err = np.abs(np.asarray(ours) - expected).max() / np.abs(expected).max()
  assert err < 1e-5, err


@pytest.mark.parametrize("stripe", [1, 2, 4])
@pytest.mark.parametrize("form,gain", [("equations", 1.0), ("authors_deit", 2.0)])
def test_feat_scale_reweights_the_stripe_groups_sum_with_the_stage_mean(stripe, form, gain):
  """FeatScale with CSwin's two stripe groups: on their summed output (CSwin's
  one projection of the concatenated groups, the MSA output) with the token
  mean of the whole stage map as DC, as the authors' Swin code takes it after
  merging the windows (their code has no CSwin). s, t random."""
  form_field = {} if form == "equations" else {"feat_scale_form": form}   # the default
  block, params, x = _random_block(stripe, key=5, feat_scale=True, **form_field)
  assert set(params["feat_scale"]) == {"dc_scale", "hc_scale"}
  (ours, _), _ = block.apply({"params": params}, (x, None), 0.0)
  expected = numpy_cswin_block(np.asarray(x, np.float64),
                               jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), params),
                               (4, 4), stripe, 4, feat_scale_gain=gain)
  err = np.abs(np.asarray(ours) - expected).max() / np.abs(expected).max()
  assert err < 1e-5, err


@pytest.mark.parametrize("group,stripe", [("attention_rows", 1), ("attention_cols", 2)])
def test_stripe_heads_never_see_outside_their_stripe(group, stripe):
  """With the other group's output projection zeroed, a token's block output
  depends on exactly the tokens of its own stripe (attention and LePE,
  zero-padded at the stripe border); the MLP and norms are token-wise."""
  block, params, x = _random_block(stripe, key=3)
  other = "attention_cols" if group == "attention_rows" else "attention_rows"
  params = dict(params, **{other: dict(params[other], out=jax.tree_util.tree_map(
      jnp.zeros_like, params[other]["out"]))})
  # Image 0, then 16 copies with token j moved: one batch, one call.
  moved = x[0] + 0.5 * jnp.eye(16)[:, :, None] * jax.random.normal(jax.random.key(4), (16, 1, 16))
  (out, _), _ = jax.jit(block.apply)({"params": params}, (jnp.concatenate([x[:1], moved]), None),
                                     0.0)
  change = np.abs(np.asarray(out[1:] - out[:1])).max(axis=-1)   # (j moved, i)
  depends = change.T > 1e-6                                     # (N, N): out i <- in j
  assert np.all((change.T > 0) == depends)                     # exactly 0 outside
  pos = np.indices((4, 4)).reshape(2, 16).T                    # token -> (row, col)
  axis = 0 if group == "attention_rows" else 1
  stripe_of = pos[:, axis] // stripe
  np.testing.assert_array_equal(depends, stripe_of[:, None] == stripe_of[None, :])


# ---------------------------------------------------------------- LePE on every variant

@pytest.mark.parametrize("name", sorted(token_attentions()))
def test_lepe_adds_the_convolution_for_every_variant(name):
  cls = get_attention(name)
  x = jax.random.normal(jax.random.key(0), (2, 16, 8))
  plain = cls(num_heads=2, grid_size=(4, 4))
  with_lepe = cls(num_heads=2, grid_size=(4, 4), lepe=True)
  params = with_lepe.init(jax.random.key(1), x)["params"]
  assert params["lepe"]["conv"]["kernel"].shape == (3, 3, 1, 8)
  base = {k: v for k, v in params.items() if k != "lepe"}
  assert jax.tree_util.tree_structure(plain.init(jax.random.key(1), x)["params"]) == \
      jax.tree_util.tree_structure(base)                       # off: no parameters
  zero = dict(params, lepe=jax.tree_util.tree_map(jnp.zeros_like, params["lepe"]))
  np.testing.assert_allclose(with_lepe.apply({"params": zero}, x)[0],
                             plain.apply({"params": base}, x)[0], atol=1e-6)
  bumped = dict(params, lepe={"conv": dict(params["lepe"]["conv"],
                                            bias=jnp.ones_like(params["lepe"]["conv"]["bias"]))})
  assert not np.allclose(with_lepe.apply({"params": bumped}, x)[0],
                         plain.apply({"params": base}, x)[0], atol=1e-4)


def test_lepe_fused_path_equals_explicit():
  cls = get_attention("dot_product")
  x = jax.random.normal(jax.random.key(0), (2, 16, 8))
  fused = cls(num_heads=2, grid_size=(4, 4), lepe=True, implementation="fused")
  params = fused.init(jax.random.key(1), x)["params"]
  explicit = cls(num_heads=2, grid_size=(4, 4), lepe=True, implementation="explicit")
  np.testing.assert_allclose(fused.apply({"params": params}, x)[0],
                             explicit.apply({"params": params}, x)[0], atol=1e-5)


# ---------------------------------------------------------------- the model

TINY = dict(hidden_size=8, depths=(1, 2), num_heads=(2, 4), stripe_widths=(1, 4), patch_size=1)
LEPE = BlockSpec(attention_kwargs={"lepe": True})
IMAGES = jax.random.normal(jax.random.key(7), (2, 8, 8, 3))


def tiny_cswin(block=LEPE, mode="scan", **fields):
  """The tiny CSwin (5 classes) with `fields` changed, its encoders in `mode`."""
  return CSwin(num_classes=5, block=block, encoder=EncoderSpec(mode=mode), **dict(TINY, **fields))


def _with_random_head(params):
  head = params["head"]
  return dict(params, head=dict(head, kernel=jax.random.normal(jax.random.key(9),
                                                               head["kernel"].shape)))


def test_attn_scale_at_zero_and_scan_equal_loop():
  model = tiny_cswin()
  params = _with_random_head(jax.jit(model.init)(jax.random.key(0), IMAGES)["params"])
  logits = jax.jit(model.apply)({"params": params}, IMAGES)
  # AttnScale's ω = 0 (its init) leaves the function unchanged: the same
  # parameters, ω added as zeros.
  scaled = tiny_cswin(LEPE.replace(attention="attn_scale"))
  scaled_params = jax.eval_shape(scaled.init, jax.random.key(0), IMAGES)["params"]
  def copy_into(target, source):
    return {k: (copy_into(v, source[k]) if isinstance(v, dict) else
                (source[k] if k in source else jnp.zeros(v.shape))) for k, v in target.items()}
  scaled_params = copy_into(scaled_params, params)
  assert any("omega" in str(p) for p in jax.tree_util.tree_flatten_with_path(scaled_params)[0])
  np.testing.assert_array_equal(jax.jit(scaled.apply)({"params": scaled_params}, IMAGES), logits)
  # The same parameters in the loop layout give the same logits.
  looped = {k: (layouts.scan_to_loop(v) if k.startswith("stage") else v)
            for k, v in params.items()}
  assert len(layouts.layer_trees(params["stage_1"])) == 2
  loop = tiny_cswin(mode="loop")
  np.testing.assert_allclose(jax.jit(loop.apply)({"params": looped}, IMAGES), logits, atol=1e-5)


@pytest.mark.parametrize("change,match", [
    (dict(block=LEPE.replace(attention="hopfield")), "carries a state"),
    (dict(block=BlockSpec(attention_kwargs={"value_output": "minus"})), "half the heads"),
    (dict(patch_size=3), "not divisible by 6"),
    (dict(stripe_widths=(3, 4)), r"stripe_widths\[0\]=3"),
    (dict(num_heads=(2,)), "one entry per stage"),
    (dict(embedding="conv"), "model.embedding"),
])
def test_clear_errors(change, match):
  with pytest.raises(ValueError, match=match):
    tiny_cswin(**change).init(jax.random.key(0), IMAGES)


def test_probe_reports_per_stripe_maps_and_per_stage_figures():
  from vit_spectral import analysis  # noqa: PLC0415
  model = tiny_cswin()
  variables = jax.jit(model.init)(jax.random.key(0), IMAGES)
  stage1, stage2 = analysis.probe_stages(model, variables, IMAGES)
  # Stage 1: 8x8 grid, stripes of one row / one column: 2 images x 8 stripes
  # of 8 tokens, one head per direction.
  for group in ("attention_rows", "attention_cols"):
    assert stage1[f"{group}/attention_weights"].shape == (1, 16, 1, 8, 8)
  assert stage2["attention_weights"].shape == (2, 2, 4, 16, 16)   # global, 4x4 grid
  assert analysis.probe(model, variables, IMAGES)["token_cosine_similarity"].shape == (3, 2)
