"""Mixup and CutMix on the device, one draw per batch (as timm's `Mixup` in mode
"batch", which DeiT uses).

The batch is mixed with itself reversed (example i with example B-1-i):

  Mixup (Zhang et al., 2018):  x = lam x + (1 - lam) x[::-1],  lam ~ Beta(a_m, a_m)
  CutMix (Yun et al., 2019):   a box of area ~ (1 - lam) H W, lam ~ Beta(a_c, a_c),
                               is pasted from x[::-1]; lam is then recomputed as the
                               exact unpasted area fraction (timm's correct_lam).
  labels:                      y = lam onehot(y) + (1 - lam) onehot(y[::-1])

When both alphas are positive, CutMix is chosen with probability `switch_prob`
(else Mixup); with probability 1 - `prob` the batch is left unmixed (lam = 1).
Label smoothing is not applied here: the loss smooths the mixed labels, which
equals timm's smoothing of each one-hot before mixing because smoothing is
affine and the weights sum to 1.

All randomness comes from the `rng` argument; the trainer passes
`fold_in(mix_rng, step)`, so a resumed run mixes exactly as an uninterrupted one.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

from vit_spectral import settings as settings_lib


from vit_spectral.sections.mix import MixSettings  # noqa: E402,F401  (re-exported)


def cutmix_box_mask(rng: jax.Array, height: int, width: int, lam: jax.Array
                    ) -> jax.Array:
  """A boolean (H, W) mask, True inside a box of side ~ sqrt(1 - lam).

  timm's `rand_bbox`: cut_h = int(H sqrt(1 - lam)), the centre uniform over the
  image, the box clipped at the borders (so it can be smaller than cut_h).
  """
  cut = jnp.sqrt(1.0 - lam)
  cut_h = jnp.floor(height * cut).astype(jnp.int32)
  cut_w = jnp.floor(width * cut).astype(jnp.int32)
  ky, kx = jax.random.split(rng)
  cy = jax.random.randint(ky, (), 0, height)
  cx = jax.random.randint(kx, (), 0, width)
  top = jnp.clip(cy - cut_h // 2, 0, height)
  bottom = jnp.clip(cy + cut_h // 2, 0, height)
  left = jnp.clip(cx - cut_w // 2, 0, width)
  right = jnp.clip(cx + cut_w // 2, 0, width)
  rows = jnp.arange(height)[:, None]
  cols = jnp.arange(width)[None, :]
  return (rows >= top) & (rows < bottom) & (cols >= left) & (cols < right)


def mix_batch(rng: jax.Array, images: jax.Array, labels: jax.Array,
              num_classes: int, settings: MixSettings
              ) -> tuple[jax.Array, jax.Array]:
  """Mixes a batch with its reverse (Mixup or CutMix, see the module doc).

  Args:
    rng: a PRNG key; the only source of randomness.
    images: (B, H, W, C) float.
    labels: int (B,) class indices, or (B, K) soft labels.
    num_classes: K.
    settings: which mixing, with which parameters.

  Returns:
    (images (B, H, W, C) same dtype, labels float32 (B, K)); every label row
    sums to 1 (exactly its input's sum when soft labels come in).
  """
  if labels.ndim == 1:
    labels = jax.nn.one_hot(labels, num_classes, dtype=jnp.float32)
  labels = labels.astype(jnp.float32)
  if not settings.enabled:
    return images, labels
  k_apply, k_switch, k_mixup, k_cutmix, k_box = jax.random.split(rng, 5)
  height, width = images.shape[1:3]

  if settings.mixup_alpha > 0 and settings.cutmix_alpha > 0:
    use_cutmix = jax.random.uniform(k_switch) < settings.switch_prob
  else:
    use_cutmix = jnp.asarray(settings.cutmix_alpha > 0)

  def beta(key, alpha):
    # An alpha of 0 never gets used (use_cutmix picks the other); draw with 1.
    return jax.random.beta(key, alpha or 1.0, alpha or 1.0)

  lam_mixup = beta(k_mixup, settings.mixup_alpha)
  lam_cutmix_drawn = beta(k_cutmix, settings.cutmix_alpha)
  box = cutmix_box_mask(k_box, height, width, lam_cutmix_drawn)
  lam_cutmix = 1.0 - box.mean(dtype=jnp.float32)
  mixed = jax.random.uniform(k_apply) < settings.prob
  lam = jnp.where(mixed, jnp.where(use_cutmix, lam_cutmix, lam_mixup), 1.0)

  flipped = images[::-1]
  blended = (lam_mixup * images + (1.0 - lam_mixup) * flipped).astype(images.dtype)
  pasted = jnp.where(box[None, :, :, None], flipped, images)
  out = jnp.where(mixed, jnp.where(use_cutmix, pasted, blended), images)
  out_labels = lam * labels + (1.0 - lam) * labels[::-1]
  return out, out_labels


def make_mix_fn(mixup: MixSettings | Any, num_classes: int
                ) -> Callable[[jax.Array, jax.Array, jax.Array],
                              tuple[jax.Array, jax.Array]] | None:
  """`(rng, images, labels) -> (images, soft labels)`, or None when mixing is off.

  `mixup` is a MixSettings or `config.mixup` (converted here).
  """
  settings = settings_lib.as_settings(MixSettings, mixup)
  if not settings.enabled:
    return None
  return lambda rng, images, labels: mix_batch(rng, images, labels, num_classes,
                                               settings)
