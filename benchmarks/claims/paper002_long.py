"""Paper 002's Figs. 2 and 3 on a long run, where the attention centres move.

  002-fig2-long        as 002-fig2: layer 4's heads leave their random start and sharpen
  002-fig3-long        as 002-fig3: layers 1–2 near the query, later layers further
  002-fig3-cover-long  as 002-fig3-cover: the heads spread out to cover the input

The 600-step entries are inconclusive: their centres moved 0.04–0.16 px, under
`paper002.MOVED_PX`. These train the same model on the same digits with the same
recipe (`paper002.centres_entries`) for `STEPS` steps and are judged by the same
functions; each criterion is its 600-step one with the step count added to its
words.
"""

from __future__ import annotations

import dataclasses

from benchmarks.claims import criteria, paper002
from benchmarks.claims.criteria import criterion_for
from benchmarks.claims.ledger import experiment

# A pilot (seed 9, no run seed; 1500 steps; only movement and time read) took
# 0.22 s a step on this machine idle (0.25-0.34 beside other jobs) and 89 s to
# compile. Its layer 4 moved 0.03 / 0.06 / 0.09 / 0.10 / 0.104 px by steps
# 150 / 300 / 600 / 900 / 1500, and the largest per-layer change of a mean
# centre distance was 0.20 px at step 600 and 0.18 at 1500 (nearest-centre
# distance: 0.13): the centres settle within ~700 steps, so no budget here is
# predicted to reach MOVED_PX. A larger learning rate would move them faster to
# the same resting place, and the recipe's (the paper's 0.1 at batch 100,
# scaled to batch 32) stays. 2000 steps is the largest run whose 3 seeds
# (~25 min idle) leave room under the ledger's 35 minutes for the machine's
# other jobs; declared anyway: the judges say inconclusive if nothing moved.
STEPS = 2000
# The 600-step claim each long entry repeats.
LONG_IDS = {short: f"{short}-long" for short in paper002.CENTRES_IDS}


def _long(short: str) -> criteria.Criterion:
  """`short`'s criterion under its long id, the step counts in its words."""
  base = criterion_for(short)
  return dataclasses.replace(
      base, id=LONG_IDS[short],
      words=f"{short}'s criterion on a run of {STEPS} steps ({short}'s has "
            f"{paper002.CENTRES_STEPS}): {base.words}")


criteria.declare(*(_long(short) for short in LONG_IDS))


@experiment("attention_centres_long", paper002.PAPER, tuple(LONG_IDS.values()), trains=True)
def attention_centres_long(seeds, small):
  return paper002.centres_entries("attention_centres_long", tuple(LONG_IDS.values()), seeds,
                                  small, STEPS)
