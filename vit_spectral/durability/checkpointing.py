"""Orbax checkpoints of the train state and the stream's position: periodic,
keep-last-N, damage-tolerant (stops by signal: `preemption`).

Restoring goes onto an abstract state that carries the *current* shardings, so a
checkpoint written on one mesh restores onto another. A step that cannot be
read (damaged files, missing metadata, arrays that differ from the
fingerprint saved with them: `state_fingerprint`, in `fingerprints/<step>.json`)
is moved aside to `<step>.unreadable`, never deleted, and the next older one is
tried; orbax neither lists nor garbage-collects the moved directories. A save
that fails (e.g. a full disk) is raised as one `errors.CheckpointSaveError`
naming the directory, the step and the newest good checkpoint.

What damage to each file of a step does, as measured:
docs/design.md#durabilitycheckpointingpy
"""

from __future__ import annotations

import errno
import json
import os
import re
from typing import Any, Callable

import jax
import numpy as np
import orbax.checkpoint as ocp
import tensorstore as ts
from absl import logging
from etils import epath
from jax.experimental import multihost_utils

from vit_spectral import errors
from vit_spectral.durability import state_fingerprint

UNREADABLE_SUFFIX = ".unreadable"
STREAM_ITEM = "stream"  # <step>/stream: the training stream's position (JSON)
FINGERPRINT_DIR = "fingerprints"  # <step>.json: `state_fingerprint` of each saved step
_REASON_CHARS = 200


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
    # Named items: each step holds the state ("default") and, where saved,
    # the stream's position; steps from before the stream item restore too.
    self.manager = ocp.CheckpointManager(self.directory, item_names=("default", STREAM_ITEM),
                                         options=options)
    self._saving_step: int | None = None  # the newest step handed to orbax
    self._failed = False  # a save failed, was reported and the manager closed
    self._closed = False
    self._streams: dict[int, dict | None] = {}  # step -> its stream item, as read

  def latest_step(self) -> int | None:
    return self.manager.latest_step()

  def save(self, step: int, state: Any, *, force: bool = False,
           stream: dict | None = None) -> bool:
    """Saves `state` at `step` if the interval says so (or `force`), with
    `stream` (the training stream's position, `stream_state`; JSON) as the
    step's `stream` item where given.

    Raises:
      errors.CheckpointSaveError: this save, or the one still in flight, failed.
    """
    if not (force or self.manager.should_save(step)) or step in self.manager.all_steps():
      return False  # (orbax never overwrites a step either)
    items = {"default": ocp.args.StandardSave(state)}
    if stream is not None:
      items[STREAM_ITEM] = ocp.args.JsonSave(stream)
    try:
      self._write_fingerprint(step, state)
      saved = self.manager.save(step, args=ocp.args.Composite(**items), force=force)
    except Exception as e:  # orbax/tensorstore: any failure of a write
      raise self._save_error(self._unsaved_step(step), e) from e
    if saved:
      self._saving_step = step
    return saved

  def _fingerprint_path(self, step: int) -> epath.Path:
    return epath.Path(self.directory) / FINGERPRINT_DIR / f"{step}.json"

  def _write_fingerprint(self, step: int, state: Any) -> None:
    """Writes `state`'s fingerprint for `step` (all processes compute it,
    process 0 writes it) and drops those of steps older than every kept one."""
    prints = state_fingerprint.fingerprint(state)
    if jax.process_index() != 0:
      return
    folder = epath.Path(self.directory) / FINGERPRINT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    self._fingerprint_path(step).write_text(json.dumps(prints))
    kept = self.manager.all_steps()
    for path in folder.glob("*.json"):
      if path.stem.isdigit() and kept and int(path.stem) < min(kept):
        path.unlink()

  def saved_stream(self, step: int) -> dict | None:
    """The `stream` item of `step` (where the training stream stood), as
    read when `restore_latest` restored that step; None for a step saved
    without one."""
    if step not in self._streams:
      self._streams[step] = _read_stream(os.path.join(self.directory, str(step)))
    return self._streams[step]

  def _restore_verified(self, step: int, abstract_state: Any, shardings: Any) -> Any:
    """`restore`, then its arrays against the fingerprint saved with them
    (steps saved without one are restored unverified), and its `stream` item
    (kept for `saved_stream`).

    Raises:
      ValueError: an array differs from its fingerprint (damaged bytes that
        the reader did not notice), or the stream item is unreadable.
    """
    self._streams[step] = _read_stream(os.path.join(self.directory, str(step)))
    state = self.restore(step, abstract_state, shardings)
    path = self._fingerprint_path(step)
    if not path.exists():
      logging.info("checkpoint at step %d has no fingerprint (saved before they were "
                   "written): restored unverified", step)
      return state
    try:
      expected = json.loads(path.read_text())
    except ValueError as e:  # the fingerprint file itself is damaged
      logging.warning("the fingerprint of step %d is unreadable (%s): restored unverified",
                      step, describe_failure(e))
      return state
    differ = state_fingerprint.mismatches(expected, state)
    if differ:
      shown = ", ".join(differ[:3]) + (f" and {len(differ) - 3} more" if len(differ) > 3 else "")
      raise ValueError(f"arrays differ from the fingerprint saved with them: {shown}")
    return state

  def restore_latest(self, abstract_state: Any, shardings: Any, *,
                     check: Callable[[int, Any], None] | None = None
                     ) -> tuple[Any, int | None]:
    """The newest readable checkpoint, restored onto `shardings`, and its
    step; (None, None) when there is none.

    Steps are tried newest first. `check(step, stored)` sees the stored tree
    (ShapeDtypeStructs, from the metadata) before the arrays are read, and may
    raise (e.g. a config that does not fit: `errors.ConfigMismatchError`);
    what it raises propagates untouched. A step whose metadata or arrays
    cannot be read is moved aside (`_move_aside`; one warning line) and the
    next older step is tried. With several processes, all take the same
    decision: a step unreadable on any process is moved aside by process 0.

    Raises:
      errors.CheckpointReadError: there were checkpoints, none readable (all
        moved aside).
    """
    steps = sorted(self.manager.all_steps(), reverse=True)
    moved = []
    for i, step in enumerate(steps):
      older = steps[i + 1] if i + 1 < len(steps) else None
      item_dir = os.path.join(self.directory, str(step), "default")
      stored, failure = _attempt(lambda: _read_stored(item_dir), os.path.dirname(item_dir))
      failure = _agreed_failure(failure)
      if failure is None:
        if check is not None:
          check(step, stored)
        state, failure = _attempt(
            lambda: self._restore_verified(step, abstract_state, shardings),
            os.path.dirname(item_dir))
        failure = _agreed_failure(failure)
        if failure is None:
          return state, step
      moved.append(self._move_aside(step, failure, older))
    if moved:
      raise errors.CheckpointReadError(
          f"none of the checkpoints in {self.directory} can be read; moved aside "
          f"(not deleted): {'; '.join(moved)}. A rerun starts from step 0; to keep "
          f"what was trained, restore a moved directory by hand first.")
    return None, None

  def _move_aside(self, step: int, failure: str, older: int | None) -> str:
    """Renames step `step` to `<step>.unreadable` (process 0; all processes
    wait), makes orbax forget it and logs one line; returns 'step S -> path
    (reason)'."""
    source = epath.Path(self.directory) / str(step)
    target = unreadable_name(source)
    several = jax.process_count() > 1
    if several:  # every process has named the target before it is taken
      multihost_utils.sync_global_devices(f"checkpoint {step} to be moved aside")
    if jax.process_index() == 0:
      source.rename(target)
    if several:
      multihost_utils.sync_global_devices(f"checkpoint {step} moved aside")
    self.manager.reload()
    then = f"trying step {older}" if older is not None else "no older checkpoint to try"
    logging.warning("checkpoint at step %d cannot be read: %s; moved to %s; %s",
                    step, failure, target, then)
    return f"step {step} -> {target} ({failure})"

  def check_for_errors(self) -> None:
    """Raises what a finished background save raised, without waiting (cheap;
    call every step): orbax itself reports it only at the next save. With
    several processes, the next save reports it (where all processes wait).

    Raises:
      errors.CheckpointSaveError: a background save failed.
    """
    if jax.process_count() == 1 and not self._failed and self._finished_with_error():
      self.wait_until_finished()  # joins the finished thread: raises

  def _finished_with_error(self) -> bool:
    """Whether orbax's finalize thread (the background save) has ended with
    an exception. orbax keeps that exception until the next `save` or
    `wait_until_finished`; this looks without waiting."""
    return self.manager._finalize_thread.map(  # pylint: disable=protected-access
        lambda t: t is not None and not t.is_alive() and t.exception is not None)

  def _unsaved_step(self, step: int | None) -> int | None:
    """The step whose save failed: the one in flight if it never got
    finalized, else `step`."""
    if self._saving_step is not None and self._saving_step not in self._finalized_steps():
      return self._saving_step
    return step

  def _finalized_steps(self) -> list[int]:
    """The steps whose checkpoints are complete on disk (not orbax's cached
    list, which holds the step being saved)."""
    self.manager.reload()
    return list(self.manager.all_steps())

  def _save_error(self, step: int | None, error: BaseException) -> errors.CheckpointSaveError:
    """The one-message error for a failed save of `step`; closes the manager
    (the run stops: nothing may wait on the failed save)."""
    if not self._failed:
      self._failed = True
      # Closing now releases orbax's threads and lets tensorstore's pending
      # writes end before the interpreter does (else each prints a traceback).
      try:
        self.manager.close()
      except Exception as e:  # orbax raises the failure being reported again
        logging.info("closed the checkpointer after the failed save: %s",
                     describe_failure(e))
    steps = self._finalized_steps()
    newest = (f"a rerun resumes from step {max(steps)} once the cause is fixed" if steps
              else "no checkpoint has been written yet")
    what = f"step {step}" if step is not None else "a step"
    return errors.CheckpointSaveError(
        f"could not save the checkpoint of {what} in {self.directory}: "
        f"{describe_failure(error)}; {newest}")

  def restore(self, step: int, abstract_state: Any, shardings: Any) -> Any:
    """Restores `step` onto `shardings` (a tree like `abstract_state`)."""
    target = jax.tree_util.tree_map(
        lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
        abstract_state, shardings)
    restored = self.manager.restore(
        step, args=ocp.args.Composite(default=ocp.args.StandardRestore(target)))
    return restored["default"]

  def wait_until_finished(self) -> None:
    """Waits for the background save.

    Raises:
      errors.CheckpointSaveError: it failed.
    """
    if self._failed:  # reported, and the manager closed
      return
    try:
      self.manager.wait_until_finished()
    except Exception as e:  # orbax/tensorstore: any failure of a write
      raise self._save_error(self._unsaved_step(self._saving_step), e) from e

  def close(self) -> None:
    """Waits for the background save and releases orbax's threads (at once
    after a reported save failure, or a second time: nothing is left).

    Raises:
      errors.CheckpointSaveError: the background save failed.
    """
    if self._failed or self._closed:
      return
    self._closed = True
    try:
      self.manager.close()
    except Exception as e:  # orbax/tensorstore: any failure of a write
      raise self._save_error(self._unsaved_step(self._saving_step), e) from e

  def __enter__(self) -> "Checkpointer":
    return self

  def __exit__(self, kind, error, traceback) -> bool:
    """Closes; when the run is failing (`error`), a save still in flight
    completes first (it holds the newest good state), and its own failure is
    logged rather than raised over the run's."""
    if error is None:
      self.close()
      return False
    try:
      self.close()
    except errors.CheckpointSaveError as e:
      logging.warning("while the run was stopping: %s", e)
    return False


# Failures of a read that say nothing about the checkpoint's bytes: raised as
# they are, never a reason to move a checkpoint aside.
_NOT_DAMAGE = ("RESOURCE_EXHAUSTED", "UNAVAILABLE", "DEADLINE_EXCEEDED", "PERMISSION_DENIED",
               "UNAUTHENTICATED", "Permission denied", "out of memory", "Out of memory")
_NOT_DAMAGE_TYPES = (PermissionError, MemoryError, ConnectionError, TimeoutError)
# What a read raises for bad or missing bytes (json.JSONDecodeError is a ValueError).
_DAMAGE_TYPES = (ValueError, KeyError, FileNotFoundError, EOFError)


def _chain(error: BaseException) -> list[BaseException]:
  """`error` and the exceptions behind it, outermost first: causes, contexts
  (not one a `raise ... from` suppressed: Python's traceback leaves it out
  too) and the members of an ExceptionGroup."""
  chain, seen, pending = [], set(), [error]
  while pending:
    e = pending.pop(0)
    if e is None or id(e) in seen:
      continue
    seen.add(id(e))
    chain.append(e)
    context = None if e.__suppress_context__ else e.__context__
    pending += [e.__cause__, context, *getattr(e, "exceptions", ())]
  return chain


def _says_not_damage(error: BaseException) -> bool:
  return (isinstance(error, _NOT_DAMAGE_TYPES) or _is_disk_full(error)
          or any(m in str(error) for m in _NOT_DAMAGE))


def _is_disk_full(error: BaseException) -> bool:
  return ((isinstance(error, OSError) and error.errno == errno.ENOSPC)
          or "No space left on device" in str(error))


def is_damage(error: BaseException) -> bool:
  """Whether a failed read of a checkpoint means the checkpoint is damaged,
  judged on the whole chain (`_chain`): orbax wraps tensorstore's errors in a
  plain `Exception`. Damage when an exception in the chain is what orbax,
  tensorstore and json raise for bad or missing bytes (ValueError, incl.
  JSONDecodeError and tensorstore's DATA_LOSS / NOT_FOUND /
  FAILED_PRECONDITION; KeyError, FileNotFoundError, EOFError), and never when
  one says out of memory, a full disk, permissions or an unreachable store."""
  chain = _chain(error)
  if any(_says_not_damage(e) for e in chain):
    return False
  return any(isinstance(e, _DAMAGE_TYPES) for e in chain)


def _attempt(read: Callable[[], Any], where: str | None = None) -> tuple[Any, str | None]:
  """(read(), None), or (None, the damage in one line: `_describe_damage`,
  naming `where`, the step directory, when the error names no file).

  Raises:
    What `read` raised when it is not damage (`is_damage`): e.g. device out
    of memory while restoring, which must not move good checkpoints aside.
  """
  try:
    return read(), None
  except Exception as e:  # pylint: disable=broad-except
    if not is_damage(e):
      raise
    return None, _describe_damage(e, where)


def _read_stored(item_dir: str) -> Any:
  """`stored_structure(item_dir)`, after listing the keys of the step's OCDBT
  database (orbax's default format; skipped for others), so that a damaged
  index or data file fails with one error."""
  if (epath.Path(item_dir) / "manifest.ocdbt").exists():
    base = item_dir if "://" in item_dir else "file://" + item_dir
    kvstore = ts.KvStore.open({"driver": "ocdbt", "base": base.rstrip("/") + "/"}).result()
    kvstore.list().result()
  return stored_structure(item_dir)


def _agreed_failure(failure: str | None) -> str | None:
  """With several processes: a failure on any of them (all get the same
  answer); with one, `failure` (no collectives)."""
  if jax.process_count() == 1:
    return failure
  failed = multihost_utils.process_allgather(np.asarray(failure is not None))
  if failure is None and np.any(failed):
    return f"unreadable on process {int(np.argmax(failed))}"
  return failure


def _read_stream(step_dir: str) -> dict | None:
  """The JSON `stream` item of a step directory; None where it has none.

  Raises:
    ValueError: the item is there but is not a JSON object (damage).
  """
  item = epath.Path(step_dir) / STREAM_ITEM
  if not item.exists():
    return None
  handler = ocp.JsonCheckpointHandler()
  try:
    tree = handler.restore(item, args=ocp.args.JsonRestore())
  except ValueError as e:  # JSONDecodeError and the like: name the file
    raise ValueError(f"cannot parse {item}: {e}") from e
  finally:
    handler.close()
  if not isinstance(tree, dict):
    raise ValueError(f"cannot parse {item}: not a JSON object")
  return tree


def unreadable_name(source: epath.Path) -> epath.Path:
  """`<source>.unreadable`, or `.unreadable.1`, `.2`, ... where taken: where a
  damaged file or directory is moved aside (checkpoints, config.json)."""
  target = source.parent / (source.name + UNREADABLE_SUFFIX)
  n = 0
  while target.exists():
    n += 1
    target = source.parent / f"{source.name}{UNREADABLE_SUFFIX}.{n}"
  return target


def describe_failure(error: BaseException) -> str:
  """`error` in one line: 'the disk is full (No space left on device)' when
  any exception in its chain is ENOSPC, else 'Type: first line' (without
  TensorStore's spec; shortened)."""
  if any(_is_disk_full(e) for e in _chain(error)):
    return "the disk is full (No space left on device)"
  line = _shortened(_plain(str(error)), _REASON_CHARS - len(type(error).__name__) - 2)
  return f"{type(error).__name__}: {line}" if line else type(error).__name__


# tensorstore's "CODE: message"; the codes for bytes read that do not decode.
_STATUS = re.compile(r"^([A-Z_]+): ")
_DECODE_CODES = ("DATA_LOSS", "FAILED_PRECONDITION")
# Where a tensorstore message stops saying anything plain: orbax appends the
# whole spec ("See full TensorStore details: <bound method ... TensorStore({").
_REPR = re.compile(r"See full TensorStore details|<bound method|TensorStore\(\{")
# A value of an OCDBT database (orbax's format): the key, then the database.
_OCDBT_VALUE = re.compile(
    r'Error reading "(?P<key>[^"]+)" in OCDBT database at (?:local file )?"(?P<db>[^"]+)"')
_QUOTED_PATH = re.compile(r"\"(?P<a>(?:/|[a-z][a-z0-9+]*://)[^\"]+)\"|'(?P<b>/[^']+)'")
_BYTE_OFFSETS = re.compile(r"(; at (uncompressed )?byte \d+)+$")
_FILE_WORDS = re.compile(r"(\s+(of|at))?\s+local file\s*$")
_DECODING = re.compile(r"decod|decompress|checksum|Invalid JSON", re.IGNORECASE)
_MAX_BTREE_HEIGHT = 64  # a bound on the walk through a b-tree that may be damaged


def _plain(text: str) -> str:
  """The first line of `text`, cut before any TensorStore spec or pybind repr."""
  cut = _REPR.search(text)
  lines = (text[:cut.start()] if cut else text).strip().splitlines()
  return lines[0].rstrip(" .:") if lines else ""


def _shortened(text: str, chars: int, *, keep_end: bool = False) -> str:
  if len(text) <= chars:
    return text
  return "..." + text[3 - chars:] if keep_end else text[:chars - 3] + "..."


def _describe_damage(error: BaseException, where: str | None = None) -> str:
  """The damage a failed read reports, in one line: 'cannot decode <file>
  (<reason>)' ('missing', 'cannot read' where it is no decoding error).

  Read from the innermost damage-like exception of the chain (orbax's outer
  one says only which slice, then TensorStore's spec). The file is the one
  its message names (`_file_and_reason`), else `where`. Paths inside
  `where`'s parent (the checkpoints directory) are shown from the step on:
  '.../30/default/...'.
  """
  damage_like = [e for e in _chain(error) if isinstance(e, _DAMAGE_TYPES)]
  inner = damage_like[-1] if damage_like else error
  text = _plain(str(inner))
  status = _STATUS.match(text)
  code = status.group(1) if status else None
  text = _BYTE_OFFSETS.sub("", text[status.end():] if status else text)
  path, reason = _file_and_reason(inner, text)
  if code is None and type(inner) is not ValueError:  # a Python error: its type says what
    reason = f"{type(inner).__name__}: {reason}"
  if (code in _DECODE_CODES or isinstance(inner, (UnicodeDecodeError, json.JSONDecodeError))
      or _DECODING.search(text)):
    verb = "cannot decode"
  elif code == "NOT_FOUND" or isinstance(inner, FileNotFoundError):
    verb = "missing"
  else:
    verb = "cannot read"
  path = path or where
  if path is None:
    return _shortened(f"{verb} a file ({reason})", _REASON_CHARS)
  if where is not None:
    checkpoints = os.path.dirname(where.rstrip("/")) + "/"
    if path.startswith(checkpoints):
      path = ".../" + path[len(checkpoints):]
  path = _shortened(path, _REASON_CHARS // 2, keep_end=True)
  reason = _shortened(reason, _REASON_CHARS - len(verb) - len(path) - 4)
  return f"{verb} {path} ({reason})"


def _file_and_reason(error: BaseException, text: str) -> tuple[str | None, str]:
  """The file `error` (whose message is `text`, without its status code)
  names, and what it says of it. For an array chunk of an OCDBT database:
  the data file that holds it (`_ocdbt_value_file`; else the database)."""
  value = _OCDBT_VALUE.search(text)
  if value:
    path = _ocdbt_value_file(value["db"], value["key"]) or value["db"]
    return path, f"{text[value.end():].lstrip(': ')}; array chunk {value['key']}"
  quoted = _QUOTED_PATH.search(text)
  if quoted:  # tensorstore: 'Error reading local file "<path>": <reason>'
    after = text[quoted.end():]
    reason = (after[2:] if after.startswith(": ")
              else _FILE_WORDS.sub("", text[:quoted.start()]).rstrip(" :"))
    return quoted["a"] or quoted["b"], reason.removeprefix("Error decoding ")
  if isinstance(error, OSError) and error.filename:
    return os.fspath(error.filename), text
  return None, text


def _ocdbt_value_file(database: str, key: str) -> str | None:
  """The data file that holds `key`'s value in the OCDBT database at
  `database`, found by walking its b-tree from the manifest's newest root
  (a few small reads; the format: docs/design.md#durabilitycheckpointingpy);
  None where that fails.
  """
  try:
    base = ts.KvStore.open(database if "://" in database else "file://" + database).result()
    location = ts.ocdbt.dump(base).result()["versions"][-1]["root"]["location"]
    rest = key.encode()
    for _ in range(_MAX_BTREE_HEIGHT):
      node = ts.ocdbt.dump(base, location).result()
      if node["height"] == 0:
        entry = next(e for e in node["entries"] if e["key"] == rest)
        location = entry.get("indirect_value", location)
        base_path, file_id = location.split(":", 1)[1].rsplit(":", 2)[0].split(":", 1)
        return database.rstrip("/") + "/" + base_path + file_id
      child = [e for e in node["entries"] if e["key"] <= rest][-1]
      prefix = child.get("subtree_common_prefix", b"")
      if not rest.startswith(prefix):
        return None
      rest, location = rest[len(prefix):], child["location"]
  except Exception:  # pylint: disable=broad-except  # only a better name is lost
    pass
  return None


def stored_structure(item_dir: str) -> Any:
  """The tree saved in `item_dir` (a step's `default` item) as ShapeDtypeStructs,
  read from the checkpoint's metadata alone.

  Raises what reading the metadata raised (orbax's `StandardCheckpointer`
  would log it and return no tree).
  """
  handler = ocp.StandardCheckpointHandler()
  try:
    stored = handler.metadata(epath.Path(item_dir)).tree
  finally:
    handler.close()
  return jax.tree_util.tree_map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype),
                                stored)


def read_on_host(item_dir: str) -> Any:
  """The tree saved in `item_dir` (a step's `default` item) as NumPy arrays on
  the host, whatever devices and processes wrote it; not checked against the
  step's fingerprint (`latest_params` does that)."""
  target = jax.tree_util.tree_map(lambda leaf: np.empty(leaf.shape, leaf.dtype),
                                  stored_structure(item_dir))
  return ocp.StandardCheckpointer().restore(item_dir, target)


def saved_steps(directory: str) -> list[int]:
  """The finished steps in a checkpoint directory, oldest first, as orbax's
  CheckpointManager lists them, without a manager."""
  name_format = ocp.path.step.standard_name_format()
  return sorted(metadata.step for metadata in name_format.find_all(epath.Path(directory)))


def latest_state(workdir: str, step: int | None = None) -> tuple[dict[str, Any], int]:
  """The whole state saved in a trainer workdir (params, optimizer state, EMA,
  step, ...) as host arrays, checked against its fingerprint, and its step.

  Raises:
    FileNotFoundError: `workdir` holds no finished checkpoint (or not `step`).
    errors.CheckpointReadError: its arrays differ from the fingerprint saved
      with them (damaged bytes).
  """
  directory = os.path.join(workdir, "checkpoints")
  directory = directory if "://" in directory else os.path.abspath(directory)
  steps = saved_steps(directory)
  if not steps or (step is not None and step not in steps):
    raise FileNotFoundError(f"no checkpoint {'' if step is None else f'at step {step} '}"
                            f"under {directory} (steps there: {sorted(steps)})")
  step = max(steps) if step is None else step
  state = read_on_host(os.path.join(directory, str(step), "default"))
  fingerprint_path = epath.Path(directory) / FINGERPRINT_DIR / f"{step}.json"
  if fingerprint_path.exists():
    differ = state_fingerprint.mismatches(json.loads(fingerprint_path.read_text()), state)
    if differ:
      raise errors.CheckpointReadError(
          f"the checkpoint at step {step} in {directory} is damaged: {len(differ)} arrays "
          f"differ from the fingerprint saved with them ({', '.join(differ[:3])}); "
          f"read an earlier step (steps there: {sorted(steps)})")
  return state, step


def latest_params(workdir: str, step: int | None = None,
                  key: str = "params") -> tuple[Any, int]:
  """The parameters saved in a trainer workdir, as host arrays, and their step.

  No model, optimizer or mesh is needed. `key="ema_params"` reads the EMA
  parameters of recipes that keep them.

  Raises:
    FileNotFoundError: `workdir` holds no finished checkpoint (or not `step`).
    errors.CheckpointReadError: its arrays differ from the fingerprint saved
      with them (damaged bytes).
    KeyError: the checkpoint has no `key`.
  """
  state, step = latest_state(workdir, step)
  if state.get(key) is None:
    raise KeyError(f"the checkpoint at step {step} has no {key!r} (keys: {sorted(state)})")
  return state[key], step
