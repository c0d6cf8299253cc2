"""Layers that differ: per-layer overrides of the block spec, grouped in segments.

`config.model.layer_overrides` is a sequence of dicts

    {"start": 0, "stop": 6,                      # layers [start, stop)
     "attention": {"value_output": "minus"},     # merged into the attention options
     "block": {...}}                             # other `BlockSpec` fields

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

__all__ = ["BLOCK_NAME", "Segment", "check_overrides", "is_scanned_path", "layer_specs",
           "scan_name", "scanned_stacks", "segments", "star_overrides"]

# Name of the block module in each mode; the loop appends "_{layer}".
BLOCK_NAME = "encoderblock"
_OVERRIDE_KEYS = ("start", "stop", "attention", "block")
_SEGMENT_RE = re.compile(rf"{BLOCK_NAME}_segment(\d+)")


@dataclasses.dataclass(frozen=True)
class Segment:
  """Layers [start, stop) sharing one block spec and one token layout.

  `spec` is a `models.specs.BlockSpec`, `layout` a `models.token_layouts`
  layout (any values compared with ==)."""
  start: int
  stop: int
  spec: Any
  layout: Any = None

  @property
  def length(self) -> int:
    return self.stop - self.start


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


def layer_specs(depth: int, block: Any,
                overrides: Sequence[Mapping[str, Any]] | None = None) -> list[Any]:
  """The block spec of every layer, in order (length `depth`): `block` (a
  `BlockSpec`) after each override of the layer's range (`BlockSpec.override`)."""
  check_overrides(overrides, depth)
  layers = [block] * depth
  for override in overrides or ():
    override = plain(override)
    for i in range(*_layer_range(override, depth)):
      layers[i] = layers[i].override(override)
  return layers


def segments(specs: Sequence[Any], layouts: Sequence[Any] | None = None) -> list[Segment]:
  """Maximal runs of consecutive layers with equal spec (and layout)."""
  layouts = list(layouts) if layouts is not None else [None] * len(specs)
  out: list[Segment] = []
  for i, (spec, layout) in enumerate(zip(specs, layouts)):
    if out and out[-1].spec == spec and out[-1].layout == layout:
      out[-1] = dataclasses.replace(out[-1], stop=i + 1)
    else:
      out.append(Segment(i, i + 1, spec, layout))
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
