"""What the ledger's training experiments read off a model: per-layer means.

`layer_means(model, params, images)` runs `analysis.diagnose` once and keeps each
metric over the images (and heads), so a run keeps a few numbers per layer
instead of the maps. The test digits are the probe images.
"""

from __future__ import annotations

import numpy as np

import jax

from vit_spectral import analysis
from vit_spectral.analysis.probe import sown_blocks

from benchmarks.claims.digits_runs import digits

PROBE_IMAGES = 128


def probe_images(count: int = PROBE_IMAGES) -> np.ndarray:
  """The first `count` test digits, (count, 8, 8, 1)."""
  return digits().test_images[:count]


_FORWARD: dict[int, object] = {}


def forward(model, params, images):
  """(logits, per-layer sown dicts) of `model` in inference mode; the jitted
  forward is built once per model object (seeds of one setup share it)."""
  fn = _FORWARD.get(id(model))
  if fn is None:
    def run(params, images):
      logits, state = model.apply({"params": params}, images, train=False,
                                  mutable=["intermediates"])
      return logits, sown_blocks(state["intermediates"])
    fn = _FORWARD[id(model)] = (model, jax.jit(run))
  return fn[1](params, images)


def layer_means(model, params, images=None) -> dict[str, list]:
  """Per-layer means over the probe images (`analysis.diagnose`'s metrics).

  Returns lists over layers:
    hc_dc: ‖HC‖/‖DC‖ of the block output (paper 000 Def. 1).
    hc_proportion: ‖HC‖/‖X‖ (App. G.3).
    token_cosine: eq. 76; attention_cosine: eq. 75.
    spectrum_high_over_dc: mean response of the attention maps over the non-DC
      frequencies divided by the DC response (App. F.2), mean over heads.
    lowpass_heads: share of (head, image) maps whose DC response is the largest.
    entropy: mean attention-row entropy (nats).
  """
  images = probe_images() if images is None else images
  names = {"hc_dc": "hc_dc_ratio", "hc_proportion": "hc_proportion",
           "token_cosine": "token_cosine_similarity",
           "attention_cosine": "attention_cosine_similarity",
           "spectrum_high_over_dc": "attention_spectrum_hf_dc",
           "lowpass_heads": "attention_lowpass", "entropy": "attention_entropy"}
  d = analysis.diagnose(model, {"params": params}, images, metrics=list(names.values()),
                        batch_size=len(images))
  return {key: d.values(metric).tolist() for key, metric in names.items()}


def seeds_table(per_seed: dict[int, list]) -> dict[str, list]:
  """{seed: values} -> {"seed 0": values, ...} for `measured`."""
  return {f"seed {s}": v for s, v in per_seed.items()}


def spearman_depth(values) -> float:
  """Spearman rank correlation of `values` with the layer index (1 = increasing)."""
  values = np.asarray(values, np.float64)
  if len(values) < 2:
    return 0.0
  ranks = np.argsort(np.argsort(values))
  depth = np.arange(len(values))
  return float(np.corrcoef(ranks, depth)[0, 1]) if np.std(ranks) else 0.0
