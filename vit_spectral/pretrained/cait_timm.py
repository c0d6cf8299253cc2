"""timm CaiT checkpoints in: `load_timm(weights, "cait_s24_224")` -> (CaiT, variables).

`pretrained.load_timm(source, name)` reads the file and hands timm
names starting with "cait_" here (registered with `pretrained.register_timm_converter`).

timm -> ours (loop layout; the model's own layout is returned):

  cls_token, pos_embed                       cls, pos_embedding (patch tokens only)
  patch_embed.proj.{weight,bias}             embedding/{kernel,bias}  (D,C,p,p) -> (p,p,C,D)
  blocks.i.norm{1,2}                         encoder/encoderblock_i/norm{1,2}
  blocks.i.attn.qkv                          .../attention/{query,key,value}  (3D, D) split
  blocks.i.attn.proj                         .../attention/out
  blocks.i.attn.proj_l, proj_w               .../attention/talking_heads_{logits,weights}
  blocks.i.gamma_{1,2}                       .../alpha{1,2}  (LayerScale = weighted residual)
  blocks.i.mlp.fc{1,2}                       .../mlp/fc{1,2}
  blocks_token_only.j.attn.{q,k,v,proj}      class_stage/classblock_j/attention/{query,key,value,out}
  blocks_token_only.j.{norm*,gamma_*,mlp.*}  class_stage/classblock_j/...
  norm, head                                 norm, head

Linear weights are transposed (PyTorch (out, in)). Strict: every tensor the
plain CaiT of that name needs must be there with its shape (or
`errors.WeightsMismatchError` names it), and every tensor of the file must
land in a parameter of the model (a deeper checkpoint, talking heads turned
off over weights that have them, an unknown tensor: the error names it).
`model_overrides` add our mechanisms (AttnScale's ω, FeatScale's s, t start
at zero: the same function); `num_classes` other than the file's starts a
fresh head; another `image_size` resamples the position embedding
bicubically, as timm does.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from vit_spectral import errors
from vit_spectral.models import posemb as posemb_lib
from vit_spectral.models.build import build_model
from vit_spectral.models.cait import VARIANTS, CaiT
from vit_spectral.models.layouts import to_layout, tree_layout
from vit_spectral.pretrained.converter import TimmConverter, flat_paths, nest_paths

__all__ = ["TIMM_NAMES", "load_timm", "timm_params"]

# timm model name (the tag after a dot is ignored) -> our registered variant.
# The 384² models are the same architecture at another resolution (their
# position embedding has 24² rows). The 36-layer ones are not registered.
TIMM_NAMES: dict[str, str] = {
    "cait_xxs24_224": "CaiT-XXS24", "cait_xxs24_384": "CaiT-XXS24",
    "cait_s24_224": "CaiT-S24", "cait_s24_384": "CaiT-S24",
}
_HEAD = ("head/kernel", "head/bias")


def _mismatch(message: str) -> errors.WeightsMismatchError:
  return errors.WeightsMismatchError(f"pretrained CaiT weights do not fit: {message}")


def _linear(w):
  """PyTorch Linear weight (out, in) -> Dense kernel (in, out)."""
  return np.asarray(w).T


def timm_params(weights: Mapping[str, np.ndarray], num_heads: int
                ) -> tuple[dict[str, np.ndarray], dict[str, str]]:
  """A timm CaiT state dict in our names and layouts (loop layout).

  Returns:
    ({our path: array}, {our path: timm name}).

  Raises:
    errors.WeightsMismatchError: a tensor we do not know (named), or a
      projection that does not split into `num_heads` heads.
  """
  out, names = {}, {}

  def put(path, name, value):
    out[path], names[path] = np.asarray(value), name

  def split_heads(name, kernel):        # (D, H·Dh) -> (D, H, Dh)
    if kernel.shape[-1] % num_heads:
      raise _mismatch(f"{name!r} {tuple(kernel.shape)} does not split into {num_heads} heads")
    return kernel.reshape(kernel.shape[0], num_heads, -1)

  def norm_or_mlp(prefix, rest, name, w):
    if m := re.fullmatch(r"(norm[12])\.(weight|bias)", rest):
      put(f"{prefix}/{m.group(1)}/{'scale' if m.group(2) == 'weight' else 'bias'}", name, w)
    elif m := re.fullmatch(r"mlp\.(fc[12])\.(weight|bias)", rest):
      put(f"{prefix}/mlp/{m.group(1)}/{'kernel' if m.group(2) == 'weight' else 'bias'}", name,
          _linear(w) if m.group(2) == "weight" else w)
    elif m := re.fullmatch(r"gamma_([12])", rest):
      put(f"{prefix}/alpha{m.group(1)}", name, w)
    elif rest == "attn.proj.weight":
      w = _linear(w)                                          # (H·Dh, D)
      put(f"{prefix}/attention/out/kernel", name, w.reshape(num_heads, -1, w.shape[-1]))
    elif rest == "attn.proj.bias":
      put(f"{prefix}/attention/out/bias", name, w)
    else:
      return False
    return True

  for name, w in weights.items():
    w = np.asarray(w)
    if name == "cls_token":
      put("cls", name, w)
    elif name == "pos_embed":
      put("pos_embedding", name, w)
    elif name == "patch_embed.proj.weight":
      put("embedding/kernel", name, w.transpose(2, 3, 1, 0))       # (D,C,p,p) -> (p,p,C,D)
    elif name == "patch_embed.proj.bias":
      put("embedding/bias", name, w)
    elif m := re.fullmatch(r"(norm|head)\.(weight|bias)", name):
      kind = {"norm": "scale", "head": "kernel"}[m.group(1)] if m.group(2) == "weight" else "bias"
      put(f"{m.group(1)}/{kind}", name, _linear(w) if kind == "kernel" else w)
    elif m := re.fullmatch(r"blocks\.(\d+)\.(.+)", name):
      prefix, rest = f"encoder/encoderblock_{m.group(1)}/attention", m.group(2)
      block = f"encoder/encoderblock_{m.group(1)}"
      if norm_or_mlp(block, rest, name, w):
        continue
      if rest in ("attn.qkv.weight", "attn.qkv.bias"):           # rows q | k | v
        for part, rows in zip(("query", "key", "value"), np.split(w, 3, axis=0)):
          if rest.endswith("weight"):
            put(f"{prefix}/{part}/kernel", name, split_heads(name, _linear(rows)))
          else:
            put(f"{prefix}/{part}/bias", name, rows.reshape(num_heads, -1))
      elif m2 := re.fullmatch(r"attn\.proj_([lw])\.(weight|bias)", rest):
        mix = {"l": "talking_heads_logits", "w": "talking_heads_weights"}[m2.group(1)]
        put(f"{prefix}/{mix}/{'kernel' if m2.group(2) == 'weight' else 'bias'}", name,
            _linear(w) if m2.group(2) == "weight" else w)
      else:
        raise _mismatch(f"tensor {name!r} is not part of the CaiT we compute")
    elif m := re.fullmatch(r"blocks_token_only\.(\d+)\.(.+)", name):
      block, rest = f"class_stage/classblock_{m.group(1)}", m.group(2)
      if norm_or_mlp(block, rest, name, w):
        continue
      if m2 := re.fullmatch(r"attn\.([qkv])\.(weight|bias)", rest):
        part = {"q": "query", "k": "key", "v": "value"}[m2.group(1)]
        if m2.group(2) == "weight":
          put(f"{block}/attention/{part}/kernel", name, split_heads(name, _linear(w)))
        else:
          put(f"{block}/attention/{part}/bias", name, w.reshape(num_heads, -1))
      else:
        raise _mismatch(f"tensor {name!r} is not part of the CaiT we compute")
    else:
      raise _mismatch(f"tensor {name!r} is not part of the CaiT we compute")
  return out, names


def _abstract_params(model: CaiT, image_size: int) -> dict[str, Any]:
  """Flat loop-layout {path: ShapeDtypeStruct} of `model`'s params."""
  image = jax.ShapeDtypeStruct((1, image_size, image_size, 3), jnp.float32)
  shapes = jax.eval_shape(lambda x: model.init(jax.random.key(0), x), image)["params"]
  return shapes


def _merged(config: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
  config = dict(config)
  for key, value in overrides.items():      # dict fields merge: block=dict(feat_scale=True)
    if key in ("block", "attention") and isinstance(value, Mapping):
      config[key] = {**config.get(key, {}), **value}
    else:
      config[key] = value
  return config


def load_timm(weights: Mapping[str, np.ndarray], name: str, *, image_size: int | None = None,
              **model_overrides: Any) -> tuple[CaiT, dict[str, Any]]:
  """A timm CaiT state dict as (model, {"params": ...}) (module docstring).

  Args:
    weights: {timm name: array} (`weight_files.read_weights`).
    name: a key of TIMM_NAMES (a ".tag" suffix is ignored).
    image_size: the input side; None = the checkpoint's (from pos_embed).
    **model_overrides: `config.model` fields added to the architecture
      (`block` / `attention` dicts merge), e.g. attention=dict(name="attn_scale"),
      block=dict(feat_scale=True), encoder_mode="loop"; `num_classes`
      replaces the head when it differs from the file's.

  Raises:
    ValueError: an unsupported name (the message lists TIMM_NAMES).
    errors.WeightsMismatchError: a tensor missing, misshapen or left over.
  """
  arch = name.split(".")[0]
  if arch not in TIMM_NAMES:
    raise ValueError(f"timm model {name!r} is not a supported CaiT; choose one of "
                     f"{sorted(TIMM_NAMES)}")
  variant = TIMM_NAMES[arch]
  shape = VARIANTS[variant]
  converted, names = timm_params(weights, shape["num_heads"])
  label = lambda path: f"{path} ({names[path]})" if path in names else path  # noqa: E731
  if "pos_embedding" not in converted:
    raise _mismatch("the source has no position embedding (pos_embed)")
  source_grid = posemb_lib.grid_of(converted["pos_embedding"].shape[1])
  size = image_size or source_grid[0] * shape["patch_size"]

  overrides = dict(model_overrides)
  source_classes = converted["head/kernel"].shape[-1] if "head/kernel" in converted else 0
  num_classes = overrides.pop("num_classes", None)
  reinit_head = num_classes is not None and num_classes != source_classes
  num_classes = num_classes if reinit_head else source_classes

  model = build_model(_merged({"variant": variant}, overrides), num_classes)
  abstract = _abstract_params(model, size)
  target = flat_paths(to_layout(abstract, None))
  # What the checkpoint must provide: the CaiT of this shape without our mechanisms.
  shape_overrides = {k: v for k, v in overrides.items()
                     if k not in ("attention", "block", "layer_overrides")}
  plain = target if shape_overrides == overrides else flat_paths(to_layout(_abstract_params(
      build_model(_merged({"variant": variant}, shape_overrides), num_classes), size), None))
  missing = sorted(p for p in plain if p in target and p not in converted
                   and not (reinit_head and p in _HEAD))
  if missing:
    raise _mismatch(f"the source has no tensor for {missing[0]}"
                    + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
                    + f"; is it a {arch} checkpoint?")
  leftover = sorted(p for p in converted if p not in target)
  if leftover:
    raise _mismatch(f"{label(leftover[0])} has no place in the model (it would change the "
                    f"function; {len(leftover)} such tensors), e.g. a deeper checkpoint or "
                    "talking heads turned off")

  params, fresh = {}, []
  for path, spec in target.items():
    want = tuple(spec.shape)
    value = converted.get(path)
    if value is None or (reinit_head and path in _HEAD):
      fresh.append(path)
      continue
    if path == "pos_embedding" and tuple(value.shape) != want and value.shape[-1] == want[-1]:
      value = posemb_lib.resample(value, 0, posemb_lib.grid_of(want[1]), source_grid,
                                  "bicubic")
    if tuple(value.shape) != want:
      raise _mismatch(f"{label(path)} has shape {tuple(value.shape)}, the model's {path} "
                      f"needs {want}")
    params[path] = np.asarray(value, dtype=spec.dtype)
  params = to_layout(nest_paths(params), tree_layout(abstract))
  if fresh:   # our mechanisms' parameters (or a new head): their initial values
    params = _initialise_missing(model, params, size)
  return model, {"params": jax.tree_util.tree_map(jnp.asarray, params)}


def _initialise_missing(model: CaiT, params: Mapping[str, Any], image_size: int):
  """`params` completed by the model's own initialisers: one forward pass with
  the "params" collection mutable initialises exactly the parameters that are
  absent (cheaper than a whole `init`, which draws every tensor)."""
  image = jnp.zeros((1, image_size, image_size, 3), jnp.float32)
  run = jax.jit(lambda p, x: model.apply({"params": p}, x, rngs={"params": jax.random.key(0)},
                                         mutable=["params"])[1]["params"])
  return jax.tree_util.tree_map(np.asarray, run(params, image))

CONVERTER = TimmConverter(load_timm, tuple(TIMM_NAMES), CaiT, timm_params)
