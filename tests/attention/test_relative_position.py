"""Relative-position attention of paper 002: quadratic, gaussian, relative_learned.

Checked against direct computations: eq. 15 and eq. 16 probabilities written as
explicit loops over query/key pixels, Theorem 1 against `lax.conv_general_dilated`,
the CLS rule of `attention.relative`, the degenerate-head thresholds of App. A.1
(pruning against a network without those heads: tests/analysis/test_every_layout.py).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_spectral.analysis import degenerate_heads, gaussian_heads, plot_attention_centres, prune_heads
from vit_spectral.analysis.attention_centres import mass_radius
from vit_spectral.attention import conv_to_quadratic_attention, get_attention, relative_shifts
from vit_spectral.layers.space_to_depth import depth_to_space, space_to_depth
from vit_spectral.models import build_model

GRID = (3, 4)


def attention(name, **kw):
  fields = dict(num_heads=3, grid_size=GRID, full_width_heads=True)
  fields.update(kw)
  return get_attention(name)(**fields)


def run(module, x, variables=None, seed=0):
  """(outputs, attention weights (B, H, T, T), variables)."""
  if variables is None:
    variables = jax.jit(module.init)(jax.random.key(seed), x)
  (y, _), state = jax.jit(functools.partial(module.apply, mutable=["intermediates"]))(
      variables, x)
  return y, state["intermediates"]["attention_weights"][0], variables


def tokens(batch=2, prefix=0, width=8, seed=1):
  return jax.random.normal(jax.random.key(seed), (batch, prefix + GRID[0] * GRID[1], width))


def test_relative_shifts_are_key_minus_query_row_major():
  shifts = relative_shifts(GRID)
  for q in range(12):
    for k in range(12):
      assert tuple(shifts[q, k]) == (k // 4 - q // 4, k % 4 - q % 4)


def test_quadratic_probabilities_are_eq15():
  module = attention("quadratic", alpha_init=0.7)
  _, weights, variables = run(module, tokens())
  centers = np.asarray(variables["params"]["centers"])
  alpha = np.exp(np.asarray(variables["params"]["log_alpha"]))
  expected = np.zeros((3, 12, 12))
  for h in range(3):
    for q in range(12):
      scores = [-alpha[h] * ((k // 4 - q // 4 - centers[h, 0]) ** 2
                             + (k % 4 - q % 4 - centers[h, 1]) ** 2) for k in range(12)]
      expected[h, q] = np.exp(scores) / np.exp(scores).sum()
  np.testing.assert_allclose(weights[0], expected, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(weights[1], expected, rtol=1e-5, atol=1e-6)


def test_gaussian_probabilities_are_eq16():
  module = attention("gaussian", inv_sqrt_cov_init_std=0.5)
  _, weights, variables = run(module, tokens())
  centers = np.asarray(variables["params"]["centers"])
  s = np.asarray(variables["params"]["inv_sqrt_cov"])
  assert np.abs(s - np.eye(2)).max() > 0.05     # a non-isotropic init was drawn
  expected = np.zeros((3, 12, 12))
  for h in range(3):
    precision = s[h] @ s[h].T
    for q in range(12):
      d = [np.array([k // 4 - q // 4, k % 4 - q % 4]) - centers[h] for k in range(12)]
      scores = np.array([-0.5 * e @ precision @ e for e in d])
      expected[h, q] = np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum()
  np.testing.assert_allclose(weights[0], expected, rtol=1e-5, atol=1e-6)


def _initial_params(name, num_heads=4096, seed=0, **kw):
  """One layer's parameters with many heads: each head's init is one sample."""
  module = get_attention(name)(num_heads=num_heads, grid_size=(2, 2), full_width_heads=True,
                               **kw)
  return jax.jit(module.init)(jax.random.key(seed), jnp.zeros((1, 4, 2)))["params"]


@pytest.mark.parametrize("name", ["quadratic", "gaussian"])
@pytest.mark.parametrize("std", [None, 2 ** 0.5])
def test_initial_centres_have_covariance_std_squared_identity(name, std):
  """Δ_h ~ N(0, σ² I) with σ = center_init_std; by default σ = 2 (cov 4 I), the
  authors' reading of §4.1's "N(0, 2I₂)": their models/bert.py draws the
  centres with torch's normal_(0, gaussian_init_mu_std), a standard deviation,
  at train.py's gaussian_init_mu_std=2. The covariance reading (σ = √2) stays
  one override away."""
  kw = {} if std is None else dict(center_init_std=std)
  var = 2.0 ** 2 if std is None else std ** 2
  centres = np.asarray(_initial_params(name, **kw)["centers"], np.float64)
  n = len(centres)
  np.testing.assert_allclose(centres.mean(0), 0.0, atol=6 * np.sqrt(var / n))
  # Sample covariance: each entry has std at most var·√(2/n) (diagonal).
  np.testing.assert_allclose(np.cov(centres.T), var * np.eye(2), atol=6 * var * np.sqrt(2 / n))


def test_initial_quadratic_widths_are_the_authors_isotropic_heads():
  """The authors' isotropic head (runs/quadratic/run.sh) holds s_h = 1 + ε_h,
  ε_h ~ N(0, 0.01²) (gaussian_init_sigma_std, a standard deviation), and scores
  −½ s_h² ‖δ − Δ_h‖² (models/bert.py, get_heads_target_vectors with a = c = s²,
  b = 0). Ours scores −α_h ‖δ − Δ_h‖², so s_h = √(2 α_h) must be that sample."""
  alpha = np.exp(np.asarray(_initial_params("quadratic")["log_alpha"], np.float64))
  s = np.sqrt(2 * alpha)
  n, eps_std = len(s), 0.01
  np.testing.assert_allclose(s.mean(), 1.0, atol=6 * eps_std / np.sqrt(n))
  np.testing.assert_allclose(s.std(ddof=1), eps_std, rtol=6 / np.sqrt(2 * n))


def test_initial_inv_sqrt_cov_is_identity_plus_std_noise():
  """Σ^{-1/2} = I + E, the four entries of E i.i.d. N(0, 0.01²) (App. A.1's
  "N(0, 0.01 I₂)" as the authors draw it: normal_(0, gaussian_init_sigma_std=0.01),
  a standard deviation)."""
  noise = np.asarray(_initial_params("gaussian")["inv_sqrt_cov"], np.float64) - np.eye(2)
  noise = noise.reshape(-1, 4)
  n, var = len(noise), 0.01 ** 2
  np.testing.assert_allclose(np.cov(noise.T), var * np.eye(4), atol=6 * var * np.sqrt(2 / n))


def test_single_head_centred_sharp_quadratic_is_identity_on_grid():
  module = attention("quadratic", num_heads=1)
  x = tokens()
  variables = jax.eval_shape(module.init, jax.random.key(0), x)
  params = dict(variables["params"], centers=jnp.zeros((1, 2)),
                log_alpha=jnp.full((1,), jnp.log(50.0)))
  params["value"] = {"kernel": jnp.eye(8)[:, None, :], "bias": jnp.zeros((1, 8))}
  params["out"] = {"kernel": jnp.eye(8)[None], "bias": jnp.zeros((8,))}
  y, weights, _ = run(module, x, {"params": params})
  np.testing.assert_allclose(weights[0, 0], np.eye(12), atol=1e-6)
  np.testing.assert_allclose(y, x, atol=1e-5)


@pytest.mark.parametrize("size", [3, 5])
def test_conv_to_quadratic_attention_matches_convolution(size):
  rng = np.random.default_rng(size)
  rows, cols, channels = 7, 8, 4
  kernel = rng.normal(size=(size, size, channels, channels - 1)).astype(np.float32)
  bias = rng.normal(size=(channels - 1,)).astype(np.float32)
  images = rng.normal(size=(2, rows, cols, channels)).astype(np.float32)
  expected = jax.lax.conv_general_dilated(
      images, kernel, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")) + bias
  module = get_attention("quadratic")(num_heads=size * size, full_width_heads=True,
                                      grid_size=(rows, cols))
  apply = jax.jit(module.apply)
  m = size // 2
  errors = []
  for alpha in (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 40.0):
    y, _ = apply(conv_to_quadratic_attention(kernel, alpha, bias),
                 images.reshape(2, rows * cols, channels))
    y = np.asarray(y).reshape(2, rows, cols, channels)
    np.testing.assert_array_equal(y[..., -1], np.zeros_like(y[..., -1]))  # unused channel
    inner = (slice(None), slice(m, rows - m), slice(m, cols - m))
    ref = np.asarray(expected)[inner]
    errors.append(np.linalg.norm(y[inner][..., :-1] - ref) / np.linalg.norm(ref))
  assert errors[-1] < 1e-4, errors
  assert all(b < a for a, b in zip(errors[:4], errors[1:5])), errors   # falls with α
  assert errors[0] > 1e-1                                             # α matters


def test_conv_to_quadratic_attention_rejects_bad_input():
  with pytest.raises(ValueError, match="C_out"):
    conv_to_quadratic_attention(np.zeros((3, 3, 2, 4)), 1.0)
  with pytest.raises(ValueError, match="alpha"):
    conv_to_quadratic_attention(np.zeros((3, 3, 2, 2)), 0.0)


@pytest.mark.parametrize("name,kw", [("quadratic", {}), ("gaussian", {}),
                                     ("relative_learned", {}),
                                     ("relative_learned", {"content": True})])
def test_cls_token_rule(name, kw):
  """Grid tokens ignore the CLS key; a position-only CLS query is uniform."""
  module = attention(name, num_prefix_tokens=1, **kw)
  x = tokens(prefix=1)
  y, weights, variables = run(module, x)
  np.testing.assert_array_equal(weights[:, :, 1:, 0], 0.0)
  if not kw.get("content"):
    np.testing.assert_allclose(weights[:, :, 0], np.full((2, 3, 13), 1 / 13), rtol=1e-5)
  # The grid tokens' outputs are those of the same layer without the CLS token.
  grid_module = attention(name, num_prefix_tokens=0, **kw)
  y_grid, weights_grid, _ = run(grid_module, x[:, 1:], variables)
  np.testing.assert_allclose(y[:, 1:], y_grid, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(weights[:, :, 1:, 1:], weights_grid, rtol=1e-5, atol=1e-6)


def test_relative_learned_scores_depend_only_on_shift():
  module = attention("relative_learned", position_dim=6)
  _, weights, variables = run(module, tokens())
  p = variables["params"]
  w = np.asarray(p["position_key"])                            # (Dp, H, Dk)
  shifts = relative_shifts(GRID)
  scores = np.zeros((3, 12, 12))
  for q in range(12):
    for k in range(12):
      r = np.concatenate([p["row_embedding"][shifts[q, k, 0] + 2],
                          p["col_embedding"][shifts[q, k, 1] + 3]])
      scores[:, q, k] = np.einsum("hd,e,ehd->h", p["position_query"], r, w) / np.sqrt(8)
  expected = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)
  np.testing.assert_allclose(weights[0], expected, rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(weights[0], weights[1], atol=1e-7)  # no content term


def test_relative_learned_content_term_is_eq8():
  module = attention("relative_learned", position_dim=6, content=True, num_heads=2)
  x = tokens(batch=1)
  _, weights, v = run(module, x)
  p = jax.tree_util.tree_map(np.asarray, v["params"])
  xn = np.asarray(x[0])
  q = np.einsum("td,dhe->the", xn, p["query"]["kernel"]) + p["query"]["bias"]
  k = np.einsum("td,dhe->the", xn, p["key"]["kernel"]) + p["key"]["bias"]
  shifts = relative_shifts(GRID)
  scores = np.zeros((2, 12, 12))
  for h in range(2):
    for a in range(12):
      for b in range(12):
        r = np.concatenate([p["row_embedding"][shifts[a, b, 0] + 2],
                            p["col_embedding"][shifts[a, b, 1] + 3]])
        pos = r @ p["position_key"][:, h]
        scores[h, a, b] = (q[a, h] @ k[b, h] + q[a, h] @ pos + p["content_bias"][h] @ k[b, h]
                           + p["position_query"][h] @ pos) / np.sqrt(8)
  expected = np.exp(scores - scores.max(-1, keepdims=True))
  expected /= expected.sum(-1, keepdims=True)
  np.testing.assert_allclose(weights[0], expected, rtol=1e-4, atol=1e-6)


def test_shared_value_equals_per_head_values_tiled():
  x = tokens()
  shared = attention("gaussian", shared_value=True)
  y, _, variables = run(shared, x)
  params = dict(variables["params"])
  value = params.pop("shared_value")
  assert value["kernel"].shape == (8, 8)
  params["value"] = {"kernel": jnp.repeat(value["kernel"][:, None], 3, axis=1),
                     "bias": jnp.repeat(value["bias"][None], 3, axis=0)}
  y_heads, _, _ = run(attention("gaussian"), x, {"params": params})
  np.testing.assert_allclose(y, y_heads, rtol=1e-5, atol=1e-5)


def test_full_width_heads_for_dot_product():
  module = get_attention("dot_product")(num_heads=3, full_width_heads=True)
  variables = jax.eval_shape(module.init, jax.random.key(0), tokens())
  assert variables["params"]["query"]["kernel"].shape == (8, 3, 8)
  assert variables["params"]["out"]["kernel"].shape == (3, 8, 8)


def test_bad_options_raise():
  with pytest.raises(ValueError, match="position_dim"):
    run(attention("relative_learned", position_dim=5), tokens())
  with pytest.raises(ValueError, match="grid"):
    run(attention("quadratic"), tokens(prefix=2))
  with pytest.raises(ValueError, match="alpha_init"):
    run(attention("quadratic", alpha_init=-1.0), tokens())
  with pytest.raises(ValueError, match="head_dim and full_width_heads"):
    run(attention("quadratic", head_dim=4), tokens())


def test_space_to_depth_is_invertible_and_matches_patch_stem():
  images = jax.random.normal(jax.random.key(0), (2, 8, 8, 3))
  np.testing.assert_array_equal(depth_to_space(space_to_depth(images, 2), 2), images)
  np.testing.assert_array_equal(space_to_depth(images, 2)[0, 1, 2, 3 * 3 + 1],
                                images[0, 3, 5, 1])          # block (1, 1), channel 1
  vit = lambda **kw: build_model(dict(patch_size=2, hidden_size=16, depth=1, num_heads=2,
                                      mlp_dim=16, pooling="mean", posemb="none", **kw),
                                 num_classes=0)
  patch, s2d = vit(), vit(stem="space_to_depth")
  variables = jax.jit(patch.init)(jax.random.key(1), images)
  params = dict(variables["params"])
  conv = params["embedding"]
  params["embedding"] = {"kernel": conv["kernel"].reshape(12, 16), "bias": conv["bias"]}
  np.testing.assert_allclose(s2d.apply({"params": params}, images),
                             patch.apply(variables, images), rtol=1e-5, atol=1e-5)
  with pytest.raises(ValueError, match="model.stem"):
    jax.eval_shape(vit(stem="conv").init, jax.random.key(0), images)


def gaussian_vit(mode):
  return build_model(dict(patch_size=2, hidden_size=16, depth=2, num_heads=4, mlp_dim=16,
                          stem="space_to_depth", pooling="mean", posemb="none",
                          attention=dict(name="gaussian", full_width_heads=True),
                          encoder_mode=mode), num_classes=10)


def with_precisions(params, mode):
  """Sets S of (layer 0: heads 1, 3) and (layer 1: head 2) to degenerate values."""
  eigen = np.ones((2, 4, 2))
  eigen[0, 1] = (1e-6, 1e-6)   # largest eigenvalue of Σ⁻¹ < 1e-5: uniform head
  eigen[0, 3] = (1e-7, 1.0)    # condition number 1e7: a stripe
  eigen[1, 2] = (0.0, 2.0)     # singular
  eigen[1, 0] = (1e-4, 1.0)    # condition 1e4: kept
  eigen[1, 1] = (2e-5, 3e-5)   # small but above 1e-5: kept
  rot = np.array([[np.cos(0.3), -np.sin(0.3)], [np.sin(0.3), np.cos(0.3)]])
  s = np.einsum("ij,lhj->lhij", rot, np.sqrt(eigen))            # S = R diag(√λ)
  params = jax.tree_util.tree_map(np.asarray, params)
  encoder = params["encoder"]
  if mode == "scan":
    encoder["encoderblock"]["attention"]["inv_sqrt_cov"] = s
  else:
    for i in range(2):
      encoder[f"encoderblock_{i}"]["attention"]["inv_sqrt_cov"] = s[i]
  return params


@pytest.mark.parametrize("mode", ["scan", "loop"])
def test_degenerate_heads_are_exactly_those_past_the_thresholds(mode):
  model = gaussian_vit(mode)
  images = jax.random.normal(jax.random.key(0), (2, 8, 8, 1))
  params = with_precisions(jax.jit(model.init)(jax.random.key(1), images)["params"], mode)
  found = degenerate_heads(params)
  assert [f.tolist() for f in found] == [[1, 3], [2]]
  assert [f.tolist() for f in degenerate_heads(params, max_condition_number=1e3)] == [[1, 3], [0, 2]]
  with pytest.raises(ValueError, match="out of range"):
    prune_heads({"params": params}, [[4], []])


def test_attention_centres_plot_and_contours(tmp_path):
  # 50%/90% radii of a 2-D Gaussian: P(χ²₂ ≤ r²) = 1 − exp(−r²/2).
  for mass in (0.5, 0.9):
    samples = np.random.default_rng(0).normal(size=(200_000, 2))
    assert abs(np.mean(np.linalg.norm(samples, axis=1) <= mass_radius(mass)) - mass) < 5e-3
  model = build_model(dict(patch_size=2, hidden_size=16, depth=2, num_heads=3, mlp_dim=16,
                           pooling="mean", posemb="none",
                           attention=dict(name="quadratic", full_width_heads=True)),
                      num_classes=10)
  params = jax.jit(model.init)(jax.random.key(0), jnp.zeros((1, 8, 8, 1)))["params"]
  heads = gaussian_heads(params)
  alpha = np.exp(np.asarray(params["encoder"]["encoderblock"]["attention"]["log_alpha"]))
  np.testing.assert_allclose(heads[1]["precision"][2], 2 * alpha[1, 2] * np.eye(2), rtol=1e-6)
  path = tmp_path / "centres.png"
  fig = plot_attention_centres(params, path=str(path))
  assert path.stat().st_size > 1000 and len(fig.axes) == 2
  relative = build_model(dict(patch_size=2, hidden_size=16, depth=1, num_heads=2, mlp_dim=16,
                              attention=dict(name="relative_learned")), num_classes=10)
  with pytest.raises(ValueError, match="quadratic"):
    gaussian_heads(jax.jit(relative.init)(jax.random.key(0), jnp.zeros((1, 8, 8, 1)))["params"])


def test_paper_recipes_validate():
  from vit_spectral.configs import cifar10_quadratic, digits_quadratic
  from vit_spectral.training import config_checks
  for name in ("quadratic", "gaussian", "relative_learned"):
    for recipe in (digits_quadratic, cifar10_quadratic):
      config = recipe.get_config(f"attention={name}")
      # The paper's batch of 100 splits over 4 data-parallel devices, not 8: the
      # 8 test devices become a 4 × 2 mesh (a mesh must use every device).
      config.mesh.data, config.mesh.model = 4, 2
      config_checks.validate_config(config)


# Paper 002's positional parameters, by the authors' names: Δ ("attention_centers")
# and the widths ("attention_spreads": α here, Σ^{-1/2} in "gaussian").
CENTRES_AND_WIDTHS = ("centers", "log_alpha", "inv_sqrt_cov")


@pytest.mark.parametrize("recipe_name,image", [("digits_quadratic", (1, 8, 8, 1)),
                                               ("cifar10_quadratic", (1, 32, 32, 3))])
@pytest.mark.parametrize("name", ["quadratic", "gaussian", "relative_learned"])
def test_paper_recipes_decay_everything_but_centres_and_widths(recipe_name, image, name):
  """The authors' SGD (epfml/attention-cnn train.py, get_optimizer) puts the
  parameters named attention_centers / attention_spreads in a group with
  weight_decay 0 and decays every other parameter, biases and layer norms
  included: the recipe's mask (the one make_optimizer builds) must be that."""
  import importlib
  from vit_spectral import settings
  from vit_spectral.training import optim
  config = importlib.import_module(f"vit_spectral.configs.{recipe_name}").get_config(
      f"attention={name}")
  model = build_model(config.model, num_classes=10)
  params = jax.eval_shape(model.init, jax.random.key(0), jnp.zeros(image))["params"]
  optim_settings = settings.as_settings(optim.OptimSettings, config.optim)
  mask = optim.weight_decay_mask(
      params, optim_settings.no_decay_patterns,
      exempt_vectors_and_biases=optim_settings.exempt_vectors_and_biases)
  leaves = {optim.param_path(path): decayed
            for path, decayed in jax.tree_util.tree_flatten_with_path(mask)[0]}
  exempt = {path for path in leaves if path.rsplit("/", 1)[-1] in CENTRES_AND_WIDTHS}
  assert {path for path, decayed in leaves.items() if not decayed} == exempt
  assert bool(exempt) == (name != "relative_learned")
  assert any(path.endswith("bias") for path in leaves)                 # decayed too
  assert any("norm" in path and path.endswith("scale") for path in leaves)
