"""A traced step's matrix FLOPs and largest arrays, from its jaxpr.

  jaxpr = jax.make_jaxpr(step)(*abstract_args)
  matmul_flops(jaxpr)          # 2·M·N·K of every dot, convolution and fused attention
  largest_arrays(jaxpr, 3)     # the biggest intermediate arrays, global shapes

Independent of any backend, and every loop counted: a `scan`'s body is
counted `length` times. The model FLOPs of MFU (PaLM, Chowdhery et al.
2022, App. B) are the matrix multiplications of the forward and backward
pass without rematerialisation: `matmul_flops` of a step traced with remat
off. Elementwise work is left out (a few percent of a ViT step).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterator

import jax
import numpy as np
from jax.extend import core

from vit_spectral.attention import fused


def _sub_jaxprs(eqn) -> Iterator[tuple[core.Jaxpr, int]]:
  """(jaxpr, how often it runs per run of `eqn`) for each jaxpr `eqn` holds
  (a Pallas kernel's body is one block's: `_attention_flops` counts it)."""
  if eqn.primitive.name == "pallas_call":
    return
  repeat = int(eqn.params.get("length", 1)) if eqn.primitive.name == "scan" else 1
  for value in eqn.params.values():
    values = value if isinstance(value, (tuple, list)) else (value,)
    for item in values:
      if isinstance(item, core.ClosedJaxpr):
        yield item.jaxpr, repeat
      elif isinstance(item, core.Jaxpr):
        yield item, repeat


def _eqns(jaxpr: core.Jaxpr, repeat: int = 1) -> Iterator[tuple[object, int]]:
  """Every equation, nested ones included, with how often it runs. Of a
  `cond`'s branches only the costliest would run; all are walked (a step's
  conds are small)."""
  for eqn in jaxpr.eqns:
    yield eqn, repeat
    for sub, times in _sub_jaxprs(eqn):
      yield from _eqns(sub, repeat * times)


def _dot_flops(eqn) -> float:
  lhs = eqn.invars[0].aval.shape
  out = eqn.outvars[0].aval.shape
  (contracting, _), _ = eqn.params["dimension_numbers"]
  return 2.0 * math.prod(out) * math.prod(lhs[d] for d in contracting)


def _conv_flops(eqn) -> float:
  rhs = eqn.invars[1].aval.shape
  out = eqn.outvars[0].aval.shape
  numbers = eqn.params["dimension_numbers"]
  rhs_spec = numbers.rhs_spec   # (out feature, in feature, *spatial)
  kernel = math.prod(rhs[d] for d in rhs_spec[1:])
  return 2.0 * math.prod(out) * kernel / eqn.params.get("batch_group_count", 1)


def _attention_flops(eqn) -> float:
  """FLOPs of a fused attention kernel's call (`fused.KERNEL_CALLS`, at the
  padded token counts it runs), else 0."""
  call = fused.kernel_call(eqn.primitive, eqn.params)
  if call is None:
    return 0.0
  # q and k: (B, T, H, Dh) for cuDNN (BTNH), (B, H, T, Dh) for splash.
  q, k = [v.aval.shape for v in eqn.invars if len(v.aval.shape) == 4][:2]
  keys = k[2] if eqn.primitive.name == "pallas_call" else k[1]
  return 2.0 * fused.KERNEL_CALLS[call] * math.prod(q) * keys


def matmul_flops(jaxpr: core.ClosedJaxpr | core.Jaxpr) -> float:
  """FLOPs of every dot_general and convolution in `jaxpr` (2 per multiply-
  add), loops counted as often as they run, for the global shapes."""
  jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
  total = 0.0
  for eqn, repeat in _eqns(jaxpr):
    if eqn.primitive.name == "dot_general":
      total += repeat * _dot_flops(eqn)
    elif eqn.primitive.name == "conv_general_dilated":
      total += repeat * _conv_flops(eqn)
    else:
      total += repeat * _attention_flops(eqn)
  return total


@dataclasses.dataclass(frozen=True)
class ArrayInfo:
  """One intermediate array: `shape`, `dtype`, `bytes` and where it comes
  from (`source`: the equation's primitive under its name stack)."""

  shape: tuple[int, ...]
  dtype: str
  bytes: int
  source: str

  def describe(self, per_device_bytes: float | None = None) -> str:
    size = self.bytes if per_device_bytes is None else per_device_bytes
    return f"{self.dtype}[{','.join(map(str, self.shape))}] {self.source} {size / 2**30:.2f} GiB"


def largest_arrays(jaxpr: core.ClosedJaxpr | core.Jaxpr, count: int = 3) -> list[ArrayInfo]:
  """The `count` largest distinct arrays the equations of `jaxpr` produce
  (global shapes, largest first)."""
  jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
  seen: dict[tuple, ArrayInfo] = {}
  for eqn, _ in _eqns(jaxpr):
    stack = str(eqn.source_info.name_stack)
    for var in eqn.outvars:
      aval = getattr(var, "aval", None)
      if not hasattr(aval, "shape") or not hasattr(aval, "dtype"):
        continue
      try:
        itemsize = np.dtype(aval.dtype).itemsize
      except TypeError:   # extended dtypes (PRNG keys)
        continue
      size = int(np.prod(aval.shape, dtype=np.int64)) * itemsize
      key = (tuple(aval.shape), str(aval.dtype))
      if key not in seen or seen[key].bytes < size:
        source = f"{stack}/{eqn.primitive.name}" if stack else eqn.primitive.name
        seen[key] = ArrayInfo(tuple(aval.shape), str(aval.dtype), size, source)
  return sorted(seen.values(), key=lambda a: -a.bytes)[:count]


def trace(fn, *args) -> core.ClosedJaxpr:
  """The jaxpr of `fn` (a jitted function or plain) on abstract `args`."""
  return jax.make_jaxpr(fn)(*args)
