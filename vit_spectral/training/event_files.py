"""Reads the scalars a run wrote to its workdir's TensorBoard event files.

The trainer writes through clu's metric writer (`tf.summary`): train and eval
metrics (`train_loss`, `eval_accuracy`, ...), `steps_per_sec`, and with
`config.diagnostics` the per-layer `diagnostics/<metric>/layer_<ll>` scalars
(`training.diagnostics`). For notebooks and tests:

  scalars = read_scalars(workdir)                  # {tag: (steps, values)}
  steps, values = layer_series(scalars, "hc_dc_ratio")   # (S,), (S, L)
"""

from __future__ import annotations

import os
import re

import numpy as np

from vit_spectral.data.tensorflow_import import tf
from vit_spectral.training.diagnostics import TAG_PREFIX

__all__ = ["layer_series", "read_scalars"]

_EVENTS = "events.out.tfevents."


def _event_files(workdir: str) -> list[str]:
  found = []
  for root, _, files in os.walk(workdir):
    found += [os.path.join(root, name) for name in files if name.startswith(_EVENTS)]
  return sorted(found)


def read_scalars(workdir: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
  """Every scalar tag in the event files under `workdir`.

  A step written twice (a run resumed from a checkpoint before that step)
  keeps the value written last.

  Returns:
    {tag: (steps int64 (S,), values float64 (S,))}, steps ascending.

  Raises:
    FileNotFoundError: no event files under `workdir`.
  """
  files = _event_files(workdir)
  if not files:
    raise FileNotFoundError(f"no TensorBoard event files ({_EVENTS}*) under {workdir}")
  latest: dict[str, dict[int, tuple[float, float]]] = {}
  for path in files:
    for record in tf.data.TFRecordDataset(path):
      event = tf.compat.v1.Event.FromString(record.numpy())
      for value in event.summary.value:
        if value.HasField("tensor"):
          array = tf.make_ndarray(value.tensor)
          if array.size != 1 or array.dtype.kind not in "fiu":
            continue  # text, images, histograms: not scalars
          number = float(array.reshape(()))
        elif value.HasField("simple_value"):
          number = float(value.simple_value)
        else:
          continue
        series = latest.setdefault(value.tag, {})
        previous = series.get(event.step)
        if previous is None or event.wall_time >= previous[0]:
          series[event.step] = (event.wall_time, number)
  out = {}
  for tag, series in latest.items():
    steps = np.array(sorted(series), np.int64)
    out[tag] = steps, np.array([series[s][1] for s in steps], np.float64)
  return out


def layer_series(scalars: dict[str, tuple[np.ndarray, np.ndarray]],
                 metric: str) -> tuple[np.ndarray, np.ndarray]:
  """One diagnostic over training, layer by layer.

  Args:
    scalars: `read_scalars(workdir)`.
    metric: a diagnostics metric name, e.g. "hc_dc_ratio" (`training.diagnostics`).

  Returns:
    (steps (S,), values (S, L)): the steps at which every layer that has the
    metric logged it, and the values, layers in block order (L = the layers
    that have the metric, e.g. only the AttnScale ones).

  Raises:
    KeyError: no layer logged `metric` (the error lists the metrics present).
  """
  pattern = re.compile(rf"{TAG_PREFIX}/{re.escape(metric)}/layer_(\d+)")
  layers = sorted((int(m.group(1)), tag) for tag in scalars if (m := pattern.fullmatch(tag)))
  if not layers:
    present = sorted({tag.split("/")[1] for tag in scalars if tag.startswith(f"{TAG_PREFIX}/")})
    raise KeyError(f"no diagnostics/{metric}/layer_* scalars; the diagnostics logged: "
                   f"{present or 'none (is config.diagnostics.every set?)'}")
  steps = sorted(set.intersection(*(set(scalars[tag][0].tolist()) for _, tag in layers)))
  values = np.stack([
      np.array([dict(zip(*map(np.ndarray.tolist, scalars[tag])))[s] for s in steps])
      for _, tag in layers], axis=1)
  return np.array(steps, np.int64), values
