"""The model classes' own checks, against the image size, without JAX.

Each family's module checks its fields when the model is called
(`ViT.check_options`, ...) by calling the function here with itself; the
command line calls the same function with the fields of `config.model`
(`models.model_settings.check_model`, before JAX is imported) and the image
size of `config.input`. Either way `model` is anything with the class's
fields as attributes and `block` (the block's fields); `facts` answers
`attention(name)` (`spec_checks.AttentionFacts`) and `attention_names`.
"""

from __future__ import annotations

from typing import Any, Sequence

from vit_spectral.head_width import head_width
from vit_spectral.models.spec_checks import check_choice

__all__ = ["CHECKS", "EMBEDDINGS", "MERGES", "POOLINGS", "POSEMB_CHOICES", "POSEMB_TOKENS",
           "STEMS", "check_cait", "check_class_attention", "check_cswin", "check_positive",
           "check_stages", "check_swin", "check_vit", "stage_windows"]

# The classifier head's pooling (every backbone).
POOLINGS = ("cls", "mean")
# The ViT's stems and position embeddings (`models.vit`, `models.posemb`).
STEMS = ("patch", "space_to_depth")
POSEMB_CHOICES = ("learned", "sincos2d", "none")
# Which tokens the learned position embedding covers (ViT.posemb_tokens).
POSEMB_TOKENS = ("all", "patches")
# How two Swin stages meet (Swin.merge).
MERGES = ("linear", "conv")
# How the CSwin stem and merges convolve (CSwin.embedding): CSwin's
# overlapping convolutions or LipsFormer's non-overlapping ones ("as in Swin").
EMBEDDINGS = ("overlapping", "patch")


def check_positive(model: Any, *fields: str) -> None:
  """Each named field (an int, or a sequence of ints) must be positive."""
  for field in fields:
    value = getattr(model, field)
    values = value if isinstance(value, Sequence) else (value,)
    if not values or min(values) <= 0:
      raise ValueError(f"model.{field}={value} must be positive")


def check_stages(model: Any, *per_stage: str) -> None:
  """depths, num_heads and each field of `per_stage` have one positive entry per stage."""
  stages = len(model.depths)
  for field in ("num_heads", *per_stage):
    if len(getattr(model, field)) != stages:
      raise ValueError(f"model.{field}={tuple(getattr(model, field))} needs one entry per "
                       f"stage ({stages}, the length of model.depths)")
  check_positive(model, "depths", "num_heads", "patch_size")


def _check_bools(model: Any, *fields: str) -> None:
  for field in fields:
    if not isinstance(getattr(model, field), bool):
      raise ValueError(f"model.{field}={getattr(model, field)!r} must be True or False")


def _check_heads(block: Any, widths: Sequence[int], heads: Sequence[int | None]) -> None:
  """Every (token width, head count) splits into heads as the attention's
  options say (`head_width`: head_dim, full_width_heads, else width / heads)."""
  options = block.attention_kwargs
  for width, num_heads in zip(widths, heads):
    if num_heads is not None:
      head_width(width, num_heads, options.get("head_dim"), options.get("full_width_heads", False))


def _check_patches(patch_size: int, height: int, width: int) -> None:
  if height % patch_size or width % patch_size:
    raise ValueError(f"model.patch_size={patch_size} does not divide the "
                     f"image size {height}x{width}")


def check_vit(model: Any, height: int, width: int, facts: Any = None) -> None:
  """The ViT's fields, on an image of height × width."""
  del facts  # the ViT's checks need no registry
  check_positive(model, "hidden_size", "depth", "patch_size")
  check_choice(model.pooling, POOLINGS, "model.pooling")
  check_choice(model.stem, STEMS, "model.stem")
  check_choice(model.posemb, POSEMB_CHOICES, "model.posemb")
  check_choice(model.posemb_tokens, POSEMB_TOKENS, "model.posemb_tokens")
  if model.posemb_tokens != "all" and model.posemb != "learned":
    raise ValueError(f"model.posemb_tokens={model.posemb_tokens!r} places a learned position "
                     f"embedding; model.posemb={model.posemb!r} has none to place (leave "
                     "posemb_tokens='all')")
  _check_bools(model, "distilled", "norm_pre", "stem_bias")
  if (isinstance(model.register_tokens, bool) or not isinstance(model.register_tokens, int)
      or model.register_tokens < 0):
    raise ValueError(f"model.register_tokens={model.register_tokens!r} must be an int >= 0")
  if model.distilled and model.pooling != "cls":
    raise ValueError("model.distilled=True reads the CLS and distillation tokens: it needs "
                     f"model.pooling='cls' (got {model.pooling!r})")
  _check_heads(model.block, [model.hidden_size], [model.block.num_heads])
  _check_patches(model.patch_size, height, width)


def class_token_attentions(facts: Any) -> list[str]:
  """Registered variants that update the class token only (the class stage's)."""
  return [n for n in facts.attention_names if facts.attention(n).updates_prefix_only]


def check_class_attention(name: str, facts: Any) -> None:
  """The class stage's attention (CaiT): a registered class-token variant."""
  attention = facts.attention(name)
  if name == "hopfield":
    raise ValueError("model.class_attention='hopfield' cannot apply: Hopfield attention "
                     "carries a T×T score memory from layer to layer, and the class stage's "
                     "maps are 1×T (only the class token asks); use it in the "
                     "self-attention stage (model.attention)")
  if not attention.updates_prefix_only:
    raise ValueError(f"model.class_attention={name!r} gives one output per token; the class "
                     f"stage needs a class-token variant: choose one of "
                     f"{class_token_attentions(facts)}")


def check_cait(model: Any, height: int, width: int, facts: Any) -> None:
  """CaiT's fields, on an image of height × width."""
  check_positive(model, "hidden_size", "depth", "patch_size", "class_depth")
  _check_bools(model, "talking_heads")
  check_class_attention(model.class_attention, facts)
  _check_heads(model.block, [model.hidden_size], [model.block.num_heads])
  _check_patches(model.patch_size, height, width)


def stage_windows(grid: tuple[int, int], window: int) -> tuple[tuple[int, int], tuple[int, int]]:
  """(window, shift) of a stage with this token grid: per side, the window
  clipped to the grid, and shift window // 2 where the grid is larger than
  the window, else 0 (Swin; timm's `_calc_window_shift`)."""
  size = tuple(min(g, window) for g in grid)
  shift = tuple(0 if g <= window else window // 2 for g in grid)
  return size, shift


def check_swin(model: Any, height: int, width: int, facts: Any) -> None:
  """Swin's fields, on an image of height × width."""
  check_stages(model)
  check_positive(model, "embed_dim", "window_size")
  _check_heads(model.block, [model.embed_dim * 2 ** s for s in range(len(model.depths))],
               model.num_heads)
  check_choice(model.merge, MERGES, "model.merge")
  if "relative_position_bias" in model.block.attention_kwargs:
    raise ValueError("model.attention.relative_position_bias is set by Swin: use "
                     "model.relative_position_bias")
  if facts.attention(model.block.attention).stateful:
    raise ValueError(
        f"model.attention.name={model.block.attention!r} carries a score memory from layer "
        "to layer; Swin's stages differ in token count (patch merging) and attend within "
        "windows, and the score memory cannot cross stages whose token counts differ: "
        "use a stateless variant")
  side = model.patch_size * 2 ** (len(model.depths) - 1)
  if height % side or width % side:
    raise ValueError(
        f"image size {height}x{width} must be divisible by model.patch_size · "
        f"2^(stages − 1) = {side} (patch partition, then {len(model.depths) - 1} merges)")
  for s in range(len(model.depths)):
    grid = (height // model.patch_size // 2 ** s, width // model.patch_size // 2 ** s)
    window, _ = stage_windows(grid, model.window_size)
    if any(g % w for g, w in zip(grid, window)):
      raise ValueError(f"model.window_size={model.window_size} does not tile stage {s}'s "
                       f"{grid[0]}x{grid[1]} token grid at image size {height}x{width}")


def check_cswin(model: Any, height: int, width: int, facts: Any = None) -> None:
  """CSwin's fields, on an image of height × width."""
  del facts  # CSwin's checks need no registry
  check_stages(model, "stripe_widths")
  check_positive(model, "hidden_size", "stripe_widths")
  stages = len(model.depths)
  _check_heads(model.block, [model.hidden_size * 2 ** s for s in range(stages)], model.num_heads)
  check_choice(model.embedding, EMBEDDINGS, "model.embedding")
  stride = model.patch_size * 2 ** (stages - 1)
  image_shape = (height, width)
  if any(side % stride for side in image_shape):
    raise ValueError(f"image size {height}x{width} is not divisible by "
                     f"{stride}, the total stride of model.patch_size={model.patch_size} "
                     f"and {stages - 1} stride-2 merges")
  for k, stripe in enumerate(model.stripe_widths):
    grid = [side // (model.patch_size * 2 ** k) for side in image_shape]
    if stripe < max(grid) and any(side % stripe for side in grid):
      raise ValueError(f"model.stripe_widths[{k}]={stripe} does not divide stage {k + 1}'s "
                       f"{grid[0]}x{grid[1]} token grid (image {height}x{width}); choose "
                       "divisors of each stage's grid")


# Model class name -> its check (`model_settings.check_model` dispatches on it).
CHECKS = {"ViT": check_vit, "CaiT": check_cait, "Swin": check_swin, "CSwin": check_cswin}
