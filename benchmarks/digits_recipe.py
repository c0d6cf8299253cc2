r"""The full DeiT-style recipe on digits (target: >= 97% test accuracy).

  nice -n 10 python benchmarks/digits_recipe.py [--steps=4000] [--workdir=DIR]

Trains configs/digits_deit.py (its docstring lists the recipe and why
RandAugment is off on 8x8 grey digits) and prints the final metrics as JSON
(eval_accuracy for the raw parameters, eval_ema_accuracy for their EMA).
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

_STEPS = flags.DEFINE_integer("steps", 4000, "training steps")
_WORKDIR = flags.DEFINE_string("workdir", "workdir/digits_recipe", "workdir")


def main(argv):
  del argv
  from vit_spectral.data.tensorflow_import import import_tensorflow  # noqa: PLC0415
  import_tensorflow()  # quiet, and off the GPUs (JAX's)
  from vit_spectral.training import trainer  # noqa: PLC0415
  from vit_spectral.configs import digits_deit  # noqa: PLC0415
  config = digits_deit.get_config(f"steps={_STEPS.value}")
  metrics = trainer.train_and_evaluate(config, _WORKDIR.value)
  print(json.dumps(metrics, indent=2))


if __name__ == "__main__":
  app.run(main)
