"""Pretrained weights in: timm and big_vision ViT checkpoints.

    model, variables = load_timm("deit_small_patch16_224.safetensors",
                                 "deit_small_patch16_224")
    logits = model.apply(variables, images)          # images (B, H, W, 3) NHWC
    timm_preprocessing("deit_small_patch16_224")     # the input size, mean, std, crop

    model, variables = load_big_vision("ViT-B_16.npz", "B/16")

timm families read here (`TIMM_ARCHITECTURES`, every size timm registers; what
each adds is timm's code, `timm/models/vision_transformer.py`, `deit.py`, since
the papers are silent): ViT, DeiT, MAE encoders, DeiT-III, distilled DeiT,
DINOv2 (with registers) and CLIP image towers. CaiT and Swin names go to their
families' converters (`FAMILY_CONVERTERS`). `timm_preprocessing(name)` gives
the input each name's weights were trained on; no torch needed.

`model_overrides` are `config.model` fields (`models.build`) added to the
checkpoint's architecture (e.g. `attention=dict(name="attn_scale")`); the
parameters they add start at values that keep the pretrained function
(AttnScale's ω and FeatScale's s, t are zero, paper 000). `load_into`
(`config.init_from`) fits a checkpoint to a model the config built.

A different resolution resamples the position embedding as each anchor does
(`models.posemb.RESAMPLE_METHODS`: timm bicubic, big_vision linear zoom).
`errors.WeightsMismatchError` stops the load, with nothing half-loaded, when a
tensor the model needs is missing or does not fit, or the file holds tensors
that would change the function and the named architecture lacks or this ViT
does not compute (`fc_norm`, query/key norms, a MAP head, big_vision's
representation layer). Tensors no parameter takes are listed in the
`LoadReport`.

How each family maps onto our parameters: docs/design.md#pretrainedloadingpy
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging

from vit_spectral import errors
from vit_spectral.models import posemb as posemb_lib
from vit_spectral.models.build import build_model
from vit_spectral.models.layouts import to_layout, tree_layout
from vit_spectral.models.backbone import StagedBackbone
from vit_spectral.models.specs import BlockSpec, EncoderSpec
from vit_spectral.models.variants import variant_fields
from vit_spectral.models.vit import ViT
from vit_spectral.pretrained import timm_names
from vit_spectral.pretrained.formats import FORMATS
from vit_spectral.pretrained.converter import TimmConverter, flat_paths, nest_paths
from vit_spectral.pretrained.timm_names import TIMM_ARCHITECTURES
from vit_spectral.pretrained.timm_preprocessing import TimmPreprocessing, timm_preprocessing
from vit_spectral.pretrained.weight_files import read_weights

# timm architecture-name prefix -> the module of that family's converter
# (`converter.TimmConverter`, its `CONVERTER`): one line per family.
FAMILY_CONVERTERS = {"cait_": "vit_spectral.pretrained.cait_timm",
                     "swin_": "vit_spectral.pretrained.swin_timm"}


def family_converters() -> dict[str, TimmConverter]:
  """prefix -> `TimmConverter` of every family in `FAMILY_CONVERTERS`."""
  return {prefix: importlib.import_module(module).CONVERTER
          for prefix, module in FAMILY_CONVERTERS.items()}


def _load_into_classes() -> dict[type, Callable[..., Any]]:
  """Model class besides the ViT that `load_into` fits -> its
  `timm_params(weights, num_heads)`. Swin is not among them: its stages and
  relative position tables are fitted by its `load_timm` only."""
  return {c.model_class: c.timm_params for c in family_converters().values()
          if c.model_class is not None}


__all__ = ["FORMATS", "LoadReport", "TIMM_ARCHITECTURES", "TimmPreprocessing",
           "big_vision_params", "flat_paths", "known_timm_names", "load_big_vision",
           "load_into", "load_timm", "nest_paths",
           "timm_model_config", "timm_params", "timm_preprocessing"]


# How each format's position embedding is resampled (models.posemb).
_RESAMPLING = {"timm": "bicubic", "big_vision": "scipy_linear", "vit_spectral": "bicubic"}
# timm's ViT families by name (JAX-free, for recipes: `pretrained.timm_names`).
_BLOCK = re.compile(r"encoder/encoderblock_(\d+)/")
# Numbered layers a source may not have more of than the model: (path, model field).
_LAYERS = ((_BLOCK, "depth"), (re.compile(r"class_stage/classblock_(\d+)/"), "class_depth"))
_HEAD = ("head/kernel", "head/bias", "head_dist/kernel", "head_dist/bias")

# Tensors that mean an architecture this ViT does not compute.
_TIMM_UNSUPPORTED = {
    "fc_norm.": "a norm after pooling (global_pool='avg')",
    ".q_norm.": "query/key normalisation", ".k_norm.": "query/key normalisation",
    "attn_pool.": "an attention-pooling (MAP) head",
}
# Converted tensors of mechanisms that change the function: a model without
# that parameter (another family's name) must not drop them as unused.
_ARCHITECTURE_TENSORS = {
    re.compile(r"dist$"): "a distillation token (DeiT *_distilled_* models: distilled=True)",
    re.compile(r"head_dist/"): "a distillation head (DeiT *_distilled_* models)",
    re.compile(r"registers$"): "register tokens (e.g. *_reg4_dinov2: register_tokens)",
    re.compile(r"norm_pre/"): "a norm before the blocks (CLIP towers: norm_pre=True)",
    re.compile(r"encoder/encoderblock_\d+/alpha[12]$"):
        "LayerScale (DeiT-III, DINOv2: block.residual_alpha)",
}
_BIG_VISION_UNSUPPORTED = {
    "pre_logits/": "a representation layer (pre_logits; ImageNet-21k checkpoints)",
    "MAPHead_0/": "an attention-pooling (MAP) head",
}


@dataclasses.dataclass(frozen=True)
class LoadReport:
  """What `load_into` did, by parameter path ("encoder/encoderblock_3/mlp/fc1/kernel").

  Attributes:
    loaded: parameters taken from the source.
    initialised: parameters the source lacks, added by the model's mechanisms
      (e.g. AttnScale's omega), left at their initial values.
    reinitialised: parameters of the source replaced by their initial values
      (the head, with `reinit_head` or a new class count).
    resampled: "pos_embedding (1, 197, 384) -> (1, 577, 384)" entries.
    unused: source tensors (by their names in the source) no parameter took.
  """
  loaded: tuple[str, ...] = ()
  initialised: tuple[str, ...] = ()
  reinitialised: tuple[str, ...] = ()
  resampled: tuple[str, ...] = ()
  unused: tuple[str, ...] = ()

  def lines(self) -> list[str]:
    """One log line per non-empty entry."""
    out = [f"loaded {len(self.loaded)} tensors"]
    for label, names in (("resampled", self.resampled),
                         ("left at their initial values (not in the source)", self.initialised),
                         ("re-initialised", self.reinitialised),
                         ("unused tensors of the source", self.unused)):
      if names:
        out.append(f"{label}: {', '.join(names)}")
    return out

  def log(self) -> None:
    for line in self.lines():
      (logging.warning if line.startswith("unused") else logging.info)("pretrained: %s", line)


def _mismatch(message: str) -> errors.WeightsMismatchError:
  return errors.WeightsMismatchError(f"pretrained weights do not fit: {message}")


def _check_supported(weights: Mapping[str, Any], markers: Mapping[str, str]) -> None:
  for name in weights:
    for marker, meaning in markers.items():
      if marker in name or name == marker:
        raise _mismatch(f"tensor {name!r} belongs to {meaning}, which this ViT does not "
                        "compute")


# --- timm ---------------------------------------------------------------------------

def timm_params(weights: Mapping[str, np.ndarray], num_heads: int
                ) -> tuple[dict[str, np.ndarray], dict[str, str], list[str]]:
  """A timm ViT state dict (ViT, DeiT, DeiT-III, distilled DeiT, DINOv2, MAE,
  CLIP towers) in our names and layouts (loop layout).

  timm -> ours: cls_token, dist_token, reg_token -> cls, dist, registers;
  pos_embed -> pos_embedding; norm_pre, norm -> norm_pre, encoder/encoder_norm;
  head, head_dist -> head, head_dist; blocks.i.ls{1,2}.gamma (LayerScale) ->
  encoder/encoderblock_i/alpha{1,2} (the Block's weighted residual).

  Args:
    weights: {timm name: array} (`weight_files.read_weights`).
    num_heads: H, to split the fused qkv and proj weights into heads.

  Returns:
    (flat {our path: array}, {our path: timm name}, timm names not converted).

  Raises:
    errors.WeightsMismatchError: a tensor of an architecture we do not
      compute, or a qkv / proj that does not split into `num_heads` heads.
  """
  _check_supported(weights, _TIMM_UNSUPPORTED)
  out, names, unused = {}, {}, []

  def put(path, name, value):
    out[path], names[path] = value, name

  def heads(name, value, axis_in_first):
    width = value.shape[0] if axis_in_first else value.shape[-1]
    if width % num_heads:
      raise _mismatch(f"{name!r} {value.shape} does not split into {num_heads} heads")
    return width // num_heads

  for name, w in weights.items():
    if name in ("cls_token", "dist_token", "reg_token"):
      put({"cls_token": "cls", "dist_token": "dist", "reg_token": "registers"}[name], name, w)
    elif name == "pos_embed":
      put("pos_embedding", name, w)
    elif name == "patch_embed.proj.weight":
      put("embedding/kernel", name, w.transpose(2, 3, 1, 0))        # (D,C,p,p) -> (p,p,C,D)
    elif name == "patch_embed.proj.bias":
      put("embedding/bias", name, w)
    elif name in ("norm.weight", "norm.bias"):
      put(f"encoder/encoder_norm/{'scale' if name.endswith('weight') else 'bias'}", name, w)
    elif name in ("norm_pre.weight", "norm_pre.bias"):
      put(f"norm_pre/{'scale' if name.endswith('weight') else 'bias'}", name, w)
    elif m := re.fullmatch(r"(head|head_dist)\.(weight|bias)", name):
      put(f"{m.group(1)}/{'kernel' if m.group(2) == 'weight' else 'bias'}", name, w.T)
    elif m := re.fullmatch(r"blocks\.(\d+)\.(.+)", name):
      block, rest = f"encoder/encoderblock_{m.group(1)}", m.group(2)
      if rest in ("norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"):
        norm, kind = rest.split(".")
        put(f"{block}/{norm}/{'scale' if kind == 'weight' else 'bias'}", name, w)
      elif rest == "attn.qkv.weight":                                # (3D, D) rows q | k | v
        dh = heads(name, w, True) // 3
        for part, rows in zip(("query", "key", "value"), np.split(w, 3, axis=0)):
          put(f"{block}/attention/{part}/kernel", name, rows.T.reshape(-1, num_heads, dh))
      elif rest == "attn.qkv.bias":
        dh = heads(name, w, True) // 3
        for part, rows in zip(("query", "key", "value"), np.split(w, 3)):
          put(f"{block}/attention/{part}/bias", name, rows.reshape(num_heads, dh))
      elif rest == "attn.proj.weight":                               # (D, H·Dh)
        dh = heads(name, w, False)
        put(f"{block}/attention/out/kernel", name, w.T.reshape(num_heads, dh, -1))
      elif rest == "attn.proj.bias":
        put(f"{block}/attention/out/bias", name, w)
      elif rest in ("ls1.gamma", "ls2.gamma"):                       # LayerScale γ
        put(f"{block}/alpha{rest[2]}", name, w)
      elif m2 := re.fullmatch(r"mlp\.(fc[12])\.(weight|bias)", rest):
        fc, kind = m2.groups()
        put(f"{block}/mlp/{fc}/{'kernel' if kind == 'weight' else 'bias'}", name,
            w.T if kind == "weight" else w)
      else:
        unused.append(name)
    else:
      unused.append(name)
  return out, names, unused


def timm_model_config(name: str) -> dict[str, Any]:
  """The `config.model` fields of a timm ViT model name
  (`timm_names.timm_model_config`; an unknown name's error also names the
  registered converters' names and families).

  Raises:
    ValueError: a name outside these families, naming the nearest known one.
  """
  return timm_names.timm_model_config(name, known_timm_names(), tuple(FAMILY_CONVERTERS))


def known_timm_names() -> tuple[str, ...]:
  """Every timm architecture name load_timm reads: this module's
  `TIMM_ARCHITECTURES` and the registered converters' names."""
  return TIMM_ARCHITECTURES + tuple(n for c in family_converters().values() for n in c.names)


# --- big_vision ------------------------------------------------------------------

def _big_vision_prefix(weights: Mapping[str, Any]) -> str:
  for prefix in ("", "opt/target/", "params/", "params/img/"):
    if f"{prefix}embedding/kernel" in weights:
      return prefix
  raise _mismatch("no 'embedding/kernel' tensor (nor under 'opt/target/' or 'params/'): "
                  "not a big_vision / AugReg ViT checkpoint")


def big_vision_params(weights: Mapping[str, np.ndarray], num_prefix_tokens: int
                      ) -> tuple[dict[str, np.ndarray], dict[str, str], list[str]]:
  """A big_vision / AugReg `.npz` in our names (loop layout).

  Args:
    weights: {npz name: array}.
    num_prefix_tokens: 1 for a CLS model, 0 for a pooled one (a big_vision
      `pos_embedding` without the CLS row gets a zero CLS row).

  Returns:
    (flat {our path: array}, {our path: npz name}, npz names not converted).
  """
  prefix = _big_vision_prefix(weights)
  _check_supported({k[len(prefix):]: None for k in weights if k.startswith(prefix)},
                   _BIG_VISION_UNSUPPORTED)
  out, names = {}, {}
  used = set()

  def put(path, name, value):
    out[path], names[path] = value, name
    used.add(name)

  for key in ("embedding/kernel", "embedding/bias", "cls", "head/kernel", "head/bias"):
    if f"{prefix}{key}" in weights:
      put(key, prefix + key, weights[prefix + key])
  for ours, theirs in (("scale", "scale"), ("bias", "bias")):
    key = f"{prefix}Transformer/encoder_norm/{theirs}"
    if key in weights:
      put(f"encoder/encoder_norm/{ours}", key, weights[key])
  augreg_pos = f"{prefix}Transformer/posembed_input/pos_embedding"
  if augreg_pos in weights:
    put("pos_embedding", augreg_pos, weights[augreg_pos])
  elif f"{prefix}pos_embedding" in weights:       # big_vision: patch tokens only
    pos = weights[f"{prefix}pos_embedding"]
    cls_rows = np.zeros((1, num_prefix_tokens, pos.shape[-1]), pos.dtype)
    put("pos_embedding", f"{prefix}pos_embedding", np.concatenate([cls_rows, pos], axis=1))

  # Blocks: per-layer `encoderblock_{i}` or one scanned `encoderblock` stack.
  blocks: dict[int, dict[str, tuple[str, np.ndarray]]] = {}
  for name, w in weights.items():
    if not name.startswith(f"{prefix}Transformer/encoderblock"):
      continue
    rest = name[len(f"{prefix}Transformer/"):]
    head, _, sub = rest.partition("/")
    if head == "encoderblock":
      for i in range(w.shape[0]):
        blocks.setdefault(i, {})[sub] = (name, w[i])
    elif m := re.fullmatch(r"encoderblock_(\d+)", head):
      blocks.setdefault(int(m.group(1)), {})[sub] = (name, w)
  augreg = any("MultiHeadDotProductAttention_1/" in sub for b in blocks.values() for sub in b)
  modules = ({"LayerNorm_0": "norm1", "MultiHeadDotProductAttention_1": "attention",
              "LayerNorm_2": "norm2", "MlpBlock_3": "mlp"} if augreg else
             {"LayerNorm_0": "norm1", "MultiHeadDotProductAttention_0": "attention",
              "LayerNorm_1": "norm2", "MlpBlock_0": "mlp"})
  denses = {"Dense_0": "fc1", "Dense_1": "fc2"}
  for i, block in blocks.items():
    for sub, (name, w) in block.items():
      module, _, tail = sub.partition("/")
      if module not in modules:
        continue
      ours = modules[module]
      if ours == "mlp":
        dense, _, kind = tail.partition("/")
        if dense not in denses:
          continue
        tail = f"{denses[dense]}/{kind}"
      path = f"encoder/encoderblock_{i}/{ours}/{tail}"
      out[path], names[path] = w, name + ("" if w.ndim == weights[name].ndim else f"[{i}]")
      used.add(name)
  unused = sorted(k for k in weights if k not in used)
  return out, names, unused


# --- fitting converted tensors to a model ------------------------------------------

def _plain_paths(model: Any, image_size: int, keep: tuple[str, ...] = ()) -> set[str]:
  """The parameter paths of the plain model of `model`'s shape (loop layout):
  what a checkpoint of that architecture must provide. Mechanisms added on
  top (AttnScale, FeatScale, ...) add paths beyond these. For another family
  (a registered converter's): `model` with the default attention and no block
  options or layer overrides (its own fields, e.g. CaiT's talking heads and
  class stage, stay). The ViT's own fields (prefix tokens, norm_pre, stem
  bias, ...) are its architecture; `keep` names BlockSpec fields that are too
  (a timm name's LayerScale, `residual_alpha`)."""
  block = BlockSpec(**dict(getattr(type(model), "BLOCK_DEFAULTS", {}),
                           **{f: getattr(model.block, f)
                              for f in (*type(model).TOP_LEVEL_BLOCK_FIELDS, *keep)}))
  if isinstance(model, ViT):
    plain = ViT(num_classes=model.num_classes, patch_size=model.patch_size,
                hidden_size=model.hidden_size, depth=model.depth, stem=model.stem,
                pooling=model.pooling, posemb=model.posemb, distilled=model.distilled,
                register_tokens=model.register_tokens, posemb_tokens=model.posemb_tokens,
                norm_pre=model.norm_pre, stem_bias=model.stem_bias, block=block,
                encoder=EncoderSpec(mode="loop"))
  else:
    changes = {"layer_overrides": None} if hasattr(model, "layer_overrides") else {}
    plain = model.clone(parent=None, block=block, encoder=EncoderSpec(mode="loop"), **changes)
  image = jax.ShapeDtypeStruct((1, image_size, image_size, 3), jnp.float32)
  shapes = jax.eval_shape(lambda x: plain.init(jax.random.key(0), x), image)
  return set(flat_paths(shapes["params"]))


def _num_heads(model: Any):
  """A hierarchical backbone's heads per stage, else the blocks' heads."""
  return model.num_heads if isinstance(model, StagedBackbone) else model.block.num_heads


def _num_prefix(model: Any) -> int:
  """Rows of the position embedding before the patch tokens: the ViT's
  prefix tokens (CLS, distillation token, registers) unless it covers the
  patch tokens only; CaiT's embedding covers the patch tokens only."""
  if isinstance(model, ViT):
    return model.posemb_prefix_rows()
  return int(getattr(model, "pooling", None) == "cls")


def _image_size(model: Any, target: Mapping[str, Any]) -> int:
  if "pos_embedding" in target:
    tokens = target["pos_embedding"].shape[1] - _num_prefix(model)
    return posemb_lib.grid_of(tokens)[0] * model.patch_size
  return model.patch_size * 2     # no learned embedding: any size has the same paths


def _loop_flat(tree: Mapping[str, Any]) -> dict[str, Any]:
  return flat_paths(to_layout(tree, None))


def _fit(converted: Mapping[str, np.ndarray], names: Mapping[str, str], unused: list[str],
         model: Any, target: Mapping[str, Any], initial: Callable[[], Mapping[str, Any]],
         *, resampling: str, reinit_head: bool, keep: tuple[str, ...] = ()
         ) -> tuple[dict[str, Any], LoadReport]:
  """Fills the parameters `target` describes (loop-layout flat abstract
  params) from `converted`, taking the rest from `initial()` (called only if
  needed). `keep`: BlockSpec fields that are part of the source's
  architecture (`_plain_paths`). Returns (flat loop-layout NumPy params, report)."""
  label = lambda path: f"{path} ({names[path]})" if path in names else path  # noqa: E731
  for path in sorted(converted):
    meaning = next((v for k, v in _ARCHITECTURE_TENSORS.items() if k.match(path)), None)
    if meaning is not None and path not in target:
      raise _mismatch(f"tensor {names.get(path, path)!r} belongs to {meaning}, which the "
                      f"model does not have; is the name of another family?")
  for pattern, field in _LAYERS:
    if not hasattr(model, field):
      continue
    depth = getattr(model, field)
    deeper = sorted({int(m.group(1)) for p in converted if (m := pattern.match(p))
                     and int(m.group(1)) >= depth})
    if deeper:
      raise _mismatch(f"the source has blocks up to {deeper[-1]} ({deeper[-1] + 1} or more "
                      f"layers), the model has {field} {depth}")
  required = _plain_paths(model, _image_size(model, target), keep) & set(target)
  missing = sorted(p for p in required if p not in converted
                   and not (reinit_head and p in _HEAD))
  if missing:
    raise _mismatch(f"the source has no tensor for {missing[0]}"
                    + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
                    + "; is it a checkpoint of this architecture?")
  params, loaded, initialised, reinitialised, resampled = {}, [], [], [], []
  init_values: dict[str, Any] | None = None
  for path, spec in target.items():
    want = tuple(spec.shape)
    value = converted.get(path)
    if value is None or (path in _HEAD and reinit_head):
      if init_values is None:
        init_values = _loop_flat(initial())
      params[path] = np.asarray(init_values[path])
      (reinitialised if value is not None else initialised).append(path)
      continue
    if tuple(value.shape) != want and path == "pos_embedding" and value.shape[-1] == want[-1]:
      prefix = _num_prefix(model)
      new_grid = posemb_lib.grid_of(want[1] - prefix)
      try:
        old_grid = posemb_lib.grid_of(value.shape[1] - prefix)
      except ValueError:
        raise _mismatch(f"{label(path)} has shape {value.shape}, the model needs {want} "
                        f"(its {value.shape[1] - prefix} patch tokens are not a square "
                        "grid)") from None
      resampled.append(f"pos_embedding {tuple(value.shape)} -> {want} "
                       f"({old_grid[0]}x{old_grid[1]} -> {new_grid[0]}x{new_grid[1]}, "
                       f"{resampling})")
      value = posemb_lib.resample(value, prefix, new_grid, old_grid, resampling)
    if tuple(value.shape) != want:
      hint = ("; the class count differs: re-initialise the head (reinit_head=True / "
              "config.init_from.reinit_head)" if path in _HEAD else "")
      raise _mismatch(f"{label(path)} has shape {tuple(value.shape)}, the model's "
                      f"{path} needs {want}{hint}")
    params[path] = np.asarray(value, dtype=spec.dtype)
    loaded.append(path)
  taken = set(target)
  unused = list(unused) + sorted({names.get(p, p) for p in converted if p not in taken})
  report = LoadReport(tuple(loaded), tuple(initialised), tuple(reinitialised),
                      tuple(resampled), tuple(unused))
  return params, report


def _convert(source: Any, format: str, model: Any,
             family_params: Callable[..., Any] | None) -> tuple[dict, dict, list]:
  """(flat converted {our path: array}, {path: source name}, unused names);
  `family_params` is the converter's `timm_params` of a model that is not the
  ViT (`load_into` found it)."""
  if format == "vit_spectral":
    if not isinstance(source, Mapping):
      raise ValueError("format 'vit_spectral' takes a params tree (e.g. from "
                       "durability.checkpointing.latest_params), not a file path")
    flat = _loop_flat(source)
    return {k: np.asarray(v) for k, v in flat.items()}, {}, []
  family = type(model).__name__
  if not isinstance(model, ViT) and format != "timm":
    raise ValueError(f"init_from.format={format!r} holds ViT checkpoints; a {family} "
                     "loads from 'timm' or 'vit_spectral'")
  weights = read_weights(source)
  if not isinstance(model, ViT):    # the family's converter (strict: unknown tensors raise)
    converted, names = family_params(weights, _num_heads(model))
    return converted, names, []
  if format == "timm":
    return timm_params(weights, _num_heads(model))
  return big_vision_params(weights, _num_prefix(model))


def load_into(source: Any, format: str, model: Any, init_params: Mapping[str, Any], *,
              reinit_head: bool) -> tuple[dict[str, Any], LoadReport]:
  """Pretrained weights fitted to `model`, for fine-tuning (`config.init_from`).

  Args:
    source: a file path (timm: .safetensors or .pth; big_vision: .npz) or a
      timm state dict; for "vit_spectral" a params tree of host arrays in any
      encoder layout (`durability.checkpointing.latest_params`).
    format: one of FORMATS.
    model: the model the parameters are for: the ViT or a class of
      a registered converter's class (CaiT: timm's `cait_*` checkpoints, through
      `cait_timm.timm_params`; its position embedding has no CLS row).
    init_params: its freshly initialised params (any layout): their values
      fill what the source lacks (mechanism parameters, the head with
      `reinit_head`) and their shapes, dtypes and layout are the target's.
    reinit_head: keep the initial head instead of the source's (a new task).

  Returns:
    (params as NumPy arrays in init_params' layout and dtypes, LoadReport).

  Raises:
    errors.WeightsMismatchError: a tensor the model needs is missing or does
      not fit (the message names the first); the source is deeper than the
      model; the head's class count differs without `reinit_head`.
    ValueError: an unknown format; FileNotFoundError: no such file.
  """
  if format not in FORMATS:
    raise ValueError(f"format={format!r}; choose one of {list(FORMATS)}")
  load_into_classes = _load_into_classes()
  if not isinstance(model, ViT) and type(model) not in load_into_classes:
    raise ValueError(f"load_into (config.init_from) fits weights to the ViT and "
                     f"{', '.join(c.__name__ for c in load_into_classes)}, not to "
                     f"{type(model).__name__}; load "
                     "that family's timm weights with load_timm(source, name), which "
                     "returns its model and variables")
  converted, names, unused = _convert(source, format, model,
                                      load_into_classes.get(type(model)))
  target = _loop_flat(jax.tree_util.tree_map(
      lambda a: jax.ShapeDtypeStruct(np.shape(a), a.dtype), init_params))
  flat, report = _fit(converted, names, unused, model, target, lambda: init_params,
                      resampling=_RESAMPLING[format], reinit_head=reinit_head)
  return to_layout(nest_paths(flat), tree_layout(init_params)), report


def _load(converted, names, unused, model_config: dict[str, Any], num_classes: int,
          image_size: int, resampling: str, overrides: Mapping[str, Any], reinit_head: bool):
  config = dict(model_config)
  for key, value in overrides.items():      # dict fields merge: block=dict(feat_scale=True)
    if key in ("block", "attention") and isinstance(value, Mapping):
      config[key] = {**config.get(key, {}), **value}
    else:
      config[key] = value
  model = build_model(config, num_classes)
  image = jnp.zeros((1, image_size, image_size, 3), jnp.float32)
  abstract = jax.eval_shape(lambda x: model.init(jax.random.key(0), x), image)["params"]
  target = _loop_flat(abstract)
  initial = lambda: model.init(jax.random.key(0), image)["params"]  # noqa: E731
  keep = tuple(k for k in ("residual_alpha",) if k in model_config.get("block", {}))
  flat, report = _fit(converted, names, unused, model, target, initial,
                      resampling=resampling, reinit_head=reinit_head, keep=keep)
  report.log()
  params = to_layout(nest_paths(flat), tree_layout(abstract))
  return model, {"params": jax.tree_util.tree_map(jnp.asarray, params)}


def _source_grid_size(converted: Mapping[str, np.ndarray], patch_size: int,
                      num_prefix: int) -> int:
  if "pos_embedding" not in converted:
    raise _mismatch("the source has no position embedding; pass image_size")
  return posemb_lib.grid_of(converted["pos_embedding"].shape[1] - num_prefix)[0] * patch_size


def load_timm(source: Any, name: str, *, image_size: int | None = None,
              **model_overrides: Any) -> tuple[ViT, dict[str, Any]]:
  """A timm ViT checkpoint of the families the module docstring lists (or
  Swin, CaiT: their registered converters) as (model, variables).

  Args:
    source: a `.safetensors` path, a `.pth` path (read with
      `torch.load(weights_only=True)`; torch optional), or a timm state dict
      ({name: array}).
    name: the timm model name (`timm_model_config`), e.g.
      "deit_small_patch16_224", "vit_small_patch14_reg4_dinov2",
      "vit_base_patch16_224.mae"; it gives the architecture (a tag after the
      dot does not change it; `timm_preprocessing(name)` gives the input).
    image_size: the input side the model will see; None = the checkpoint's
      (from its position embedding). Another size resamples the position
      embedding bicubically, as timm does.
    **model_overrides: `config.model` fields added to the architecture (our
      mechanisms; `block` and `attention` dicts merge with the converted
      model's), e.g. attention=dict(name="attn_scale"), encoder_mode="loop".
      `num_classes` here replaces the checkpoint's head with a fresh one.

  Returns:
    (model, {"params": ...}): `model.apply(variables, images)` on NHWC images
    (prepared as `timm_preprocessing(name)` says) gives timm's logits, or
    timm's features for a model without a head (MAE, DINOv2).

  Raises:
    errors.WeightsMismatchError: see the module docstring.
  """
  loader = next((c.load_timm for prefix, c in family_converters().items()
                 if name.split(".")[0].startswith(prefix)), None)
  if loader is not None:    # Swin, CaiT: their own converters (same contract)
    return loader(read_weights(source), name, image_size=image_size, **model_overrides)
  config = timm_model_config(name)
  converted, names, unused = timm_params(read_weights(source), config["num_heads"])
  return _load_checked(converted, names, unused, config, image_size, "bicubic",
                       model_overrides)


def load_big_vision(path: Any, variant: str, *, image_size: int | None = None,
                    **model_overrides: Any) -> tuple[ViT, dict[str, Any]]:
  """A big_vision / AugReg ViT `.npz` checkpoint as (model, variables).

  Args:
    path: the `.npz` file (or a dict of its arrays).
    variant: our model name, e.g. "B/16" (`models.variants`).
    image_size: as in `load_timm`; a new size resamples the position
      embedding with big_vision's linear zoom.
    **model_overrides: as in `load_timm`. The checkpoint's pooling is read
      from the file (a `cls` tensor: CLS pooling, else the mean of the
      tokens, big_vision's "gap"); the GELU is flax's tanh form, as the
      checkpoint was trained (timm reads these files with its exact GELU:
      `block=dict(mlp_activation="gelu_erf")` computes timm's function).

  Returns:
    (model, {"params": ...}).
  """
  weights = read_weights(path)
  prefix = _big_vision_prefix(weights)
  pooling = "cls" if f"{prefix}cls" in weights else "mean"
  config = dict(variant_fields(variant), pooling=pooling, posemb="learned", stem="patch",
                norm="layer_norm")
  converted, names, unused = big_vision_params(weights, int(pooling == "cls"))
  return _load_checked(converted, names, unused, config, image_size, "scipy_linear",
                       model_overrides)


def _load_checked(converted, names, unused, config, image_size, resampling, overrides):
  overrides = dict(overrides)
  head = converted.get("head/kernel")
  num_classes = overrides.pop("num_classes", None)
  source_classes = 0 if head is None else head.shape[-1]
  reinit_head = num_classes is not None and num_classes != source_classes
  if not reinit_head:
    num_classes = source_classes
  num_prefix = (int(config.get("pooling", "cls") == "cls") + int(config.get("distilled", False))
                + config.get("register_tokens", 0))
  if config.get("posemb_tokens", "all") == "patches":
    num_prefix = 0
  size = image_size or _source_grid_size(converted, config["patch_size"], num_prefix)
  return _load(converted, names, unused, config, num_classes, size, resampling, overrides,
               reinit_head)
