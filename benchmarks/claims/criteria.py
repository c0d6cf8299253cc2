"""Each claim's test, declared as data apart from the results.

A `Criterion` says what one ledger entry claims and how it is judged: its
`kind`, the test in `words` and as the function `test(measured) -> verdict`
the runner applies, the paper's numbers exactly as printed (`paper_values`),
and `resolution(measured)`: the smallest effect the setup can resolve beside
the effect the paper claims. Experiments (`paper00N.py`) only measure; the
runner judges what they measured by the criterion declared for each id and
stores the criterion's `fingerprint` with the verdict. A criterion changed
after its entry was judged must be re-judged (`reproduce_claims.py --rejudge
--reason=...`), which keeps the earlier criterion and verdict in the entry's
`history` with the reason.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
from typing import Any, Callable

# theorem: a mathematical statement checked numerically on random inputs;
# identity: the module reduces to another at a parameter value (an invariant);
# at_init: a property of untrained networks; training_effect: what training does.
KINDS = ("theorem", "identity", "at_init", "training_effect")
# inconclusive: the setup cannot resolve the claimed effect, or the measured
# quantity did not move from its start.
VERDICTS = ("reproduced", "direction", "not_reproduced", "inconclusive", "not_testable")


@dataclasses.dataclass(frozen=True)
class PaperValue:
  """A number as the paper prints it (`value`, verbatim) and where (`where`:
  table or figure, row and column)."""
  where: str
  value: str

  def as_json(self) -> dict[str, str]:
    return {"where": self.where, "value": self.value}


Resolution = Callable[[dict], dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class Criterion:
  """One claim and its test.

  Attributes:
    id: the ledger id, "<paper>-<where>".
    where: section, figure or table of the paper.
    claim: one sentence: what the paper says.
    kind: one of KINDS.
    words: the test in words, as `test` applies it.
    test: measured -> one of VERDICTS.
    resolution: measured -> {"smallest_resolvable", "claimed_effect", "basis"}
      (or that dict itself where it does not depend on the measurements).
    paper_values: the paper's numbers behind the claim, verbatim.
  """
  id: str
  where: str
  claim: str
  kind: str
  words: str
  test: Callable[[dict], str]
  resolution: Resolution | dict[str, Any]
  paper_values: tuple[PaperValue, ...] = ()

  def __post_init__(self):
    if self.kind not in KINDS:
      raise ValueError(f"criterion {self.id}: kind={self.kind!r}; choose one of {list(KINDS)}")
    for name in ("where", "claim", "words"):
      if not getattr(self, name).strip():
        raise ValueError(f"criterion {self.id}: {name} must be a non-empty string")

  @property
  def paper(self) -> str:
    return self.id.split("-", 1)[0]

  def function(self) -> str:
    return f"{self.test.__module__}.{self.test.__qualname__}"

  def as_json(self) -> dict[str, str]:
    """The criterion as the entry records it: the test in words and the function."""
    return {"words": self.words, "function": self.function()}

  def fingerprint(self) -> str:
    """A hash of the kind, the words, the test function's source and what it
    reads (`_reads`): it changes whenever what decides the verdict changes."""
    sources, constants = _reads(self.test)
    text = json.dumps({"kind": self.kind, "words": self.words, "function": self.function(),
                       "source": inspect.getsource(self.test), "helpers": sources,
                       "constants": constants}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]

  def judge(self, measured: dict) -> str:
    result = self.test(measured)
    if result not in VERDICTS:
      raise ValueError(f"criterion {self.id}: {self.function()} returned {result!r}; "
                       f"a verdict is one of {list(VERDICTS)}")
    return result

  def resolve(self, measured: dict) -> dict[str, Any]:
    out = self.resolution(measured) if callable(self.resolution) else dict(self.resolution)
    missing = {"smallest_resolvable", "claimed_effect", "basis"} - set(out)
    if missing:
      raise ValueError(f"criterion {self.id}: resolution lacks {sorted(missing)}")
    return out


CRITERIA: dict[str, Criterion] = {}
# The modules whose functions and constants a test reads into its fingerprint.
_HELPER_PACKAGE = "benchmarks.claims"
_CONSTANT_TYPES = (bool, int, float, str, tuple, frozenset, dict)


def _codes(code):
  """`code` and the code objects nested in it (lambdas, comprehensions)."""
  yield code
  for const in code.co_consts:
    if inspect.iscode(const):
      yield from _codes(const)


def _reads(test: Callable) -> tuple[dict[str, str], dict[str, str]]:
  """The functions of `benchmarks.claims` that `test` calls, directly or
  through each other ({qualified name: source}), and the plain constants
  they read from their modules ({module.name: repr}): a judge's helpers
  (`paper000.judge_gains`) and thresholds (`TABLE1_GAINS`) are part of it."""
  sources, constants, stack = {}, {}, [test]
  while stack:
    function = stack.pop()
    name = f"{function.__module__}.{function.__qualname__}"
    if name in sources:
      continue
    sources[name] = inspect.getsource(function)
    if function.__defaults__:   # values bound when it was defined (a constant's name in its source)
      constants[f"{name}.__defaults__"] = repr(function.__defaults__)
    scope = function.__globals__
    for code in _codes(function.__code__):
      for global_name in code.co_names:
        value = scope.get(global_name)
        if inspect.isfunction(value) and value.__module__.startswith(_HELPER_PACKAGE):
          stack.append(value)
        elif isinstance(value, _CONSTANT_TYPES) and not global_name.startswith("__"):
          constants[f"{function.__module__}.{global_name}"] = repr(value)
  return sources, constants


def declare(*criteria: Criterion) -> tuple[Criterion, ...]:
  """Registers criteria (an id declared twice is an error); returns them."""
  for criterion in criteria:
    if criterion.id in CRITERIA:
      raise ValueError(f"criterion {criterion.id!r} declared twice")
    CRITERIA[criterion.id] = criterion
  return criteria


def criterion_for(claim_id: str) -> Criterion:
  if claim_id not in CRITERIA:
    raise KeyError(f"no criterion declared for claim {claim_id!r}; declared: {sorted(CRITERIA)}")
  return CRITERIA[claim_id]


def not_testable(measured: dict) -> str:
  """The test of a claim that needs data or hardware this machine lacks."""
  del measured
  return "not_testable"


def exact(tolerance: float, claimed: str = "exact equality") -> dict[str, Any]:
  """The resolution of a theorem or identity checked to `tolerance`."""
  return {"smallest_resolvable": tolerance, "claimed_effect": claimed,
          "basis": "numerical tolerance of the check (round-off), not a sample"}


NOT_RESOLVABLE_HERE = {"smallest_resolvable": None, "claimed_effect": "see paper_values",
                       "basis": "not run here: needs ImageNet-scale data or weights"}
