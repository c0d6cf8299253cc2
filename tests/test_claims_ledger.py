"""The claims ledger (benchmarks/results/claims.json): its shape, each verdict
the declared criterion applied to the stored measurements, the paper's numbers
as printed, the history of changed criteria, its commands, the README table
rendered from it, and one cheap experiment per paper rerun small."""

import glob
import json
import os
import re
import shlex

import pytest

from benchmarks import render_claims, reproduce_claims
from benchmarks.claims import criteria, headline, ledger

REPO = ledger.REPO
ENTRIES = ledger.read()
# One experiment per paper that computes at init or from a theorem: rerun small here.
CHEAP = {"000": "fourier_theorems", "001": "lipsformer_init", "002": "conv_theorems",
         "003": "eigen_theorems", "004": "hopfield_init"}


def test_ledger_covers_every_paper_with_30_or_more_claims():
  assert len(ENTRIES) >= 30
  ids = [e["id"] for e in ENTRIES]
  assert len(ids) == len(set(ids)), "duplicate ids"
  assert {e["paper"] for e in ENTRIES} == set(ledger.PAPERS)


def test_every_registered_claim_has_an_entry_a_criterion_and_back():
  """Every registered claim has an entry, but a headline claim declared before
  its runs and not yet run (`headline.PENDING`, each with its reason)."""
  registered = ledger.claim_experiments()
  assert all(headline.PENDING.values())
  assert not set(headline.PENDING) & {e["id"] for e in ENTRIES}, "run: leave PENDING"
  assert sorted(registered) == sorted([e["id"] for e in ENTRIES] + list(headline.PENDING))
  assert sorted(criteria.CRITERIA) == sorted(registered)


def test_a_fingerprint_covers_an_effects_measure_helpers_and_declaration(monkeypatch):
  """000-table1-mnist1d's measure calls `criteria.accuracy_gains` with
  `_OVER_BASELINE`: a changed helper constant or sesoi is a changed criterion
  (the rule's and `criteria`'s measure helpers are named in the fingerprint)."""
  from benchmarks.claims import paper000_mnist1d  # noqa: PLC0415
  criterion = criteria.criterion_for("000-table1-mnist1d")
  _, constants = criteria._reads(criterion.effect.measure)
  assert "benchmarks.claims.paper000_mnist1d._OVER_BASELINE" in constants
  before = criterion.fingerprint()
  monkeypatch.setattr(paper000_mnist1d, "_OVER_BASELINE", (("attn_scale", "baseline"),))
  assert criterion.fingerprint() != before
  monkeypatch.undo()
  assert criterion.fingerprint() == before
  import dataclasses  # noqa: PLC0415
  halved = dataclasses.replace(criterion, effect=dataclasses.replace(
      criterion.effect, sesoi=criterion.effect.sesoi / 2))
  assert halved.fingerprint() != before


TRAINING = [e for e in ENTRIES if e["kind"] == "training_effect" and e["verdict"] != "not_testable"]


@pytest.mark.parametrize("entry", TRAINING, ids=lambda e: e["id"])
def test_every_training_effect_is_the_one_rule_on_its_interval(entry):
  """Issue 56: interval, sesoi, claimed and seeds; the verdict judge_effect's."""
  from benchmarks.claims import power  # noqa: PLC0415
  r = entry["resolution"]
  effect = criteria.criterion_for(entry["id"]).effect
  assert effect is not None
  assert r["sesoi"] == pytest.approx(effect.sesoi, rel=1e-3) and r["direction"] == effect.direction
  if r["claimed"] is not None and r["direction"]:
    assert r["sesoi"] <= abs(r["claimed"]) + 1e-12
  if r["interval"] is None:
    assert entry["verdict"] == "inconclusive" and "no per-seed interval" in r["basis"]
    return
  low, high = r["interval"]
  assert r["seeds"] >= 2 and low <= high
  rule = (power.judge_no_effect(low, high, r["sesoi"]) if r["direction"] == 0
          else power.judge_effect(low, high, r["sesoi"], r["direction"]))
  assert entry["verdict"] == rule


def test_counts_by_kind_and_verdict_have_no_direction_among_training_effects():
  assert not [e["id"] for e in TRAINING if e["verdict"] == "direction"]
  assert criteria.criterion_for("000-fig2").kind == "by_construction"
  assert {criteria.criterion_for(i).kind for i in ("003-fig4", "003-table1-trained")} == {"at_init"}


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["id"])
def test_verdict_is_the_declared_criterion_applied_to_the_measurements(entry):
  criterion = criteria.criterion_for(entry["id"])
  assert entry["criterion_fingerprint"] == criterion.fingerprint(), (
      f"{entry['id']}'s criterion changed since it was judged: rerun it or "
      f"`python {ledger.SCRIPT} --claim={entry['id']} --rejudge --reason=...` (keeps the old "
      "criterion and verdict in its history)")
  assert entry["verdict"] == criterion.judge(entry["measured"])
  assert entry["criterion"] == criterion.as_json()
  assert (entry["kind"], entry["where"], entry["claim"]) == (
      criterion.kind, criterion.where, criterion.claim)
  assert entry["paper_values"] == [v.as_json() for v in criterion.paper_values]
  assert entry["resolution"] == ledger.rounded(criterion.resolve(entry["measured"]))


def _paper_text(paper: str) -> str:
  papers = os.path.join(REPO, "..", "shared", "papers")
  (path,) = glob.glob(os.path.join(papers, f"{paper}_*.txt"))
  with open(path, encoding="utf-8") as f:
    return " ".join(f.read().split())


# How far from a "Table N" caption (before or after: the extracted text puts some
# captions below their tables) a value of that table may sit.
TABLE_SPAN = 4000


def _printed_where_attributed(text: str, value: dict) -> bool:
  """The value is printed within TABLE_SPAN characters of an occurrence of
  the table it is attributed to ("Table N" in `where`); a value attributed to
  no table (a section's sentence) must be printed somewhere in the paper."""
  number = " ".join(value["value"].split())
  table = re.search(r"Table \d+", value["where"])
  if table is None:
    return number in text
  return any(number in text[max(0, m.start() - TABLE_SPAN):m.start() + TABLE_SPAN]
             for m in re.finditer(re.escape(table.group(0)) + r"\b", text))


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["id"])
def test_paper_values_are_printed_in_the_table_they_are_attributed_to(entry):
  text = _paper_text(entry["paper"])
  for value in entry["paper_values"]:
    assert _printed_where_attributed(text, value), (entry["id"], value)


def test_a_value_attributed_to_the_wrong_table_fails():
  text = _paper_text("004")
  right = {"where": "Table 8, depth 1, column self-attention", "value": "0.48887348"}
  assert _printed_where_attributed(text, right)
  assert not _printed_where_attributed(text, dict(right, where="Table 3, ViT-Tiny"))


def test_training_effects_state_their_resolution_next_to_the_claimed_effect():
  training = [e for e in ENTRIES if e["kind"] == "training_effect"]
  assert training
  for entry in training:
    resolution = entry["resolution"]
    assert resolution["basis"] and resolution["claimed_effect"], entry["id"]
    if entry["verdict"] != "not_testable" and resolution.get("interval") is not None:
      assert isinstance(resolution["smallest_resolvable"], (int, float)), entry["id"]


def _judged_entry(verdict_, words="the test"):
  """A judged entry of a throwaway claim whose criterion returns `verdict_`."""
  def test(measured):
    del measured
    return verdict_
  criterion = criteria.Criterion(
      id="000-scratch", where="nowhere", claim="a claim", kind="theorem", words=words,
      test=test, resolution=criteria.exact(1e-6))
  criteria.CRITERIA["000-scratch"] = criterion
  try:
    return ledger.judged(ledger.entry("000", "000-scratch", "a setup", {"x": 1.0},
                                      why={"not_reproduced": "it failed"}))
  finally:
    del criteria.CRITERIA["000-scratch"]


def test_a_changed_criterion_keeps_the_old_one_and_its_verdict_in_the_history(tmp_path):
  path = str(tmp_path / "claims.json")
  first = dict(_judged_entry("reproduced"), command="python x")
  ledger.merge([first], path)
  changed = dict(_judged_entry("not_reproduced", words="a stricter test"), command="python x")
  assert changed["why"] == "it failed" and first["why"] == ""
  with pytest.raises(ValueError, match="give the reason"):
    ledger.merge([dict(changed)], path)
  (stored,) = ledger.merge([dict(changed)], path, reason="stricter", date="2026-11-27")
  (record,) = stored["history"]
  assert record["verdict"] == "reproduced" and record["reason"] == "stricter"
  assert record["criterion"] == first["criterion"] != stored["criterion"]
  assert record["criterion_fingerprint"] == first["criterion_fingerprint"]
  # The same criterion and verdict again: nothing to record, the history stays.
  (again,) = ledger.merge([dict(changed)], path)
  assert again["history"] == stored["history"]


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["id"])
def test_entry_shape(entry):
  ledger.check_entry(entry)
  if entry.get("figure"):
    assert os.path.isfile(os.path.join(REPO, entry["figure"])), entry["figure"]
  if entry["verdict"] != "not_testable":
    assert "seed" in json.dumps(entry["measured"]) or "seeds" not in entry["command"], (
        "a training entry reports every seed's value")


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["id"])
def test_command_names_the_script_and_flags_that_make_the_entry(entry):
  words = shlex.split(entry["command"])
  assert words[:2] == ["python", ledger.SCRIPT], entry["command"]
  assert os.path.isfile(os.path.join(REPO, words[1]))
  args = reproduce_claims.build_parser().parse_args(words[2:])   # unknown flags exit
  assert not args.small, "the committed ledger holds full runs, not --small ones"
  experiments = reproduce_claims.selected(args)
  assert any(entry["id"] in exp.claims for exp in experiments)
  if any(exp.trains for exp in experiments):
    seeds = reproduce_claims.parse_seeds(args.seeds)
    fewest = min(exp.min_seeds for exp in experiments if exp.trains)
    assert len(seeds) >= fewest, f"training effects need at least {fewest} seeds"
    if fewest < 3:   # a grid under the usual 3 seeds says so where the verdict is read
      assert f"seeds {seeds}" in entry["setup"], entry["setup"]
    for seed in seeds:
      assert f"seed {seed}" in json.dumps(entry["measured"]), f"seed {seed} not reported"


def test_readme_table_is_rendered_from_the_ledger():
  assert render_claims.main(["--check"]) == 0


def test_readme_block_counts_match_the_ledger():
  counts = render_claims.verdict_counts(ENTRIES)
  assert sum(sum(c.values()) for c in counts.values()) == len(ENTRIES)
  by_kind = render_claims.kind_counts(ENTRIES)
  assert sum(sum(c.values()) for c in by_kind.values()) == len(ENTRIES)
  block = render_claims.ledger_block(ENTRIES)
  assert render_claims.kind_summary(ENTRIES) in block
  for entry in ENTRIES:
    assert entry["id"] in block


def test_unknown_names_are_refused_with_the_choices():
  parser = reproduce_claims.build_parser()
  with pytest.raises(SystemExit, match="choose from"):
    reproduce_claims.selected(parser.parse_args(["--experiment=nope"]))
  with pytest.raises(SystemExit, match="choose from"):
    reproduce_claims.selected(parser.parse_args(["--claim=000-nope"]))
  with pytest.raises(SystemExit, match="choose one of"):
    reproduce_claims.selected(parser.parse_args(["--paper=007"]))
  with pytest.raises(SystemExit, match="--seeds"):
    reproduce_claims.parse_seeds("a,b")
  with pytest.raises(SystemExit, match="--out"):
    reproduce_claims.main(["--experiment=conv_cifar", "--small"])


def test_check_entry_rejects_bad_entries():
  good = dict(ENTRIES[0])
  with pytest.raises(ValueError, match="verdict"):
    ledger.check_entry(dict(good, verdict="maybe"))
  with pytest.raises(ValueError, match="missing"):
    ledger.check_entry({k: v for k, v in good.items() if k != "claim"})
  with pytest.raises(ValueError, match="needs a why"):
    ledger.check_entry(dict(good, verdict="not_reproduced", why=""))
  with pytest.raises(ValueError, match="kind"):
    ledger.check_entry(dict(good, kind="anecdote"))
  with pytest.raises(ValueError, match="history record"):
    ledger.check_entry(dict(good, history=[{"verdict": "reproduced"}]))


# Every cheap experiment at small size (7-20 s each here): the `extended` step.
@pytest.mark.extended
@pytest.mark.parametrize("paper", sorted(CHEAP))
def test_cheap_experiment_reruns_small(paper, tmp_path):
  out = tmp_path / "claims.json"
  assert reproduce_claims.main([f"--experiment={CHEAP[paper]}", "--small", f"--out={out}"]) == 0
  small = {e["id"]: e for e in ledger.read(str(out))}
  assert set(small) == set(ledger.EXPERIMENTS[CHEAP[paper]].claims)
  committed = {e["id"]: e for e in ENTRIES}
  for claim_id, entry in small.items():
    assert entry["command"].endswith("--small")
    # The tiny form reaches the committed verdict for exact statements
    # (theorems and invariants); the at-init bands are checked for shape only.
    if committed[claim_id]["verdict"] == "reproduced" and claim_id not in ("004-table8",):
      assert entry["verdict"] == "reproduced", (claim_id, entry["measured"])


def test_not_testable_entries_name_the_command_that_settles_them_and_its_cost():
  """Part 5: a claim this machine cannot test names the recipe's command and its
  cost from the compiled rows (recomputed here: a recompiled row must refresh
  the entry), or says why there is none."""
  from benchmarks.claims import costs
  for entry in ENTRIES:
    if entry["verdict"] != "not_testable":
      continue
    settle = entry["measured"].get("settle")
    if settle is None:
      assert "no compiled row" in entry["why"] or "no training" in entry["why"], entry["id"]
      continue
    for cost in (settle.values() if "hours" not in settle else [settle]):
      assert cost["command"] in entry["why"] or cost["command"].split(" --workdir")[0] in entry["why"]
      fresh = costs.settle(cost["compiled_config"], cost["recipe"], slowdown=cost.get("slowdown", {}).get("factor", 1.0))
      assert cost["hours"] == pytest.approx(fresh["hours"], rel=1e-3), entry["id"]
      assert cost["hours"] > 0 and cost["chips"] >= 1
