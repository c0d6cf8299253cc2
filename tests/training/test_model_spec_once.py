"""`config.model` becomes a model spec once per run, where the run starts, and
the trainer builds its model from that spec."""

from __future__ import annotations

import jax

from vit_spectral.configs import digits_vit
from vit_spectral.models import build
from vit_spectral.models.specs import BlockSpec, EncoderSpec
from vit_spectral.training import trainer


def test_set_up_converts_config_model_once(monkeypatch):
  calls = []
  original = build.model_kwargs

  def counting(model_config):
    calls.append(dict(model_config))
    return original(model_config)

  monkeypatch.setattr(build, "model_kwargs", counting)
  config = digits_vit.get_config("depth=1,width=16,heads=2,steps=4")
  config.model.block = dict(feat_scale=True)
  config.optim.warmup_steps = 1
  setup = trainer.set_up(config)
  assert len(calls) == 1
  spec = setup.sections.model
  assert isinstance(spec.fields["block"], BlockSpec) and spec.fields["block"].feat_scale
  assert isinstance(spec.fields["encoder"], EncoderSpec)
  model = setup.steps.model
  # The model is the spec with the run's backend written in (`ModelSpec.for_backend`).
  assert model.block == spec.fields["block"].replace(platform=jax.default_backend())
  assert model.num_classes == 10
