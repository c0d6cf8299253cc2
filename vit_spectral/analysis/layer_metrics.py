"""Every per-layer diagnostic, once: the metric names `diagnose`, `probe` and the
trainer's live diagnostics share, and the one function that computes them.

Token metrics: on a block's output X (..., T, D), one number per image.

  hc_dc_ratio                  ‖HC[X]‖_F / ‖DC[X]‖_F (paper 000, Def. 1; paper 003's
                               HFC/LFC, Fig. 4)
  hc_proportion                ‖HC[X]‖_F / ‖X‖_F (paper 000, App. G.3)
  token_cosine_similarity      mean |cos| between distinct tokens (paper 000, eq. 76)
  rank_residual_ratio          ‖Res(X)‖_{1,∞} / ‖X‖_{1,∞} (paper 004, eq. 61)

Map metrics: on an attention map A (..., H, N, N), one number per map and head
(per window where the attention is windowed: the window is its whole input).

  attention_cosine_similarity  mean |cos| between distinct columns (paper 000,
                               eq. 75; the paper's figure is the mean over heads)
  attention_entropy            mean over queries of the row entropy, nats (paper
                               004, App. I; only p > 0 terms: AttnScale's Â, paper
                               000 eq. 9, has a few negative entries)
  attention_spectrum_dc        ‖Λ_0‖₂, the DC row of Λ = F A F⁻¹ (paper 000, App. F.2)
  attention_spectrum_hf        mean of ‖Λ_k‖₂ over the frequencies k ≥ 1
  attention_spectrum_hf_dc     attention_spectrum_hf / attention_spectrum_dc per map
  attention_lowpass            1 when DC is the largest response, else 0 (Thm. 1:
                               every softmax map is a low-pass filter); its mean is
                               the share of low-pass maps

Vector: attention_spectrum, ‖Λ_k‖₂ for every k (..., H, N), DC first.

`parameter_metrics` (a library layer's weights: paper 003's H, FeatScale's
s and t, what attention variants declare) and `declared_sown_metrics` (the
scalars a variant sows) complete the set; `known_metric_names` lists all.
"""

from __future__ import annotations

import difflib
from typing import Any, Callable, Iterable, Mapping

import jax.numpy as jnp

from vit_spectral.analysis.attention_spectrum import attention_spectrum
from vit_spectral.analysis.eigen import asymmetry, condition_number, h_matrix
from vit_spectral.analysis.frequency import hc_dc_ratio, hc_proportion
from vit_spectral.analysis.protocol import OUTPUT_KEY
from vit_spectral.analysis.rank import attention_entropy, rank_residual_ratio
from vit_spectral.analysis.similarity import attention_cosine_similarity, token_cosine_similarity
from vit_spectral.attention.registry import get_attention, registered_attentions
from vit_spectral.attention.value_output import PSI, ValueOutput, eigenvalues, value_output_kernels
from vit_spectral.layers.feat_scale import FeatScale
from vit_spectral.models.token_layouts import ATTENTION_MODULE

__all__ = ["MAP_METRICS", "PARAMETER_METRICS", "SPECTRUM", "TOKEN_METRICS", "check_metrics",
           "declared_sown_metrics", "known_metric_names", "map_metrics", "parameter_metrics",
           "token_metrics"]

TOKEN_METRICS: dict[str, Callable] = {
    "hc_dc_ratio": hc_dc_ratio,                                  # 000 Def. 1
    "hc_proportion": hc_proportion,                              # 000 App. G.3
    "token_cosine_similarity": token_cosine_similarity,          # 000 eq. 76
    "rank_residual_ratio": rank_residual_ratio,                  # 004 eq. 61
}
SPECTRUM = "attention_spectrum"
_SPECTRUM_METRICS = ("attention_spectrum_dc", "attention_spectrum_hf", "attention_spectrum_hf_dc",
                     "attention_lowpass")
MAP_METRICS = ("attention_cosine_similarity", "attention_entropy", *_SPECTRUM_METRICS)
PARAMETER_METRICS = ("h_cond", "h_asymmetry", "h_eig_min", "h_eig_max")


def token_metrics(x, names: Iterable[str]) -> dict[str, Any]:
  """x: (..., T, D) tokens -> {name: (...)} float32, for the TOKEN_METRICS named."""
  x = jnp.asarray(x).astype(jnp.float32)
  return {name: TOKEN_METRICS[name](x) for name in names if name in TOKEN_METRICS}


def map_metrics(a, names: Iterable[str]) -> dict[str, Any]:
  """a: (..., H, N, N) maps -> {name: (..., H)} for the MAP_METRICS named, and
  SPECTRUM (..., H, N) when named. The spectrum is computed once for all."""
  a = jnp.asarray(a).astype(jnp.float32)
  names = set(names)
  out = {}
  if "attention_cosine_similarity" in names:                     # 000 eq. 75, per head
    out["attention_cosine_similarity"] = attention_cosine_similarity(a[..., None, :, :])
  if "attention_entropy" in names:                               # 004 App. I
    out["attention_entropy"] = attention_entropy(a)
  if names & {SPECTRUM, *_SPECTRUM_METRICS}:
    spectrum = attention_spectrum(a)                             # 000 App. F.2, (..., H, N)
    dc, rest = spectrum[..., 0], spectrum[..., 1:]
    hf = rest.mean(axis=-1) if rest.shape[-1] else jnp.zeros_like(dc)
    derived = {
        SPECTRUM: spectrum,
        "attention_spectrum_dc": dc,
        "attention_spectrum_hf": hf,
        "attention_spectrum_hf_dc": hf / jnp.where(dc > 0, dc, 1.0),
        "attention_lowpass": (dc >= (rest.max(axis=-1) if rest.shape[-1] else dc)
                              ).astype(jnp.float32),
    }
    out.update({k: v for k, v in derived.items() if k in names})
  return out


def _summaries(stem: str, values) -> dict[str, Any]:
  values = jnp.asarray(values).astype(jnp.float32)
  return {f"{stem}_mean": values.mean(), f"{stem}_min": values.min(), f"{stem}_max": values.max()}


def parameter_metrics(tree: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
  """One library layer's weight diagnostics -> {name: () float32}.

  Args:
    tree: the layer's parameters (loop layout, `models.layouts.layer_trees`).
    fields: its `BlockSpec.as_dict()` (attention name and options, num_heads).

  Returns (each where the layer has it):
    h_cond, h_asymmetry: cond(H) and ‖(H − Hᵀ)/2‖_F / ‖(H + Hᵀ)/2‖_F of
      H = W_projᵀ W_Vᵀ (paper 003, Figs. 5 and 2);
    h_eig_min, h_eig_max: the range of Λ_H of eigen-reparameterized layers
      (paper 003, §4);
    <stem>_mean/_min/_max of each parameter the attention variant declares
      (`LOGGED_PARAMS`) and of FeatScale's s and t (paper 000, eqs. 10–12).
  """
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


def declared_sown_metrics(layer: Mapping[str, Any], attention_name: str) -> dict[str, Any]:
  """The scalars a library layer's attention variant sows and declares
  (`LOGGED_SOWN`: sown name -> metric name), per image: {name: (B,)} (a
  value sown without a batch axis is broadcast to every image)."""
  out = {}
  for sown, name in get_attention(attention_name).LOGGED_SOWN.items():
    key = f"{ATTENTION_MODULE}/{sown}"
    if key in layer:
      value = jnp.asarray(layer[key]).astype(jnp.float32)
      batch = layer[OUTPUT_KEY].shape[0]
      out[name] = (value.reshape(batch, -1).mean(axis=1) if value.size % batch == 0
                   and value.ndim else jnp.broadcast_to(value.mean(), (batch,)))
  return out


def known_metric_names() -> tuple[str, ...]:
  """Every metric name `diagnose` knows: token, map and parameter metrics, and
  those each registered attention variant and FeatScale declare."""
  declared = []
  stems = list(FeatScale.LOGGED_PARAMS.values())
  for name in registered_attentions():
    cls = get_attention(name)
    stems += list(cls.LOGGED_PARAMS.values())
    declared += list(cls.LOGGED_SOWN.values())
  summaries = [f"{stem}_{s}" for stem in stems for s in ("mean", "min", "max")]
  return tuple(dict.fromkeys((*TOKEN_METRICS, *MAP_METRICS, SPECTRUM, *PARAMETER_METRICS,
                              *summaries, *declared)))


def check_metrics(metrics: Iterable[str] | None) -> tuple[str, ...] | None:
  """`metrics` as a tuple, each a known name (None = all).

  Raises:
    ValueError: an unknown name (names the nearest known one and all of them).
  """
  if metrics is None:
    return None
  if isinstance(metrics, str):
    metrics = (metrics,)
  known = known_metric_names()
  for name in metrics:
    if name not in known:
      near = difflib.get_close_matches(name, known, n=1)
      hint = f"did you mean {near[0]!r}? " if near else ""
      raise ValueError(f"diagnose metrics: unknown metric {name!r}; {hint}choose from "
                       f"{list(known)}")
  return tuple(dict.fromkeys(metrics))
