"""What every classification backbone shares: the specs, the classifier head,
and the registry of model names.

`Backbone` is the base of the ViT, CaiT, Swin and CSwin: it declares the
fields they all have (`num_classes`, the `BlockSpec` of their blocks and the
`EncoderSpec` of how their encoders run them), so each model declares only
its own shape. `IsotropicBackbone` (one encoder of `depth` blocks of one
width: ViT, CaiT) and `StagedBackbone` (stages of growing width: Swin, CSwin)
add the shape fields each kind shares.

A backbone registers its names beside its architecture (as timm's
`@register_model`): `register_models(Swin, {"Swin-T": {...}, ...})` in the
family's module, each name with its fields in `config.model` form
(`models.build` reads them). A built-in backbone is its own module plus its
name in `_FAMILIES`; one of one's own registers itself when its module is
imported (`tests/test_plugins_from_a_file.py`).
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, ClassVar, Mapping, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from vit_spectral.layers.drop_path import linear_drop_path_rates
from vit_spectral.names import did_you_mean
from vit_spectral.models.specs import BlockSpec, EncoderSpec

__all__ = ["Backbone", "ClassifierHead", "IsotropicBackbone", "POOLINGS", "StagedBackbone",
           "check_bools", "check_heads", "check_patches", "check_positive", "model_entry",
           "register_models", "registered_model_names"]

# The classifier head's pooling (every backbone).
POOLINGS = ("cls", "mean")

# name -> (model class, its fields in config.model form).
_MODELS: dict[str, tuple[type, dict[str, Any]]] = {}


def register_models(cls: type, variants: Mapping[str, Mapping[str, Any]]) -> None:
  """Registers each name of `variants` as `cls` with those config-form fields."""
  for name, fields in variants.items():
    if name in _MODELS and _MODELS[name][0] is not cls:
      raise ValueError(f"model name {name!r} is already registered to "
                       f"{_MODELS[name][0].__qualname__}")
    _MODELS[name] = (cls, dict(fields))


# The modules that register model names (`models/__init__.py` imports its names
# lazily, so the registry imports them when it is first read).
_FAMILIES = ("vit", "swin", "cait", "cswin")


def _import_families() -> None:
  for family in _FAMILIES:
    importlib.import_module(f"vit_spectral.models.{family}")


def registered_model_names() -> tuple[str, ...]:
  """Every registered model name, in registration order."""
  _import_families()
  return tuple(_MODELS)


def model_entry(name: str) -> tuple[type, dict[str, Any]]:
  """(model class, a copy of its config-form fields) of a registered name.

  Raises:
    ValueError: `name` is not registered; the message lists the names.
  """
  _import_families()
  if name not in _MODELS:
    raise ValueError(f"model.variant={name!r} is not a registered model name"
                     f"{did_you_mean(name, _MODELS)}; choose one of {sorted(_MODELS)}")
  cls, fields = _MODELS[name]
  return cls, {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in fields.items()}


def check_positive(model: Any, *fields: str) -> None:
  """Each named field of `model` (an int, or a sequence of ints) must be positive."""
  for field in fields:
    value = getattr(model, field)
    values = value if isinstance(value, Sequence) else (value,)
    if not values or min(values) <= 0:
      raise ValueError(f"model.{field}={value} must be positive")


def check_bools(model: Any, *fields: str) -> None:
  for field in fields:
    if not isinstance(getattr(model, field), bool):
      raise ValueError(f"model.{field}={getattr(model, field)!r} must be True or False")


def check_heads(block: BlockSpec, widths: Sequence[int], heads: Sequence[int | None]) -> None:
  """Every (token width, head count) splits into heads as the block's
  attention says (`Attention.resolved_head_dim`)."""
  attention = block.attention_class
  for width, num_heads in zip(widths, heads):
    if num_heads is not None:
      attention(num_heads=num_heads, parent=None,  # detached: checked, never called
                **block.attention_kwargs).resolved_head_dim(width)


def check_patches(patch_size: int, height: int, width: int) -> None:
  if height % patch_size or width % patch_size:
    raise ValueError(f"model.patch_size={patch_size} does not divide the "
                     f"image size {height}x{width}")


class ClassifierHead(nn.Module):
  """The shared tail: tokens -> float32 -> pooled features (sown as
  "pre_logits") -> the zero-initialised linear classifier.

  Parameters "kernel" (D, num_classes) and "bias" (num_classes,) (a Dense's;
  the model names this module "head", so they are "head/kernel" and
  "head/bias"). With num_classes = 0 there are none and the features are
  returned.

  Attributes:
    num_classes: classes (0 = return the pooled features).
    pooling: "cls" (the first token) or "mean" (the mean over tokens).
    param_dtype: the parameters' dtype.
  """
  num_classes: int
  pooling: str = "cls"
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x):
    """x: (B, T, D) tokens -> logits (B, num_classes), float32 (features (B,
    D) when num_classes is 0)."""
    if self.pooling not in POOLINGS:
      raise ValueError(f"model.pooling={self.pooling!r}; choose one of {list(POOLINGS)}")
    x = x.astype(jnp.promote_types(x.dtype, jnp.float32))       # pool and head in float32
    x = x[:, 0] if self.pooling == "cls" else x.mean(axis=1)    # (B, D)
    self.sow("intermediates", "pre_logits", x)
    if not self.num_classes:
      return x
    kernel = self.param("kernel", nn.initializers.zeros, (x.shape[-1], self.num_classes),
                        self.param_dtype)
    bias = self.param("bias", nn.initializers.zeros, (self.num_classes,), self.param_dtype)
    logits = jax.lax.dot_general(x, kernel.astype(x.dtype), (((1,), (0,)), ((), ())))
    return logits + bias.astype(x.dtype)


class Backbone(nn.Module):
  """Fields every classification backbone has.

  Attributes:
    num_classes: size of the zero-initialised head (0 = no head, return the
      pooled features).
    block: the `BlockSpec` of every block (a hierarchical backbone's stages
      set num_heads and mlp_dim; `BLOCK_FIELDS_SET_BY_MODEL` lists the fields
      a model sets itself).
    encoder: the `EncoderSpec` every encoder (or stage) runs its blocks by.
  """
  # BlockSpec fields the model sets itself (not `model.block` options).
  BLOCK_FIELDS_SET_BY_MODEL: ClassVar[tuple[str, ...]] = ()
  # BlockSpec fields config.model spells at its top level for this model.
  TOP_LEVEL_BLOCK_FIELDS: ClassVar[tuple[str, ...]] = BlockSpec.TOP_LEVEL

  num_classes: int
  block: BlockSpec = dataclasses.field(default=BlockSpec(), kw_only=True)
  encoder: EncoderSpec = dataclasses.field(default=EncoderSpec(), kw_only=True)

  def check_options(self, height: int, width: int) -> None:
    """Raises ValueError naming the field for settings this model cannot run
    on a height × width image. Each model calls it first; the config checks
    call it on the unbound module (`training.config_checks.check_config`).
    A model of one's own may leave it: its traced init checks the rest."""
    del height, width

  def classify(self, tokens, pooling: str = "mean"):
    """tokens (B, T, D) -> logits through the shared `ClassifierHead` "head"."""
    return ClassifierHead(self.num_classes, pooling, param_dtype=self.block.param_dtype,
                          name="head")(tokens)


class IsotropicBackbone(Backbone):
  """One encoder of `depth` blocks of one width (ViT, CaiT).

  Attributes:
    patch_size: side of the square patches (must divide the image side).
    hidden_size: the token width.
    depth: blocks in the encoder.
    layer_overrides: per-layer-range changes of the blocks (`models.segments`);
      None = every layer alike.
  """
  patch_size: int = dataclasses.field(kw_only=True)
  hidden_size: int = dataclasses.field(kw_only=True)
  depth: int = dataclasses.field(kw_only=True)
  layer_overrides: Sequence[Mapping[str, Any]] | None = dataclasses.field(default=None,
                                                                         kw_only=True)

  def encoder_block(self) -> BlockSpec:
    """The BlockSpec every encoder layer shares before `layer_overrides`."""
    if self.block.num_heads is None or self.block.mlp_dim is None:
      raise ValueError("model.num_heads and model.mlp_dim must be set (or model.variant)")
    return self.block


class StagedBackbone(Backbone):
  """Stages of blocks whose width doubles from stage to stage (Swin, CSwin).

  Attributes:
    depths: blocks per stage (the number of stages is its length); no
      default: a registered name or the config gives the shape.
    num_heads: attention heads per stage.
    mlp_ratio: MLP width / token width.
    patch_size: the stem's stride.
  """
  BLOCK_FIELDS_SET_BY_MODEL: ClassVar[tuple[str, ...]] = ("num_heads", "mlp_dim")
  TOP_LEVEL_BLOCK_FIELDS: ClassVar[tuple[str, ...]] = tuple(
      f for f in BlockSpec.TOP_LEVEL if f not in ("num_heads", "mlp_dim"))

  depths: tuple[int, ...] = dataclasses.field(kw_only=True)
  num_heads: tuple[int, ...] = dataclasses.field(kw_only=True)
  mlp_ratio: float = dataclasses.field(default=4.0, kw_only=True)
  patch_size: int = dataclasses.field(default=4, kw_only=True)

  def check_stages(self, *per_stage: str) -> None:
    """depths, num_heads and each field of `per_stage` have one positive entry per stage."""
    stages = len(self.depths)
    for field in ("num_heads", *per_stage):
      if len(getattr(self, field)) != stages:
        raise ValueError(f"model.{field}={tuple(getattr(self, field))} needs one entry per "
                         f"stage ({stages}, the length of model.depths)")
    check_positive(self, "depths", "num_heads", "patch_size")

  def stage_block(self, stage: int, width: int) -> BlockSpec:
    """The BlockSpec of stage `stage`'s blocks, whose tokens are `width` wide."""
    return self.block.replace(num_heads=self.num_heads[stage],
                              mlp_dim=int(width * self.mlp_ratio))

  def drop_path_rates(self) -> list[list[float]]:
    """Each stage's rates: linear from 0 to `encoder.drop_path_rate` over all blocks."""
    rates = linear_drop_path_rates(self.encoder.drop_path_rate, sum(self.depths))
    out, start = [], 0
    for depth in self.depths:
      out.append(rates[start:start + depth])
      start += depth
    return out
