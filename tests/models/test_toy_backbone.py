"""A new backbone touches no library file: it subclasses a `Backbone`, runs the
shared `Encoder` of `Block`s with its own token layout, ends in the shared
classifier head and registers its names beside itself; `config.model` then
builds, checks and trains it like any other model."""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from vit_spectral.models import backbone, build
from vit_spectral.models.backbone import IsotropicBackbone, register_models
from vit_spectral.models.token_layouts import WindowLayout
from vit_spectral.models.vit import Encoder


class ToyWindowNet(IsotropicBackbone):
  """Patches -> `depth` blocks attending within 2×2 windows -> mean -> head."""
  window: int = 2

  @nn.compact
  def __call__(self, images, *, train: bool = False):
    block = self.encoder_block()
    x = nn.Conv(self.hidden_size, (self.patch_size,) * 2, strides=self.patch_size,
                name="embedding")(images)
    batch, rows, cols, _ = x.shape
    layout = WindowLayout((rows, cols), window=(self.window,) * 2)
    x = Encoder(depth=self.depth, block=block, spec=self.encoder, layouts=layout,
                layer_overrides=self.layer_overrides, deterministic=not train,
                name="encoder")(x.reshape(batch, rows * cols, self.hidden_size))
    return self.classify(x, "mean")


@pytest.fixture
def toy_names():
  names = {"Toy-T": dict(patch_size=2, hidden_size=8, depth=2, num_heads=2, mlp_dim=16)}
  register_models(ToyWindowNet, names)
  yield names
  for name in names:
    del backbone._MODELS[name]     # pylint: disable=protected-access


@pytest.mark.extended  # a training run (~20 s): .ci/run's extended step
def test_a_registered_toy_backbone_builds_checks_and_trains_from_config(toy_names):
  del toy_names
  config = build.model_config(variant="Toy-T", window=2,
                              attention=dict(name="attn_scale"), block=dict(feat_scale=True))
  assert config.window == 2 and config.encoder_mode == "scan"
  model = build.build_model(config, num_classes=3)
  assert isinstance(model, ToyWindowNet) and model.block.attention == "attn_scale"
  images = jax.random.normal(jax.random.key(0), (4, 8, 8, 3))
  labels = jnp.arange(4) % 3
  params = model.init(jax.random.key(1), images)["params"]
  # Its blocks are the shared Block: AttnScale's ω and FeatScale's s, t are there.
  stack = params["encoder"]["encoderblock"]
  assert stack["attention"]["omega"].shape == (2, 2)
  assert stack["feat_scale"]["dc_scale"].shape == (2, 8)

  tx = optax.adam(1e-2)
  opt_state = tx.init(params)

  def loss(p):
    logits = model.apply({"params": p}, images)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

  losses = []
  for _ in range(2):
    value, grads = jax.value_and_grad(loss)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    losses.append(float(value))
  assert np.isfinite(losses).all() and losses[1] < losses[0]

  with pytest.raises(ValueError, match=r"model.window_size|does not divide|tile"):
    build.build_model(dict(variant="Toy-T", window=3), 3).init(jax.random.key(0), images)
  with pytest.raises(ValueError, match=r"config.model has unknown options \['windows'\]"):
    build.build_model(dict(variant="Toy-T", windows=2), 3)


def test_the_four_models_declare_no_field_twice():
  """Besides num_classes, no field is declared by more than one of the four
  top models (the shared ones live in their bases and specs)."""
  from vit_spectral.models import CSwin, CaiT, Swin, ViT  # noqa: PLC0415
  declared = {cls.__name__: ({f.name for f in dataclasses.fields(cls)}
                             & set(cls.__dict__.get("__annotations__", {})))
                             - {"parent", "name"}
              for cls in (ViT, Swin, CaiT, CSwin)}
  assert declared["ViT"] == {"stem", "pooling", "posemb",   # and the pretrained families':
                             "distilled", "register_tokens", "posemb_tokens", "norm_pre",
                             "stem_bias"}
  seen: dict[str, list[str]] = {}
  for name, fields in declared.items():
    for field in fields:
      seen.setdefault(field, []).append(name)
  assert {f: owners for f, owners in seen.items() if len(owners) > 1} == {}
  # and every model still has the shared fields, through its bases
  for cls in (ViT, Swin, CaiT, CSwin):
    assert {"num_classes", "block", "encoder"} <= {f.name for f in dataclasses.fields(cls)}
