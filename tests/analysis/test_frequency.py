"""DC/HC decomposition checked against an explicit DFT along the token axis."""

import numpy as np

from vit_spectral.analysis import dc, hc, hc_dc_ratio, hc_proportion


def test_dc_is_the_zero_frequency_of_the_dft_and_hc_the_rest():
  x = np.random.default_rng(0).standard_normal((3, 7, 5))
  n = x.shape[1]
  f = np.exp(-2j * np.pi * np.outer(np.arange(n), np.arange(n)) / n)  # DFT matrix
  spectrum = np.einsum("kn,bnd->bkd", f, x)
  low = spectrum.copy(); low[:, 1:] = 0
  expected_dc = np.einsum("nk,bkd->bnd", np.conj(f) / n, low).real  # inverse DFT
  np.testing.assert_allclose(dc(x), expected_dc, atol=1e-6)
  np.testing.assert_allclose(hc(x), x - expected_dc, atol=1e-6)
  # Parseval: the ratios are those of the spectrum's energy.
  e_dc = np.abs(spectrum[:, 0]) ** 2 / n
  e_all = (np.abs(spectrum) ** 2).sum((1, 2)) / n
  np.testing.assert_allclose(hc_dc_ratio(x), np.sqrt((e_all - e_dc.sum(-1)) / e_dc.sum(-1)), rtol=1e-5)
  np.testing.assert_allclose(hc_proportion(x), np.sqrt((e_all - e_dc.sum(-1)) / e_all), rtol=1e-5)


def test_constant_tokens_have_no_high_frequency():
  x = np.tile(np.arange(4.0)[None], (6, 1))
  assert float(hc_dc_ratio(x)) == 0.0
