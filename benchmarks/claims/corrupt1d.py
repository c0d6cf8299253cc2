"""1-D analogues of Hendrycks & Dietterich's common corruptions, for MNIST-1D.

A proxy for CIFAR-100-C (paper 003, Table 4), not the benchmark: of its 15
corruptions only those that have a meaning on a 1-D signal are kept. Each
signal is scaled to [0, 1] by its own minimum and maximum (an image's pixel
range), corrupted by the formula and the five severities of
`make_cifar_c.py` (github.com/hendrycks/robustness, ImageNet-C/create_c: the
CIFAR version, the one CIFAR-100-C was made with), clipped to [0, 1] as there,
and scaled back. The source of each:

  gaussian_noise  x + N(0, c²)                 make_cifar_c.gaussian_noise
  shot_noise      Poisson(x c) / c             make_cifar_c.shot_noise
  impulse_noise   a share c of the samples set to 0 or 1 (half each)
                                               make_cifar_c.impulse_noise (skimage s&p)
  gaussian_blur   a Gaussian of σ = c samples (a pixel read as a sample; edges
                  'nearest', skimage's default) make_cifar_c.gaussian_blur (one of
                  its four extra corruptions: the 15's blurs are 2-D disks, glass,
                  motion and zoom)
  contrast        (x − mean) c + mean          make_cifar_c.contrast
  brightness      x + c (a grey pixel's HSV value is the pixel)
                                               make_cifar_c.brightness

Left out: defocus, glass, motion and zoom blur, snow, frost, fog, spatter,
elastic, pixelate, JPEG (2-D kernels, textures or image codecs).
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

# make_cifar_c.py's parameters, severities 1–5.
SEVERITIES = {
    "gaussian_noise": (0.04, 0.06, 0.08, 0.09, 0.10),
    "shot_noise": (500, 250, 100, 75, 50),
    "impulse_noise": (0.01, 0.02, 0.03, 0.05, 0.07),
    "gaussian_blur": (0.4, 0.6, 0.7, 0.8, 1.0),
    "contrast": (0.75, 0.5, 0.4, 0.3, 0.15),
    "brightness": (0.05, 0.1, 0.15, 0.2, 0.3),
}


def _gaussian_noise(u, c, rng):
  return u + rng.normal(scale=c, size=u.shape)


def _shot_noise(u, c, rng):
  return rng.poisson(u * c) / c


def _impulse_noise(u, c, rng):
  out = u.copy()
  hit = rng.random(u.shape) < c
  out[hit] = rng.random(int(hit.sum())) < 0.5
  return out


def _gaussian_blur(u, c, rng):
  del rng
  return ndimage.gaussian_filter1d(u, sigma=c, axis=-1, mode="nearest")


def _contrast(u, c, rng):
  del rng
  mean = u.mean(-1, keepdims=True)
  return (u - mean) * c + mean


def _brightness(u, c, rng):
  del rng
  return u + c


_FORMULAS = {"gaussian_noise": _gaussian_noise, "shot_noise": _shot_noise,
             "impulse_noise": _impulse_noise, "gaussian_blur": _gaussian_blur,
             "contrast": _contrast, "brightness": _brightness}


def corrupt(signals: np.ndarray, name: str, severity: int, seed: int = 0) -> np.ndarray:
  """`signals` (N, L) under corruption `name` at `severity` (1–5), each signal
  scaled to [0, 1] by its own range and back; the noise drawn from `seed`.

  Raises:
    ValueError: an unknown corruption or a severity outside 1–5.
  """
  if name not in SEVERITIES:
    raise ValueError(f"corruption={name!r}; choose one of {sorted(SEVERITIES)}")
  if not 1 <= severity <= 5:
    raise ValueError(f"severity={severity}; choose 1 … 5")
  low = signals.min(-1, keepdims=True)
  span = np.maximum(signals.max(-1, keepdims=True) - low, 1e-12)
  u = (signals - low) / span
  c = SEVERITIES[name][severity - 1]
  out = np.clip(_FORMULAS[name](u, c, np.random.default_rng(seed)), 0.0, 1.0)
  return (out * span + low).astype(signals.dtype)
