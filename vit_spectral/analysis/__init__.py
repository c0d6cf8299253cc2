"""The papers' diagnostics: pure functions on arrays, and a probe that runs a model.

Each function cites the paper and equation it implements.
"""

from vit_spectral.analysis.frequency import dc, hc, hc_dc_ratio, hc_proportion
from vit_spectral.analysis.lipschitz import (
    LipschitzReport, empirical_lipschitz, exp_kappa_bound, lipsformer_lipschitz_bound,
    multihead_scsa_lipschitz_bound, scsa_lipschitz_bound, vit_lipschitz_bound)
