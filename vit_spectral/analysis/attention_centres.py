"""Where each Gaussian attention head looks (paper 002, Figs. 2, 3, 7, 10).

A "quadratic" head (eq. 9) or a "gaussian" head (eq. 16) attends, around every
query pixel, with probabilities ∝ exp(−½ (δ − Δ)ᵀ Σ⁻¹ (δ − Δ)) over the shifts
δ = k − q: a bivariate Gaussian with mean Δ and covariance Σ (cut to the grid).
The plot draws, per layer, each head's centre Δ and the ellipses holding 50%
(solid) and 90% (dotted) of that Gaussian's mass, around the query pixel (black
square) — the paper's figures.

Everything reads trained variables of a ViT, in any encoder layout (scan,
segmented scan, loop; `models.layouts`).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from vit_spectral.attention.gaussian import gaussian_precision
from vit_spectral.attention.quadratic import quadratic_precision
from vit_spectral.models.layouts import layer_trees

__all__ = ["ellipse_axes", "gaussian_heads", "mass_radius", "plot_attention_centres"]


def _attention_params_per_layer(params: Mapping[str, Any]) -> list[Mapping[str, Any]]:
  """The "attention" parameter subtree of every block, in layer order."""
  if "encoder" not in params:
    raise ValueError("params have no 'encoder': pass the ViT's params "
                     "(variables['params'])")
  return [layer["attention"] for layer in layer_trees(params)]


def gaussian_heads(params: Mapping[str, Any]) -> list[dict[str, np.ndarray]]:
  """Centre and precision of every head, per layer.

  Args:
    params: a ViT's params whose attention is "quadratic" or "gaussian".

  Returns:
    One dict per layer: "centers" (H, 2) Δ (row, column shift) and "precision"
    (H, 2, 2) Σ⁻¹ (2αI for quadratic heads, S Sᵀ for gaussian heads).

  Raises:
    ValueError: the attention has no Gaussian heads (e.g. "relative_learned").
  """
  layers = []
  for attention in _attention_params_per_layer(params):
    if "log_alpha" in attention:
      precision = quadratic_precision(np.asarray(attention["log_alpha"]))
    elif "inv_sqrt_cov" in attention:
      precision = gaussian_precision(np.asarray(attention["inv_sqrt_cov"]))
    else:
      raise ValueError("attention parameters have neither 'log_alpha' nor "
                       "'inv_sqrt_cov': only the 'quadratic' and 'gaussian' "
                       "attentions have centres to plot or prune")
    layers.append({"centers": np.asarray(attention["centers"], np.float64),
                   "precision": np.asarray(precision, np.float64)})
  return layers


def mass_radius(mass: float) -> float:
  """Mahalanobis radius of the ellipse holding `mass` of a 2-D Gaussian.

  ‖Σ^{-1/2}(δ − Δ)‖² is χ² with 2 degrees of freedom: P(r² ≤ ρ²) = 1 − e^{−ρ²/2}.
  """
  if not 0.0 < mass < 1.0:
    raise ValueError(f"mass={mass} must be in (0, 1)")
  return float(np.sqrt(-2.0 * np.log1p(-mass)))


def ellipse_axes(precision: np.ndarray, mass: float):
  """Ellipse of a Gaussian with precision Σ⁻¹ (2, 2) holding `mass` of it.

  Returns:
    (semi-axes (2,), directions (2, 2) columns = unit axes in (row, col)).
    A zero precision eigenvalue gives an infinite semi-axis.
  """
  eigvals, eigvecs = np.linalg.eigh(precision)
  with np.errstate(divide="ignore"):
    semi = mass_radius(mass) / np.sqrt(np.maximum(eigvals, 0.0))
  return semi, eigvecs


def plot_attention_centres(params: Mapping[str, Any], *, extent: float | None = None,
                           masses: Sequence[float] = (0.5, 0.9), path: str | None = None,
                           title: str | None = None):
  """One panel per layer: each head's centre and its `masses` contours.

  Args:
    params: a ViT's params with "quadratic" or "gaussian" attention.
    extent: half-width of each panel in pixels of the token grid (None: fit the
      centres, at least 3).
    masses: probability masses of the contours; the first is drawn solid, the
      others dotted (the paper: 50% and 90%).
    path: if given, the figure is saved there (PNG by extension).
    title: figure title.

  Returns:
    The matplotlib Figure.
  """
  # A pyplot-free Figure: no backend is switched, so notebooks keep theirs and
  # headless machines need no display.
  import matplotlib
  from matplotlib.figure import Figure
  from matplotlib.patches import Ellipse, Rectangle

  layers = gaussian_heads(params)
  if extent is None:
    extent = max(3.0, 1.0 + max(float(np.abs(l["centers"]).max()) for l in layers))
  cols = min(len(layers), 3)
  rows = -(-len(layers) // cols)
  fig = Figure(figsize=(3.2 * cols, 3.2 * rows))
  axes = fig.subplots(rows, cols, squeeze=False)
  colors = matplotlib.colormaps["tab10" if len(layers[0]["centers"]) <= 10 else "tab20"]
  for ax in axes.flat[len(layers):]:
    ax.axis("off")
  for layer, (ax, heads) in enumerate(zip(axes.flat, layers)):
    for h, (centre, precision) in enumerate(zip(heads["centers"], heads["precision"])):
      color = colors(h)
      # Plot coordinates: x = column shift, y = row shift (rows grow downwards).
      for i, mass in enumerate(masses):
        semi, vecs = ellipse_axes(precision, mass)
        semi = np.minimum(semi, 4 * extent)       # degenerate heads: a long stripe
        angle = np.degrees(np.arctan2(vecs[0, 0], vecs[1, 0]))
        ax.add_patch(Ellipse((centre[1], centre[0]), 2 * semi[0], 2 * semi[1],
                             angle=angle, fill=False, color=color, lw=1.2,
                             ls="-" if i == 0 else ":"))
      ax.plot(centre[1], centre[0], "o", color=color, ms=3)
    ax.add_patch(Rectangle((-0.5, -0.5), 1, 1, color="black"))   # the query pixel
    ax.set_xlim(-extent, extent)
    ax.set_ylim(extent, -extent)
    ax.set_aspect("equal")
    ax.set_xticks(np.arange(-int(extent), int(extent) + 1))
    ax.set_yticks(np.arange(-int(extent), int(extent) + 1))
    ax.tick_params(labelsize=6)
    ax.grid(True, lw=0.3)
    ax.set_title(f"layer {layer + 1}", fontsize=9)
  if title:
    fig.suptitle(title, fontsize=10)
  fig.tight_layout()
  if path:
    fig.savefig(path, dpi=120)
  return fig
