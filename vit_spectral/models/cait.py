"""CaiT: Class-Attention in Image Transformers (Touvron et al., 2021).

    images -> patch embedding + position embedding (patch tokens only)
           -> self-attention stage: `depth` LayerScale blocks with talking heads
              ("encoder", a `models.vit.Encoder` of `models.vit.Block`s)
           -> class-attention stage: the class token joins late and is the only
              token updated, `class_depth` blocks ("class_stage")
           -> final norm over [cls, patches] ("norm") -> head on the class token

As timm's `cait_xxs24_224` / `cait_s24_224` (`pretrained.cait_timm` loads their
weights; equal logits, tests/models/test_cait.py):

| name        | width | depth | heads | MLP  | class blocks | params (1000 classes) |
| ----------- | ----- | ----- | ----- | ---- | ------------ | --------------------- |
| CaiT-XXS24  | 192   | 24    | 4     | 768  | 2            | 11,956,264 (12.0M)    |
| CaiT-S24    | 384   | 24    | 8     | 1536 | 2            | 46,916,200 (46.9M)    |

patch 16, qkv bias, LayerScale initialised to 1e-5, exact (erf) GELU,
LayerNorm ε = 1e-6, uniform stochastic depth (every SA block the same
`drop_path_rate`, as CaiT and timm; the class stage has none).

Self-attention stage. The one `Block` of the library: LayerScale *is* its
weighted residual (`residual_alpha` = `layer_scale_init`; the parameters
"alpha1" / "alpha2" are LayerScale's γ_1 / γ_2, timm's `gamma_1` /
`gamma_2`), and talking heads are the shared attention field
`talking_heads` (`attention.base`: a heads×heads map with bias on the
logits before the softmax and another on the probabilities after it), so any
registered variant runs here with talking heads. The stage is the model's
top-level "encoder" (scan or loop, `encoder_mode`; no final norm of its own),
so everything that reads a ViT's encoder layer by layer (`models.layouts`,
`analysis.probe`, `training.diagnostics`) reads CaiT's self-attention stage.

The papers' mechanisms (paper 000 on CaiT-S24, Table 1): AttnScale
(`attention=dict(name="attn_scale")`) and FeatScale
(`block=dict(feat_scale=True)`) act in the self-attention stage, as the
paper applies them ("only to the patch embedding layers"); the class stage is
plain class attention. With talking heads, AttnScale rescales the map after
the post-softmax head mixing: Â = A_LP + (1 + ω)(A_mix − A_LP), A_mix =
the mixed probabilities (what the values see and what is sown); with ω = 0
(its init) that is exactly CaiT. Modern Hopfield attention
(`attention="hopfield"`) runs in the self-attention stage, its score memory
carried through those `depth` blocks (all with the same T tokens); it ends
there: the class stage's maps are 1×T, so there is no memory to carry, and
`class_attention="hopfield"` raises.

Class-attention stage: its own small block (`ClassAttentionBlock`) built from
the shared pieces (`norms.make_norm`, `MlpBlock`, `DropPath`, LayerScale as
the same per-channel α), because a `Block` updates every token: with a
prefix-only attention output its MLP branch would still rewrite the patch
tokens, which CaiT freezes after the self-attention stage. Here the patch
tokens are read (keys and values) and never written.
"""

from __future__ import annotations

from typing import Any, ClassVar

import flax.linen as nn
import jax.numpy as jnp

from vit_spectral.attention import get_attention, registered_attentions
from vit_spectral.layers.drop_path import DropPath
from vit_spectral.layers.mlp import MlpBlock
from vit_spectral.layers.norms import make_norm
from vit_spectral.models.backbone import (IsotropicBackbone, check_bools, check_heads,
                                          check_patches, check_positive, register_models)
from vit_spectral.models.specs import BlockSpec
from vit_spectral.models.token_layouts import TokenLayout
from vit_spectral.models.vit import Encoder

__all__ = ["CaiT", "ClassAttentionBlock", "ClassStage", "VARIANTS"]

# Registered names -> fields in config form (timm's shapes).
VARIANTS: dict[str, dict[str, Any]] = {
    "CaiT-XXS24": dict(patch_size=16, hidden_size=192, depth=24, num_heads=4, mlp_dim=768),
    "CaiT-S24": dict(patch_size=16, hidden_size=384, depth=24, num_heads=8, mlp_dim=1536),
}


def class_token_attentions() -> list[str]:
  """Registered variants that update the class token only (the class stage's)."""
  return [n for n in registered_attentions() if get_attention(n).updates_prefix_only]


def check_class_attention(name: str) -> type:
  """The class stage's attention class (`model.class_attention`): a registered
  class-token variant; ValueError saying why for any other."""
  attention = get_attention(name)
  if name == "hopfield":
    raise ValueError("model.class_attention='hopfield' cannot apply: Hopfield attention "
                     "carries a T×T score memory from layer to layer, and the class stage's "
                     "maps are 1×T (only the class token asks); use it in the "
                     "self-attention stage (model.attention)")
  if not attention.updates_prefix_only:
    raise ValueError(f"model.class_attention={name!r} gives one output per token; the class "
                     f"stage needs a class-token variant: choose one of "
                     f"{class_token_attentions()}")
  return attention


class ClassAttentionBlock(nn.Module):
  """One class-attention block (CaiT eq. 4; timm's `LayerScaleBlockClassAttn`):

      z   = [x_cls, x_patches]                         (B, 1 + N, D)
      x_cls <- x_cls + DropPath(γ_1 ⊙ CA(Norm1(z)))     queries: x_cls only
      x_cls <- x_cls + DropPath(γ_2 ⊙ MLP(Norm2(x_cls)))

  Parameters "norm1", "attention", "alpha1" (γ_1), "norm2", "mlp", "alpha2"
  (γ_2), named as in `Block`; γ starts at `spec.residual_alpha` (None = no γ).

  Attributes:
    spec: the block's `BlockSpec` (heads, MLP width, norm, LayerScale as
      residual_alpha, GELU, dropout rates, kernel_init, dtypes; its attention
      fields are the self-attention stage's and are not read here).
    attention: a registered class-token variant (`check_class_attention`).
    drop_path_rate: stochastic depth (CaiT's class stage has none).
    deterministic: disables dropout and drop-path.
  """
  spec: BlockSpec
  attention: str = "class_attention"
  drop_path_rate: float = 0.0
  deterministic: bool = True

  def scaled(self, y, suffix: str):
    if self.spec.residual_alpha is None:
      return y
    gamma = self.param(f"alpha{suffix}", nn.initializers.constant(self.spec.residual_alpha),
                       (y.shape[-1],), self.spec.param_dtype)
    return y * gamma.astype(y.dtype)

  @nn.compact
  def __call__(self, cls, patches):
    """cls: (B, P, D), patches: (B, N, D) -> the updated cls (B, P, D)."""
    spec = self.spec
    attention_cls = check_class_attention(self.attention)
    norm = lambda name: make_norm(spec.norm, spec.norm_epsilon, dtype=spec.dtype,  # noqa: E731
                                  param_dtype=spec.param_dtype, name=name)
    tokens = jnp.concatenate([cls, patches], axis=1)
    attention = attention_cls(num_heads=spec.num_heads,
                              dropout_rate=spec.attention_dropout_rate,
                              deterministic=self.deterministic, kernel_init=spec.kernel_init,
                              num_prefix_tokens=cls.shape[1], dtype=spec.dtype,
                              param_dtype=spec.param_dtype, platform=spec.platform,
                              name="attention")
    y, _ = attention(norm("norm1")(tokens), None)
    y = nn.Dropout(spec.dropout_rate)(y, deterministic=self.deterministic)
    cls = cls + DropPath(name="drop_path1")(self.scaled(y, "1"), self.drop_path_rate,
                                            self.deterministic)
    y = MlpBlock(mlp_dim=spec.mlp_dim, dropout_rate=spec.dropout_rate,
                 deterministic=self.deterministic, kernel_init=spec.kernel_init,
                 activation=spec.mlp_activation, dtype=spec.dtype,
                 param_dtype=spec.param_dtype, name="mlp")(norm("norm2")(cls))
    return cls + DropPath(name="drop_path2")(self.scaled(y, "2"), self.drop_path_rate,
                                             self.deterministic)


class ClassStage(nn.Module):
  """`depth` `ClassAttentionBlock`s ("classblock_{i}"): (cls, patches) -> cls."""
  depth: int
  spec: BlockSpec
  attention: str = "class_attention"
  deterministic: bool = True

  @nn.compact
  def __call__(self, cls, patches):
    for i in range(self.depth):
      cls = ClassAttentionBlock(self.spec, self.attention, deterministic=self.deterministic,
                                name=f"classblock_{i}")(cls, patches)
    return cls


class CaiT(IsotropicBackbone):
  """CaiT for image classification (module docstring).

  Attributes (besides `IsotropicBackbone`'s: num_classes, patch_size,
  hidden_size, depth, layer_overrides, block, encoder):
    class_depth: class-attention blocks (2 in CaiT); class_mlp_dim: their MLP
      width (None = block.mlp_dim, CaiT's ratio 4).
    class_attention: the class stage's registered class-token variant.
    layer_scale_init: LayerScale's initial γ (1e-5 for the 24-layer CaiTs),
      every block's `residual_alpha`; None = no LayerScale.
    talking_heads: talking heads in the self-attention stage (the attention
      field of that name; set it here, not in `attention`).

  The `block` (self-attention stage; its norm, norm_epsilon, mlp_activation
  and dropout rates also the class stage's) and `layer_overrides` act in the
  self-attention stage; an override naming another attention variant replaces
  the options, talking_heads included. `encoder.drop_path_rate` is every
  self-attention block's stochastic-depth rate (uniform, CaiT §4); the class
  blocks have none. timm's CaiTs use the exact (erf) GELU and LayerNorm ε 1e-6
  (`BLOCK_DEFAULTS`, the registered names' fields).
  """
  # BlockSpec fields CaiT sets per block itself (not `model.block` options).
  BLOCK_FIELDS_SET_BY_MODEL: ClassVar[tuple[str, ...]] = ("residual_alpha",)
  # CaiT's config spells the blocks' GELU and ε at its top level.
  TOP_LEVEL_BLOCK_FIELDS: ClassVar[tuple[str, ...]] = (
      *BlockSpec.TOP_LEVEL, "norm_epsilon", "mlp_activation")
  BLOCK_DEFAULTS: ClassVar[dict[str, Any]] = {"mlp_activation": "gelu_erf"}

  class_depth: int = 2
  class_mlp_dim: int | None = None
  class_attention: str = "class_attention"
  layer_scale_init: float | None = 1e-5
  talking_heads: bool = True

  def encoder_block(self) -> BlockSpec:
    """The self-attention stage's BlockSpec before `layer_overrides`: talking
    heads and LayerScale added."""
    block = super().encoder_block()
    options = dict(block.attention_kwargs)
    if "talking_heads" in options:
      raise ValueError("model.attention.talking_heads is set by CaiT: use "
                       f"model.talking_heads (now {self.talking_heads})")
    options["talking_heads"] = self.talking_heads
    return block.replace(attention_kwargs=options, residual_alpha=self.layer_scale_init)

  def check_options(self, height: int, width: int) -> None:
    """Raises ValueError naming the field (`Backbone.check_options`)."""
    check_positive(self, "hidden_size", "depth", "patch_size", "class_depth")
    check_bools(self, "talking_heads")
    check_class_attention(self.class_attention)
    check_heads(self.block, [self.hidden_size], [self.block.num_heads])
    check_patches(self.patch_size, height, width)

  @nn.compact
  def __call__(self, images, *, train: bool = False):
    """images: (B, H, W, C) -> logits (B, num_classes), float32 (features
    (B, D), float32, when num_classes is 0)."""
    self.check_options(*images.shape[1:3])
    block = self.encoder_block()
    dtype, param_dtype = block.dtype, block.param_dtype
    x = nn.Conv(self.hidden_size, (self.patch_size,) * 2, strides=self.patch_size,
                padding="VALID", dtype=dtype, param_dtype=param_dtype,
                name="embedding")(images.astype(dtype))
    batch, rows, cols, _ = x.shape
    x = x.reshape(batch, rows * cols, self.hidden_size)           # (B, N, D)
    pos = self.param("pos_embedding", nn.initializers.normal(stddev=0.02),
                     (1, rows * cols, self.hidden_size), param_dtype)
    x = nn.Dropout(block.dropout_rate)(x + pos.astype(dtype), deterministic=not train)

    x = Encoder(depth=self.depth, block=block, spec=self.encoder,
                layouts=TokenLayout((rows, cols), 0), layer_overrides=self.layer_overrides,
                drop_path_rates=(self.encoder.drop_path_rate,) * self.depth, final_norm=False,
                deterministic=not train, name="encoder")(x)

    cls = self.param("cls", nn.initializers.normal(stddev=0.02), (1, 1, self.hidden_size),
                     param_dtype)
    cls = jnp.tile(cls.astype(dtype), (batch, 1, 1))
    class_block = block.replace(mlp_dim=self.class_mlp_dim or block.mlp_dim)
    cls = ClassStage(self.class_depth, class_block, self.class_attention,
                     deterministic=not train, name="class_stage")(cls, x)

    tokens = jnp.concatenate([cls, x], axis=1)
    tokens = make_norm(block.norm, block.norm_epsilon, dtype=dtype, param_dtype=param_dtype,
                       name="norm")(tokens)
    return self.classify(tokens, "cls")


register_models(CaiT, VARIANTS)
