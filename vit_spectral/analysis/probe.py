"""Runs a model once and reads the paper-000 diagnostics from what its blocks sow.

Every block sows its output tokens ("block_output", (B, T, D)) and its attention
map ("attention/attention_weights", (B, H, T, T); Â for AttnScale), so one
forward pass with `mutable=["intermediates"]` is enough. Token statistics use all
T tokens, CLS included (n in the paper counts every token).

Backbones with stages (Swin, CSwin: one encoder per stage, `models.
intermediates.per_stage`) and windowed attention: the token statistics are
taken per layer on the whole image's tokens (HC/DC, token cosine: one number
per image and layer, stackable over every stage); the attention figures are
per window, since each window is the attention's whole input there (its DC is
the window mean): maps (B·nW, H, N, N), row b·nW + w = window w of image b,
one set per head group (CSwin's "attention_rows" / "attention_cols" stripes).
`probe` returns those per stage (`probe_stages`).
"""

from __future__ import annotations

from typing import Any, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp

from vit_spectral.analysis.attention_spectrum import attention_spectrum
from vit_spectral.analysis.frequency import hc_dc_ratio, hc_proportion
from vit_spectral.analysis.similarity import attention_cosine_similarity, token_cosine_similarity
from vit_spectral.models.intermediates import per_layer, per_stage

ATTENTION_KEY = "attention/attention_weights"
OUTPUT_KEY = "block_output"
_MAP_SUFFIX = "/attention_weights"
# Per-image token statistics: one number per image and layer at any token count.
TOKEN_METRICS = ("hc_dc_ratio", "hc_proportion", "token_cosine_similarity")


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


def _token_metrics(x) -> dict[str, jax.Array]:
  x = x.astype(jnp.float32)
  return {"hc_dc_ratio": hc_dc_ratio(x),                                  # Def. 1
          "hc_proportion": hc_proportion(x),                              # App. G.3
          "token_cosine_similarity": token_cosine_similarity(x)}          # eq. 76


def _map_metrics(a) -> dict[str, jax.Array]:
  a = a.astype(jnp.float32)
  return {"attention_cosine_similarity": attention_cosine_similarity(a),  # eq. 75
          "attention_spectrum": attention_spectrum(a),                    # App. F.2
          "attention_weights": a}


def _layer_metrics(layer: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
  return {**_token_metrics(layer[OUTPUT_KEY]), **_map_metrics(layer[ATTENTION_KEY])}


def _stage_layer_metrics(layer: Mapping[str, jax.Array], where: str) -> dict[str, jax.Array]:
  """A stage's block: token metrics of its output, map metrics per head group
  ("attention" alone keeps the plain keys; other groups prefix theirs)."""
  groups = {k[:-len(_MAP_SUFFIX)]: v for k, v in layer.items() if k.endswith(_MAP_SUFFIX)}
  if OUTPUT_KEY not in layer or not groups:
    raise KeyError(f"{where} sowed {sorted(layer)}: the diagnostics need every block to sow "
                   "its output and its attention map")
  out = _token_metrics(layer[OUTPUT_KEY])
  for group, a in groups.items():
    prefix = "" if group == "attention" else f"{group}/"
    out.update({prefix + k: v for k, v in _map_metrics(a).items()})
  return out


def probe_stages(model: nn.Module, variables: Mapping[str, Any], images
                 ) -> list[dict[str, Any]]:
  """`probe` per stage, for any library model (one entry for the ViT).

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
  inputs = {k: v for k, v in variables.items() if k != "intermediates"}
  return _probe_stages(model, inputs, images, _stage_names(model, inputs, images))


def _probe_stages(model, inputs, images, names: list[str | None]) -> list[dict[str, Any]]:
  """`probe_stages` once the stages' `names` are known (one eval_shape)."""

  @jax.jit
  def run(inputs, images):
    _, state = model.apply(inputs, images, train=False, mutable=["intermediates"])
    stages = []
    for name, layers in per_stage(state["intermediates"]):
      metrics = [_stage_layer_metrics(layer, f"block {i} of stage {name}")
                 for i, layer in enumerate(layers)]
      keys = set.intersection(*(set(m) for m in metrics))
      stages.append({k: jnp.stack([m[k] for m in metrics]) for k in sorted(keys)})
    return stages

  return [dict(arrays, name=name) for (name, arrays) in zip(names, run(inputs, images))]


def _stage_names(model, inputs, images) -> list[str | None]:
  shapes = jax.eval_shape(lambda v, x: model.apply(v, x, train=False,
                                                   mutable=["intermediates"])[1],
                          inputs, images)
  return [name for name, _ in per_stage(shapes["intermediates"])]


def probe(model: nn.Module, variables: Mapping[str, Any], images) -> dict[str, Any]:
  """Per-layer Fourier-domain diagnostics of `model` on `images` (one forward pass).

  A model with stages (Swin, CSwin) returns the layers of every stage:
  the token metrics stacked over all of them, (L, B), "stage" (L,) the stage
  index of each layer, and "stages" = `probe_stages` (the per-window
  attention figures, which cannot be stacked across stages). CaiT keeps its
  self-attention stage as the top-level "encoder" and is read as a ViT: its
  `depth` self-attention layers (the class stage's 1×T maps are not probed).

  Args:
    model: a library model (any attention variant and block options).
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
  names = _stage_names(model, inputs, images)
  if names != [None]:
    stages = _probe_stages(model, inputs, images, names)
    out: dict[str, Any] = {k: jnp.concatenate([s[k] for s in stages]) for k in TOKEN_METRICS}
    out["stage"] = jnp.concatenate([jnp.full(len(s["hc_dc_ratio"]), i, jnp.int32)
                                    for i, s in enumerate(stages)])
    out["stages"] = stages
    return out

  @jax.jit
  def run(inputs, images):
    _, state = model.apply(inputs, images, train=False, mutable=["intermediates"])
    layers = [_layer_metrics(layer) for layer in sown_blocks(state["intermediates"])]
    return {key: jnp.stack([m[key] for m in layers]) for key in layers[0]}

  return run(inputs, images)
