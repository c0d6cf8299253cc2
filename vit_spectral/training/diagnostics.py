"""The papers' per-layer diagnostics, logged while training (`config.diagnostics`).

With `config.diagnostics = dict(every=N, num_images=M)` the trainer runs one
jitted function (compiled once) on a fixed set of images (the first M of the
eval split, preprocessed as for evaluation) at step 0 of a run from scratch,
every N steps and at the last step, and writes per-layer scalars to the
workdir's TensorBoard files (`training.event_files` reads them back). Tags are
`diagnostics/<metric>/layer_<ll>` (ll = 00, 01, ... in block order); each value
is a mean over the M images (and heads, where the metric has them):

  every model (from what each block sows, one forward pass in inference mode)
    hc_dc_ratio          ‖HC[X_ℓ]‖_F / ‖DC[X_ℓ]‖_F of block ℓ's output
                         (paper 000, Def. 1; paper 003's HFC/LFC, Fig. 4)
    token_cosine         mean |cos| between distinct tokens (paper 000, eq. 76)
    attention_cosine     mean |cos| between attention columns (paper 000, eq. 75)
    rank_residual_ratio  ‖Res(X_ℓ)‖_{1,∞} / ‖X_ℓ‖_{1,∞} (paper 004, eq. 61)
    attention_entropy    attention-row entropy in nats (paper 004, App. I); for
                         AttnScale the sown map is Â (paper 000, eq. 9), whose
                         few negative entries add nothing (only p > 0 terms)
  every layer with value and output projections (from the parameters)
    h_cond, h_asymmetry  cond(H) and ‖(H − Hᵀ)/2‖_F / ‖(H + Hᵀ)/2‖_F of
                         H = W_projᵀ W_Vᵀ (paper 003, Figs. 5 and 2)
  eigen-reparameterized layers (paper 003, §4)
    h_eig_min, h_eig_max the range of the eigenvalues Λ_H of W_V W_proj
  FeatScale layers (paper 000, eqs. 10–12; Fig. 7)
    feat_scale_s_mean, _min, _max; feat_scale_t_mean, _min, _max   over channels
  layers whose attention variant declares scalars (`Attention.LOGGED_PARAMS`:
  a parameter -> <stem>_mean, _min, _max; `Attention.LOGGED_SOWN`: a sown
  scalar -> its tag, the mean over the images); the tags are listed in each
  variant's docstring (AttnScale's per-head scale, paper 000 Fig. 6;
  Hopfield's score-memory norm, paper 004 eq. 10)

Layers are read through the layout walker (`models.layouts`), so scanned,
segmented and looped encoders, and layers that differ (`model.layer_overrides`),
all give one value per layer; a metric a layer does not have is not written
for that layer. The attention maps of all layers are held at once: M images
cost M·L·heads·T² floats (ViT-B/16, M = 64: 1.4 GB), so keep M small on large
models.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from vit_spectral import errors
from vit_spectral import settings as settings_lib
from vit_spectral.analysis.eigen import asymmetry, condition_number, h_matrix
from vit_spectral.analysis.frequency import hc_dc_ratio
from vit_spectral.analysis.probe import ATTENTION_KEY, OUTPUT_KEY, sown_blocks
from vit_spectral.analysis.rank import attention_entropy, rank_residual_ratio
from vit_spectral.analysis.similarity import attention_cosine_similarity, token_cosine_similarity
from vit_spectral.attention import get_attention
from vit_spectral.attention.value_output import PSI, ValueOutput, eigenvalues, value_output_kernels
from vit_spectral.data import input_pipeline
from vit_spectral.layers.feat_scale import FeatScale
from vit_spectral.models.layouts import layer_fields, layer_trees
from vit_spectral.models.token_layouts import ATTENTION_MODULE

TAG_PREFIX = "diagnostics"


@dataclasses.dataclass(frozen=True)
class DiagnosticsSettings:
  """`config.diagnostics` (off by default).

  Attributes:
    every: log the diagnostics every this many steps, besides step 0 (of a run
      from scratch) and the last step; None = off.
    num_images: how many images of the eval split (the first ones) they are
      measured on.
  """

  SECTION = "diagnostics"

  every: int | None = None
  num_images: int = 64

  def __post_init__(self):
    settings_lib.require(self.every is None or self.every > 0,
                         f"config.diagnostics.every={self.every} must be positive "
                         "(None turns the diagnostics off)")
    settings_lib.require(self.num_images > 0,
                         f"config.diagnostics.num_images={self.num_images} must be positive")

  @property
  def enabled(self) -> bool:
    return self.every is not None

  def due(self, step: int, total_steps: int) -> bool:
    """Whether the diagnostics are logged after `step` (step 0 = before training)."""
    return self.enabled and (step % self.every == 0 or step == total_steps)


def _tokens_metrics(layers: list[Mapping[str, jax.Array]]) -> dict[str, jax.Array]:
  """Per-layer means over images of the sown-token metrics: metric -> (L,).

  The layers' arrays are stacked and each metric runs once on the stack (one
  op per metric rather than one per layer: a fraction of the compile time)."""
  x = jnp.stack([layer[OUTPUT_KEY] for layer in layers]).astype(jnp.float32)     # (L, B, T, D)
  a = jnp.stack([layer[ATTENTION_KEY] for layer in layers]).astype(jnp.float32)  # (L, B, H, T, T)
  return {
      "hc_dc_ratio": hc_dc_ratio(x).mean(axis=1),
      "token_cosine": token_cosine_similarity(x).mean(axis=1),
      "attention_cosine": attention_cosine_similarity(a).mean(axis=1),
      "rank_residual_ratio": rank_residual_ratio(x).mean(axis=1),
      "attention_entropy": attention_entropy(a).mean(axis=(1, 2)),
  }


def _summaries(name: str, values: jax.Array) -> dict[str, jax.Array]:
  values = values.astype(jnp.float32)
  return {f"{name}_mean": values.mean(), f"{name}_min": values.min(),
          f"{name}_max": values.max()}


def _parameter_metrics(tree: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, jax.Array]:
  """One layer's parameter diagnostics (`tree`: its loop-layout params)."""
  attention = tree.get(ATTENTION_MODULE, {})
  value_output = ValueOutput.from_options(fields["attention_kwargs"])
  metrics = {}
  if value_output.eigen or ("value" in attention and "out" in attention):
    w_v, w_proj = value_output_kernels(attention, value_output, fields["num_heads"])
    h = h_matrix(jnp.asarray(w_v), jnp.asarray(w_proj))
    metrics.update(h_cond=condition_number(h), h_asymmetry=asymmetry(h))
  if value_output.eigen:
    lam = eigenvalues(attention[PSI], value_output)
    metrics.update(h_eig_min=lam.min(), h_eig_max=lam.max())
  for path, stem in get_attention(fields["attention"]).LOGGED_PARAMS.items():
    if path in attention:
      metrics.update(_summaries(stem, attention[path]))
  if "feat_scale" in tree:
    for path, stem in FeatScale.LOGGED_PARAMS.items():
      metrics.update(_summaries(stem, tree["feat_scale"][path]))
  return metrics


def _sown_metrics(layer: Mapping[str, jax.Array], fields: Mapping[str, Any]) -> dict[str, jax.Array]:
  """One layer's sown scalars its attention variant declares (`LOGGED_SOWN`),
  each averaged over the images."""
  declared = get_attention(fields["attention"]).LOGGED_SOWN
  return {tag: layer[f"{ATTENTION_MODULE}/{name}"].astype(jnp.float32).mean()
          for name, tag in declared.items() if f"{ATTENTION_MODULE}/{name}" in layer}


def layer_diagnostics(model, params: Mapping[str, Any], images) -> list[dict[str, jax.Array]]:
  """Every diagnostic of every layer (pure; `Diagnostics` jits it).

  Args:
    model: a library ViT (any attention variant, block options and layout).
    params: its "params" collection.
    images: (M, H, W, C) inputs, run in inference mode.

  Returns:
    One dict per layer, in block order: metric name (module docstring) -> ()
    float32 scalar; a layer's dict holds only the metrics it has.
  """
  _, state = model.apply({"params": params}, images, train=False, mutable=["intermediates"])
  sown = sown_blocks(state["intermediates"])
  trees, fields = layer_trees(params), layer_fields(model)
  if not len(sown) == len(trees) == len(fields):
    raise ValueError(f"{len(sown)} blocks sowed intermediates, the params have {len(trees)} "
                     f"layers and model.depth={len(fields)}: they must agree")
  tokens = _tokens_metrics(sown)
  out = []
  for index, (layer, tree, block) in enumerate(zip(sown, trees, fields)):
    metrics = {name: values[index] for name, values in tokens.items()}
    metrics.update(_sown_metrics(layer, block))
    out.append({**metrics, **_parameter_metrics(tree, block)})
  return out


def scalar_tags(layers: list[Mapping[str, Any]]) -> dict[str, float]:
  """[{metric: value}] per layer -> {"diagnostics/<metric>/layer_<ll>": float}."""
  return {f"{TAG_PREFIX}/{metric}/layer_{index:02d}": float(value)
          for index, layer in enumerate(layers) for metric, value in layer.items()}


def fixed_images(input_config, num_images: int) -> np.ndarray:
  """The first `num_images` images of the eval split, preprocessed for eval.

  Every process reads the same images (the whole split as one process would),
  so they can be replicated across hosts.

  Raises:
    errors.ConfigError: the eval split has fewer images.
  """
  dataset, num_batches = input_pipeline.create_eval_dataset(
      input_config, process_index=0, process_count=1)
  images, count = [], 0
  for batch in dataset.take(num_batches).as_numpy_iterator():
    real = batch["image"][batch["mask"]]
    images.append(real)
    count += len(real)
    if count >= num_images:
      break
  if count < num_images:
    raise errors.ConfigError(
        f"config.diagnostics.num_images={num_images}, but config.input.eval_split="
        f"{input_config.eval_split!r} of {input_config.dataset!r} has {count} images")
  return np.concatenate(images)[:num_images]


class Diagnostics:
  """The diagnostics of one run: fixed images on the devices and one jitted function.

  `diagnostics(params)` -> {tag: float} (`scalar_tags`); it compiles on the
  first call and never again (same shapes and shardings every time).
  """

  def __init__(self, settings: DiagnosticsSettings, model, input_config, params_sharding,
               mesh: jax.sharding.Mesh):
    """params_sharding: the shardings of the params the trainer holds
    (`ShardedSteps.state_sharding.params`); the images are replicated."""
    if not hasattr(model, "depth"):
      raise ValueError(f"config.diagnostics reads one encoder of model.depth blocks; "
                       f"{type(model).__name__} has stages of different token counts and "
                       "widths, which the diagnostics do not read yet: leave "
                       "config.diagnostics.every unset")
    self.settings = settings
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    images = fixed_images(input_config, settings.num_images)
    self._images = jax.make_array_from_callback(images.shape, replicated,
                                                lambda index: images[index])
    self._run = jax.jit(lambda params, images: layer_diagnostics(model, params, images),
                        in_shardings=(params_sharding, replicated), out_shardings=replicated)

  def __call__(self, params) -> dict[str, float]:
    return scalar_tags(jax.device_get(self._run(params, self._images)))
