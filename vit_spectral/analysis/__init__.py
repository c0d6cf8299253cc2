"""The papers' diagnostics: pure functions on arrays, and a probe that runs a model.

Each function cites the paper and equation it implements.
"""

from vit_spectral.analysis.frequency import dc, hc, hc_dc_ratio, hc_proportion
from vit_spectral.analysis.rank import attention_entropy, norm_1_inf, rank_residual_ratio, token_cosine_values, token_residual
