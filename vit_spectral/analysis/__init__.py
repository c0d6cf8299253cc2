"""The papers' diagnostics: pure functions on arrays, and a probe that runs a model.

Each function cites the paper and equation it implements.
"""

from vit_spectral.analysis.attention_spectrum import attention_spectrum
from vit_spectral.analysis.frequency import dc, hc, hc_dc_ratio, hc_proportion
from vit_spectral.analysis.attention_centres import gaussian_heads, plot_attention_centres
from vit_spectral.analysis.head_pruning import degenerate_heads, prune_heads
from vit_spectral.analysis.probe import probe
from vit_spectral.analysis.similarity import attention_cosine_similarity, token_cosine_similarity
from vit_spectral.analysis.smoothing import smoothing_rate_bound
from vit_spectral.analysis.rank import attention_entropy, norm_1_inf, rank_residual_ratio, token_cosine_values, token_residual
from vit_spectral.analysis.lipschitz import (
    LipschitzReport, empirical_lipschitz, exp_kappa_bound, lipsformer_lipschitz_bound,
    multihead_scsa_lipschitz_bound, scsa_lipschitz_bound, vit_lipschitz_bound)
