r"""Where the GPU train step's memory goes, and which encoder settings make it
cheapest: the DeiT recipe (ViT-S/16 and B/16, 224², bf16 compute, batch 256)
compiled by the GPU compiler for one H100 on a machine without one, for every
combination of the encoder's settings (issue 40).

  PYTHONPATH=.ci/cuda:/tmp/cudnn XLA_FLAGS= JAX_PLATFORMS=cpu \
      python benchmarks/gpu_step_plans.py                    # the matrix below
  ... python benchmarks/gpu_step_plans.py --variants S/16 --kernels xla --settings scan/all/u1
  ... python benchmarks/gpu_step_plans.py --policies         # experimental remat policies
  PYTHONPATH=.ci/libtpu ... python benchmarks/gpu_step_plans.py --target=v5litepod-16 \
      --batch=1024 --settings scan/all/u1,scan/dots/u1,loop/all,scan/remat/u1

Each row is one compile, in this process, one after another (the compiles are
the cost: 20-60 s each on 2 cores): the trainer's own sharded step
(`dry_run.plan`, as `train.py --dry_run --target=a3-highgpu-1g` plans it) with
`model.encoder_mode` scan|loop × `model.encoder_residuals` all|dots or
`model.remat` × `model.encoder_unroll` 1, 2, depth (scan only), lowered and
compiled with the target's compiler options plus XLA's dump options, so the
compiler writes its buffer assignment and live ranges into a scratch folder.
From each compile:

- memory per GPU (`compiled.memory_analysis()`, as `dry_run.memory_of`) and
  the roofline step time of `target_dry_run` (matmul FLOPs of the jaxpr over
  the peak bf16 FLOP/s; XLA's bytes accessed, every loop iteration, over the
  HBM bandwidth; the larger of the two), with its bound;
- from the optimized HLO (`compiled.as_text()`): fusions (in the program text,
  and run per step, a loop body counted per iteration: XLA's kernels launched),
  cuDNN flash-attention and cuBLAS custom calls, and, for a scanned encoder,
  the stacked buffers its forward loop hands to the backward pass (the
  residuals, (L, B, ...) per layer);
- from XLA's live ranges at the peak of the heap simulation and its buffer
  assignment: every buffer live at the peak, deduplicated (values that share
  one buffer through a loop count once), by what its shape says it holds
  (`classify_shape`: attention maps (B,H,T,T), MLP hidden (B,T,M), q/k/v,
  width-D activations (B,T,D): residual stream, norm inputs and outputs,
  masks, parameters and optimizer state) and by dtype.

`--block_residuals` adds what one encoder block saves for the backward pass,
from its jaxpr (`block_residuals`: `jax.vjp`'s residuals with the op and
module that made each), for each residual policy: the per-layer story behind
the stacked buffers (the GELU's five tanh-chain intermediates, the norms'
float32 centred inputs, the drop-path masks at full size).

`--kernels`: "auto" is the library's choice on the target (cuDNN flash
attention on a GPU once `attention.fused` picks it); "xla" forces XLA's
attention (what issue 40 measured: the (B,H,T,T) scores formed in the step) by
patching `attention.fused.kernel_for` in this process only. `--policies` adds
rows with remat policies the library does not offer (`POLICIES`), patched into
`models.vit.Encoder.block_class` in this process only: experiments for the
lead to choose from, not settings a user can pass.

Results: benchmarks/results/gpu_step_plans.json (rows merged by key across
runs) and a Markdown table on stdout. These are the GPU compiler's estimates
for a GPU nobody ran on, not measurements; issue 40's measured H200 figures
are in the JSON beside them.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import datetime
import glob
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any, Iterable, Iterator

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
RESULTS = os.path.join(REPO, "benchmarks", "results", "gpu_step_plans.json")
GIB = 2**30
MIB = 2**20

# Issue 40, measured on one H200 (ViT-S/16, 224², bf16 compute, float32
# params, batch 256, AdamW): memory per device and step time.
MEASURED_H200 = {
    "ours scan (encoder_residuals all)": {"memory_gib": 22.5, "temp_gib": 22.1,
                                          "step_ms": 69.5},
    "ours loop": {"memory_gib": 13.4, "step_ms": 48.4},
    "timm eager": {"memory_gib": 8.8},
    "timm + torch.compile": {"step_ms": 31.0},
}
TIMM_MEMORY_GIB = 8.8
# What a reader of the JSON must know about rows compiled on different days of
# a moving library (each row's `library_fingerprint`, `compiled_at`).
NOTES = (
    "The library changed while this matrix ran (the GPU/TPU backend defaults of issue 44 "
    "and 40). Rows without library_fingerprint predate it; of those, the rows with "
    "encoder_residuals 'dots' (B/16 loop/dots, S/16 xla scan/dots/u1, v5litepod-16 "
    "scan/dots/u1) ran the old 'dots' (Dense outputs only; the fused attention kernel's "
    "forward recomputed in the backward pass): the current 'dots' also saves the kernel's "
    "outputs, the same as this benchmark's 'dots+attn' policy.",
    "Before the fix of unrolled remat (prevent_cse when encoder_unroll > 1), remat and "
    "'dots' at encoder_unroll=depth compiled to the very step of 'all' (XLA merged the "
    "recomputation back into the forward: 10.02 GiB, 11.0 ms for all three); the rows "
    "here with a fingerprint have the fix.",
    "Rows whose peak classes say classes_from_largest_only were classified from their 12 "
    "largest buffer shapes only (saved before every shape was).",
)


# --- Rows -------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Row:
  """One compile: a variant with encoder settings, an attention kernel and,
  optionally, an experimental remat policy (`POLICIES`)."""

  variant: str            # "S/16", "B/16"
  mode: str               # "scan" | "loop"
  residuals: str          # "all" | "dots" | "remat" (model.remat=True)
  unroll: int = 1         # scan only; 0 = depth
  kernel: str = "auto"    # "auto" (the library's) | "xla"
  policy: str = ""        # a POLICIES name, or "" for the library's settings
  target: str = "a3-highgpu-1g"
  batch: int = 256

  @property
  def settings(self) -> str:
    what = self.policy or self.residuals
    return f"{self.mode}/{what}" + (f"/u{self.unroll or 'L'}" if self.mode == "scan" else "")

  @property
  def key(self) -> str:
    return f"{self.target}|{self.variant}|b{self.batch}|{self.kernel}|{self.settings}"

  def recipe_arg(self) -> str:
    return f"variant={self.variant},batch={self.batch}"

  def flags(self, depth: int) -> list[str]:
    """`train.py` flags for the same step (`policy` and kernel="xla" are this
    benchmark's patches and have none)."""
    flags = [f"--config=imagenet_deit:{self.recipe_arg()}"]
    if self.mode != "scan":
      flags.append(f"--config.model.encoder_mode={self.mode}")
    if self.residuals == "remat":
      flags.append("--config.model.remat=True")
    elif not self.policy:
      flags.append(f"--config.model.encoder_residuals={self.residuals}")
    if self.mode == "scan" and self.unroll != 1:
      flags.append(f"--config.model.encoder_unroll={self.unroll or depth}")
    return flags + ["--dry_run", f"--target={self.target}"]


def parse_settings(text: str) -> tuple[str, str, int]:
  """"scan/all/u2" -> ("scan", "all", 2); "scan/dots/uL" -> unroll 0 (depth);
  "loop/remat" -> ("loop", "remat", 1)."""
  parts = text.split("/")
  mode, what = parts[0], parts[1]
  unroll = 1
  if len(parts) > 2:
    unroll = 0 if parts[2] in ("uL", "ul") else int(parts[2].lstrip("u"))
  return mode, what, unroll


# The default matrix (~23 compiles, ~20 min on 2 cores): every setting for
# S/16 with the library's attention, the main ones for B/16, and issue 40's
# settings with XLA's attention (the "before" of the cuDNN kernel).
MATRIX_SETTINGS = ("scan/all/u1", "scan/dots/u1", "scan/remat/u1",
                   "scan/all/u2", "scan/dots/u2", "scan/remat/u2",
                   "scan/all/uL", "scan/dots/uL", "scan/remat/uL",
                   "loop/all", "loop/dots", "loop/remat")
MAIN_SETTINGS = ("scan/all/u1", "scan/dots/u1", "scan/remat/u1", "loop/all", "loop/dots")
XLA_SETTINGS = ("scan/all/u1", "scan/dots/u1", "scan/remat/u1", "loop/all")
DEFAULT_SETTINGS = {("auto", "S/16"): MATRIX_SETTINGS, ("auto", None): MAIN_SETTINGS,
                    ("xla", "S/16"): XLA_SETTINGS, ("xla", None): ("scan/all/u1", "loop/all")}


def matrix(variants: Iterable[str], kernels: Iterable[str], settings: Iterable[str] | None,
           target: str, batch: int) -> list[Row]:
  rows = []
  for kernel in kernels:
    for variant in variants:
      chosen = settings or DEFAULT_SETTINGS.get(
          (kernel, variant), DEFAULT_SETTINGS[(kernel, None)])
      for text in chosen:
        mode, what, unroll = parse_settings(text)
        if what in POLICIES:
          rows.append(Row(variant, mode, "all", unroll, kernel, what, target, batch))
        else:
          rows.append(Row(variant, mode, what, unroll, kernel, "", target, batch))
  return rows


# --- Experimental remat policies (patched in; not library settings) -------------------

def _is_dot(prim) -> bool:
  return prim.name == "dot_general"


def _attention_kernel_call(prim) -> bool:
  """cuDNN's fused attention forward (its output and softmax statistics)."""
  return "dot_product_attention" in prim.name


def _policy_dots_no_mlp(mlp_dim: int):
  """Saves the Dense outputs (no batch dims) except fc1's (…, M): q, k, v and
  the attention's output projection; fc1 and the GELU are recomputed."""
  base = __import__("jax").checkpoint_policies.dots_with_no_batch_dims_saveable

  def policy(prim, *avals, **params):
    if not base(prim, *avals, **params):
      return False
    return not (_is_dot(prim) and _dot_result_last_dim(avals, params) == mlp_dim)
  return policy


def _dot_result_last_dim(avals, params) -> int | None:
  """The last dimension of a dot_general's result: rhs's last free dim."""
  try:
    (_, rhs_contract), (_, rhs_batch) = params["dimension_numbers"]
    rhs = avals[1].shape
    free = [d for i, d in enumerate(rhs) if i not in rhs_contract and i not in rhs_batch]
    return free[-1] if free else None
  except (KeyError, IndexError, ValueError, TypeError, AttributeError):
    return None


def _policy_plus_attention(base_policy):
  """`base_policy`, and the fused attention kernel's outputs saved too (its
  forward then runs once, not again in the backward pass)."""
  def policy(prim, *avals, **params):
    return _attention_kernel_call(prim) or base_policy(prim, *avals, **params)
  return policy


def make_policy(name: str, mlp_dim: int):
  import jax  # noqa: PLC0415
  dots = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
  return {
      "dots+attn": lambda: _policy_plus_attention(dots),
      "dots-mlp": lambda: _policy_dots_no_mlp(mlp_dim),
      "dots-mlp+attn": lambda: _policy_plus_attention(_policy_dots_no_mlp(mlp_dim)),
      "dots_saveable": lambda: jax.checkpoint_policies.dots_saveable,
      "nothing+attn": lambda: _policy_plus_attention(
          jax.checkpoint_policies.nothing_saveable),
      "dots+gelu": lambda: _policy_plus_names(dots),
      "dots+gelu+attn": lambda: _policy_plus_attention(_policy_plus_names(dots)),
  }[name]()


# The MLP's activation output, named where a policy saves it (`patched`).
GELU_NAME = "mlp_activation"


def _policy_plus_names(base_policy):
  """`base_policy`, and the values named GELU_NAME saved too."""
  import jax  # noqa: PLC0415
  return jax.checkpoint_policies.save_from_both_policies(
      base_policy, jax.checkpoint_policies.save_only_these_names(GELU_NAME))


POLICIES = {
    "dots+attn": "'dots' (Dense outputs) and the fused attention kernel's outputs",
    "dots-mlp": "'dots' without fc1's (B,T,M) output: q, k, v and the attention "
                "projection saved; fc1 and the GELU recomputed",
    "dots-mlp+attn": "'dots-mlp' and the fused attention kernel's outputs",
    "dots_saveable": "jax.checkpoint_policies.dots_saveable (batched dots too: the "
                     "XLA path's scores and probabilities·V)",
    "nothing+attn": "remat, but the fused attention kernel's outputs saved",
    "dots+gelu": "'dots' and the GELU's output (fc2's input; what PyTorch saves): "
                 "only the norms recomputed",
    "dots+gelu+attn": "'dots+gelu' and the fused attention kernel's outputs",
}
POLICY_SETTINGS = tuple(f"scan/{p}/u1" for p in POLICIES)


@contextlib.contextmanager
def patched(row: Row, mlp_dim: int) -> Iterator[None]:
  """This process's library, for `row`: XLA's attention kernel (kernel="xla")
  and an experimental remat policy (`row.policy`), undone on exit."""
  from flax import linen as nn  # noqa: PLC0415
  from jax.ad_checkpoint import checkpoint_name  # noqa: PLC0415
  from vit_spectral.attention import fused  # noqa: PLC0415
  from vit_spectral.layers import mlp  # noqa: PLC0415
  from vit_spectral.models import vit  # noqa: PLC0415
  saved = []
  try:
    if "gelu" in row.policy:
      activate = mlp.activate
      saved.append((mlp, "activate", activate))
      mlp.activate = lambda x, name: checkpoint_name(activate(x, name), GELU_NAME)
    if row.kernel == "xla":
      if not hasattr(fused, "kernel_for"):
        raise RuntimeError("kernel='xla' patches attention.fused.kernel_for, which is gone")
      saved.append((fused, "kernel_for", fused.kernel_for))
      fused.kernel_for = lambda *args, **kwargs: "xla"
    if row.policy:
      policy = make_policy(row.policy, mlp_dim)
      saved.append((vit.Encoder, "block_class", vit.Encoder.block_class))

      def block_class(self):
        return nn.remat(vit.Block, prevent_cse=self.spec.mode != "scan", policy=policy)
      vit.Encoder.block_class = block_class
    yield
  finally:
    for owner, name, value in reversed(saved):
      setattr(owner, name, value)


def row_config(row: Row):
  """The recipe's config with `row`'s encoder settings."""
  from vit_spectral import configs  # noqa: PLC0415
  from vit_spectral.main import load_config  # noqa: PLC0415
  config = load_config(configs.recipe_path("imagenet_deit") + ":" + row.recipe_arg())
  model = config.model
  model.encoder_mode = row.mode
  if row.residuals == "remat":
    model.remat = True
    model.encoder_residuals = None
  else:
    model.remat = False
    model.encoder_residuals = None if row.policy else row.residuals
  if row.mode == "scan":
    model.encoder_unroll = row.unroll or int(model.depth)
  return config


# --- What the HLO says -----------------------------------------------------------------

_CUSTOM_CALL = re.compile(r'custom_call_target="([^"]+)"')


def custom_call_kind(target: str) -> str:
  if target.startswith("__cudnn$fmha"):
    return "cudnn_fmha"
  if target.startswith("__cublas"):
    return "cublas"
  if target.startswith("__cudnn$conv"):
    return "cudnn_conv"
  return "other"


def hlo_counts(text: str) -> dict[str, Any]:
  """Fusions and custom calls of an optimized HLO module text: in the program
  ("static") and run per step (each loop body times its trip count, by
  `hlo_costs.HloModule.multiplicities`), custom calls by target."""
  from vit_spectral.planning import hlo_costs  # noqa: PLC0415
  module = hlo_costs.HloModule.parse(text)
  runs = module.multiplicities()
  fused = _fused_computations(module)
  counts = collections.Counter()
  targets = collections.Counter()
  loops = []
  for name, instructions in module.computations.items():
    if name in fused:
      continue
    n = runs.get(name, 0)
    for instruction in instructions:
      if instruction.opcode == "fusion":
        counts["fusions_static"] += 1
        counts["fusions_per_step"] += n
      elif instruction.opcode == "custom-call":
        match = _CUSTOM_CALL.search(instruction.text)
        target = match[1] if match else "?"
        kind = custom_call_kind(target)
        counts[f"{kind}_static"] += 1
        counts[f"{kind}_per_step"] += n
        targets[target] += n
      elif instruction.opcode == "while":
        loops.append(module.trip_count(instruction, name))
  return {**{k: counts[k] for k in sorted(counts)}, "custom_call_targets": dict(targets),
          "while_trip_counts": sorted((t for t in loops if t is not None), reverse=True),
          "data_dependent_loops": sum(t is None for t in loops)}


def _fused_computations(module) -> set[str]:
  """Computations called by fusions (their instructions run inside one kernel)."""
  fused = set()
  for instructions in module.computations.values():
    for instruction in instructions:
      if instruction.opcode == "fusion":
        fused |= {callee for how, callee in instruction.called() if how == "calls"}
  todo = list(fused)
  while todo:   # nested fused computations
    for instruction in module.computations.get(todo.pop(), []):
      for _, callee in instruction.called():
        if callee not in fused:
          fused.add(callee)
          todo.append(callee)
  return fused


_SHAPE = re.compile(r"^([a-z]+[0-9]*)\[([0-9,]*)\]")


def parse_shape(text: str) -> tuple[str, tuple[int, ...]] | None:
  """"bf16[12,256,197,384]{3,2,1,0}" -> ("bf16", (12, 256, 197, 384)); None
  for a tuple or token."""
  match = _SHAPE.match(text.strip().replace(" ", ""))
  if not match:
    return None
  return match[1], tuple(int(d) for d in match[2].split(",") if d)


@dataclasses.dataclass(frozen=True)
class Dims:
  """The model's dimensions, per device, for `classify_shape`."""

  batch: int
  tokens: int
  width: int
  heads: int
  head_dim: int
  mlp: int
  depth: int
  classes: int
  image: int

  def token_like(self, d: int) -> bool:
    """T, or T padded for a kernel (cuDNN: to a multiple of 16; splash: of 128)."""
    return self.tokens <= d <= _round_up(self.tokens, 128)


def _round_up(n: int, m: int) -> int:
  return -(-n // m) * m


CLASSES = ("attention maps (B,H,T,T)", "MLP hidden (B,T,M)", "q, k, v, attention out (B,T,H,Dh)",
           "width-D activations (B,T,D)", "attention softmax stats (B,H,T)",
           "norm statistics (B,T)", "masks (pred)", "input images", "logits (B,K)",
           "parameters, gradients, optimizer state", "other")


def classify_shape(dtype: str, shape: tuple[int, ...], dims: Dims) -> str:
  """What an array of `shape` holds, by its dimensions (see CLASSES): the
  stacking axis of a scanned encoder (L leading, B next) is looked through."""
  s = list(shape)
  lead = _stacking_axes(s, dims)
  s = s[lead:]
  bt = dims.batch * dims.tokens
  # Activations lead with the batch (or batch × tokens, batch × heads, flattened).
  has_batch = bool(s) and s[0] in (dims.batch, bt, dims.batch * dims.heads)
  if s and s[0] == dims.batch and len(s) == 4 and s[1:3] == [dims.image, dims.image]:
    return "input images"
  if s and s[-1] == dims.image and len(s) == 4 and s[0] == dims.batch:
    return "input images"
  if not has_batch:
    return "parameters, gradients, optimizer state"
  if dtype == "pred":
    return "masks (pred)"
  # Token axes: never the leading (batch) one, which may equal a padded T.
  tokens = [i for i, d in enumerate(s) if i > 0 and dims.token_like(d)]
  if len(s) >= 3 and dims.token_like(s[-1]) and dims.token_like(s[-2]) and s[0] != s[-1]:
    return "attention maps (B,H,T,T)"
  if dims.mlp in s or (dims.mlp * dims.tokens) in s:
    return "MLP hidden (B,T,M)"
  if dims.heads in s[1:] and dims.head_dim in s[1:] and (tokens or bt in s):
    return "q, k, v, attention out (B,T,H,Dh)"   # in any order of T, H, Dh
  if dims.width in s and (tokens or bt in s):
    return "width-D activations (B,T,D)"
  if dims.heads in s and tokens:
    return "attention softmax stats (B,H,T)"
  if tokens and all(d in (dims.batch, 1) or dims.token_like(d) for d in s):
    return "norm statistics (B,T)"
  if dims.classes in s:
    return "logits (B,K)"
  return "other"


def _stacking_axes(shape, dims: Dims) -> int:
  """How many leading axes of `shape` stack the encoder's layers: (L, B, ...)
  or, unrolled by u, (L/u, u, B, ...); 0 where none."""
  for axes in (1, 2):
    if len(shape) > axes and math.prod(shape[:axes]) == dims.depth and \
       shape[axes] == dims.batch:
      return axes
  return 0


def stacked_residuals(text: str, dims: Dims) -> dict[str, Any]:
  """The (L, B, ...) buffers of the step's loops over the encoder: what the
  scanned encoder's forward loop hands to its backward loop. Each buffer
  once (the largest loop holding it), by class and dtype."""
  from vit_spectral.planning import hlo_costs  # noqa: PLC0415
  module = hlo_costs.HloModule.parse(text)
  best: dict[str, Any] = {}
  for name, instructions in module.computations.items():
    for instruction in instructions:
      if instruction.opcode != "while":
        continue
      shapes = [parse_shape(t) for t in _tuple_elements(instruction.type)]
      stacked = [s for s in shapes if s and _stacking_axes(s[1], dims)]
      if stacked and len(stacked) > len(best.get("items", [])):
        best = {"loop": instruction.name, "items": stacked}
  shapes = collections.Counter(f"{dtype}[{','.join(map(str, shape))}]"
                               for dtype, shape in best.get("items", []))
  return {"loop": best.get("loop"), **summarize_stacked(dict(shapes), dims)}


def summarize_stacked(shapes: dict[str, int], dims: Dims) -> dict[str, Any]:
  """{shape text: count} of stacked buffers -> count, bytes, by class and dtype."""
  by_class = collections.Counter()
  for text, count in shapes.items():
    dtype, shape = parse_shape(text)
    by_class[f"{classify_shape(dtype, shape, dims)} [{dtype}]"] += (
        count * math.prod(shape) * _bytes(dtype))
  return {"count": sum(shapes.values()), "bytes": sum(by_class.values()),
          "by_class": dict(by_class.most_common()),
          "shapes": dict(sorted(shapes.items(), key=lambda kv: -kv[1]))}


def _tuple_elements(type_text: str) -> list[str]:
  text = re.sub(r"/\*index=\d+\*/", "", type_text.strip())
  if not text.startswith("("):
    return [text]
  inner, depth, parts, current = text[1:-1], 0, [], ""
  for ch in inner:
    if ch in "({[":
      depth += 1
    elif ch in ")}]":
      depth -= 1
    if ch == "," and depth == 0:
      parts.append(current.strip())
      current = ""
    else:
      current += ch
  if current.strip():
    parts.append(current.strip())
  return parts


_BYTES = {"pred": 1, "s8": 1, "u8": 1, "bf16": 2, "f16": 2, "s16": 2, "u16": 2, "f32": 4,
          "s32": 4, "u32": 4, "f64": 8, "s64": 8, "u64": 8}


def _bytes(dtype: str) -> int:
  return _BYTES.get(dtype, 1)


# --- What the buffer assignment says ---------------------------------------------------

_VALUE = re.compile(r"^ value: <\d+ (\S+) @\d+> \(size=(\d+),offset=(\d+)\): (.*)$")
_ALLOCATION = re.compile(r"^allocation (\d+): size (\d+)(.*)$")
_PEAK = re.compile(r"^\s*Live ranges at (\d+) \(peak\):")
_LIVE = re.compile(r"^\s+(\S+): (\d+) bytes")


def _value_name(name: str) -> str:
  return name if name.endswith("}") else name + "{}"


def parse_buffer_assignment(text: str) -> dict[str, tuple[int, str, int, int, str]]:
  """XLA's buffer assignment text -> {value name ("x{}", "t{0}"): (allocation,
  kind, offset, size, shape text)}; kind: "parameter", "temp", "output",
  "constant" or "other"."""
  values, allocation, kind = {}, None, "other"
  for line in text.splitlines():
    match = _ALLOCATION.match(line)
    if match:
      allocation, rest = int(match[1]), match[3]
      kind = ("parameter" if " parameter " in rest else "temp" if "temp" in rest
              else "constant" if "constant" in rest else
              "output" if "output" in rest or "live-out" in rest else "other")
      continue
    match = _VALUE.match(line)
    if match and allocation is not None:
      values[_value_name(match[1])] = (allocation, kind, int(match[3]), int(match[2]),
                                       match[4])
  return values


def peak_live(live_range_text: str) -> tuple[int | None, list[tuple[str, int]]]:
  """XLA's live-range dump -> (the peak's position, [(value, bytes)] live there)."""
  lines = live_range_text.splitlines()
  for i, line in enumerate(lines):
    match = _PEAK.match(line)
    if match:
      live = []
      for entry in lines[i + 1:]:
        value = _LIVE.match(entry)
        if not value:
          break
        live.append((value[1], int(value[2])))
      return int(match[1]), live
  return None, []


def peak_buffers(buffer_text: str, live_text: str, dims: Dims | None,
                 top: int = 12) -> dict[str, Any]:
  """The buffers live at the heap simulator's peak, each once (values that
  share a buffer, as a loop's input, body and output do, are one), with what
  their shapes say they hold."""
  values = parse_buffer_assignment(buffer_text)
  position, live = peak_live(live_text)
  seen, buffers, missing = set(), [], 0
  for name, _ in live:
    info = values.get(name)
    if info is None:
      missing += 1
      continue
    allocation, kind, offset, size, shape = info
    if (allocation, offset, size) in seen:
      continue
    seen.add((allocation, offset, size))
    buffers.append((shape.split("{")[0] if parse_shape(shape) else "tuple", kind, size))
  grouped = collections.Counter()
  grouped_bytes = collections.Counter()
  for shape, kind, size in buffers:
    grouped[(shape, kind)] += 1
    grouped_bytes[(shape, kind)] += size
  shapes = [{"shape": shape, "allocation": kind, "count": grouped[(shape, kind)],
             "bytes": total} for (shape, kind), total in grouped_bytes.most_common()]
  return {"peak_position": position, "live_bytes": sum(b[2] for b in buffers),
          "buffers": len(buffers), "unmatched_values": missing,
          **summarize_peak(shapes, dims, top),
          "shapes": [s for s in shapes if s["bytes"] >= MIB]}   # the rest: < 1 MiB each


def summarize_peak(shapes: list[dict], dims: Dims | None, top: int = 12) -> dict[str, Any]:
  """The peak's buffers ({"shape", "allocation", "count", "bytes"}) by class
  (`classify_shape`; the step's parameters by their allocation) and, for the
  activations, by dtype; the `top` largest shapes."""
  by_class, by_dtype = collections.Counter(), collections.Counter()
  largest = collections.Counter()
  counts = collections.Counter()
  for item in shapes:
    parsed = parse_shape(item["shape"])
    what = classify_shape(*parsed, dims) if dims and parsed else "other"
    if item["allocation"] == "parameter" and what != "input images":
      what = "parameters, gradients, optimizer state"
    by_class[what] += item["bytes"]
    if parsed and what not in ("parameters, gradients, optimizer state", "input images"):
      by_dtype[parsed[0]] += item["bytes"]
    largest[item["shape"]] += item["bytes"]
    counts[item["shape"]] += item["count"]
  return {"by_class": dict(by_class.most_common()),
          "activations_by_dtype": dict(by_dtype.most_common()),
          "largest": [{"shape": s, "count": counts[s], "bytes": b}
                      for s, b in largest.most_common(top)]}


def read_dump(folder: str) -> tuple[str, str] | None:
  """(buffer assignment, live ranges) of the largest module XLA dumped into
  `folder`, or None."""
  assignments = glob.glob(os.path.join(folder, "*buffer-assignment.txt"))
  if not assignments:
    return None
  assignment = max(assignments, key=os.path.getsize)
  live = assignment.replace("buffer-assignment.txt", "live-range.txt")
  if not os.path.exists(live):
    return None
  with open(assignment, encoding="utf-8") as f, open(live, encoding="utf-8") as g:
    return f.read(), g.read()


# --- One compile ----------------------------------------------------------------------

def model_dims(config, batch_per_device: int) -> Dims:
  from vit_spectral.models import build  # noqa: PLC0415
  spec = build.model_spec(config.model)
  fields = spec.fields
  block = fields["block"]
  width = int(fields.get("hidden_size"))
  heads = int(block.num_heads)
  image = int(config.input.image_size)
  patch = int(fields.get("patch_size"))
  tokens = (image // patch) ** 2 + 1 + int(fields.get("register_tokens", 0) or 0)
  return Dims(batch=batch_per_device, tokens=tokens, width=width, heads=heads,
              head_dim=width // heads, mlp=int(block.mlp_dim), depth=int(fields["depth"]),
              classes=1000, image=image)


def compile_row(row: Row, target, devices, keep_text: str | None = None) -> dict[str, Any]:
  """Plans, lowers and compiles `row` for `target`: its figures (module docstring)."""
  from vit_spectral.planning import dry_run, hlo_costs, jaxpr_costs  # noqa: PLC0415
  from vit_spectral.planning import target_dry_run, tpu_targets  # noqa: PLC0415
  config = row_config(row)
  depth = int(config.model.depth)
  result: dict[str, Any] = {"key": row.key, **dataclasses.asdict(row),
                            "settings": row.settings, "flags": row.flags(depth),
                            "library_fingerprint": library_fingerprint(),
                            "compiled_at": datetime.datetime.now().isoformat(timespec="seconds")}
  if row.policy:
    result["policy_description"] = POLICIES[row.policy]
  start = time.perf_counter()
  with tempfile.TemporaryDirectory(prefix="gpu_step_plans_") as dump:
    with patched(row, _mlp_dim(config)):
      step = dry_run.plan(config, devices)
      batch_devices = step.mesh.shape["data"] * step.mesh.shape["fsdp"]
      dims = model_dims(config, row.batch // batch_devices)
      lowered = step.lower()
      jaxpr = jaxpr_costs.trace(step.steps.train_step, step.state, step.batch)
    result["trace_seconds"] = time.perf_counter() - start
    options = dict(target.compiler_options)
    options.update(xla_dump_to=dump, xla_dump_hlo_as_text=True)
    compiled = lowered.compile(compiler_options=options)
    result["compile_seconds"] = time.perf_counter() - start - result["trace_seconds"]
    text = compiled.as_text()
    if keep_text:
      with open(keep_text, "w", encoding="utf-8") as f:
        f.write(text)
    dumped = read_dump(dump)
  memory = dry_run.memory_of(compiled)
  costs = hlo_costs.step_costs(compiled)
  on_tpu = isinstance(target, tpu_targets.TpuTarget)
  flops = costs.flops if on_tpu else jaxpr_costs.matmul_flops(jaxpr) / len(devices)
  line = target_dry_run.roofline(flops, costs.bytes_accessed, costs.collective_bytes, target)
  result.update({
      "num_params": step.num_params, "depth": depth, "mesh": dict(step.mesh.shape),
      "dims": dataclasses.asdict(dims),
      "memory": memory, "memory_gib": {k: v / GIB for k, v in memory.items()},
      "capacity_gib": target.memory_bytes / GIB,
      "flops": flops, "flops_source": "HLO" if on_tpu else "jaxpr",
      "bytes_accessed": costs.bytes_accessed,
      "step_seconds": line.seconds, "bound": line.bound,
      "roofline_seconds": dataclasses.asdict(line),
      "hlo": hlo_counts(text),
      "stacked_residuals": stacked_residuals(text, dims),
      "peak": peak_buffers(*dumped, dims) if dumped else None,
  })
  result["analysis_seconds"] = (time.perf_counter() - start - result["trace_seconds"]
                                - result["compile_seconds"])
  return result


def library_fingerprint() -> str:
  """A hash of vit_spectral's sources as this process imported them: rows
  with the same one compiled the same library (the working tree moves)."""
  import hashlib  # noqa: PLC0415
  import vit_spectral  # noqa: PLC0415
  root = os.path.dirname(vit_spectral.__file__)
  digest = hashlib.sha256()
  for path in sorted(glob.glob(os.path.join(root, "**", "*.py"), recursive=True)):
    with open(path, "rb") as f:
      digest.update(os.path.relpath(path, root).encode() + b"\0" + f.read())
  return digest.hexdigest()[:12]


def _mlp_dim(config) -> int:
  from vit_spectral.models import build  # noqa: PLC0415
  return int(build.model_spec(config.model).fields["block"].mlp_dim)


# --- What one block saves (jaxpr) -------------------------------------------------------

def block_residuals(row: Row, platform: str = "gpu") -> dict[str, Any]:
  """What one encoder block of `row`'s model saves for the backward pass: the
  residuals of `jax.vjp` of a depth-1 loop model (`row`'s residual policy or
  remat) with respect to its parameters, each with the op and module that
  made it, bytes per device. Traced only (nothing compiled)."""
  import jax  # noqa: PLC0415
  import jax.numpy as jnp  # noqa: PLC0415
  from jax._src import core  # noqa: PLC0415
  from vit_spectral import backends  # noqa: PLC0415
  from vit_spectral.models import build  # noqa: PLC0415
  single = dataclasses.replace(row, mode="loop", unroll=1)
  config = row_config(single)
  config.model.depth = 1
  with patched(single, _mlp_dim(config)):
    model = build.build_model(config.model, 1000, backends.Backend(platform))
    size = int(config.input.image_size)
    images = jax.ShapeDtypeStruct((row.batch, size, size, 3), jnp.float32)
    params = jax.eval_shape(lambda: model.init(
        {"params": jax.random.key(0)}, jnp.zeros((1, size, size, 3)), train=False)["params"])

    def loss(p, x):
      logits = model.apply({"params": p}, x, train=True, rngs={"dropout": jax.random.key(1)})
      return logits.astype(jnp.float32).sum()

    closed, shapes = jax.make_jaxpr(lambda p, x: jax.vjp(lambda q: loss(q, x), p),
                                    return_shape=True)(params, images)
  jaxpr = closed.jaxpr
  count = len(jax.tree_util.tree_leaves(shapes[1]))
  residuals = {v for v in jaxpr.outvars[len(jaxpr.outvars) - count:]
               if not isinstance(v, core.Literal)}
  producers = {v: e for e in jaxpr.eqns for v in e.outvars}
  items = []
  for v in residuals:
    eqn = producers.get(v)
    stack = str(eqn.source_info.name_stack) if eqn is not None else "argument"
    if "encoderblock" not in stack:
      continue
    module = re.sub(r"^.*?encoderblock_0/", "", stack)
    module = re.sub(r"encoderblock_0\.", "", module)
    items.append({"module": module, "op": eqn.primitive.name, "shape":
                  f"{v.aval.dtype}{list(v.aval.shape)}",
                  "bytes": int(v.aval.size * v.aval.dtype.itemsize)})
  items.sort(key=lambda i: (-i["bytes"], i["module"]))
  by_dtype = collections.Counter()
  for i in items:
    by_dtype[i["shape"].split("[")[0]] += i["bytes"]
  return {"settings": row.settings, "variant": row.variant, "kernel": row.kernel,
          "bytes_per_layer": sum(i["bytes"] for i in items), "by_dtype": dict(by_dtype),
          "residuals": items}


# --- Output ---------------------------------------------------------------------------

def _gib(value: float | None) -> str:
  return "—" if value is None else f"{value / GIB:.2f}"


def table(rows: list[dict]) -> str:
  lines = ["| target | variant | attention | settings | total GiB | temp GiB | est. ms | bound "
           "| compute / HBM ms | TFLOP | fusions (text / per step) | cuDNN fmha | cuBLAS "
           "| stacked residuals GiB | largest live buffer |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
  for r in rows:
    if r.get("error"):
      lines.append(f"| {r['target']} | {r['variant']} | {r['kernel']} | {r['settings']} | "
                   f"error: {r['error'][:80]} |||||||||||")
      continue
    hlo, peak = r["hlo"], r.get("peak") or {}
    largest = (peak.get("largest") or [{}])[0]
    big = f"{largest.get('count', 0)}× {largest.get('shape', '')}" if largest else ""
    lines.append(
        f"| {r['target']} | {r['variant']} | {r['kernel']} | {r['settings']} | "
        f"{_gib(r['memory']['total'])} | {_gib(r['memory']['temp'])} | "
        f"{r['step_seconds'] * 1e3:.1f} | {r['bound']} | "
        f"{r['roofline_seconds']['compute_seconds'] * 1e3:.1f} / "
        f"{r['roofline_seconds']['hbm_seconds'] * 1e3:.1f} | {r['flops'] / 1e12:.2f} | "
        f"{hlo.get('fusions_static', 0)} / {hlo.get('fusions_per_step', 0)} | "
        f"{hlo.get('cudnn_fmha_per_step', 0)} | {hlo.get('cublas_per_step', 0)} | "
        f"{_gib(r['stacked_residuals']['bytes'])} | {big} |")
  return "\n".join(lines)


def _git(*args: str) -> str:
  try:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                          check=False).stdout.strip()
  except OSError:
    return ""


def load_results(path: str) -> dict[str, Any]:
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  return {"rows": [], "block_residuals": []}


def save_results(path: str, results: dict[str, Any], new_rows: list[dict],
                 new_blocks: list[dict], argv: list[str]) -> dict[str, Any]:
  import jax  # noqa: PLC0415
  import jaxlib  # noqa: PLC0415
  rows = {r["key"]: r for r in results.get("rows", [])}
  for r in new_rows:
    rows[r["key"]] = r
  blocks = {(b["variant"], b["kernel"], b["settings"]): b
            for b in results.get("block_residuals", [])}
  for b in new_blocks:
    blocks[(b["variant"], b["kernel"], b["settings"])] = b
  commands = list(results.get("commands", []))
  plugin = (".ci/libtpu" if any(a.startswith("--target=v") for a in argv)
            else ".ci/cuda:/tmp/cudnn")
  command = (f"XLA_FLAGS= JAX_PLATFORMS=cpu PYTHONPATH={plugin} python "
             + " ".join(["benchmarks/gpu_step_plans.py", *argv]))
  if argv and command not in commands:
    commands.append(command)
  out = {
      "description": "The DeiT recipe's train step (ViT-S/16, B/16; 224², bf16 compute, "
                     "float32 params, AdamW, EMA) compiled for one H100 "
                     "(a3-highgpu-1g) by the GPU compiler on a CPU-only machine, "
                     "for each encoder setting; memory per GPU from the compiler's "
                     "memory analysis, step time a roofline over its HLO, buffers live at "
                     "the peak from its buffer assignment.",
      "estimates_not_measurements": True,
      "note": "These are the GPU compiler's estimates (memory analysis, buffer assignment) "
              "and a roofline over its cost analysis, for an H100 nobody ran on; "
              "issue 40's figures (measured_h200) are measurements on an H200.",
      "commands": commands,
      "date": datetime.date.today().isoformat(),
      "jax_version": jax.__version__, "jaxlib_version": jaxlib.__version__,
      "git_commit": _git("rev-parse", "HEAD"),
      "working_tree_changes": _git("status", "--short", "--", "vit_spectral").splitlines(),
      "notes": list(NOTES),
      "measured_h200": MEASURED_H200,
      "policies": POLICIES,
      "rows": sorted(rows.values(), key=lambda r: r["key"]),
      "block_residuals": sorted(blocks.values(),
                                key=lambda b: (b["variant"], b["kernel"], b["settings"])),
  }
  with open(path, "w", encoding="utf-8") as f:
    json.dump(out, f, indent=1, default=float)
    f.write("\n")
  return out


def main(argv: list[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--variants", default="S/16,B/16")
  parser.add_argument("--kernels", default="auto,xla",
                      help="auto (the library's choice), xla (XLA's attention, patched)")
  parser.add_argument("--settings", default="",
                      help="comma-separated mode/residuals[/uN], e.g. scan/dots/u2, "
                           "loop/remat, scan/dots-mlp/u1 (a POLICIES name); default: "
                           "the matrix")
  parser.add_argument("--policies", action="store_true",
                      help="only the experimental remat policies (POLICY_SETTINGS)")
  parser.add_argument("--block_residuals", action="store_true",
                      help="also trace what one block saves, per setting")
  parser.add_argument("--target", default="a3-highgpu-1g")
  parser.add_argument("--batch", type=int, default=256)
  parser.add_argument("--results", default=RESULTS)
  parser.add_argument("--keep_hlo", default="", help="folder for each row's HLO text")
  parser.add_argument("--dry", action="store_true", help="list the rows, compile nothing")
  parser.add_argument("--table", action="store_true",
                      help="print the table of the saved results, compile nothing")
  parser.add_argument("--reclassify", action="store_true",
                      help="re-derive the saved rows' classes from their shapes")
  args = parser.parse_args(argv)
  if args.table:
    print(table(load_results(args.results)["rows"]))
    return 0
  if args.reclassify:
    results = load_results(args.results)
    for r in results["rows"]:
      if "dims" not in r:
        continue
      dims = Dims(**r["dims"])
      r["stacked_residuals"] = {"loop": r["stacked_residuals"].get("loop"),
                                **summarize_stacked(r["stacked_residuals"]["shapes"], dims)}
      if r.get("peak") and "shapes" in r["peak"]:
        r["peak"].update(summarize_peak(r["peak"]["shapes"], dims))
      elif r.get("peak"):   # saved before the shapes were: the largest ones only
        largest = [{**item, "allocation": "?"} for item in r["peak"]["largest"]]
        r["peak"].update(summarize_peak(largest, dims), classes_from_largest_only=True)
    save_results(args.results, results, [], [], [])
    return 0
  settings = [s for s in args.settings.split(",") if s] or None
  if args.policies:
    settings = list(POLICY_SETTINGS)
  rows = matrix(args.variants.split(","), args.kernels.split(","), settings, args.target,
                args.batch)
  if args.dry:
    print("\n".join(r.key for r in rows))
    return 0
  from vit_spectral.planning import target_dry_run  # noqa: PLC0415
  target = target_dry_run.parse_target(args.target)
  devices = list(target.devices())
  results = load_results(args.results)
  done, blocks = [], []
  for i, row in enumerate(rows):
    print(f"[{i + 1}/{len(rows)}] {row.key}", file=sys.stderr, flush=True)
    keep = (os.path.join(args.keep_hlo, re.sub(r"[^\w.]+", "_", row.key) + ".hlo")
            if args.keep_hlo else None)
    try:
      result = compile_row(row, target, devices, keep)
    except Exception as e:  # pylint: disable=broad-except  # one row's failure is its cell
      traceback.print_exc()
      result = {"key": row.key, **dataclasses.asdict(row), "settings": row.settings,
                "error": f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"}
    done.append(result)
    if not result.get("error"):
      print(f"    total {_gib(result['memory']['total'])} GiB, "
            f"{result['step_seconds'] * 1e3:.1f} ms, compile "
            f"{result['compile_seconds']:.0f} s", file=sys.stderr, flush=True)
    if args.block_residuals and row.mode == "scan" and row.unroll == 1:
      try:
        blocks.append(block_residuals(row, devices[0].platform))
      except Exception:  # pylint: disable=broad-except
        traceback.print_exc()
    results = save_results(args.results, results, [result], blocks, argv)
  print(table(done))
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
