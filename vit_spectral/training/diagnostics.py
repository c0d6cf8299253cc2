"""The papers' per-layer diagnostics, logged while training (`config.diagnostics`).

With `config.diagnostics = dict(every=N, num_images=M)` the trainer runs one
jitted function (compiled once) on a fixed set of images (the first M of the
eval split, preprocessed as for evaluation) at step 0 of a run from scratch,
every N steps and at the last step, and writes per-layer scalars to the
workdir's TensorBoard files (`training.event_files` reads them back). Tags are
`diagnostics/<metric>/layer_<ll>` (ll = 00, 01, ... in block order, over all
stages of a hierarchical backbone); each value is a mean over the M images
(and heads and windows, where the metric has them).

The metrics are `analysis.diagnose`'s, computed by the same functions
(`analysis.diagnosis.layer_means`; names and equations in
`analysis.layer_metrics`): by default `logged_metrics()`, i.e.

    hc_dc_ratio, hc_proportion, token_cosine_similarity, rank_residual_ratio,
    attention_cosine_similarity, attention_entropy, attention_spectrum_hf_dc
    (from what each block sows, one forward pass in inference mode);
    h_cond, h_asymmetry (paper 003's H = W_projᵀ W_Vᵀ), h_eig_min, h_eig_max
    (eigen-reparameterized layers), FeatScale's feat_scale_{s,t}_{mean,min,max},
    and what each attention variant declares (`Attention.LOGGED_PARAMS`,
    `LOGGED_SOWN`: AttnScale's attn_scale_omega_*, Hopfield's
    hopfield_memory_norm) from the parameters and sown scalars;

`config.diagnostics.metrics` names another set. Layers are read through the
layout walker (`models.layouts`), so scanned, segmented and looped encoders,
and layers that differ (`model.layer_overrides`), all give one value per
layer; a metric a layer does not have is not written for that layer. The
maps are reduced layer by layer, so the memory is about one layer's maps
(M·heads·T² floats) beyond the forward pass.
"""

from __future__ import annotations

from typing import Any, Mapping

import jax
import numpy as np

from vit_spectral import errors
from vit_spectral.analysis.diagnosis import layer_means
from vit_spectral.data import input_pipeline

TAG_PREFIX = "diagnostics"
# The activation metrics the trainer logs unless config.diagnostics.metrics says
# otherwise; `logged_metrics()` adds every parameter and declared metric.
# The section's one definition (JAX-free, for the command line), re-exported.
from vit_spectral.sections.diagnostics import (  # noqa: E402,F401
    LOGGED_ACTIVATION_METRICS, DiagnosticsSettings, logged_metrics)


def layer_diagnostics(model, params: Mapping[str, Any], images,
                      metrics=None) -> list[dict[str, jax.Array]]:
  """Every logged diagnostic of every layer (pure; `Diagnostics` jits it):
  `analysis.diagnosis.layer_means` on the params.

  Args:
    model: a library model (any attention variant, block options, layout and
      backbone) or any module that follows `analysis.protocol`.
    params: its "params" collection.
    images: (M, H, W, C) inputs, run in inference mode.
    metrics: the metric names; None = `logged_metrics()`.

  Returns:
    One dict per layer, in block order: metric name -> () float32 scalar; a
    layer's dict holds only the metrics it has.
  """
  return layer_means(model, {"params": params}, images,
                     logged_metrics() if metrics is None else metrics)


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
    self.settings = settings
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    images = fixed_images(input_config, settings.num_images)
    self._images = jax.make_array_from_callback(images.shape, replicated,
                                                lambda index: images[index])
    metrics = settings.logged_metrics
    self._run = jax.jit(lambda params, images: layer_diagnostics(model, params, images, metrics),
                        in_shardings=(params_sharding, replicated), out_shardings=replicated)

  def __call__(self, params) -> dict[str, float]:
    return scalar_tags(jax.device_get(self._run(params, self._images)))
