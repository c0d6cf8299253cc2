"""The papers' diagnostics: `diagnose` runs any Flax model, pure functions do the maths.

    d = analysis.diagnose(model, variables, images)     # any model, any checkpoint
    d.to_frame(); d.per_layer(); d.plot()
    analysis.compare({"baseline": d0, "attn_scale": d1}).plot()

Each function cites the paper and equation it implements.

  diagnosis           `diagnose`, `Diagnosis`, `compare`: every per-layer metric
                      of a model on images, streamed, compiled once
  protocol            what a model sows to be diagnosable (`diagnosable`,
                      `sow_attention`)
  layer_metrics       the metric names and the one function of each
  plots               per-layer figures of one model or several

  frequency           DC/HC decomposition and ratios (paper 000, Def. 1, App. G.3)
  attention_spectrum  row norms of F·A·F⁻¹ (paper 000, App. F.2)
  similarity          attention and token cosine similarity (paper 000, eqs. 75-76)
  smoothing           the smoothing-rate bound (paper 000, Thm. 3)
  rank                rank-collapse residuals, token cosines, entropy (paper 004)
  eigen               dominating eigenvalues, asymmetry and condition of H (paper 003)
  lipschitz           Lipschitz bounds and an empirical estimate (paper 001)
  attention_centres   Gaussian head centres and their plot (paper 002)
  head_pruning        degenerate Gaussian heads and their pruning (paper 002)
  probe               `probe`, `probe_stages`: per-image values, thin names over
                      `diagnose`
"""

from vit_spectral.analysis.attention_centres import gaussian_heads, plot_attention_centres
from vit_spectral.analysis.attention_spectrum import attention_spectrum
from vit_spectral.analysis.diagnosis import Comparison, Diagnosis, compare, diagnose
from vit_spectral.analysis.layer_metrics import known_metric_names
from vit_spectral.analysis.plots import plot_diagnoses, plot_spectra
from vit_spectral.analysis.protocol import diagnosable, sow_attention
from vit_spectral.analysis.eigen import (
    Dominating, DominatingCounts, asymmetry, condition_number, dominating_counts, dominating_eigenvalue,
    dominating_from_spectra, h_matrix, head_h_spectra, layer_kernels, perron_index,
    theorem4_dominating)
from vit_spectral.analysis.frequency import dc, hc, hc_dc_ratio, hc_proportion
from vit_spectral.analysis.head_pruning import degenerate_heads, prune_heads, remove_heads
from vit_spectral.analysis.lipschitz import (
    Branch, LipschitzReport, block_branches, empirical_lipschitz, exp_kappa_bound,
    gelu_lipschitz, lipsformer_lipschitz_bound, matrix_norm,
    multihead_scsa_lipschitz_bound, norm_lipschitz, scsa_lipschitz_bound,
    vit_lipschitz_bound)
from vit_spectral.analysis.probe import probe, probe_stages
from vit_spectral.analysis.rank import (
    attention_entropy, norm_1_inf, rank_residual_ratio, token_cosine_values, token_residual)
from vit_spectral.analysis.similarity import (
    attention_cosine_similarity, cosine_gram, token_cosine_similarity)
from vit_spectral.analysis.smoothing import smoothing_rate_bound

__all__ = [
    "Branch", "Comparison", "Diagnosis", "Dominating", "DominatingCounts", "LipschitzReport", "asymmetry",
    "attention_cosine_similarity", "attention_entropy", "attention_spectrum",
    "block_branches", "compare", "condition_number", "cosine_gram", "dc", "degenerate_heads", "diagnosable", "diagnose", "dominating_counts",
    "dominating_eigenvalue", "dominating_from_spectra", "empirical_lipschitz",
    "exp_kappa_bound", "gaussian_heads", "gelu_lipschitz", "h_matrix", "hc",
    "hc_dc_ratio", "hc_proportion", "head_h_spectra", "known_metric_names", "layer_kernels",
    "lipsformer_lipschitz_bound", "load_workdir", "matrix_norm", "multihead_scsa_lipschitz_bound",
    "norm_1_inf", "norm_lipschitz", "perron_index", "plot_attention_centres", "plot_diagnoses", "plot_spectra", "probe", "probe_stages",
    "prune_heads", "rank_residual_ratio", "remove_heads", "scsa_lipschitz_bound",
    "smoothing_rate_bound", "sow_attention", "theorem4_dominating", "token_cosine_similarity",
    "token_cosine_values", "token_residual", "vit_lipschitz_bound",
]


def __getattr__(name: str):
  """`load_workdir` lives above analysis and training (`vit_spectral.workdir`,
  which reads the trainer's checkpoints); it stays importable from here."""
  if name == "load_workdir":
    from vit_spectral.workdir import load_workdir  # pylint: disable=import-outside-toplevel
    return load_workdir
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
