"""Per-layer figures of `Diagnosis` results, one model or several side by side.

`plot_diagnoses({"baseline": d0, "attn_scale": d1})` draws one panel per
metric, the layer on the x axis and one line per model: the papers'
per-layer curves (paper 000 Fig. 4: HC/DC; Fig. 12: token and attention
cosine; paper 004 Fig. 2 and App. I: rank residual and entropy; App. F.2:
the attention maps' high-frequency response over DC). Stage boundaries of
hierarchical backbones are dotted lines. A pyplot-free Figure: no backend is
switched, so notebooks keep theirs and scripts need no display.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

__all__ = ["DEFAULT_PLOT_METRICS", "plot_diagnoses", "plot_spectra"]

DEFAULT_PLOT_METRICS = ("hc_dc_ratio", "token_cosine_similarity", "attention_cosine_similarity",
                        "rank_residual_ratio", "attention_entropy", "attention_spectrum_hf_dc")
_LABELS = {
    "hc_dc_ratio": "‖HC‖/‖DC‖ of the block output (000 Def. 1)",
    "hc_proportion": "‖HC‖/‖X‖ (000 App. G.3)",
    "token_cosine_similarity": "token cosine (000 eq. 76)",
    "attention_cosine_similarity": "attention cosine (000 eq. 75)",
    "rank_residual_ratio": "rank residual ‖Res‖/‖X‖ (004 eq. 61)",
    "attention_entropy": "attention entropy, nats (004 App. I)",
    "attention_spectrum_hf_dc": "attention HF/DC response (000 App. F.2)",
    "attention_spectrum_dc": "attention DC response (000 App. F.2)",
    "attention_spectrum_hf": "attention HF response (000 App. F.2)",
    "attention_lowpass": "share of low-pass maps (000 Thm. 1)",
    "h_cond": "cond(H) (003 Fig. 5)",
    "h_asymmetry": "asymmetry of H (003 Fig. 2)",
}


def plot_diagnoses(diagnoses: Mapping[str, "Diagnosis"], metrics: Sequence[str] | None = None):
  """One panel per metric, one line per model; returns the matplotlib Figure.

  Args:
    diagnoses: label -> `Diagnosis` (the label names the line).
    metrics: the metrics to draw; None = those of DEFAULT_PLOT_METRICS that
      any of the models has.

  Raises:
    KeyError: a metric no model has (names the ones there are).
  """
  from matplotlib.figure import Figure
  from matplotlib.ticker import MaxNLocator

  if not diagnoses:
    raise ValueError("plot_diagnoses needs at least one Diagnosis")
  available = list(dict.fromkeys(m for d in diagnoses.values() for m in d.metric_names()))
  if metrics is None:
    metrics = [m for m in DEFAULT_PLOT_METRICS if m in available]
  for metric in metrics:
    if metric not in available:
      raise KeyError(f"no model has the metric {metric!r}; they have {available}")
  cols = min(3, len(metrics))
  rows = -(-len(metrics) // cols)
  fig = Figure(figsize=(4.2 * cols, 3.2 * rows), layout="constrained")
  axes = fig.subplots(rows, cols, squeeze=False).ravel()
  for ax, metric in zip(axes, metrics):
    for k, (label, d) in enumerate(diagnoses.items()):
      if not any(metric in layer for layer in d.layers):
        continue
      layers = np.arange(d.num_layers)      # from 0, as to_frame's "layer" and layer_00
      ax.plot(layers, d.values(metric), "o-", ms=3, lw=1.2, color=f"C{k % 10}", label=label)
      for boundary in np.flatnonzero(np.diff(d.stage)) + 0.5:
        ax.axvline(boundary, color=f"C{k % 10}", ls=":", lw=0.8)
    ax.set_title(_LABELS.get(metric, metric), fontsize=9)
    ax.set_xlabel("layer")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, lw=0.3)
    if metric.endswith("cosine_similarity") or metric == "attention_lowpass":
      ax.set_ylim(0, 1.02)
  for ax in axes[len(metrics):]:
    ax.set_visible(False)
  axes[0].legend(fontsize=7)
  counts = sorted({d.num_images for d in diagnoses.values()})
  fig.suptitle(f"per-layer diagnostics ({', '.join(map(str, counts))} images)", fontsize=10)
  return fig


def plot_spectra(diagnosis: "Diagnosis"):
  """Each layer's attention spectrum, ‖Λ_k‖₂ over the frequency bands k (DC at
  0), the mean over images and heads (paper 000, Figs. 2, 5, 9–10: a low-pass
  map has its largest response at DC); returns the matplotlib Figure.

  Raises:
    KeyError: the Diagnosis has no "attention_spectrum" (diagnose it with
      that metric).
  """
  from matplotlib.figure import Figure

  layers = [(i, np.asarray(layer["attention_spectrum"]).mean(axis=0))
            for i, layer in enumerate(diagnosis.layers) if "attention_spectrum" in layer]
  if not layers:
    raise KeyError(f"{diagnosis.model} has no 'attention_spectrum'; diagnose it with that "
                   "metric (the default set has it)")
  fig = Figure(figsize=(6.0, 3.8), layout="constrained")
  ax = fig.subplots()
  colors = np.linspace(0.1, 0.9, len(layers))
  import matplotlib
  cmap = matplotlib.colormaps["viridis"]
  for (index, spectrum), shade in zip(layers, colors):
    ax.plot(np.arange(len(spectrum)), spectrum, "-", lw=1.0, color=cmap(shade),
            label=f"layer {index}")
  ax.set_xlabel("frequency band k (0 = DC)")
  ax.set_ylabel("response ‖Λ_k‖₂ of F A F⁻¹")
  ax.set_title(f"{diagnosis.model}: attention spectrum per layer (000 App. F.2)", fontsize=9)
  ax.grid(True, lw=0.3)
  ax.legend(fontsize=6, ncol=2 if len(layers) > 8 else 1)
  return fig
