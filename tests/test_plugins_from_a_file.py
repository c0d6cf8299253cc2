"""A toy attention variant and a toy backbone written in a file of one's own:
each is one class plus its registration line, no library file is edited, and
the command line prints their config, checks it and trains them; the registry
listing reads them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="")

PLUGINS = textwrap.dedent('''
    import flax.linen as nn
    import jax.numpy as jnp

    from vit_spectral.attention import Attention, register_attention
    from vit_spectral.models.backbone import IsotropicBackbone, register_models
    from vit_spectral.models.token_layouts import TokenLayout
    from vit_spectral.models.vit import Encoder


    @register_attention("toy_mean")
    class ToyMeanAttention(Attention):
      """Attention whose logits are scaled by `temperature` (a toy)."""
      temperature: float = 1.0
      OPTION_RANGES = {"temperature": "(0, inf)"}

      def scores(self, q, k, x):
        return super().scores(q, k, x) / self.temperature


    class ToyNet(IsotropicBackbone):
      """Patches -> the shared encoder -> mean -> the shared head."""

      @nn.compact
      def __call__(self, images, *, train: bool = False):
        block = self.encoder_block()
        x = nn.Conv(self.hidden_size, (self.patch_size,) * 2, strides=self.patch_size,
                    name="embedding")(images)
        batch, rows, cols, _ = x.shape
        x = Encoder(depth=self.depth, block=block, spec=self.encoder,
                    layouts=TokenLayout((rows, cols)), deterministic=not train,
                    name="encoder")(x.reshape(batch, rows * cols, self.hidden_size))
        return self.classify(x, "mean")


    register_models(ToyNet, {"Toy-S": dict(patch_size=2, hidden_size=8, depth=2, num_heads=2,
                                           mlp_dim=16)})
''')

CONFIG = textwrap.dedent('''
    import os
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import toy_plugins  # noqa: F401  (registers the variant and the backbone)

    from vit_spectral.configs import common, digits_vit


    def get_config():
      config = digits_vit.get_config("steps=2")
      config.model = common.model_config("Toy-S", attention=dict(name="toy_mean",
                                                                 temperature=2.0))
      config.eval_every = config.checkpoint_every = 2
      config.optim.warmup_steps = 1
      return config
''')


def _run(*args, path=""):
  env = dict(ENV, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, str(path)])))
  return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                        text=True, timeout=600, check=False)


@pytest.mark.extended   # three command lines and a run (~45 s); the toy tests train in-process
def test_a_variant_and_a_backbone_of_ones_own_print_check_and_train(tmp_path):
  (tmp_path / "toy_plugins.py").write_text(PLUGINS)
  (tmp_path / "toy_config.py").write_text(CONFIG)
  config = f"--config={tmp_path / 'toy_config.py'}"
  printed = _run("train.py", config, "--print_config")
  assert printed.returncode == 0, printed.stderr[-2000:]
  model = json.loads(printed.stdout)["model"]
  assert model["variant"] == "Toy-S" and model["attention"] == {"name": "toy_mean",
                                                                "temperature": 2.0}
  # The option's declared range and type reach the command line.
  refused = _run("train.py", config, "--config.model.attention.temperature=0", "--print_config")
  assert refused.returncode == 2
  assert refused.stderr.strip() == "error: model.attention.temperature=0.0 must be in (0, inf)"
  trained = _run("train.py", config, f"--workdir={tmp_path / 'run'}")
  assert trained.returncode == 0, trained.stderr[-2000:]
  assert os.path.isdir(tmp_path / "run" / "checkpoints" / "2")
  listing = _run("-m", "vit_spectral.registries", "--import=toy_plugins", path=tmp_path)
  assert listing.returncode == 0, listing.stderr[-2000:]
  assert "| `toy_mean` | `ToyMeanAttention` | toy_plugins |" in listing.stdout
  assert "| `Toy-S` | `ToyNet` |" in listing.stdout
