"""`probe` and `probe_stages`: the paper-000 figures per image, as thin names over
`analysis.diagnose` (kept for code written against them; new code calls
`diagnose`, which also averages on the fly, streams batches and compiles once).

Both run `diagnose(..., per_image=True, keep_maps=True)` on the images as one
batch and reshape its result: the per-image values with a leading layer axis.
Token statistics use all T tokens, CLS included (n in the paper counts every
token). Backbones with stages (Swin, CSwin) and windowed attention: the token
statistics are per layer on the whole image's tokens; the attention figures
per window (maps (B·nW, H, N, N), row b·nW + w = window w of image b), one
set per head group (CSwin's "attention_rows" / "attention_cols" stripes).
"""

from __future__ import annotations

from typing import Any, Mapping

import flax.linen as nn
import numpy as np

from vit_spectral.analysis.diagnosis import diagnose
from vit_spectral.analysis.protocol import ATTENTION_KEY, OUTPUT_KEY
from vit_spectral.models.intermediates import per_layer

__all__ = ["ATTENTION_KEY", "OUTPUT_KEY", "TOKEN_METRICS", "probe", "probe_stages", "sown_blocks"]

# Per-image token statistics: one number per image and layer at any token count.
TOKEN_METRICS = ("hc_dc_ratio", "hc_proportion", "token_cosine_similarity")
_MAP_METRICS = ("attention_cosine_similarity", "attention_spectrum")


def sown_blocks(intermediates: Mapping[str, Any]) -> list[dict[str, Any]]:
  """`models.per_layer(intermediates)`, checked: every block sowed its output
  (OUTPUT_KEY, (B, T, D)) and its attention map (ATTENTION_KEY, (B, H, T, T)).

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


def _per_stage(model, variables, images) -> list[dict[str, Any]]:
  images = np.asarray(images)
  d = diagnose(model, variables, images, metrics=TOKEN_METRICS + _MAP_METRICS,
               batch_size=len(images), per_image=True, keep_maps=True)
  stages = []
  for s, name in enumerate(d.stage_names):
    layers = np.flatnonzero(d.stage == s)
    keys = set.intersection(*(set(d.per_image[i]) for i in layers))
    stage: dict[str, Any] = {"name": name}
    for key in sorted(keys):
      values = np.stack([d.per_image[i][key] for i in layers])
      if key.split("/")[-1] == "attention_cosine_similarity":   # eq. 75: mean over heads
        values = values.mean(axis=-1)
      stage[key] = values
    for group in set.intersection(*(set(d.maps[i]) for i in layers)):
      prefix = "" if group == "attention" else f"{group}/"
      stage[f"{prefix}attention_weights"] = np.stack([d.maps[i][group] for i in layers])
    stages.append(stage)
  return stages


def probe_stages(model: nn.Module, variables: Mapping[str, Any], images
                 ) -> list[dict[str, Any]]:
  """`probe` per stage, for any diagnosable model (one entry for the ViT).

  Returns:
    One dict per stage, in order: "name" (the stage's module name, None for
    the ViT), and arrays with a leading axis over the stage's L_s layers:
      "hc_dc_ratio", "hc_proportion", "token_cosine_similarity": (L_s, B),
        on each block's whole output (every token of the image).
      "attention_weights": (L_s, B', H, N, N) the maps as the attention saw
        them: B' = B·nW windows of N tokens (B' = B, N = T without windows).
      "attention_cosine_similarity": (L_s, B') eq. 75 per window.
      "attention_spectrum": (L_s, B', H, N) per window (App. F.2).
    Head groups other than "attention" (CSwin's stripes) prefix their three
    attention keys with their name: "attention_rows/attention_weights", ...
  """
  return _per_stage(model, variables, images)


def probe(model: nn.Module, variables: Mapping[str, Any], images) -> dict[str, Any]:
  """Per-layer Fourier-domain diagnostics of `model` on `images`, per image.

  A model with stages (Swin, CSwin) returns the layers of every stage:
  the token metrics stacked over all of them, (L, B), "stage" (L,) the stage
  index of each layer, and "stages" = `probe_stages` (the per-window
  attention figures, which cannot be stacked across stages). CaiT keeps its
  self-attention stage as the top-level "encoder" and is read as a ViT: its
  `depth` self-attention layers (the class stage's 1×T maps are not probed).

  Args:
    model: a library model (any attention variant and block options), or any
      module that follows `analysis.protocol`.
    variables: its variables ({"params": ...}); an "intermediates" collection
      in them is ignored.
    images: (B, H, W, C) inputs, run in inference mode (no dropout).

  Returns:
    A dict of NumPy arrays with a leading layer axis L (block order), per image:
      "hc_dc_ratio": (L, B) ‖HC[X_l]‖_F / ‖DC[X_l]‖_F of block l's output.
      "hc_proportion": (L, B) ‖HC[X_l]‖_F / ‖X_l‖_F.
      "token_cosine_similarity": (L, B) eq. 76 on block l's output.
      "attention_cosine_similarity": (L, B) eq. 75 (mean over heads).
      "attention_spectrum": (L, B, H, T) response per frequency, DC first.
      "attention_weights": (L, B, H, T, T) the attention maps.
    Average over axis 1 for per-layer numbers (or call `diagnose`).
  """
  stages = _per_stage(model, variables, images)
  if len(stages) == 1:
    return {k: v for k, v in stages[0].items() if k != "name"}
  out: dict[str, Any] = {k: np.concatenate([s[k] for s in stages]) for k in TOKEN_METRICS}
  out["stage"] = np.concatenate([np.full(len(s["hc_dc_ratio"]), i, np.int32)
                                 for i, s in enumerate(stages)])
  out["stages"] = stages
  return out
