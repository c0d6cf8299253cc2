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

A training effect is judged by one rule (issue 56): its `Effect` declares the
per-seed measure, the claimed direction, the smallest effect of interest
(`sesoi`) and the paper's effect (`claimed`), and `power.judge_effect` (or
`power.judge_no_effect` for a claimed absence of effect) reads the paired 95 %
interval over the seeds. Replicates are seeds, never settings.
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
# by_construction: holds for any input, trained or not (a check of the probe that
# cannot fail): counted apart from everything else.
KINDS = ("theorem", "identity", "by_construction", "at_init", "training_effect")
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
# What an effect's `measure` returns: {"per_seed": {"seed 0": value, ...}} with,
# for an accuracy difference scored on a shared test set, "test_examples" (n) and
# "accuracy" (the arms' mean accuracy), which add the test-set term; or a string:
# why the stored measurements give no per-seed interval (the verdict is then
# inconclusive, with that reason).
Measure = Callable[[dict], "dict[str, Any] | str"]
DIRECTIONS = {1: "above 0", -1: "below 0", 0: "no effect either way"}


@dataclasses.dataclass(frozen=True)
class Effect:
  """A training effect's declaration, judged by `power.judge_effect`.

  Attributes:
    measure: measured -> {"per_seed": {...}, ...} or a reason string (`Measure`).
    describe: the per-seed effect in words, with its units.
    direction: +1 (the paper's effect is > 0), -1 (< 0), 0 (the paper claims
      no effect: `power.judge_no_effect`).
    sesoi: the smallest effect of interest, in the measure's units, > 0.
    sesoi_why: one sentence: how `sesoi` follows from the paper's effect (and,
      where the units differ or the paper prints no number, why this value).
    claimed: the paper's effect as a number in the measure's units (None where
      the paper prints none); `sesoi` may not exceed its size.
    claimed_words: the paper's effect as the paper states it.
  """
  measure: Measure
  describe: str
  direction: int
  sesoi: float
  sesoi_why: str
  claimed: float | None
  claimed_words: str

  def __post_init__(self):
    if self.direction not in DIRECTIONS:
      raise ValueError(f"direction={self.direction!r}; choose one of {sorted(DIRECTIONS)}")
    if not (isinstance(self.sesoi, (int, float)) and self.sesoi > 0):
      raise ValueError(f"sesoi={self.sesoi!r} must be a positive number")
    if self.claimed is not None and self.direction and self.sesoi > abs(self.claimed) + 1e-12:
      raise ValueError(f"sesoi={self.sesoi} exceeds the paper's effect {self.claimed}")
    if self.claimed is not None and self.direction and self.claimed * self.direction <= 0:
      raise ValueError(f"claimed={self.claimed} is not on the claimed side ({self.direction:+d})")
    for name in ("describe", "sesoi_why", "claimed_words"):
      if not getattr(self, name).strip():
        raise ValueError(f"Effect.{name} must be a non-empty string")

  def words(self) -> str:
    """The test in words: the measure, the declaration and the rule."""
    rule = ("reproduced when the interval lies inside ±sesoi (no effect of interest either way), "
            "not reproduced when it excludes 0, else inconclusive" if self.direction == 0 else
            "reproduced when the interval excludes 0 on the claimed side, not reproduced when "
            "it excludes every effect of at least the sesoi on that side, else inconclusive")
    return (f"Per seed: {self.describe}. Claimed: {DIRECTIONS[self.direction]}; sesoi "
            f"{self.sesoi:g} ({self.sesoi_why}). From the 95 % interval of the mean over the "
            "seeds (t over seeds; for an accuracy difference on a shared test set at least the "
            f"binomial half-width of a difference on its examples): {rule}.")

  def interval(self, measured: dict) -> "tuple[dict | None, str]":
    """(the interval with its per-seed values, "") or (None, why there is none)."""
    from benchmarks.claims import power  # noqa: PLC0415
    out = self.measure(measured)
    if isinstance(out, str):
      return None, out
    per_seed = out["per_seed"]
    if len(per_seed) < 2:
      return None, (f"{len(per_seed)} seed: no interval over seeds (a training effect needs "
                    "at least 2, the ledger 3)")
    # The test-set term: the paired per-example half-width a measure computed
    # ("test_term"), or the binomial one of two independent arms.
    floor = float(out.get("test_term", 0.0))
    if "test_examples" in out:
      floor = power.difference_half_width(out["accuracy"], out["test_examples"])
    interval = power.seed_interval(list(per_seed.values()), floor)
    return dict(interval, per_seed=per_seed, test_term=floor,
                test_examples=out.get("test_examples")), ""

  def judge(self, measured: dict) -> str:
    from benchmarks.claims import power  # noqa: PLC0415
    interval, _ = self.interval(measured)
    if interval is None:
      return "inconclusive"
    if self.direction == 0:
      return power.judge_no_effect(interval["low"], interval["high"], self.sesoi)
    return power.judge_effect(interval["low"], interval["high"], self.sesoi, self.direction)

  def resolve(self, measured: dict) -> dict[str, Any]:
    """The entry's resolution: interval, sesoi, claimed, seeds and the basis."""
    interval, reason = self.interval(measured)
    out = {"sesoi": self.sesoi, "direction": self.direction, "claimed": self.claimed,
           "claimed_effect": self.claimed_words}
    if interval is None:
      measure = self.measure(measured)
      seeds = 0 if isinstance(measure, str) else len(measure["per_seed"])
      return dict(out, interval=None, seeds=seeds, smallest_resolvable=None,
                  basis=f"no per-seed interval: {reason}")
    seeds = len(interval["per_seed"])
    basis = f"95 % t-interval over {seeds} seeds of the per-seed effect"
    if interval["test_term"] and not interval["test_examples"]:
      basis += (f", widened to at least the paired per-example half-width on the shared test "
                f"set (±{interval['test_term']:.4g})")
    if interval["test_examples"]:
      basis += (f", widened to at least the binomial half-width of a difference of two "
                f"accuracies on {interval['test_examples']} shared test examples (±"
                f"{interval['test_term']:.4g}; counted as independent arms: the stored "
                "measurements hold no per-example correctness for the paired comparison)")
    return dict(out, interval=[interval["low"], interval["high"]], seeds=seeds,
                mean=interval["mean_difference"], per_seed=interval["per_seed"],
                smallest_resolvable=interval["half_width"], basis=basis)

  def why(self, measured: dict, verdict: str, units: float = 1.0) -> str:
    """The cause of a verdict but "reproduced", from the interval."""
    interval, reason = self.interval(measured)
    if interval is None:
      return f"inconclusive: {reason}"
    low, high, mean = interval["low"], interval["high"], interval["mean_difference"]
    text = (f"mean {mean:+.4g}, 95 % interval [{low:+.4g}, {high:+.4g}] over "
            f"{len(interval['per_seed'])} seeds, against the sesoi {self.sesoi:g}")
    if self.claimed is not None:
      text += f" and the paper's {self.claimed:+g}"
    if verdict == "inconclusive":
      return text + (": the interval holds 0 and effects of the sesoi, so the setup does not "
                     "resolve the claim" if self.direction else
                     ": the interval holds 0 but reaches beyond ±sesoi")
    if verdict == "not_reproduced":
      return text + (": it excludes every effect of at least the sesoi on the claimed side"
                     if self.direction else ": it excludes 0, an effect the paper says is absent")
    return text


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
    effect: a training effect's declaration (`Effect`); it is then the test
      and the resolution (`test` and `resolution` stay None), and `words` is
      what the setup adds to the effect's own words (may be empty).
  """
  id: str
  where: str
  claim: str
  kind: str
  words: str
  test: Callable[[dict], str] | None = None
  resolution: Resolution | dict[str, Any] | None = None
  paper_values: tuple[PaperValue, ...] = ()
  effect: Effect | None = None

  def __post_init__(self):
    if self.kind not in KINDS:
      raise ValueError(f"criterion {self.id}: kind={self.kind!r}; choose one of {list(KINDS)}")
    for name in ("where", "claim") + (() if self.effect else ("words",)):
      if not getattr(self, name).strip():
        raise ValueError(f"criterion {self.id}: {name} must be a non-empty string")
    if self.effect is not None:
      if self.kind != "training_effect" or self.test is not None or self.resolution is not None:
        raise ValueError(f"criterion {self.id}: an effect is a training_effect's whole test "
                         "(no test or resolution beside it)")
    elif self.test is None or self.resolution is None:
      raise ValueError(f"criterion {self.id}: give test and resolution, or an effect")
    elif self.kind == "training_effect" and self.test is not not_testable:
      raise ValueError(f"criterion {self.id}: a training effect declares an Effect "
                       "(sesoi, direction, claimed), judged by power.judge_effect")

  @property
  def paper(self) -> str:
    return self.id.split("-", 1)[0]

  def function(self) -> str:
    if self.effect is not None:
      measure = self.effect.measure
      judge = "judge_no_effect" if self.effect.direction == 0 else "judge_effect"
      return f"{measure.__module__}.{measure.__qualname__} -> benchmarks.claims.power.{judge}"
    return f"{self.test.__module__}.{self.test.__qualname__}"

  def full_words(self) -> str:
    if self.effect is None:
      return self.words
    return " ".join(w for w in (self.words.strip(), self.effect.words()) if w)

  def as_json(self) -> dict[str, str]:
    """The criterion as the entry records it: the test in words and the function."""
    return {"words": self.full_words(), "function": self.function()}

  def fingerprint(self) -> str:
    """A hash of the kind, the words, the test function's source and what it
    reads (`_reads`): it changes whenever what decides the verdict changes
    (for an effect: its measure, its declaration and the rule's source)."""
    if self.effect is not None:
      from benchmarks.claims import power  # noqa: PLC0415
      function = self.effect.measure
      sources, constants = _reads(function)
      rule = power.judge_no_effect if self.effect.direction == 0 else power.judge_effect
      sources.update({f"rule.{f.__qualname__}": inspect.getsource(f)
                      for f in (rule, power.seed_interval, power.difference_half_width,
                                power.accuracy_half_width, power.t_half_width,
                                Effect.interval, Effect.judge, seed_labels, per_seed,
                                seeds_min, accuracy_gains)})
      constants["effect"] = repr((self.effect.direction, self.effect.sesoi, self.effect.claimed))
    else:
      function = self.test
      sources, constants = _reads(function)
    text = json.dumps({"kind": self.kind, "words": self.full_words(), "function": self.function(),
                       "source": inspect.getsource(function), "helpers": sources,
                       "constants": constants}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]

  def judge(self, measured: dict) -> str:
    result = self.effect.judge(measured) if self.effect is not None else self.test(measured)
    if result not in VERDICTS:
      raise ValueError(f"criterion {self.id}: {self.function()} returned {result!r}; "
                       f"a verdict is one of {list(VERDICTS)}")
    return result

  def resolve(self, measured: dict) -> dict[str, Any]:
    if self.effect is not None:
      return self.effect.resolve(measured)
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


# ---------------------------------------------------------- effects' measures

# The sesoi of an accuracy effect where the paper prints the effect in the same units.
PAPER_EFFECT = ("the paper's own effect, the largest the rule allows: a smaller effect is not "
                "the one the paper reports")
NO_NUMBER = "the paper prints no number (a figure only)"


def seed_labels(table: dict) -> list[str]:
  """{"seed 0": …, "seed 1": …} -> its keys in seed order."""
  return sorted(table, key=lambda k: int(str(k).split()[-1]))


def per_seed(table: dict, fn: Callable[..., float] = float) -> dict[str, float]:
  """{"seed s": fn(value)} in seed order."""
  return {s: float(fn(table[s])) for s in seed_labels(table)}


def seeds_min(*tables: dict[str, float]) -> dict[str, float]:
  """Per seed, the smallest of several per-seed effects: a claim that every one
  of them holds, read on one number (its mean > 0 implies each mean > 0)."""
  return {s: min(t[s] for t in tables) for s in seed_labels(tables[0])}


def accuracy_gains(accuracy: dict[str, dict], pairs: tuple[tuple[str, str], ...],
                   test_examples: int) -> dict[str, Any]:
  """An effect's measure from {arm: {"seed s": accuracy}}: per seed the smallest
  gain better − worse over `pairs`, with the shared test set's size and the
  arms' mean accuracy for the test-set term."""
  gains = [{s: accuracy[b][s] - accuracy[w][s] for s in seed_labels(accuracy[b])}
           for b, w in pairs]
  arms = sorted({arm for pair in pairs for arm in pair})
  level = sum(v for arm in arms for v in accuracy[arm].values()) / sum(
      len(accuracy[arm]) for arm in arms)
  return {"per_seed": seeds_min(*gains), "test_examples": test_examples, "accuracy": level}
