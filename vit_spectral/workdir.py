"""A trainer run as something to analyse: `load_workdir(path) -> (model, variables, config)`.

    model, variables, config = analysis.load_workdir("workdir/digits_vit")
    d = analysis.diagnose(model, variables, images)

Reads the workdir's `config.json` (the config of its latest run) and its
newest finished checkpoint (or `step`), checked against the fingerprint saved
with it; a run still training can be read (only finished steps are listed).
The model is built from `config.model` with the head the checkpoint holds
(its class count is read from the parameters, so no data set is needed), in
the layout the run stored (scan or loop), and the parameters are the EMA's
when the run keeps one (`params="auto"`), or as asked.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import ml_collections
import numpy as np


__all__ = ["PARAMS_CHOICES", "WorkdirRun", "load_workdir", "read_workdir"]

PARAMS_CHOICES = ("auto", "ema", "raw")


@dataclasses.dataclass(frozen=True)
class WorkdirRun:
  """What `read_workdir` found: the model, its variables and config, and
  which parameters of which step they are ("ema" or "raw")."""
  model: Any
  variables: dict[str, Any]
  config: ml_collections.ConfigDict
  step: int
  params: str


def _num_classes(params) -> int:
  head = params.get("head", {}) if hasattr(params, "get") else {}
  kernel = head.get("kernel") if hasattr(head, "get") else None
  return 0 if kernel is None else int(np.shape(kernel)[-1])


def read_workdir(path: str, *, params: str = "auto", step: int | None = None) -> WorkdirRun:
  """`load_workdir` with the step and which parameters it read.

  Raises:
    FileNotFoundError: `path` is not a directory, has no config.json (not a
      trainer workdir), or holds no finished checkpoint (or not `step`).
    ValueError: `params` is not one of PARAMS_CHOICES, or "ema" for a run
      without EMA.
    errors.CheckpointReadError: the checkpoint's bytes are damaged.
  """
  # Imported here: `vit-spectral-analyse` reads PARAMS_CHOICES before JAX.
  from vit_spectral.durability import checkpointing  # pylint: disable=import-outside-toplevel
  from vit_spectral.durability.resume import CONFIG_NAME  # pylint: disable=import-outside-toplevel
  from vit_spectral.models.build import build_model  # pylint: disable=import-outside-toplevel

  if params not in PARAMS_CHOICES:
    raise ValueError(f"params={params!r}; choose one of {list(PARAMS_CHOICES)}")
  if not os.path.isdir(path):
    raise FileNotFoundError(f"workdir {path} does not exist")
  config_path = os.path.join(path, CONFIG_NAME)
  if not os.path.exists(config_path):
    raise FileNotFoundError(f"{path} is not a trainer workdir: it has no {CONFIG_NAME} "
                            "(train.py writes it once the run's first step has run)")
  with open(config_path) as f:
    config = ml_collections.ConfigDict(json.load(f))
  state, step = checkpointing.latest_state(path, step)
  has_ema = state.get("ema_params") is not None
  if params == "ema" and not has_ema:
    raise ValueError(f"params='ema', but the run in {path} keeps no EMA parameters "
                     "(config.ema_decay is 0); use params='raw' or 'auto'")
  which = "ema" if has_ema and params != "raw" else "raw"
  tree = state["ema_params" if which == "ema" else "params"]
  model = build_model(config.model, _num_classes(tree))
  return WorkdirRun(model, {"params": tree}, config, int(step), which)


def load_workdir(path: str, *, params: str = "auto", step: int | None = None):
  """A trainer workdir's model, variables and config, ready for `diagnose`.

  Args:
    path: the workdir of a finished or running `train.py` run.
    params: "auto" (the EMA parameters when the run keeps them, else the
      raw ones), "ema" or "raw".
    step: the checkpoint step; None = the newest finished one.

  Returns:
    (model, {"params": ...} host arrays, config) with config the run's
    `config.json` as a ConfigDict.

  Raises:
    FileNotFoundError: as `read_workdir`.
    ValueError: as `read_workdir`.
    errors.CheckpointReadError: as `read_workdir`.
  """
  run = read_workdir(path, params=params, step=step)
  return run.model, run.variables, run.config
