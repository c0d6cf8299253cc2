"""Checkpoints that survive damage, and save failures reported as one message.

Damage: a workdir left by a run stopped after its step-30 checkpoint (steps
20 and 30; a copy of the reference run's workdir without step 40) has its
step 30 damaged five ways: random bytes over the second half of the file in
`default/d/` (the b-tree orbax merged: the reader fails), over the start of
the largest data file (issue 31: orbax raises a plain `Exception`, with
tensorstore's error as its cause),
64 random bytes inside the largest raw array chunk (the reader returns wrong
numbers: the fingerprint saved with the step catches them; without it the
rerun's loss is NaN two steps later), an empty `_METADATA`, half of the step
directory's files deleted. Each rerun moves step 30 aside to `30.unreadable`
(one warning line), resumes from step 20 and
ends with exactly the parameters of the uninterrupted reference run. The
reruns keep two checkpoints (the reference three), so orbax's garbage
collection deletes step 20 at step 40 and must leave `30.unreadable` alone.
A step whose `default` item directory is gone (orbax alone: "Must provide
`args` of type `Composite`") is moved aside too (restore only, no training).

Damage anywhere: up to 4096 random bytes over the start, the middle and the
end of each file of step 30, one (file, position) at a time, restored as the
trainer restores: step 30 bit-identical to the reference's where nothing
reads those bytes, else step 30 moved aside (one plain warning line naming
the file) and step 20 bit-identical to the reference's; what each file does
is in docs/design.md (section durability/checkpointing.py). A full rerun for the
issue's case (the start of the largest data file) is among the five above.

Save failures: orbax's own file writes (`async_path.write_text`, what it
writes `_METADATA`, array metadata and commit markers with) raise ENOSPC from
the second checkpoint on, as on a full disk.
"""

import errno
import functools
import glob
import json
import logging
import os
import re
import shutil
import time

import jax
import numpy as np
import pytest
from orbax.checkpoint._src.path import async_path

from vit_spectral import errors
from vit_spectral.configs import digits_vit
from vit_spectral.durability import checkpointing, resume, state_fingerprint

# End-to-end runs: .ci/run runs them as a step of their own (pyproject's markers).
from vit_spectral.training import trainer

# End-to-end runs: .ci/run runs them as a step of their own (pyproject's markers).
pytestmark = pytest.mark.extended

TOTAL, EVERY = 40, 10
DAMAGE_BYTES = 4096


def _config(keep=3):
  config = digits_vit.get_config(f"depth=1,width=64,heads=2,steps={TOTAL}")
  config.checkpoint_every = config.log_every = EVERY
  config.eval_every = TOTAL
  config.input.batch_size = 32
  config.optim.warmup_steps = 5
  config.keep_checkpoints = keep
  return config


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
  """The uninterrupted 40-step run's workdir (checkpoints 20, 30, 40)."""
  workdir = tmp_path_factory.mktemp("reference")
  trainer.train_and_evaluate(_config(), str(workdir))
  return workdir


def _stopped_after_step_30(reference, tmp_path):
  workdir = tmp_path / "run"
  shutil.copytree(reference, workdir)
  shutil.rmtree(workdir / "checkpoints" / "40")
  os.remove(workdir / "final_metrics.json")
  return workdir


def _random_bytes_in_array_file(step_dir):
  (data_file,) = glob.glob(str(step_dir / "default" / "d" / "*"))
  size = os.path.getsize(data_file)
  with open(data_file, "r+b") as f:
    f.seek(size // 2)
    f.write(np.random.default_rng(0).bytes(size - size // 2))


def _data_files(step_dir):
  """Every regular file under `step_dir`, relative to it, sorted."""
  return sorted(os.path.relpath(p, step_dir)
                for p in glob.glob(str(step_dir / "**"), recursive=True) if os.path.isfile(p))


def _random_bytes_over(path, position, seed=0):
  """Up to `DAMAGE_BYTES` random bytes over `path` at its start, middle or
  end (the file keeps its size)."""
  size = os.path.getsize(path)
  count = min(DAMAGE_BYTES, size)
  at = {"start": 0, "middle": size // 2, "end": size - count}[position]
  count = min(count, size - at)
  with open(path, "r+b") as f:
    f.seek(at)
    f.write(np.random.default_rng(seed).bytes(count))


def _random_bytes_at_the_start_of_the_largest_data_file(step_dir):
  """A torn write or a bad sector at the start of the largest file: the
  reader fails inside orbax's plain `Exception`, whose cause is tensorstore's
  FAILED_PRECONDITION (the case of issue 31)."""
  files = [step_dir / rel for rel in _data_files(step_dir)]
  _random_bytes_over(max(files, key=os.path.getsize), "start")


def _read_unchecked(step_dir):
  """The step's arrays as orbax reads them (no fingerprint check), or None
  where the read fails."""
  try:
    return jax.tree_util.tree_leaves(checkpointing.read_on_host(str(step_dir / "default")))
  except Exception:  # noqa: BLE001 - a read error is one of the outcomes probed for
    return None


def _random_bytes_in_the_largest_array_chunk(step_dir):
  """Bytes the reader does not check (chunk data): orbax restores them as
  wrong numbers; the fingerprint saved with the step catches them.

  64 random bytes go into the largest data file, in the middle first. A data
  file also holds b-tree nodes (after orbax merges the per-process databases,
  some are read by no one: damage there changes nothing) and compressed-frame
  headers (damage there is a read error, another test's case), and where each
  lies depends on the order of the asynchronous writes. So the damage is
  tried at spread offsets, each undone again, until orbax reads wrong numbers
  without an error.
  """
  want = _read_unchecked(step_dir)
  files = glob.glob(str(step_dir / "default" / "ocdbt.process_0" / "d" / "*"))
  data_file = max(files, key=os.path.getsize)
  with open(data_file, "rb") as f:
    original = f.read()
  size = len(original)
  for at in [size // 2] + [(2 * j + 1) * size // 32 for j in range(16)]:
    with open(data_file, "r+b") as f:
      f.seek(at)
      f.write(np.random.default_rng(0).bytes(64))
    got = _read_unchecked(step_dir)
    if got is not None and any(not np.array_equal(a, b) for a, b in zip(got, want)):
      return
    with open(data_file, "wb") as f:
      f.write(original)
  raise AssertionError(f"no offset in {data_file} makes orbax read wrong numbers")


def _empty_metadata(step_dir):
  (step_dir / "default" / "_METADATA").write_text("")


def _half_the_files_deleted(step_dir):
  files = sorted(p for p in glob.glob(str(step_dir / "**"), recursive=True) if os.path.isfile(p))
  assert len(files) > 10
  for path in files[::2]:
    os.remove(path)


def _params_equal(got, want):
  assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
  for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("damage", [_random_bytes_in_array_file,
                                    _random_bytes_at_the_start_of_the_largest_data_file,
                                    _random_bytes_in_the_largest_array_chunk, _empty_metadata,
                                    _half_the_files_deleted])
def test_a_damaged_newest_checkpoint_is_moved_aside_and_the_run_resumes(
    reference, tmp_path, caplog, damage):
  workdir = _stopped_after_step_30(reference, tmp_path)
  checkpoints = workdir / "checkpoints"
  damage(checkpoints / "30")
  # What a kill during a save leaves: orbax skips it, as before.
  killed = checkpoints / "40.orbax-checkpoint-tmp-1"
  killed.mkdir()
  (killed / "_CHECKPOINT_METADATA").write_text("{")

  with caplog.at_level(logging.INFO):
    trainer.train_and_evaluate(_config(keep=2), str(workdir))

  names = sorted(os.listdir(checkpoints))
  assert [n for n in names if "tmp" not in n] == ["30", "30.unreadable", "40", "fingerprints"]
  # Fingerprints of the steps saved; those older than every kept step are
  # dropped at the next save (20's is still there: it was kept at step 40's).
  assert {"30.json", "40.json"} <= set(os.listdir(checkpoints / "fingerprints"))
  moved = [r.getMessage() for r in caplog.records if "30.unreadable" in r.getMessage()]
  assert len(moved) == 1, moved
  _assert_one_plain_line(moved[0])
  assert any("resumed from the checkpoint at step 20" in r.getMessage() for r in caplog.records)
  got, step = checkpointing.latest_params(str(workdir))
  want, _ = checkpointing.latest_params(str(reference))
  assert step == TOTAL
  _params_equal(got, want)


def _assert_one_plain_line(line):
  """The warning of a step moved aside: step 30, what in it is damaged and
  why in plain words, in one line without TensorStore's spec."""
  assert re.search(r"step 30 cannot be read: (cannot decode|cannot read|cannot parse|missing) "
                   r"\S*/30\b\S* \(.+\); moved to .*step 20\b", line), line
  assert "\n" not in line and "TensorStore({" not in line and "bound method" not in line, line


def _arrays_by_name(tree):
  paths_and_leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
  return {state_fingerprint.leaf_name(path): np.asarray(leaf) for path, leaf in paths_and_leaves}


def _assert_bit_identical(got, want):
  got, want = _arrays_by_name(got), _arrays_by_name(want)
  assert sorted(got) == sorted(want)
  for name, a in got.items():
    b = want[name]
    assert (a.dtype, a.shape, a.tobytes()) == (b.dtype, b.shape, b.tobytes()), name


@pytest.fixture(scope="module")
def reference_states(reference):
  """The reference run's states at steps 20 and 30, as read (and checked
  against their fingerprints)."""
  return {step: checkpointing.latest_state(str(reference), step)[0] for step in (20, 30)}


@pytest.fixture(scope="module")
def run_setup():
  return trainer.set_up(_config())


# Files orbax parses with Python's JSON reader: its errors name no file, so
# the warning names the step directory.
_PARSED_BY_PYTHON = ("default/_METADATA", "default/array_metadatas/", "stream/metadata")
# Files every restore reads whole.
_ALWAYS_READ = _PARSED_BY_PYTHON + ("default/_sharding", "default/manifest.ocdbt", "default/d/")


@pytest.mark.parametrize("position", ["start", "middle", "end"])
def test_damage_anywhere_in_the_newest_step_falls_back_or_is_harmless(
    reference, reference_states, run_setup, tmp_path, caplog, position):
  """Random bytes over the start, middle or end of each file of step 30, one
  file at a time, restored as the trainer restores (`restore_latest` with
  `resume.check_structure`): step 30 bit-identical to the reference's (the
  damage lies in bytes no reader reads), or step 30 moved aside with one
  plain warning line naming the file and step 20 bit-identical to the
  reference's. A full rerun of the representative cases is
  `test_a_damaged_newest_checkpoint_is_moved_aside_and_the_run_resumes`.
  A file no larger than `DAMAGE_BYTES` is damaged whole at its start and
  not again at its end (the same bytes)."""
  stopped = _stopped_after_step_30(reference, tmp_path) / "checkpoints"
  steps = run_setup.steps
  check = functools.partial(resume.check_structure, abstract_state=steps.abstract_state,
                            config=_config(),
                            previous_config=resume.previous_config(str(reference)))
  outcomes = {}
  for i, rel in enumerate(_data_files(stopped / "30")):
    if position == "end" and os.path.getsize(stopped / "30" / rel) <= DAMAGE_BYTES:
      continue
    checkpoints = tmp_path / f"case-{i}"
    shutil.copytree(stopped, checkpoints)
    _random_bytes_over(checkpoints / "30" / rel, position, seed=i)
    caplog.clear()
    with caplog.at_level(logging.WARNING), checkpointing.Checkpointer(
        str(checkpoints), save_every=EVERY) as ckpt:
      state, step = ckpt.restore_latest(steps.abstract_state, steps.state_sharding, check=check)
    moved = [r.getMessage() for r in caplog.records if "30.unreadable" in r.getMessage()]
    if step == 30:
      assert sorted(os.listdir(checkpoints)) == ["20", "30", "fingerprints"], rel
      assert not moved, (rel, moved)
    else:
      assert step == 20, (rel, step)
      assert sorted(os.listdir(checkpoints)) == ["20", "30.unreadable", "fingerprints"], rel
      assert len(moved) == 1, (rel, moved)
      _assert_one_plain_line(moved[0])
      named_file = f".../30/{rel} (" in moved[0]
      assert named_file or ".../30 (" in moved[0], (rel, moved[0])
      if rel.startswith("default/") and not rel.startswith(_PARSED_BY_PYTHON):
        assert named_file, (rel, moved[0])  # read by tensorstore: its errors name the file
    _assert_bit_identical(state, reference_states[step])
    outcomes[rel] = step
  assert all(step == 20 for rel, step in outcomes.items() if rel.startswith(_ALWAYS_READ)), outcomes
  if position == "start":  # issue 31 (array chunks start there; the end may be unread b-tree)
    largest = max(outcomes, key=lambda rel: os.path.getsize(stopped / "30" / rel))
    assert outcomes[largest] == 20, (largest, outcomes)


def test_latest_params_refuses_damaged_arrays(reference, tmp_path):
  workdir = _stopped_after_step_30(reference, tmp_path)
  _random_bytes_in_the_largest_array_chunk(workdir / "checkpoints" / "30")
  with pytest.raises(errors.CheckpointReadError, match="step 30 .* is damaged"):
    checkpointing.latest_params(str(workdir))
  params, step = checkpointing.latest_params(str(workdir), step=20)
  assert step == 20 and params


def test_no_readable_checkpoint_stops_with_one_message(reference, tmp_path):
  workdir = _stopped_after_step_30(reference, tmp_path)
  checkpoints = workdir / "checkpoints"
  _empty_metadata(checkpoints / "30")
  (checkpoints / "20.unreadable").mkdir()  # from an earlier rerun: kept, not reused
  _half_the_files_deleted(checkpoints / "20")

  with pytest.raises(errors.CheckpointReadError) as info:
    trainer.train_and_evaluate(_config(), str(workdir))
  message = str(info.value)
  assert sorted(os.listdir(checkpoints)) == ["20.unreadable", "20.unreadable.1", "30.unreadable",
                                             "fingerprints"]
  assert str(checkpoints) in message
  assert "30.unreadable" in message and "20.unreadable.1" in message
  assert "step 0" in message and "\n" not in message


def _disk_full_after_first_checkpoint(monkeypatch):
  """orbax's file writes fail with ENOSPC for every step after `EVERY`."""
  write_text = async_path.write_text
  faults = []

  async def write_text_or_fail(path, text):
    match = re.search(r"checkpoints/(\d+)", str(path))
    if match and int(match.group(1)) > EVERY:
      faults.append((time.monotonic(), int(match.group(1))))
      raise OSError(errno.ENOSPC, "No space left on device", str(path))
    return await write_text(path, text)

  monkeypatch.setattr(async_path, "write_text", write_text_or_fail)
  return faults


def test_a_full_disk_stops_the_run_with_one_message(tmp_path, monkeypatch):
  faults = _disk_full_after_first_checkpoint(monkeypatch)
  with pytest.raises(errors.CheckpointSaveError) as info:
    trainer.train_and_evaluate(_config(), str(tmp_path))
  message = str(info.value)
  assert str(tmp_path / "checkpoints") in message, message
  assert re.search(rf"step {2 * EVERY}\b", message), message
  assert "the disk is full (No space left on device)" in message, message
  assert re.search(rf"resumes from step {EVERY}\b", message), message
  assert "\n" not in message
  cause = info.value.__cause__
  assert cause is not None and faults
  # Surfaced before the next save: no write of step 30 was ever attempted.
  assert {step for _, step in faults} == {2 * EVERY}, faults
  assert not os.path.exists(tmp_path / "checkpoints" / str(2 * EVERY))


def test_a_failed_background_save_surfaces_before_the_next_save(tmp_path, monkeypatch):
  faults = _disk_full_after_first_checkpoint(monkeypatch)
  ckpt = checkpointing.Checkpointer(str(tmp_path / "checkpoints"), save_every=EVERY)
  state = {"w": np.arange(6, dtype=np.float32)}
  assert ckpt.save(EVERY, state)
  ckpt.wait_until_finished()
  assert ckpt.save(2 * EVERY, state)
  deadline = time.monotonic() + 10
  with pytest.raises(errors.CheckpointSaveError, match=rf"resumes from step {EVERY}\b"):
    while time.monotonic() < deadline:  # what the train loop does after each step
      ckpt.check_for_errors()
      time.sleep(0.01)
  assert faults
  start = time.monotonic()
  ckpt.close()
  assert time.monotonic() - start < 5


def test_a_step_without_its_item_directory_is_moved_aside(reference, run_setup, tmp_path):
  # What orbax alone answers with "Must provide `args` of type `Composite`".
  workdir = _stopped_after_step_30(reference, tmp_path)
  checkpoints = workdir / "checkpoints"
  shutil.rmtree(checkpoints / "30" / "default")
  ckpt = checkpointing.Checkpointer(str(checkpoints), save_every=EVERY)
  state, step = ckpt.restore_latest(run_setup.steps.abstract_state, run_setup.steps.state_sharding)
  ckpt.close()
  assert step == 2 * EVERY and int(state.step) == 2 * EVERY
  assert sorted(os.listdir(checkpoints)) == ["20", "30.unreadable", "fingerprints"]


def test_a_failure_that_is_not_damage_moves_nothing(reference, run_setup, tmp_path):
  """Out of memory while restoring (or permissions, an unreachable store) is
  raised as it is: the checkpoints stay where they are."""
  workdir = _stopped_after_step_30(reference, tmp_path)
  checkpoints = workdir / "checkpoints"
  ckpt = checkpointing.Checkpointer(str(checkpoints), save_every=EVERY)

  def out_of_memory(*args, **kwargs):
    raise ValueError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4.0GiB")

  ckpt.manager.restore = out_of_memory  # orbax's read, as a device would fail it
  with pytest.raises(ValueError, match="RESOURCE_EXHAUSTED"):
    ckpt.restore_latest(run_setup.steps.abstract_state, run_setup.steps.state_sharding)
  ckpt.close()
  assert sorted(os.listdir(checkpoints)) == ["20", "30", "fingerprints"]


def _raised(error, *, cause=None, context=None, suppressed=False):
  """`error` as raised `from cause`, or while handling `context` (which
  `from None` drops where `suppressed`)."""
  try:
    if context is None:
      raise error from cause
    try:
      raise context
    except BaseException:  # noqa: BLE001
      if suppressed:
        raise error from None
      raise error
  except BaseException as e:  # noqa: BLE001
    return e


_TORN = ('FAILED_PRECONDITION: Error reading "params.x/0.0" in OCDBT database at local file '
         '"/c/30/default/": ZSTD_decompressStream() failed: Unknown frame descriptor; at byte 0; '
         "at uncompressed byte 0")
_ORBAX = ("Encountered error while reading array index: (slice(0, 1, 1),). See full TensorStore "
          "details: <bound method spec of TensorStore({\n  'base': {'driver': 'zarr'}})>")


def test_what_counts_as_damage():
  assert checkpointing.is_damage(ValueError("DATA_LOSS: Error reading byte range"))
  assert checkpointing.is_damage(json.JSONDecodeError("Expecting value", "", 0))
  assert checkpointing.is_damage(FileNotFoundError("_METADATA"))
  assert not checkpointing.is_damage(ValueError("UNAVAILABLE: connection reset"))
  assert not checkpointing.is_damage(PermissionError(13, "Permission denied"))
  assert not checkpointing.is_damage(RuntimeError("something else"))
  # What orbax raises for a torn write at the start of a data file (issue 31).
  assert checkpointing.is_damage(_raised(Exception(_ORBAX), cause=ValueError(_TORN)))
  assert checkpointing.is_damage(_raised(Exception("wrapped"), context=KeyError("params")))
  assert checkpointing.is_damage(BaseExceptionGroup("reads", [RuntimeError("x"), EOFError()]))
  assert not checkpointing.is_damage(_raised(
      Exception(_ORBAX), cause=ValueError("RESOURCE_EXHAUSTED: Out of memory allocating 4GiB")))
  # Damage-like in the chain, but something in it is not damage.
  assert not checkpointing.is_damage(
      _raised(ValueError("DATA_LOSS: short read"), cause=PermissionError(13, "Permission denied")))
  assert not checkpointing.is_damage(
      ExceptionGroup("reads", [ValueError("NOT_FOUND: x"), ValueError("DEADLINE_EXCEEDED: y")]))
  assert not checkpointing.is_damage(_raised(Exception("bare"), cause=RuntimeError("inner")))
  assert not checkpointing.is_damage(Exception("bare"))
  # A context dropped by `raise ... from None` does not count.
  assert not checkpointing.is_damage(
      _raised(RuntimeError("bug"), context=KeyError("params"), suppressed=True))


def test_the_damage_is_described_in_plain_words():
  torn = _raised(Exception(_ORBAX), cause=ValueError(_TORN))

  def read():
    raise torn

  # (/c holds no database: the data file holding the chunk is not found, so
  # the database is named)
  assert checkpointing._attempt(read, "/c/30") == (None, (
      "cannot decode .../30/default/ (ZSTD_decompressStream() failed: Unknown frame descriptor; "
      "array chunk params.x/0.0)"))
  node = ValueError('DATA_LOSS: Error reading Byte range [0, 36631) of local file '
                    '"/c/30/default/d/8f7d": Error decoding b-tree node: CRC-32C checksum '
                    "verification failed: expected=1, actual=2")
  assert checkpointing._describe_damage(node, where="/c/30") == (
      "cannot decode .../30/default/d/8f7d (b-tree node: CRC-32C checksum verification failed: "
      "expected=1, actual=2)")
  describe = functools.partial(checkpointing._describe_damage, where="/c/30")
  assert describe(FileNotFoundError(2, "No such file", "/c/30/x")) == (
      "missing .../30/x (FileNotFoundError: [Errno 2] No such file)")
  assert describe(json.JSONDecodeError("Expecting value", "", 0)) == (
      "cannot decode .../30 (JSONDecodeError: Expecting value: line 1 column 1 (char 0))")
  assert len(describe(ValueError("x" * 1000))) <= 200
  # Failures of a save: not described as damage; a full disk anywhere in the chain says so.
  full = _raised(Exception("save failed"), cause=OSError(errno.ENOSPC, "No space left on device"))
  assert checkpointing.describe_failure(full) == "the disk is full (No space left on device)"
  assert checkpointing.describe_failure(torn) == (
      "Exception: Encountered error while reading array index: (slice(0, 1, 1),)")
