"""timm Swin checkpoints in: `load_timm(weights, "swin_tiny_patch4_window7_224")`.

Reached through `pretrained.load_timm` (timm names starting with
"swin_"). What makes the converted `models.swin.Swin` compute timm's function
(timm >= 0.9 naming, `SwinTransformer`):

* patch_embed.proj (C, 3, p, p) -> embedding/kernel (p, p, 3, C);
  patch_embed.norm -> embedding_norm.
* layers.{s}.downsample (the merge opens stage s >= 1, as in timm):
  norm -> stage_{s}/merge/norm over 4C in timm's channel order (kept by
  `swin.PatchMerging`), reduction.weight (2C, 4C) -> merge/reduction/kernel.
* layers.{s}.blocks.{i}: the fused attn.qkv (3C, C) split into query / key /
  value (C, H, Dh); attn.proj -> attention/out (H, Dh, C);
  attn.relative_position_bias_table -> attention/relative_position_bias_table
  (same row order: `layers.windows.relative_position_index`); norm1, norm2,
  mlp.fc1, mlp.fc2 as named. The relative_position_index and attn_mask
  buffers, when a file has them, are checked against ours and not loaded.
* norm -> norm; head.fc -> head (current timm's `ClassifierHead`; the
  older "head.weight" is read too).

Every tensor the plain Swin needs must be there with its shape, or the load
stops with `errors.WeightsMismatchError` naming it; parameters our mechanisms
add (`model_overrides`: AttnScale's ω, FeatScale's scales, ...) keep their
initial values (neutral for both). An absolute position embedding (Swin's
`ape`) would change the function and stops the load.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging

from vit_spectral import errors
from vit_spectral.layers.windows import relative_position_index
from vit_spectral.models.build import build_model
from vit_spectral.models.layouts import to_layout, tree_layout
from vit_spectral.pretrained.converter import TimmConverter, flat_paths, nest_paths

__all__ = ["TIMM_NAMES", "load_timm", "timm_swin_params"]

# timm model name (the tag after a "." ignored) -> (our variant, its other fields).
TIMM_NAMES: dict[str, tuple[str, dict[str, Any]]] = {
    "swin_tiny_patch4_window7_224": ("Swin-T", {}),
    "swin_small_patch4_window7_224": ("Swin-S", {}),
    "swin_base_patch4_window7_224": ("Swin-B", {}),
    "swin_base_patch4_window12_384": ("Swin-B", {"window_size": 12}),
}
_RESOLUTION = re.compile(r"_(\d+)$")
_BLOCK = re.compile(r"layers\.(\d+)\.blocks\.(\d+)\.(.+)")
_KIND = {"weight": "scale", "bias": "bias"}


def _mismatch(message: str) -> errors.WeightsMismatchError:
  return errors.WeightsMismatchError(f"pretrained weights do not fit: {message}")


def timm_swin_params(weights: Mapping[str, np.ndarray], num_heads: tuple[int, ...]
                     ) -> tuple[dict[str, np.ndarray], dict[str, str], list[str]]:
  """A timm Swin state dict in our names and layouts (blocks in the loop layout).

  Args:
    weights: {timm name: array}.
    num_heads: heads per stage, to split qkv and proj.

  Returns:
    (flat {our path: array}, {our path: timm name}, timm names not converted;
    the relative_position_index / attn_mask buffers are checked, not listed).
  """
  if "absolute_pos_embed" in weights:
    raise _mismatch("tensor 'absolute_pos_embed' (Swin's ape) adds an absolute position "
                    "embedding, which this Swin does not compute")
  out, names, unused = {}, {}, []

  def put(path, name, value):
    out[path], names[path] = np.asarray(value), name

  for name, w in weights.items():
    w = np.asarray(w)
    if name == "patch_embed.proj.weight":
      put("embedding/kernel", name, w.transpose(2, 3, 1, 0))
    elif name == "patch_embed.proj.bias":
      put("embedding/bias", name, w)
    elif m := re.fullmatch(r"patch_embed\.norm\.(weight|bias)", name):
      put(f"embedding_norm/{_KIND[m.group(1)]}", name, w)
    elif m := re.fullmatch(r"norm\.(weight|bias)", name):
      put(f"norm/{_KIND[m.group(1)]}", name, w)
    elif m := re.fullmatch(r"head(?:\.fc)?\.(weight|bias)", name):
      put(f"head/{'kernel' if m.group(1) == 'weight' else 'bias'}", name,
          w.T if m.group(1) == "weight" else w)
    elif m := re.fullmatch(r"layers\.(\d+)\.downsample\.norm\.(weight|bias)", name):
      put(f"stage_{m.group(1)}/merge/norm/{_KIND[m.group(2)]}", name, w)
    elif m := re.fullmatch(r"layers\.(\d+)\.downsample\.reduction\.weight", name):
      put(f"stage_{m.group(1)}/merge/reduction/kernel", name, w.T)
    elif m := _BLOCK.fullmatch(name):
      stage, rest = int(m.group(1)), m.group(3)
      block = f"stage_{stage}/encoder/encoderblock_{m.group(2)}"
      if stage >= len(num_heads):
        raise _mismatch(f"tensor {name!r} is of stage {stage}; the model has "
                        f"{len(num_heads)} stages")
      heads = num_heads[stage]
      if m2 := re.fullmatch(r"(norm[12])\.(weight|bias)", rest):
        put(f"{block}/{m2.group(1)}/{_KIND[m2.group(2)]}", name, w)
      elif rest in ("attn.qkv.weight", "attn.qkv.bias"):     # rows q | k | v
        if w.shape[0] % (3 * heads):
          raise _mismatch(f"{name!r} {w.shape} does not split into 3 × {heads} heads")
        dh = w.shape[0] // (3 * heads)
        for part, rows in zip(("query", "key", "value"), np.split(w, 3, axis=0)):
          if rest.endswith("weight"):
            put(f"{block}/attention/{part}/kernel", name, rows.T.reshape(-1, heads, dh))
          else:
            put(f"{block}/attention/{part}/bias", name, rows.reshape(heads, dh))
      elif rest == "attn.proj.weight":                        # (C, H·Dh)
        if w.shape[1] % heads:
          raise _mismatch(f"{name!r} {w.shape} does not split into {heads} heads")
        put(f"{block}/attention/out/kernel", name, w.T.reshape(heads, w.shape[1] // heads, -1))
      elif rest == "attn.proj.bias":
        put(f"{block}/attention/out/bias", name, w)
      elif rest == "attn.relative_position_bias_table":
        put(f"{block}/attention/relative_position_bias_table", name, w)
      elif rest == "attn.relative_position_index":
        side = int(round(np.sqrt(w.shape[0])))
        if w.shape != (side * side,) * 2 or not np.array_equal(
            w, relative_position_index((side, side))):
          raise _mismatch(f"buffer {name!r} is not Swin's relative position index of a "
                          f"{side}x{side} window")
      elif rest == "attn_mask":
        pass    # the shifted-window mask: a function of the shapes, ours is computed
      elif m2 := re.fullmatch(r"mlp\.(fc[12])\.(weight|bias)", rest):
        put(f"{block}/mlp/{m2.group(1)}/{'kernel' if m2.group(2) == 'weight' else 'bias'}",
            name, w.T if m2.group(2) == "weight" else w)
      else:
        unused.append(name)
    else:
      unused.append(name)
  return out, names, unused


def _loop_stages(params: Mapping[str, Any]) -> dict[str, Any]:
  """`params` with every stage's encoder in the loop layout."""
  return {k: (to_layout(v, None) if k.startswith("stage_") and "encoder" in v else v)
          for k, v in params.items()}


def _as_layout_of(params: Mapping[str, Any], like: Mapping[str, Any]) -> dict[str, Any]:
  """Loop-layout stages of `params` restored to the layouts of `like`'s."""
  return {k: (to_layout(v, tree_layout(like[k])) if k.startswith("stage_") and "encoder" in v
              else v) for k, v in params.items()}


def _config(name: str) -> tuple[dict[str, Any], int]:
  """(config.model fields, image side) of a timm Swin name."""
  base = name.split(".")[0]
  if base not in TIMM_NAMES:
    raise ValueError(f"timm model {name!r} is not a supported Swin; choose one of "
                     f"{sorted(TIMM_NAMES)}")
  variant, fields = TIMM_NAMES[base]
  return dict(fields, variant=variant), int(_RESOLUTION.search(base).group(1))


def load_timm(weights: Mapping[str, np.ndarray], name: str, *, image_size: int | None = None,
              **model_overrides: Any) -> tuple[Any, dict[str, Any]]:
  """A timm Swin state dict as (model, {"params": ...}) (module docstring).

  Args:
    weights: {timm name: array} (`weight_files.read_weights`).
    name: the timm model name, one of TIMM_NAMES (a ".tag" suffix is ignored).
    image_size: the input side; None = the name's resolution. Any side the
      windows tile works (the bias tables depend on the window only).
    **model_overrides: `config.model` fields added to the architecture
      (`block` and `attention` dicts merge with the variant's); `num_classes`
      here replaces the checkpoint's head with a fresh one.

  Raises:
    errors.WeightsMismatchError: a tensor the plain Swin needs is missing or
      misshapen, or one would change the function (the message names it).
  """
  config, resolution = _config(name)
  size = image_size or resolution
  overrides = dict(model_overrides)
  for key, value in overrides.items():
    if key in ("block", "attention") and isinstance(value, Mapping) and key in config:
      config[key] = {**config[key], **value}
    else:
      config[key] = value
  num_classes = config.pop("num_classes", None)
  plain_config, _ = _config(name)
  converted, names, unused = timm_swin_params(
      weights, tuple(build_model(plain_config, 1).num_heads))
  source_classes = converted["head/kernel"].shape[-1] if "head/kernel" in converted else 0
  reinit_head = num_classes is not None and num_classes != source_classes
  num_classes = num_classes if reinit_head else source_classes

  image = jnp.zeros((1, size, size, 3), jnp.float32)
  model = build_model(config, num_classes)
  abstract = jax.eval_shape(lambda x: model.init(jax.random.key(0), x), image)["params"]
  plain = build_model(dict(plain_config, encoder_mode="loop"), num_classes)
  required = set(flat_paths(jax.eval_shape(lambda x: plain.init(jax.random.key(0), x),
                                         image)["params"]))
  target = flat_paths(_loop_stages(abstract))
  head = {"head/kernel", "head/bias"} if reinit_head else set()
  missing = sorted(p for p in required & set(target) if p not in converted and p not in head)
  if missing:
    raise _mismatch(f"the source has no tensor for {missing[0]}"
                    + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
                    + f"; is it a checkpoint of {name}?")
  initial = None
  flat = {}
  for path, spec in target.items():
    value = None if path in head else converted.get(path)
    if value is None:
      if initial is None:
        initial = flat_paths(_loop_stages(model.init(jax.random.key(0), image)["params"]))
      flat[path] = np.asarray(initial[path])
      continue
    if tuple(value.shape) != tuple(spec.shape):
      label = f"{path} ({names[path]})" if path in names else path
      raise _mismatch(f"{label} has shape {tuple(value.shape)}, the model needs "
                      f"{tuple(spec.shape)}")
    flat[path] = value.astype(spec.dtype)
  unused += sorted({names[p] for p in converted if p not in target})
  if unused:
    logging.warning("pretrained: unused tensors of %s: %s", name, unused)
  params = _as_layout_of(nest_paths(flat), abstract)
  return model, {"params": jax.tree_util.tree_map(jnp.asarray, params)}

CONVERTER = TimmConverter(load_timm, tuple(TIMM_NAMES))
