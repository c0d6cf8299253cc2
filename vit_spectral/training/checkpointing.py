"""Orbax checkpoints of the train state: periodic, keep-last-N, preemption-aware.

Restoring goes onto an abstract state that carries the *current* shardings, so a
checkpoint written on one mesh restores onto another.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import jax
import numpy as np
import orbax.checkpoint as ocp


class Checkpointer:
  """A thin wrapper around `orbax.checkpoint.CheckpointManager`.

  Args:
    directory: where step directories are written (local path or gs://).
    save_every: save when `step % save_every == 0` (and when forced).
    keep: how many of the latest checkpoints to keep.
    async_save: write in a background thread (the train loop goes on).
  """

  def __init__(self, directory: str, *, save_every: int, keep: int = 3,
               async_save: bool = True):
    if save_every <= 0:
      raise ValueError(f"checkpoint_every={save_every} must be positive")
    options = ocp.CheckpointManagerOptions(
        save_interval_steps=save_every, max_to_keep=keep, create=True,
        enable_async_checkpointing=async_save)
    self.directory = directory if "://" in directory else os.path.abspath(directory)
    self.manager = ocp.CheckpointManager(self.directory, options=options)

  def latest_step(self) -> int | None:
    return self.manager.latest_step()

  def save(self, step: int, state: Any, *, force: bool = False) -> bool:
    """Saves `state` at `step` if the interval says so (or `force`)."""
    return self.manager.save(step, args=ocp.args.StandardSave(state), force=force)

  def restore_latest(self, abstract_state: Any, shardings: Any, *,
                     check: Callable[[int, Any], None] | None = None
                     ) -> tuple[Any, int | None]:
    """The newest checkpoint, restored onto `shardings`, and its step;
    (None, None) when there is none.

    `check(step, stored)` sees the stored tree (ShapeDtypeStructs, from the
    metadata) before the arrays are read, and may raise (e.g. a config that
    does not fit: `errors.ConfigMismatchError`).
    """
    step = self.latest_step()
    if step is None:
      return None, None
    if check is not None:
      check(step, stored_structure(os.path.join(self.directory, str(step), "default")))
    return self.restore(step, abstract_state, shardings), step

  def check_for_errors(self) -> None:
    """Raises what a finished background save raised (cheap; call every step)."""
    self.manager.check_for_errors()

  def restore(self, step: int, abstract_state: Any, shardings: Any) -> Any:
    """Restores `step` onto `shardings` (a tree like `abstract_state`)."""
    target = jax.tree_util.tree_map(
        lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
        abstract_state, shardings)
    return self.manager.restore(step, args=ocp.args.StandardRestore(target))

  def reached_preemption(self, step: int) -> bool:
    return self.manager.reached_preemption(step)

  def wait_until_finished(self) -> None:
    self.manager.wait_until_finished()

  def close(self) -> None:
    self.manager.close()


def stored_structure(item_dir: str) -> Any:
  """The tree saved in `item_dir` (a step's `default` item) as ShapeDtypeStructs,
  read from the checkpoint's metadata alone."""
  stored = ocp.StandardCheckpointer().metadata(item_dir).item_metadata.tree
  return jax.tree_util.tree_map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype),
                                stored)


def latest_params(workdir: str, step: int | None = None,
                  key: str = "params") -> tuple[Any, int]:
  """The parameters saved in a trainer workdir, as host arrays, and their step.

  For analysis and notebooks: no model, optimizer or mesh is needed, the tree is
  read as stored (NumPy arrays), also where other devices or several processes
  wrote it. `key="ema_params"` reads the EMA parameters of recipes that
  keep them.

  Raises:
    FileNotFoundError: `workdir` holds no finished checkpoint (or not `step`).
  """
  directory = os.path.join(workdir, "checkpoints")
  directory = directory if "://" in directory else os.path.abspath(directory)
  manager = ocp.CheckpointManager(directory, options=ocp.CheckpointManagerOptions(read_only=True))
  steps = manager.all_steps()
  manager.close()
  if not steps or (step is not None and step not in steps):
    raise FileNotFoundError(f"no checkpoint {'' if step is None else f'at step {step} '}"
                            f"under {directory} (steps there: {sorted(steps)})")
  step = max(steps) if step is None else step
  path = os.path.join(directory, str(step), "default")
  # A NumPy target: read onto the host, whatever devices and processes wrote it
  # (without a target orbax looks for the writers' devices and fails elsewhere).
  target = jax.tree_util.tree_map(lambda leaf: np.empty(leaf.shape, leaf.dtype),
                                  stored_structure(path))
  state = ocp.StandardCheckpointer().restore(path, target)
  if state.get(key) is None:
    raise KeyError(f"the checkpoint at step {step} has no {key!r} (keys: {sorted(state)})")
  return state[key], step
