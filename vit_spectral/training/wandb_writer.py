"""A Weights & Biases metric writer beside clu's default one (`config.logging.wandb`).

    with wandb_writer.run_writer(settings.logging, workdir, config) as writer:
      ...  # clu's default writer (TensorBoard + logging), and on process 0
           # with config.logging.wandb set a `WandbWriter` too (clu's MultiWriter)

wandb is imported only when `logging.wandb` is set (`import_wandb`: one line
naming the extra when it is not installed). A resumed run continues the same
W&B run: the first run of a workdir draws a run id and stores it in
`<workdir>/wandb_run_id`; every later run there passes that id with
`resume="allow"` (offline, each run writes its own `wandb/offline-run-*-<id>/`,
and `wandb sync` uploads them into the one run, in the order they started).
W&B's files go to the workdir (`wandb/`) unless WANDB_DIR names another folder
(a remote workdir, gs://..., leaves them to W&B's default: ./wandb).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import string
from typing import Any, Iterator, Mapping

import jax
import numpy as np
from absl import logging
from clu import metric_writers
from clu.metric_writers import interface
from etils import epath

from vit_spectral import errors
from vit_spectral.durability import resume
from vit_spectral.sections.logging import LoggingSettings

__all__ = ["INSTALL_COMMAND", "RUN_ID_FILE", "WandbWriter", "check_installed", "import_wandb",
           "run_writer", "start_run", "stored_run_id"]

INSTALL_COMMAND = 'pip install "vit_spectral[wandb]"'
RUN_ID_FILE = "wandb_run_id"  # in the workdir: the W&B run a resume continues
_ID_CHARACTERS = string.ascii_lowercase + string.digits  # a subset of what W&B ids allow
_ID_LENGTH = 8


def import_wandb(settings: LoggingSettings) -> Any:
  """The wandb module, for `settings.wandb` set.

  Raises:
    errors.ConfigError: wandb is not installed (one line naming the extra).
  """
  try:
    import wandb  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise errors.ConfigError(
        f"config.logging.wandb={settings.wandb!r} needs the wandb package, which is not "
        f"installed: {INSTALL_COMMAND}") from e
  return wandb


def stored_run_id(workdir: str) -> str | None:
  """The W&B run id an earlier run in `workdir` stored, or None."""
  path = epath.Path(workdir) / RUN_ID_FILE
  return path.read_text().strip() if path.exists() else None


def _run_id(workdir: str) -> str:
  """The workdir's W&B run id, drawn and stored on its first run."""
  run_id = stored_run_id(workdir)
  if run_id:
    return run_id
  run_id = "".join(secrets.choice(_ID_CHARACTERS) for _ in range(_ID_LENGTH))
  (epath.Path(workdir) / RUN_ID_FILE).write_text(run_id + "\n")
  return run_id


def _files_dir(workdir: str) -> str | None:
  """Where W&B writes its files (in `wandb/` there): WANDB_DIR when set, else
  the workdir, unless that is remote (gs://...: W&B writes local files) and
  W&B's default (the current directory) holds. Read at each start, as W&B
  itself reads WANDB_DIR only once per process."""
  chosen = os.environ.get("WANDB_DIR") or workdir
  return None if "://" in chosen else chosen


class WandbWriter(interface.MetricWriter):
  """A clu `MetricWriter` onto a started W&B run (`start_run`).

  Values written for one step (train and eval metrics, say) become one row of
  the run's history, at that step. W&B keeps steps increasing: a step written
  again (after a rollback, or a resume from a checkpoint before the last step
  logged) is dropped with W&B's warning; the TensorBoard files hold both writes.
  """

  def __init__(self, run: Any, wandb: Any):
    self._run = run
    self._wandb = wandb

  @property
  def run(self) -> Any:
    return self._run

  def write_scalars(self, step: int, scalars: Mapping[str, Any]):
    self._run.log({k: np.asarray(v).item() for k, v in scalars.items()}, step=step)

  def write_images(self, step: int, images: Mapping[str, Any]):
    """Images (N, H, W, C) or (H, W, C), C 1 or 3, as a list of W&B images per key."""
    logged = {}
    for key, value in images.items():
      array = np.asarray(value)
      batch = array if array.ndim == 4 else array[None]
      logged[key] = [self._wandb.Image(image) for image in batch]
    self._run.log(logged, step=step)

  def write_texts(self, step: int, texts: Mapping[str, str]):
    self._run.log({k: str(v) for k, v in texts.items()}, step=step)

  def write_histograms(self, step: int, arrays: Mapping[str, Any],
                       num_buckets: Mapping[str, int] | None = None):
    """One W&B histogram per key, `num_buckets[key]` bins (W&B's 64 by default)."""
    self._run.log({k: self._wandb.Histogram(np.asarray(v).ravel(),
                                            **({"num_bins": num_buckets[k]}
                                               if num_buckets and k in num_buckets else {}))
                   for k, v in arrays.items()}, step=step)

  def write_hparams(self, hparams: Mapping[str, Any]):
    self._run.config.update(dict(hparams), allow_val_change=True)

  def _not_written(self, kind: str, keys) -> None:
    logging.warning("the W&B writer does not write %s (%s): TensorBoard has them", kind,
                    ", ".join(keys))

  def write_summaries(self, step: int, values: Mapping[str, Any],
                      metadata: Mapping[str, Any] | None = None):
    self._not_written("tensor summaries", values)

  def write_videos(self, step: int, videos: Mapping[str, Any]):
    self._not_written("videos", videos)

  def write_audios(self, step: int, audios: Mapping[str, Any], *, sample_rate: int):
    self._not_written("audio", audios)

  def flush(self):
    pass  # W&B's service process writes each row as the step completes

  def close(self, exit_code: int = 0):
    """Finishes the run (W&B marks it failed for a non-zero `exit_code`)."""
    self._run.finish(exit_code=exit_code)


def start_run(settings: LoggingSettings, workdir: str, config: Any = None) -> WandbWriter:
  """Starts (or, with the workdir's stored id, resumes) the W&B run of
  `settings` and returns its writer; `config` (the run's ConfigDict) becomes
  the W&B run's config.

  Raises:
    errors.ConfigError: wandb is not installed.
    errors.RunError: W&B refused to start (e.g. online with no account
      logged in); the message says how to go offline.
  """
  wandb = import_wandb(settings)
  run_id = _run_id(workdir)
  try:
    run = wandb.init(
        project=settings.wandb, entity=settings.wandb_entity, mode=settings.wandb_mode,
        name=settings.run_name(workdir), tags=list(settings.wandb_tags) or None,
        id=run_id, resume="allow",
        config=None if config is None else resume.config_dict(config),
        dir=_files_dir(workdir),
        # The progress line and the run's log file keep the console; W&B
        # capturing stdout would record every redraw of the progress line.
        settings=wandb.Settings(console="off"))
  except wandb.Error as e:
    raise errors.RunError(
        f"W&B could not start run {run_id} of project {settings.wandb!r}: "
        f"{str(e).splitlines()[0] if str(e) else type(e).__name__} "
        "(--config.logging.wandb_mode=offline logs without an account)") from e
  logging.info("W&B run %s of project %s (%s), id stored in %s", run.name, settings.wandb,
               settings.wandb_mode or "mode from WANDB_MODE, else online",
               os.path.join(workdir, RUN_ID_FILE))
  return WandbWriter(run, wandb)


def check_installed(settings: LoggingSettings) -> None:
  """With `settings.wandb` set, raises errors.ConfigError unless wandb
  imports (`import_wandb`): for the checks made before the workdir is touched."""
  if settings.wandb_enabled:
    import_wandb(settings)


@contextlib.contextmanager
def run_writer(settings: LoggingSettings, workdir: str,
               config: Any = None) -> Iterator[interface.MetricWriter]:
  """clu's default writer (TensorBoard in `workdir` and logging; logging only
  on processes > 0), with a `WandbWriter` beside it on process 0 when
  `settings.wandb` is set. Leaving closes both; an exception leaving marks
  the W&B run failed (a preemption: preempting, so W&B expects the resume)."""
  default = metric_writers.create_default_writer(
      workdir, just_logging=jax.process_index() > 0)
  with contextlib.closing(default):
    if not settings.wandb_enabled or jax.process_index() > 0:
      yield default
      return
    wandb_writer = start_run(settings, workdir, config)
    failed = True
    try:
      yield metric_writers.MultiWriter([default, wandb_writer])
      failed = False
    except errors.RunPreempted:
      wandb_writer.run.mark_preempting()
      raise
    finally:
      wandb_writer.close(exit_code=1 if failed else 0)
