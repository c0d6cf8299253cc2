"""Paper 004's Table 7 at its token count: skip-free networks of depth 1 to 12.

  004-table7-depths  attention-only ViTs (no MLP, no residual) on the digits in
                     1×1 patches (64 tokens + CLS = 65, the paper's count on
                     CIFAR in 4×4 patches), depths 1, 2, 4, 8, 12, self-attention
                     against MHA; eq. 61 measured on the trained networks

The depth-8 gap and the judge's threshold are 004-table7's (`paper004`); this
entry adds the depths and the token count that entry lacked (17 tokens there).
"""

from __future__ import annotations

import numpy as np

from benchmarks.claims import criteria, power, probes
from benchmarks.claims.criteria import Criterion, criterion_for
from benchmarks.claims.digits_runs import DIGITS_TEST_EXAMPLES, train
from benchmarks.claims.ledger import entry, experiment, verdict
from benchmarks.claims.paper004 import (
    PAPER, TABLE7_DEPTH8_GAP, _accuracies, _table7_depths, deep_gain, depth8_effect, vit_config)

DEPTHS = (1, 2, 4, 8, 12)
DEEP = 8                      # the depth Table 7's claim is read at
ARMS = ("dot_product", "hopfield")
# Batch 64 (004-table7 took 128) keeps the 30 runs, 27 blocks per arm and seed
# at 65 tokens, within the ledger's 45 minutes on two cores.
STEPS, WIDTH, BATCH, PATCH = 600, 64, 64, 1
AHEAD = 0.02                  # "ahead": more than 2 points, as 004-table7


def _accuracy(measured, arm, depth):
  return _accuracies(measured, f"{arm} depth {depth}")


def _deep_and_shallow(measured) -> tuple[int, list[int]]:
  """The depth judged (`DEEP`, or the deepest below it in a --small run) and the
  shallow depths (up to 4) below it."""
  depths = _table7_depths(measured)
  deep = max(d for d in depths if d <= DEEP)
  return deep, [d for d in depths if d < deep and d <= 4]


def _effect(measured):
  deep, _ = _deep_and_shallow(measured)
  return deep_gain(measured, deep)


criteria.declare(Criterion(
    id="004-table7-depths", where="§5.3, Table 7",
    claim=criterion_for("004-table7").claim,
    kind="training_effect",
    words="Attention-only digits ViTs with 65 tokens at depths 1, 2, 4, 8, 12, self-attention "
          "and MHA, paired seeds. The loss from the best depth up to 4, depth 12 (both at chance "
          "in the paper) and eq. 61 on the trained networks are reported, not judged.",
    effect=depth8_effect(_effect),
    paper_values=criterion_for("004-table7").paper_values))


def _trained_residual(model, params, images) -> float:
  """Eq. 61 on the trained network: ‖Res(AttnNet(X))‖_{1,∞} / ‖AttnNet(X)‖_{1,∞}
  of the last block's output, the mean over `images`."""
  from vit_spectral.analysis import rank_residual_ratio  # noqa: PLC0415
  _, layers = probes.forward(model, params, images)
  return float(np.mean(rank_residual_ratio(layers[-1]["block_output"])))


@experiment("hopfield_skip_free_depths", PAPER, ("004-table7-depths",), trains=True)
def hopfield_skip_free_depths(seeds, small):
  from benchmarks.hopfield_rank_collapse import ATTENTION_ONLY  # noqa: PLC0415
  steps = 20 if small else STEPS
  depths = (1, 2) if small else DEPTHS
  width = 16 if small else WIDTH
  acc, residual = {}, {}
  images = probes.probe_images()
  for arm in ARMS:
    for depth in depths:
      for seed in seeds:
        config = vit_config(arm, steps, depth, width, block=ATTENTION_ONLY)
        config.model.dropout_rate = 0.0
        config.model.patch_size = PATCH
        run = train(config, seed=seed, steps=steps, batch_size=BATCH)
        acc[(arm, depth, seed)] = run.test_accuracy
        residual[(arm, depth, seed)] = _trained_residual(run.model, run.params, images)
        print(f"[hopfield_skip_free_depths] {arm} depth {depth} seed {seed}: acc "
              f"{run.test_accuracy:.3f}, eq. 61 {residual[(arm, depth, seed)]:.3g}", flush=True)
  table = lambda values: {f"{a} depth {d}": probes.seeds_table({s: values[(a, d, s)] for s in seeds})
                          for a in ARMS for d in depths}
  deep = max(d for d in depths if d <= DEEP)
  mean = lambda a, d: 100 * np.mean([acc[(a, d, s)] for s in seeds])
  curve = lambda a: ", ".join(f"{mean(a, d):.1f}" for d in depths)
  ahead = sum(acc[("hopfield", deep, s)] > acc[("dot_product", deep, s)] + AHEAD for s in seeds)
  eq61 = lambda a: np.mean([residual[(a, deep, s)] for s in seeds])
  summary = (f"mean accuracy at depths {list(depths)}: self-attention {curve('dot_product')}, MHA "
             f"{curve('hopfield')} (%); MHA is {AHEAD * 100:.0f}+ points ahead at depth {deep} in "
             f"{ahead} of {len(seeds)} seeds; eq. 61 after training at depth {deep}: self-attention "
             f"{eq61('dot_product'):.2g}, MHA {eq61('hopfield'):.2g} (mean over seeds)")
  setup = (f"Digits in 1×1 patches (64 tokens + CLS = 65, the paper's count), attention-only ViT "
           f"(no MLP, no residual: `block=dict(attention_residual='none', use_mlp=False)`), width "
           f"{width}, 4 heads, depths {list(depths)}, self-attention vs MHA (α = α′ = 0.5, the skip "
           f"mixed inside the attention), {steps} steps AdamW lr 2e-3 batch {BATCH}, no dropout, "
           f"seeds {list(seeds)}; eq. 61 of the last block's output on the first "
           f"{len(images)} test digits after training. The paper: ViT-T width, CIFAR-10/100.")
  return [entry(PAPER, "004-table7-depths", setup,
                {"test_accuracy": table(acc), "trained_eq61_last_block": table(residual)},
                {"not_reproduced": summary + "; its loss from its best shallow depth is not "
                                             "milder in every seed, or it is not ahead",
                 "direction": summary + "; its loss from its best shallow depth is not milder in "
                                        "every seed",
                 "inconclusive": summary + "; the seeds and test set cannot resolve the paper's "
                                           "gap"})]
