"""Pure train and eval steps (jitted by the trainer with explicit shardings).

No `from __future__ import annotations` here: clu reads the metric classes from
the Collection annotations at runtime.
"""


from typing import Any, Callable, Optional

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from clu import metrics

from vit_spectral.training import ema
from vit_spectral.training.train_state import TrainState


@flax.struct.dataclass
class TrainMetrics(metrics.Collection):
  loss: metrics.Average.from_output("loss")
  accuracy: metrics.Average.from_output("accuracy")
  grad_norm: metrics.Average.from_output("grad_norm")
  learning_rate: metrics.LastValue.from_output("learning_rate")


@flax.struct.dataclass
class EvalMetrics(metrics.Collection):
  loss: metrics.Average.from_output("loss")
  accuracy: metrics.Average.from_output("accuracy")


def cross_entropy(logits, labels, num_classes: int, label_smoothing: float = 0.0):
  """Per-example softmax cross-entropy. labels: int (B,) or soft (B, K)."""
  if labels.ndim == 1:
    labels = jax.nn.one_hot(labels, num_classes)
  if label_smoothing:
    labels = optax.smooth_labels(labels, label_smoothing)
  return optax.softmax_cross_entropy(logits, labels)


def train_step(state: TrainState, batch: dict[str, jax.Array], *, model: nn.Module,
               tx: optax.GradientTransformation, schedule, base_rng: jax.Array,
               label_smoothing: float = 0.0, ema_decay: float = 0.0,
               mix_fn: Optional[Callable] = None, mix_rng: Optional[jax.Array] = None
               ) -> tuple[TrainState, TrainMetrics]:
  """One optimizer step on `batch` = {"image": (B,H,W,C), "label": (B,)}.

  The dropout RNG is `fold_in(base_rng, step)`, so a resumed run draws exactly
  the numbers an uninterrupted one would. Likewise `mix_fn` (Mixup/CutMix,
  `vit_spectral.training.mixing.make_mix_fn`) gets `fold_in(mix_rng, step)`. With
  `ema_decay` > 0, `state.ema_params` is updated after the step.
  """
  rng = jax.random.fold_in(base_rng, state.step)
  images, targets = batch["image"], batch["label"]
  if mix_fn is not None:
    images, targets = mix_fn(jax.random.fold_in(mix_rng, state.step), images, targets)

  def loss_fn(params):
    logits = model.apply({"params": params}, images, train=True,
                         rngs={"dropout": rng})
    loss = cross_entropy(logits, targets, logits.shape[-1], label_smoothing)
    return loss.mean(), logits

  (loss, logits), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
  updates, opt_state = tx.update(grads, state.opt_state, state.params)
  params = optax.apply_updates(state.params, updates)
  # Accuracy against the dominant class of (possibly mixed) targets.
  labels = targets if targets.ndim == 1 else targets.argmax(-1)
  step_metrics = TrainMetrics.single_from_model_output(
      loss=loss, accuracy=(logits.argmax(-1) == labels).astype(jnp.float32),
      grad_norm=optax.global_norm(grads), learning_rate=schedule(state.step))
  new_state = state.replace(step=state.step + 1, params=params, opt_state=opt_state)
  if ema_decay:
    new_state = new_state.replace(
        ema_params=ema.update(state.ema_params, params, ema_decay))
  return new_state, step_metrics


def eval_step(params: Any, batch: dict[str, jax.Array], *, model: nn.Module) -> EvalMetrics:
  """Metrics on `batch` = {"image", "label", "mask"}; padded examples (mask False) count zero."""
  logits = model.apply({"params": params}, batch["image"], train=False)
  loss = cross_entropy(logits, batch["label"], logits.shape[-1])
  correct = (logits.argmax(-1) == batch["label"]).astype(jnp.float32)
  return EvalMetrics.single_from_model_output(loss=loss, accuracy=correct,
                                              mask=batch["mask"])
