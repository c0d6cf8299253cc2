"""Reads what a W&B run wrote to its `.wandb` file, for the tests.

wandb 0.31 ships no Python reader for it (the old `wandb.sdk.internal.datastore`
is gone; `wandb sync` and `wandb beta leet` read it in wandb-core). The file is
a 7-byte header (":W&B", 0xBEE1 little-endian, version 0) then LevelDB's log
format: 32 KiB blocks of chunks, each a 7-byte header (CRC-32, length uint16
little-endian, type 1 FULL / 2 FIRST / 3 MIDDLE / 4 LAST) and its bytes; a
block's tail shorter than a header is zero padding. A whole chunk sequence is
one serialized `wandb.proto.wandb_internal_pb2.Record`, the message wandb
itself defines and ships.
"""

from __future__ import annotations

import glob
import json
import os
import struct

from wandb.proto import wandb_internal_pb2

MAGIC = b":W&B" + struct.pack("<H", 0xBEE1) + b"\x00"
BLOCK = 32 * 1024
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: str) -> list[wandb_internal_pb2.Record]:
  """Every record of the `.wandb` file at `path`, in order."""
  with open(path, "rb") as f:
    data = f.read()
  assert data[:len(MAGIC)] == MAGIC, f"{path} is not a W&B transaction log"
  out, pieces, position = [], [], len(MAGIC)
  while position + HEADER <= len(data):
    left_in_block = BLOCK - position % BLOCK
    if left_in_block < HEADER:  # padding up to the next block
      position += left_in_block
      continue
    _, length, kind = struct.unpack("<IHB", data[position:position + HEADER])
    if kind == 0 and length == 0:  # a zero-filled tail: the next block
      position += left_in_block
      continue
    assert kind in (FULL, FIRST, MIDDLE, LAST), (path, position, kind)
    pieces.append(data[position + HEADER:position + HEADER + length])
    position += HEADER + length
    if kind in (FULL, LAST):
      record = wandb_internal_pb2.Record()
      record.ParseFromString(b"".join(pieces))
      out.append(record)
      pieces = []
  return out


def _start_time(path: str) -> float:
  (run,) = of_type(path, "run")
  return run.start_time.seconds + run.start_time.nanos * 1e-9


def run_files(wandb_dir: str) -> list[str]:
  """The `.wandb` files of the offline runs under `wandb_dir` (the folder
  holding `wandb/`), the first started first (their folders are named by
  the second a run started, and a second run of that second gets "-1")."""
  found = glob.glob(os.path.join(wandb_dir, "wandb", "offline-run-*", "run-*.wandb"))
  return sorted(found, key=_start_time)


def _key(item) -> str:
  return item.key or ".".join(item.nested_key)


def history(path: str) -> dict[int, dict[str, object]]:
  """{step: {key: value}} of the history rows in `path` (W&B's own `_step`,
  `_runtime` and `_timestamp` left out)."""
  rows = {}
  for record in records(path):
    if record.WhichOneof("record_type") == "history":
      row = {_key(item): json.loads(item.value_json) for item in record.history.item}
      rows[int(record.history.step.num)] = {k: v for k, v in row.items()
                                            if not k.startswith("_")}
  return rows


def of_type(path: str, kind: str) -> list:
  """The payloads of the records of `kind` ("run", "config", "exit", ...)."""
  return [getattr(r, kind) for r in records(path) if r.WhichOneof("record_type") == kind]


def config(path: str) -> dict[str, object]:
  """The run's config as its records set it (the run record, then updates)."""
  values = {}
  for record in records(path):
    kind = record.WhichOneof("record_type")
    updates = (record.run.config.update if kind == "run" else
               record.config.update if kind == "config" else ())
    for item in updates:
      values[_key(item)] = json.loads(item.value_json)
  return values
