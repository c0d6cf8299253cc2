"""Layers that differ: per-layer overrides of the Block settings, grouped in segments.

`config.model.layer_overrides` is a sequence of dicts

    {"start": 0, "stop": 6,                      # layers [start, stop)
     "attention": {"value_output": "minus"},     # merged into the attention options
     "block": {...}}                             # other `Block` fields

applied in order on top of the settings every layer shares. An `attention`
override without "name" (or with the shared name) is merged into the shared
attention options; one naming another variant replaces them.

The encoder runs consecutive layers with identical settings as one *segment*:
one `nn.scan` per segment in scan mode. With a single segment (no overrides, or
overrides that change nothing) the parameters keep their usual names,
`encoder/encoderblock` (scan) and `encoder/encoderblock_{i}` (loop); with several,
segment k's scanned stack is `encoder/encoderblock_segment{k}` while the loop names
stay `encoderblock_{i}` with the global layer index i.

Example: paper 003's "*" models (first half of the layers sharpened, §4):
`star_overrides(12)` = ({"start": 0, "stop": 6, "attention": {"value_output": "minus"}},).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Mapping, Sequence

from vit_spectral.settings import plain

__all__ = ["BLOCK_NAME", "Segment", "check_overrides", "is_scanned_path", "layer_kwargs",
           "scan_name", "scanned_stacks", "segments", "star_overrides"]

# Name of the block module in each mode; the loop appends "_{layer}".
BLOCK_NAME = "encoderblock"
_OVERRIDE_KEYS = ("start", "stop", "attention", "block")
_SEGMENT_RE = re.compile(rf"{BLOCK_NAME}_segment(\d+)")


@dataclasses.dataclass(frozen=True)
class Segment:
  """Layers [start, stop) sharing `block_kwargs` (the `Block` fields)."""
  start: int
  stop: int
  block_kwargs: Mapping[str, Any]

  @property
  def length(self) -> int:
    return self.stop - self.start


def _apply(kwargs: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
  """The Block fields of one layer after `override`."""
  out = dict(kwargs)
  attention = dict(plain(override.get("attention") or {}))
  if attention:
    # Without a "name" the override keeps the layer's variant (if the layer
    # names none, the Block default stands and the options merge into it).
    name = attention.pop("name", out.get("attention"))
    shared = out.get("attention_kwargs") or {}
    same = name == out.get("attention")
    if name is not None:
      out["attention"] = name
    out["attention_kwargs"] = dict(shared, **attention) if same else attention
  for key, value in dict(plain(override.get("block") or {})).items():
    if key in ("attention", "attention_kwargs"):
      raise ValueError(f"model.layer_overrides: set the attention through the "
                       f"'attention' dict, not block.{key}")
    out[key] = value
  return out


def _layer_range(override: Mapping[str, Any], depth: int) -> tuple[int, int]:
  """An override's layers [start, stop): from the first layer to the last by default."""
  return override.get("start", 0), override.get("stop", depth)


def check_overrides(overrides: Sequence[Mapping[str, Any]] | None, depth: int) -> None:
  """Raises ValueError for an unknown key or a layer range outside [0, depth)."""
  for n, override in enumerate(overrides or ()):
    override = plain(override)
    if not isinstance(override, Mapping):
      raise ValueError(f"model.layer_overrides[{n}] must be a dict with keys "
                       f"{list(_OVERRIDE_KEYS)}, got {override!r}")
    unknown = sorted(set(override) - set(_OVERRIDE_KEYS))
    if unknown:
      raise ValueError(f"model.layer_overrides[{n}] has unknown keys {unknown}; "
                       f"the keys are {list(_OVERRIDE_KEYS)}")
    start, stop = _layer_range(override, depth)
    if not 0 <= start < stop <= depth:
      raise ValueError(f"model.layer_overrides[{n}]: start={start}, stop={stop} "
                       f"must satisfy 0 <= start < stop <= model.depth={depth}")


def layer_kwargs(depth: int, block_kwargs: Mapping[str, Any],
                 overrides: Sequence[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
  """The `Block` fields of every layer, in order (length `depth`)."""
  check_overrides(overrides, depth)
  layers = [dict(block_kwargs) for _ in range(depth)]
  for override in overrides or ():
    override = plain(override)
    for i in range(*_layer_range(override, depth)):
      layers[i] = _apply(layers[i], override)
  return layers


def segments(depth: int, block_kwargs: Mapping[str, Any],
             overrides: Sequence[Mapping[str, Any]] | None = None) -> list[Segment]:
  """Maximal runs of consecutive layers with identical settings."""
  out: list[Segment] = []
  for i, kwargs in enumerate(layer_kwargs(depth, block_kwargs, overrides)):
    if out and out[-1].block_kwargs == kwargs:
      out[-1] = dataclasses.replace(out[-1], stop=i + 1)
    else:
      out.append(Segment(i, i + 1, kwargs))
  return out


def scan_name(index: int, num_segments: int) -> str:
  """The scanned stack's module name of segment `index`."""
  return BLOCK_NAME if num_segments == 1 else f"{BLOCK_NAME}_segment{index}"


def scanned_stacks(encoder: Mapping[str, Any]) -> list[str]:
  """Names of the scanned stacks in an encoder subtree, in layer order."""
  if BLOCK_NAME in encoder:
    return [BLOCK_NAME]
  found = {int(m.group(1)): k for k in encoder if (m := _SEGMENT_RE.fullmatch(k))}
  return [found[k] for k in sorted(found)]


def is_scanned_path(path: str) -> bool:
  """Whether a parameter path ("encoder/encoderblock/...") has a leading depth axis."""
  return bool(re.search(rf"(^|/)({BLOCK_NAME}|{BLOCK_NAME}_segment\d+)/", path))


def star_overrides(depth: int, value_output: str = "minus") -> tuple[dict[str, Any], ...]:
  """Paper 003's "*": layers [0, depth // 2) use `value_output`, the rest stay standard."""
  return ({"start": 0, "stop": depth // 2, "attention": {"value_output": value_output}},)
