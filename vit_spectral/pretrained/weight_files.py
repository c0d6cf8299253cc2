"""Reading weight files into flat dicts of NumPy arrays, never by unpickling.

`read_weights(source)` accepts:

* a `.safetensors` file (timm's and the Hugging Face hub's format), read by
  the small reader below: an 8-byte little-endian header length, a JSON header
  {name: {dtype, shape, data_offsets}}, then the raw little-endian bytes;
* a `.npz` file (big_vision / AugReg checkpoints), with `allow_pickle=False`;
* a `.pth` / `.pt` / `.bin` PyTorch file, only through
  `torch.load(weights_only=True)` (torch is optional: without it the error
  says how to convert the file to safetensors);
* a Mapping of names to arrays (a timm `state_dict()`, NumPy arrays or
  anything `np.asarray` reads, e.g. CPU torch tensors).

A PyTorch checkpoint that wraps its state dict (`{"model": ...}` as DeiT's
releases do, or `{"state_dict": ...}`) is unwrapped, and a DistributedDataParallel
"module." prefix is dropped. bfloat16 tensors are returned as float32.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any, Mapping

import jax.numpy as jnp
import numpy as np

__all__ = ["read_safetensors", "read_weights"]

_BFLOAT16 = jnp.bfloat16      # ml_dtypes' bfloat16, the NumPy dtype jax uses

_SAFETENSORS_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": _BFLOAT16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
    "BOOL": np.bool_,
}
_WRAPPER_KEYS = ("model", "state_dict", "model_state", "module")


def _as_numpy(name: str, value: Any) -> np.ndarray:
  if hasattr(value, "detach"):                       # a torch tensor
    value = value.detach().cpu()
    if str(value.dtype) == "torch.bfloat16":
      value = value.float()
    value = value.numpy()
  try:
    array = np.asarray(value)
  except Exception as e:  # noqa: BLE001 - any unreadable entry is reported by name
    raise ValueError(f"weight {name!r} is not an array ({type(value).__name__}: {e})") from None
  if array.dtype == _BFLOAT16:
    array = array.astype(np.float32)
  if array.dtype == object:
    raise ValueError(f"weight {name!r} is not a numeric array ({type(value).__name__})")
  return array


def read_safetensors(path: str) -> dict[str, np.ndarray]:
  """The tensors of a `.safetensors` file by name (memory-mapped, then copied
  only where a dtype converts: bfloat16 -> float32).

  Raises:
    ValueError: the file is not a complete safetensors file (names the file
      and what is wrong: truncated header, bad JSON, offsets past the end).
  """
  size = os.path.getsize(path)
  with open(path, "rb") as f:
    head = f.read(8)
    if len(head) < 8:
      raise ValueError(f"{path} is not a safetensors file: {size} bytes, no header")
    (header_len,) = struct.unpack("<Q", head)
    if header_len > size - 8:
      raise ValueError(f"{path} is not a complete safetensors file: its header says "
                       f"{header_len} bytes, the file has {size - 8} after the length")
    try:
      header = json.loads(f.read(header_len))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
      raise ValueError(f"{path} is not a safetensors file: unreadable header ({e})") from None
  if not isinstance(header, dict):
    raise ValueError(f"{path} is not a safetensors file: its header is a JSON "
                     f"{type(header).__name__}, not an object of tensors")
  data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_len)
  arrays = {}
  for name, entry in header.items():
    if name == "__metadata__":
      continue
    if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= set(entry):
      raise ValueError(f"{path}: tensor {name!r} has header entry {entry!r}, not one with "
                       "dtype, shape and data_offsets (a damaged safetensors file?)")
    dtype = _SAFETENSORS_DTYPES.get(entry["dtype"])
    if dtype is None:
      raise ValueError(f"{path}: tensor {name!r} has dtype {entry['dtype']!r}; this "
                       f"reader knows {sorted(_SAFETENSORS_DTYPES)}")
    start, stop = entry["data_offsets"]
    shape = tuple(entry["shape"])
    count = int(np.prod(shape, dtype=np.int64))
    if not 0 <= start <= stop <= data.size or stop - start != count * np.dtype(dtype).itemsize:
      raise ValueError(f"{path}: tensor {name!r} {shape} {entry['dtype']} has byte range "
                       f"[{start}, {stop}), which does not fit the file (truncated?)")
    array = np.frombuffer(data, dtype=dtype, count=count, offset=start).reshape(shape)
    arrays[name] = array.astype(np.float32) if dtype == _BFLOAT16 else array
  return arrays


def _read_torch(path: str) -> Mapping[str, Any]:
  try:
    import torch  # pylint: disable=import-outside-toplevel
  except ImportError:
    raise ValueError(
        f"{path} is a PyTorch file and torch is not installed; install torch (it is "
        "read with torch.load(weights_only=True), never unpickled otherwise) or "
        "convert the file to .safetensors") from None
  return torch.load(path, map_location="cpu", weights_only=True)


def _unwrap(weights: Mapping[str, Any]) -> Mapping[str, Any]:
  """{"model": state_dict} -> state_dict; "module." prefixes dropped."""
  for key in _WRAPPER_KEYS:
    if key in weights and isinstance(weights[key], Mapping):
      weights = weights[key]
      break
  if weights and all(k.startswith("module.") for k in weights):
    weights = {k[len("module."):]: v for k, v in weights.items()}
  return weights


def read_weights(source: str | os.PathLike | Mapping[str, Any]) -> dict[str, np.ndarray]:
  """Flat {name: array} of a weight file or an in-memory state dict.

  Raises:
    FileNotFoundError: the path does not exist.
    ValueError: an unknown file type (the error lists the known ones), a
      damaged file, or an entry that is not an array.
  """
  if isinstance(source, Mapping):
    weights = _unwrap(source)
  else:
    path = os.fspath(source)
    if not os.path.exists(path):
      raise FileNotFoundError(f"no weight file at {path}")
    suffix = os.path.splitext(path)[1].lower()
    if suffix == ".safetensors":
      return read_safetensors(path)
    if suffix == ".npz":
      try:
        with np.load(path, allow_pickle=False) as npz:
          return {k: _as_numpy(k, npz[k]) for k in npz.files}
      except (ValueError, OSError, EOFError) as e:
        raise ValueError(f"{path} is not a readable .npz file ({e})") from None
    if suffix in (".pth", ".pt", ".bin"):
      weights = _unwrap(_read_torch(path))
    else:
      raise ValueError(f"{path}: unknown weight file type {suffix!r}; use .safetensors, "
                       ".npz, or .pth/.pt/.bin (read with torch.load(weights_only=True))")
  return {str(k): _as_numpy(str(k), v) for k, v in weights.items()}
