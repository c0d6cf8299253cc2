"""What one compiled step costs, read from its optimized HLO, with loops
counted as many times as they run.

  costs = step_costs(compiled)          # a jax.stages.Compiled
  costs.flops, costs.bytes_accessed     # per device, every loop iteration
  costs.collectives                     # [Collective(kind, count, bytes)]

XLA's cost analysis (`compiled.cost_analysis()`) visits each computation
once, so a `while` loop's body counts once however often it runs: for a
scanned encoder (model.encoder_mode="scan") that is one block of L. Here:

  total = XLA's total + Σ_loops m(parent) · (n − 1) · cost(body)

where n is the loop's trip count, read off its condition (a counter
compared with a constant, `i < n`, as `lax.scan` and `fori_loop` lower),
m(parent) how often the computation holding the loop runs (nested loops
multiply) and cost(body) XLA's own cost analysis of the body computation
alone (the entry of a module of the computations it calls, costed by the
CPU client's cost analysis, which reads any backend's HLO; its FLOPs equal
the TPU compiler's, its bytes leave out the tiles' padding, so the body's
bytes are scaled by the whole step's ratio of the two). Loops whose trip
count is data-dependent (a rejection sampler's) stay counted once;
`StepCosts.uncounted_loops` names them.

Collectives: every all-reduce, all-gather, reduce-scatter, all-to-all and
collective-permute (their async `-start` halves once each), times how often
its computation runs, with the bytes of its result on one device (for an
async start, its largest buffer: the result, not the operand it carries).
"""

from __future__ import annotations

import collections
import dataclasses
import re
from typing import Any

COLLECTIVE_KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                    "collective-permute")
# Bytes per element of HLO's primitive types (sub-byte types round up per element).
_DTYPE_BYTES = {"pred": 1, "s2": 1, "u2": 1, "s4": 1, "u4": 1, "s8": 1, "u8": 1, "s16": 2,
                "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4, "s64": 8,
                "u64": 8, "f64": 8, "c64": 8, "c128": 16}
_ARRAY = re.compile(r"\b([a-z]+[0-9]*(?:e[0-9]m[0-9][a-z0-9]*)?)\[([0-9,]*)\]")
_INSTRUCTION = re.compile(
    r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+) = (?P<type>.*?) (?P<op>[a-z][a-z0-9\-]*)\((?P<args>.*)$")
_CALLED = re.compile(r"\b(condition|body|calls|to_apply|true_computation|false_computation)"
                     r"=%?([\w.\-]+)")
_CALLED_LISTS = re.compile(r"\b(?:branch_computations|called_computations)=\{([^}]*)\}")
_OPERAND = re.compile(r"%([\w.\-]+)")


@dataclasses.dataclass(frozen=True)
class Instruction:
  name: str
  type: str          # the result type, e.g. "bf16[64,197,384]{2,1,0}" or a tuple
  opcode: str
  text: str          # the whole line

  def operands(self) -> list[str]:
    """Names of the operands (the argument list before the attributes)."""
    args = self.text.split(f" {self.opcode}(", 1)[1]
    depth, end = 1, 0
    for end, ch in enumerate(args):
      depth += {"(": 1, ")": -1}.get(ch, 0)
      if depth == 0:
        break
    return _OPERAND.findall(args[:end])

  def called(self) -> list[tuple[str, str]]:
    """(how, computation) for each computation this instruction calls."""
    calls = [(how, name) for how, name in _CALLED.findall(self.text)]
    for listed in _CALLED_LISTS.findall(self.text):
      calls += [("calls", name.strip().lstrip("%")) for name in listed.split(",") if name.strip()]
    return calls


@dataclasses.dataclass(frozen=True)
class HloModule:
  """An HLO module's text split into computations (in the printed order:
  every computation after the ones it calls, the entry last)."""

  text: str
  computations: dict[str, list[Instruction]]
  entry: str

  @classmethod
  def parse(cls, text: str) -> "HloModule":
    computations, entry, current = {}, None, None
    for line in text.splitlines():
      # A computation opens on an unindented line ending in "{" and closes on a
      # line "}" alone (an instruction's text may span lines: a Pallas kernel's).
      if current is None and not line.startswith((" ", "\t")) and line.rstrip().endswith("{"):
        header = line[len("ENTRY "):] if line.startswith("ENTRY ") else line
        current = header.split(" ", 1)[0].lstrip("%")
        computations[current] = []
        if line.startswith("ENTRY "):
          entry = current
      elif line.rstrip() == "}":
        current = None
      elif current is not None:
        match = _INSTRUCTION.match(line)
        if match:
          computations[current].append(
              Instruction(match["name"], match["type"], match["op"], line))
    if entry is None:
      raise ValueError("no ENTRY computation in the HLO text")
    return cls(text, computations, entry)

  def instruction(self, computation: str, name: str) -> Instruction | None:
    return next((i for i in self.computations[computation] if i.name == name), None)

  def trip_count(self, loop: Instruction, computation: str) -> int | None:
    """The iterations of `while` instruction `loop` (in `computation`): its
    backend config's `known_trip_count` where the compiler wrote one, else
    when its condition is `counter < constant` and the counter starts at a
    constant; else None."""
    known = re.search(r'"known_trip_count":\{"n":"(\d+)"\}', loop.text)
    if known:   # the GPU compiler writes it down
      return int(known[1])
    called = dict(loop.called())
    condition = self.computations.get(called.get("condition", ""), [])
    root = next((i for i in condition if i.text.lstrip().startswith("ROOT")), None)
    if root is None or root.opcode != "compare":
      return None
    direction = re.search(r"direction=(\w+)", root.text)
    left, right = (self.instruction(called["condition"], n) for n in root.operands()[:2])
    if direction is None or left is None or right is None:
      return None
    if direction[1] in ("GT", "GE"):   # n > i is i < n
      left, right = right, left
    if direction[1] not in ("LT", "LE", "GT", "GE"):
      return None
    limit = self.constant(called["condition"], right)
    if left.opcode != "get-tuple-element" or limit is None:
      return None
    index = int(re.search(r"index=(\d+)", left.text)[1])
    init_tuple = self.instruction(computation, loop.operands()[0])
    start = None
    if init_tuple is not None and init_tuple.opcode == "tuple":
      element = self.instruction(computation, init_tuple.operands()[index])
      start = self.constant(computation, element) if element is not None else None
    if start is None:
      return None
    count = limit - start + (1 if direction[1] in ("LE", "GE") else 0)
    return max(count, 0)

  def constant(self, computation: str, instruction: Instruction) -> int | None:
    """The integer `instruction` holds when it is a scalar constant, or a
    copy, bitcast or conversion of one; else None."""
    while instruction is not None and instruction.opcode in ("copy", "bitcast", "convert"):
      operands = instruction.operands()
      instruction = self.instruction(computation, operands[0]) if operands else None
    if instruction is None or instruction.opcode != "constant":
      return None
    match = re.search(r"constant\((-?\d+)\)", instruction.text)
    return int(match[1]) if match else None

  def multiplicities(self) -> dict[str, int]:
    """How often each computation runs per execution of the entry (loops'
    bodies by their trip counts; an unknown trip count counts once)."""
    runs = collections.defaultdict(int)
    runs[self.entry] = 1
    for name in reversed(list(self.computations)):   # callers before callees
      for instruction in self.computations[name]:
        trips = (self.trip_count(instruction, name) if instruction.opcode == "while"
                 else None)
        for how, callee in instruction.called():
          runs[callee] += runs[name] * (trips if how == "body" and trips else 1)
    return dict(runs)

  def callees(self, computation: str) -> set[str]:
    """`computation` and every computation it calls, directly or not."""
    seen, todo = set(), [computation]
    while todo:
      name = todo.pop()
      if name in seen or name not in self.computations:
        continue
      seen.add(name)
      todo += [callee for instruction in self.computations[name]
               for _, callee in instruction.called()]
    return seen

  def with_entry(self, computation: str) -> str:
    """The module's text with `computation` as its entry (for its cost alone)
    and without the computations it never calls (the parse and the cost
    analysis then read the body's few computations, not the step's
    thousands)."""
    kept, lines, current = self.callees(computation), [], None
    for line in self.text.splitlines():
      if line.startswith("HloModule "):
        line = "HloModule " + re.sub(r"[^\w]", "_", computation)
      elif (current is None and not line.startswith((" ", "\t"))
            and line.rstrip().endswith("{")):
        line = line.removeprefix("ENTRY ")
        current = line.split(" ", 1)[0].lstrip("%")
        if current == computation:
          line = "ENTRY " + line
      if current is None or current in kept:
        lines.append(line)
      if line.rstrip() == "}":
        current = None
    return "\n".join(lines)


def array_bytes(type_text: str) -> list[int]:
  """Bytes of each array in an HLO type ("bf16[2,3]{1,0}" or a tuple)."""
  sizes = []
  for dtype, dims in _ARRAY.findall(type_text):
    elements = 1
    for dim in filter(None, dims.split(",")):
      elements *= int(dim)
    sizes.append(elements * _DTYPE_BYTES.get(dtype, 1))
  return sizes


@dataclasses.dataclass(frozen=True)
class Collective:
  """Collectives of one kind in a step, per device.

  Attributes:
    kind: one of COLLECTIVE_KINDS.
    count: how many run per step (loop iterations counted).
    bytes: their results' bytes on one device, summed over the runs.
  """

  kind: str
  count: int
  bytes: int


@dataclasses.dataclass(frozen=True)
class LoopCost:
  """One `while` loop of the step: its body's cost and how often it runs."""

  body: str
  trips: int | None        # None: data-dependent, counted once
  runs: int                # trips × the runs of the computation holding it
  flops: float             # one run of the body, per device
  bytes_accessed: float


@dataclasses.dataclass(frozen=True)
class StepCosts:
  """A compiled step's cost per device, every loop iteration counted.

  Attributes:
    flops, bytes_accessed, transcendentals: the totals.
    compiled_flops, compiled_bytes: XLA's own figures (each body once).
    loops: the step's loops with a cost of their own.
    uncounted_loops: bodies of loops whose trip count is data-dependent.
    collectives: per kind, in COLLECTIVE_KINDS order (kinds absent: left out).
  """

  flops: float
  bytes_accessed: float
  transcendentals: float
  compiled_flops: float
  compiled_bytes: float
  loops: tuple[LoopCost, ...]
  uncounted_loops: tuple[str, ...]
  collectives: tuple[Collective, ...]

  @property
  def collective_bytes(self) -> int:
    return sum(c.bytes for c in self.collectives)


def collectives(module: HloModule, runs: dict[str, int] | None = None) -> tuple[Collective, ...]:
  """The module's collectives per kind (module docstring)."""
  runs = module.multiplicities() if runs is None else runs
  count, size = collections.Counter(), collections.Counter()
  for name, instructions in module.computations.items():
    for instruction in instructions:
      kind = instruction.opcode.removesuffix("-start")
      if kind not in COLLECTIVE_KINDS:
        continue
      sizes = array_bytes(instruction.type)
      if instruction.opcode.endswith("-start") and kind != "all-reduce":
        per_run = max(sizes, default=0)   # (operand, result, ...): the result
      else:
        per_run = sum(sizes)
      count[kind] += runs.get(name, 0)
      size[kind] += runs.get(name, 0) * per_run
  return tuple(Collective(k, count[k], size[k]) for k in COLLECTIVE_KINDS if count[k])


def _cpu_cost(text: str) -> dict[str, float]:
  """XLA's cost analysis of an HLO module text, by the CPU client."""
  from jax._src import xla_bridge  # pylint: disable=import-outside-toplevel
  from jax._src.lib import _jax  # pylint: disable=import-outside-toplevel
  from jaxlib import _hlo  # pylint: disable=import-outside-toplevel
  module = _hlo.hlo_module_from_text(text)
  return _jax.hlo_module_cost_analysis(xla_bridge.get_backend("cpu"), module)


def xla_cost(compiled: Any) -> dict[str, float]:
  """XLA's own cost analysis of a compiled step as one dict ({} where the
  backend gives none)."""
  cost = compiled.cost_analysis()
  if isinstance(cost, (list, tuple)):    # older jax: one dict per executable
    cost = cost[0] if cost else {}
  return dict(cost or {})


def compiler_seconds(compiled: Any) -> float | None:
  """The compiler's own step-time estimate (`optimal_seconds`), or None. It
  counts each loop body once and can be negative: see `target_dry_run`."""
  value = xla_cost(compiled).get("optimal_seconds")
  return None if value is None else float(value)


def step_costs(compiled: Any) -> StepCosts:
  """The compiled step's FLOPs, bytes accessed and collectives per device,
  every loop iteration counted (module docstring)."""
  return costs_of_text(compiled.as_text(), xla_cost(compiled))


def costs_of_text(text: str, xla_cost: dict[str, float]) -> StepCosts:
  """`step_costs` from the optimized HLO text and XLA's cost analysis of it
  (empty: the CPU client's cost analysis of the same text stands in)."""
  module = HloModule.parse(text)
  runs = module.multiplicities()
  if not xla_cost:   # a backend without a cost analysis (jax's GPU compile-only client)
    xla_cost = _cpu_cost(text)
  flops = compiled_flops = float(xla_cost.get("flops", 0.0))
  bytes_accessed = compiled_bytes = float(xla_cost.get("bytes accessed", 0.0))
  transcendentals = float(xla_cost.get("transcendentals", 0.0))
  loops, uncounted = [], []
  padding = None   # the compiler's bytes over the CPU count of the same module
  for name, instructions in module.computations.items():
    for instruction in instructions:
      if instruction.opcode != "while":
        continue
      body = dict(instruction.called())["body"]
      trips = module.trip_count(instruction, name)
      if trips is None:
        uncounted.append(body)
        continue
      if trips <= 1:
        continue
      cost = _cpu_cost(module.with_entry(body))
      if padding is None:
        whole = _cpu_cost(text).get("bytes accessed", 0.0)
        padding = compiled_bytes / whole if whole > 0 and compiled_bytes > 0 else 1.0
      extra = runs.get(name, 1) * (trips - 1)
      body_flops = float(cost.get("flops", 0.0))
      body_bytes = float(cost.get("bytes accessed", 0.0)) * padding
      flops += extra * body_flops
      bytes_accessed += extra * body_bytes
      transcendentals += extra * float(cost.get("transcendentals", 0.0))
      loops.append(LoopCost(body, trips, runs.get(name, 1) * trips, body_flops, body_bytes))
  return StepCosts(flops=flops, bytes_accessed=bytes_accessed,
                   transcendentals=transcendentals, compiled_flops=compiled_flops,
                   compiled_bytes=compiled_bytes, loops=tuple(loops),
                   uncounted_loops=tuple(uncounted),
                   collectives=collectives(module, runs))


# A fused attention kernel's custom calls in compiled HLO (`attention.fused`):
# cuDNN's flash attention targets "__cudnn$fmha..." (forward and backward);
# a Pallas TPU kernel is a "tpu_custom_call" named after its kernel.
_CUDNN_ATTENTION = re.compile(r'custom_call_target="__cudnn\$fmha')
_SPLASH_ATTENTION = re.compile(r"%splash_mha_\w+(?:\.\d+)? = .*custom-call\(.*"
                               r'custom_call_target="tpu_custom_call"')


def attention_kernels(text: str) -> dict[str, int]:
  """Fused attention custom calls in compiled HLO `text`, by kernel
  ("cudnn", "splash"; `backends.ATTENTION_KERNELS`): instructions of the
  module, each loop body counted once. Empty: attention runs as XLA's ops."""
  counts = {"cudnn": 0, "splash": 0}
  for line in text.splitlines():
    if _CUDNN_ATTENTION.search(line):
      counts["cudnn"] += 1
    elif _SPLASH_ATTENTION.search(line):
      counts["splash"] += 1
  return {kernel: n for kernel, n in counts.items() if n}
