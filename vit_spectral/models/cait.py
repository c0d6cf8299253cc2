"""CaiT: Class-Attention in Image Transformers (Touvron et al., 2021).

    images -> patch embedding + position embedding (patch tokens only)
           -> self-attention stage: `depth` LayerScale blocks with talking heads
              ("encoder", a `models.vit.Encoder` of `models.vit.Block`s)
           -> class-attention stage: the class token joins late and is the only
              token updated, `class_depth` blocks ("class_stage")
           -> final norm over [cls, patches] ("norm") -> head on the class token

As timm's `cait_xxs24_224` / `cait_s24_224` (`models.cait_timm` loads their
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

from typing import Any, ClassVar, Mapping, Sequence

import flax.linen as nn
import jax.numpy as jnp

from vit_spectral.attention import get_attention, registered_attentions
from vit_spectral.layers.drop_path import DropPath
from vit_spectral.layers.mlp import MlpBlock, check_activation
from vit_spectral.layers.norms import LAYER_NORM_EPSILON, make_norm
from vit_spectral.models.vit import Block, Encoder

__all__ = ["CaiT", "ClassAttentionBlock", "MODEL", "VARIANTS"]

# Registered names (`models.variants.BACKBONE_NAMES`) -> fields in config form.
VARIANTS: dict[str, dict[str, Any]] = {
    "CaiT-XXS24": dict(patch_size=16, hidden_size=192, depth=24, num_heads=4, mlp_dim=768),
    "CaiT-S24": dict(patch_size=16, hidden_size=384, depth=24, num_heads=8, mlp_dim=1536),
}


def class_token_attentions() -> list[str]:
  """Registered variants that update the class token only (the class stage's)."""
  return [n for n in registered_attentions() if get_attention(n).updates_prefix_only]


def check_class_attention(name: str) -> type:
  """The class stage's attention class; ValueError saying why for any other."""
  cls = get_attention(name)
  if name == "hopfield":
    raise ValueError("model.class_attention='hopfield' cannot apply: Hopfield attention "
                     "carries a T×T score memory from layer to layer, and the class stage's "
                     "maps are 1×T (only the class token asks); use it in the "
                     "self-attention stage (model.attention)")
  if not cls.updates_prefix_only:
    raise ValueError(f"model.class_attention={name!r} gives one output per token; the class "
                     f"stage needs a class-token variant: choose one of "
                     f"{class_token_attentions()}")
  return cls


class ClassAttentionBlock(nn.Module):
  """One class-attention block (CaiT eq. 4; timm's `LayerScaleBlockClassAttn`):

      z   = [x_cls, x_patches]                         (B, 1 + N, D)
      x_cls <- x_cls + DropPath(γ_1 ⊙ CA(Norm1(z)))     queries: x_cls only
      x_cls <- x_cls + DropPath(γ_2 ⊙ MLP(Norm2(x_cls)))

  Parameters "norm1", "attention", "alpha1" (γ_1), "norm2", "mlp", "alpha2"
  (γ_2), named as in `Block`; `layer_scale_init=None` = no γ.

  Attributes: as `Block`'s fields of the same names; attention: a registered
  class-token variant (`check_class_attention`).
  """
  num_heads: int
  mlp_dim: int
  attention: str = "class_attention"
  norm: str = "layer_norm"
  norm_epsilon: float = LAYER_NORM_EPSILON
  layer_scale_init: float | None = 1e-5
  mlp_activation: str = "gelu_erf"
  dropout_rate: float = 0.0
  attention_dropout_rate: float = 0.0
  drop_path_rate: float = 0.0
  deterministic: bool = True
  kernel_init: str = "xavier_uniform"
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  def scaled(self, y, suffix: str):
    if self.layer_scale_init is None:
      return y
    gamma = self.param(f"alpha{suffix}", nn.initializers.constant(self.layer_scale_init),
                       (y.shape[-1],), self.param_dtype)
    return y * gamma.astype(y.dtype)

  @nn.compact
  def __call__(self, cls, patches):
    """cls: (B, P, D), patches: (B, N, D) -> the updated cls (B, P, D)."""
    attention_cls = check_class_attention(self.attention)
    norm = lambda name: make_norm(self.norm, self.norm_epsilon, dtype=self.dtype,  # noqa: E731
                                  param_dtype=self.param_dtype, name=name)
    tokens = jnp.concatenate([cls, patches], axis=1)
    attention = attention_cls(num_heads=self.num_heads,
                              dropout_rate=self.attention_dropout_rate,
                              deterministic=self.deterministic, kernel_init=self.kernel_init,
                              num_prefix_tokens=cls.shape[1], dtype=self.dtype,
                              param_dtype=self.param_dtype, name="attention")
    y, _ = attention(norm("norm1")(tokens), None)
    y = nn.Dropout(self.dropout_rate)(y, deterministic=self.deterministic)
    cls = cls + DropPath(name="drop_path1")(self.scaled(y, "1"), self.drop_path_rate,
                                            self.deterministic)
    y = MlpBlock(mlp_dim=self.mlp_dim, dropout_rate=self.dropout_rate,
                 deterministic=self.deterministic, kernel_init=self.kernel_init,
                 activation=self.mlp_activation, dtype=self.dtype,
                 param_dtype=self.param_dtype, name="mlp")(norm("norm2")(cls))
    return cls + DropPath(name="drop_path2")(self.scaled(y, "2"), self.drop_path_rate,
                                             self.deterministic)


class ClassStage(nn.Module):
  """`depth` `ClassAttentionBlock`s ("classblock_{i}"): (cls, patches) -> cls."""
  depth: int
  block_kwargs: Mapping[str, Any]

  @nn.compact
  def __call__(self, cls, patches):
    for i in range(self.depth):
      cls = ClassAttentionBlock(name=f"classblock_{i}", **self.block_kwargs)(cls, patches)
    return cls


class CaiT(nn.Module):
  """CaiT for image classification (module docstring).

  Attributes:
    num_classes: size of the zero-initialised head (0 = no head, return features).
    patch_size, hidden_size, depth, num_heads, mlp_dim: the self-attention
      stage's shape (as the ViT's fields).
    class_depth: class-attention blocks (2 in CaiT); class_mlp_dim: their MLP
      width (None = mlp_dim, CaiT's ratio 4).
    class_attention: the class stage's registered class-token variant.
    layer_scale_init: LayerScale's initial γ (1e-5 for the 24-layer CaiTs),
      the Blocks' `residual_alpha`; None = no LayerScale.
    talking_heads: talking heads in the self-attention stage (the attention
      field of that name; set it here, not in `attention`).
    mlp_activation, norm_epsilon: every block's GELU form and LayerNorm ε
      (timm's: "gelu_erf", 1e-6).
    attention, attention_kwargs, norm, block_options, layer_overrides,
    dropout_rate, attention_dropout_rate, kernel_init, encoder_mode,
    encoder_unroll, encoder_residuals, remat, dtype, param_dtype: as the
      ViT's, for the self-attention stage (`block_options`, `attention` and
      `layer_overrides` act there only; an override naming another attention
      variant replaces the options, talking_heads included).
    drop_path_rate: every self-attention block's stochastic-depth rate
      (uniform, CaiT §4); the class blocks have none.
  """
  # Block fields CaiT sets per block itself (not `model.block` options).
  BLOCK_FIELDS_SET_BY_MODEL: ClassVar[tuple[str, ...]] = ("residual_alpha",)

  num_classes: int
  patch_size: int
  hidden_size: int
  depth: int
  num_heads: int
  mlp_dim: int
  class_depth: int = 2
  class_mlp_dim: int | None = None
  class_attention: str = "class_attention"
  layer_scale_init: float | None = 1e-5
  talking_heads: bool = True
  mlp_activation: str = "gelu_erf"
  norm_epsilon: float = LAYER_NORM_EPSILON
  dropout_rate: float = Block.dropout_rate
  attention_dropout_rate: float = Block.attention_dropout_rate
  drop_path_rate: float = 0.0
  attention: str = Block.attention
  attention_kwargs: Mapping[str, Any] | None = None
  norm: str = Block.norm
  block_options: Mapping[str, Any] | None = None
  layer_overrides: Sequence[Mapping[str, Any]] | None = None
  encoder_mode: str = "scan"
  encoder_unroll: int = 1
  encoder_residuals: str | None = None
  remat: bool = False
  kernel_init: str = Block.kernel_init
  dtype: Any = Block.dtype
  param_dtype: Any = Block.param_dtype

  def block_fields(self) -> dict[str, Any]:
    """The Block fields every self-attention layer shares before `layer_overrides`
    (grid_size and num_prefix_tokens are added when the images are seen)."""
    attention_kwargs = dict(self.attention_kwargs or {})
    if "talking_heads" in attention_kwargs:
      raise ValueError("model.attention.talking_heads is set by CaiT: use "
                       f"model.talking_heads (now {self.talking_heads})")
    attention_kwargs["talking_heads"] = self.talking_heads
    return dict(
        num_heads=self.num_heads, mlp_dim=self.mlp_dim, attention=self.attention,
        attention_kwargs=attention_kwargs, norm=self.norm, norm_epsilon=self.norm_epsilon,
        mlp_activation=self.mlp_activation, residual_alpha=self.layer_scale_init,
        dropout_rate=self.dropout_rate, attention_dropout_rate=self.attention_dropout_rate,
        kernel_init=self.kernel_init, dtype=self.dtype, param_dtype=self.param_dtype,
        **dict(self.block_options or {}))

  def check_options(self) -> None:
    for field in ("hidden_size", "depth", "num_heads", "mlp_dim", "patch_size", "class_depth"):
      if getattr(self, field) <= 0:
        raise ValueError(f"model.{field}={getattr(self, field)} must be positive")
    for field in ("dropout_rate", "attention_dropout_rate", "drop_path_rate"):
      if not 0.0 <= getattr(self, field) < 1.0:
        raise ValueError(f"model.{field}={getattr(self, field)} must be in [0, 1)")
    if not isinstance(self.talking_heads, bool):
      raise ValueError(f"model.talking_heads={self.talking_heads!r} must be True or False")
    check_activation(self.mlp_activation, "model.mlp_activation")
    check_class_attention(self.class_attention)

  @nn.compact
  def __call__(self, images, *, train: bool = False):
    """images: (B, H, W, C) -> logits (B, num_classes), float32 (features
    (B, D), float32, when num_classes is 0)."""
    self.check_options()
    height, width = images.shape[1:3]
    if height % self.patch_size or width % self.patch_size:
      raise ValueError(f"model.patch_size={self.patch_size} does not divide the "
                       f"image size {height}x{width}")
    x = nn.Conv(self.hidden_size, (self.patch_size,) * 2, strides=self.patch_size,
                padding="VALID", dtype=self.dtype, param_dtype=self.param_dtype,
                name="embedding")(images.astype(self.dtype))
    batch, rows, cols, _ = x.shape
    x = x.reshape(batch, rows * cols, self.hidden_size)           # (B, N, D)
    pos = self.param("pos_embedding", nn.initializers.normal(stddev=0.02),
                     (1, rows * cols, self.hidden_size), self.param_dtype)
    x = nn.Dropout(self.dropout_rate)(x + pos.astype(self.dtype), deterministic=not train)

    block_kwargs = dict(self.block_fields(), grid_size=(rows, cols), num_prefix_tokens=0)
    x = Encoder(depth=self.depth, block_kwargs=block_kwargs,
                layer_overrides=self.layer_overrides,
                drop_path_rates=(self.drop_path_rate,) * self.depth, final_norm=False,
                mode=self.encoder_mode, unroll=self.encoder_unroll,
                residuals=self.encoder_residuals, remat=self.remat,
                deterministic=not train, dtype=self.dtype,
                param_dtype=self.param_dtype, name="encoder")(x)

    cls = self.param("cls", nn.initializers.normal(stddev=0.02), (1, 1, self.hidden_size),
                     self.param_dtype)
    cls = jnp.tile(cls.astype(self.dtype), (batch, 1, 1))
    class_kwargs = dict(
        num_heads=self.num_heads, mlp_dim=self.class_mlp_dim or self.mlp_dim,
        attention=self.class_attention, norm=self.norm, norm_epsilon=self.norm_epsilon,
        layer_scale_init=self.layer_scale_init, mlp_activation=self.mlp_activation,
        dropout_rate=self.dropout_rate, attention_dropout_rate=self.attention_dropout_rate,
        deterministic=not train, kernel_init=self.kernel_init, dtype=self.dtype,
        param_dtype=self.param_dtype)
    cls = ClassStage(self.class_depth, class_kwargs, name="class_stage")(cls, x)

    tokens = jnp.concatenate([cls, x], axis=1)
    tokens = make_norm(self.norm, self.norm_epsilon, dtype=self.dtype,
                       param_dtype=self.param_dtype, name="norm")(tokens)
    x = tokens[:, 0].astype(jnp.promote_types(self.dtype, jnp.float32))   # (B, D)
    self.sow("intermediates", "pre_logits", x)
    if not self.num_classes:
      return x
    return nn.Dense(self.num_classes, kernel_init=nn.initializers.zeros,
                    dtype=x.dtype, param_dtype=self.param_dtype, name="head")(x)


MODEL = CaiT
