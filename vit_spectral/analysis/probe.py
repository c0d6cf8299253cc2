"""Runs a model once and reads the paper-000 diagnostics from what its blocks sow.

Every block sows its output tokens ("block_output", (B, T, D)) and its attention
map ("attention/attention_weights", (B, H, T, T); Â for AttnScale), so one
forward pass with `mutable=["intermediates"]` is enough. Token statistics use all
T tokens, CLS included (n in the paper counts every token).
"""

from __future__ import annotations

from typing import Any, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp

from vit_spectral.analysis.attention_spectrum import attention_spectrum
from vit_spectral.analysis.frequency import hc_dc_ratio, hc_proportion
from vit_spectral.analysis.similarity import attention_cosine_similarity, token_cosine_similarity
from vit_spectral.models.intermediates import per_layer

ATTENTION_KEY = "attention/attention_weights"
OUTPUT_KEY = "block_output"


def sown_blocks(intermediates: Mapping[str, Any]) -> list[dict[str, jax.Array]]:
  """`models.per_layer(intermediates)`, checked: every block sowed its output
  (OUTPUT_KEY, (B, T, D)) and its attention map (ATTENTION_KEY, (B, H, T, T)),
  which the diagnostics read (`probe`, `training.diagnostics`).

  Raises:
    KeyError: a block lacks one of them (names the block and what it sowed).
  """
  layers = per_layer(intermediates)
  for index, layer in enumerate(layers):
    missing = [k for k in (ATTENTION_KEY, OUTPUT_KEY) if k not in layer]
    if missing:
      raise KeyError(f"block {index} sowed {sorted(layer)}, not {missing}: the diagnostics "
                     "need every block to sow its output and its attention map")
  return layers


def _layer_metrics(layer: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
  x, a = layer[OUTPUT_KEY].astype(jnp.float32), layer[ATTENTION_KEY].astype(jnp.float32)
  return {
      "hc_dc_ratio": hc_dc_ratio(x),                                   # Def. 1
      "hc_proportion": hc_proportion(x),                               # App. G.3
      "token_cosine_similarity": token_cosine_similarity(x),           # eq. 76
      "attention_cosine_similarity": attention_cosine_similarity(a),   # eq. 75
      "attention_spectrum": attention_spectrum(a),                     # App. F.2
      "attention_weights": a,
  }


def probe(model: nn.Module, variables: Mapping[str, Any], images) -> dict[str, jax.Array]:
  """Per-layer Fourier-domain diagnostics of `model` on `images` (one forward pass).

  Args:
    model: a library ViT (any attention variant and block options).
    variables: its variables ({"params": ...}); an "intermediates" collection
      in them is ignored.
    images: (B, H, W, C) inputs, run in inference mode (no dropout).

  Returns:
    A dict of arrays with a leading layer axis L (block order), per image:
      "hc_dc_ratio": (L, B) ‖HC[X_l]‖_F / ‖DC[X_l]‖_F of block l's output.
      "hc_proportion": (L, B) ‖HC[X_l]‖_F / ‖X_l‖_F.
      "token_cosine_similarity": (L, B) eq. 76 on block l's output.
      "attention_cosine_similarity": (L, B) eq. 75 (mean over heads).
      "attention_spectrum": (L, B, H, T) response per frequency, DC first.
      "attention_weights": (L, B, H, T, T) the attention maps.
    Average over axis 1 for per-layer numbers.
  """
  inputs = {k: v for k, v in variables.items() if k != "intermediates"}

  @jax.jit
  def run(inputs, images):
    _, state = model.apply(inputs, images, train=False, mutable=["intermediates"])
    layers = [_layer_metrics(layer) for layer in sown_blocks(state["intermediates"])]
    return {key: jnp.stack([m[key] for m in layers]) for key in layers[0]}

  return run(inputs, images)
