"""`diagnose`: every per-layer diagnostic of any Flax model on a set of images.

    from vit_spectral import analysis
    d = analysis.diagnose(model, variables, images)          # images (N, H, W, C)
    d.to_frame()              # tidy: model, layer, stage, head, metric, value
    d.per_layer()             # one row per layer, one column per metric
    d.plot()                  # the papers' per-layer curves
    analysis.compare({"baseline": d0, "attn_scale": d1}).plot()

The model runs in inference mode on batches of `batch_size` images (the last
padded; padded images count nowhere), one jitted function per model and
metric set. Each metric (`analysis.layer_metrics`) is averaged over the images
(and windows) on the fly; per-image values and maps are kept only when asked
(`per_image=True`, `keep_maps=True`).

The model must sow what `analysis.protocol` asks (library models do). Library
models (`models.ViT`, `CaiT`, `Swin`, `CSwin`) are read stage by stage in any
encoder layout and add their weight diagnostics (paper 003's H, FeatScale's s
and t, their attention variants' declared scalars).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from vit_spectral.analysis import layer_metrics as lm
from vit_spectral.analysis.protocol import (
    OUTPUT_KEY, default_apply_kwargs, map_groups, protocol_blocks)
from vit_spectral.models.backbone import Backbone, StagedBackbone
from vit_spectral.models.intermediates import per_stage, stage_names
from vit_spectral.models.layouts import holds_blocks, layer_fields, layer_trees

__all__ = ["Comparison", "DEFAULT_BATCH_SIZE", "Diagnosis", "compare", "diagnose", "layer_means",
           "stage_layer_metrics"]

DEFAULT_BATCH_SIZE = 8
# Metrics with one value per head (the others have one per layer).
_PER_HEAD = frozenset(lm.MAP_METRICS)


# --------------------------------------------------------------------------- the metrics


def _stack_or_none(arrays: Sequence[Any]):
  shapes = {tuple(a.shape) for a in arrays}
  return jnp.stack(arrays) if len(shapes) == 1 else None


def _per_layer(fn, arrays: Sequence[Any]) -> list[dict[str, Any]]:
  """fn on each array; on a stack through `lax.map` when the shapes agree (the
  metric ops compile once and only one layer's temporaries are live)."""
  stack = _stack_or_none(arrays)
  if stack is None:
    return [fn(a) for a in arrays]
  stacked = jax.lax.map(fn, stack)
  return [jax.tree_util.tree_map(lambda v, i=i: v[i], stacked) for i in range(len(arrays))]


def stage_layer_metrics(layers: Sequence[Mapping[str, Any]], names: Iterable[str],
                        where: str = "block") -> list[dict[str, Any]]:
  """The token and map metrics of one stage's blocks, per image.

  Args:
    layers: each block's flattened sown dict (OUTPUT_KEY (B, T, D) and one or
      more "<group>/attention_weights" maps (B', H, N, N)).
    names: the metrics wanted (`layer_metrics` names; others are skipped).
    where: how errors name the stage's blocks.

  Returns:
    One dict per block: token metrics (B,); map metrics (B', H) and the
    spectrum (B', H, N), under their names for a block's only group and for
    the group "attention", under "<group>/<name>" for the other groups of a
    block that sows several (CSwin's "attention_rows/...").
  """
  names = tuple(names)
  token_names = [n for n in names if n in lm.TOKEN_METRICS]
  map_names = [n for n in names if n in _PER_HEAD or n == lm.SPECTRUM]
  out = [dict() for _ in layers]
  if token_names:
    for d, values in zip(out, _per_layer(lambda x: lm.token_metrics(x, token_names),
                                         [layer[OUTPUT_KEY] for layer in layers])):
      d.update(values)
  groups = []
  for index, layer in enumerate(layers):
    found = map_groups(layer)
    if not found:
      raise KeyError(f"{where} {index} sowed {sorted(layer)}, no attention maps (a key "
                     "ending in 'attention_weights'): see vit_spectral.analysis.protocol")
    for group, maps in found.items():
      if maps.ndim != 4 or maps.shape[-1] != maps.shape[-2] or (
          maps.shape[0] % layer[OUTPUT_KEY].shape[0]):
        raise ValueError(f"{where} {index} sowed {group}/attention_weights of shape "
                         f"{maps.shape}; the protocol's maps are (B', H, N, N) with B' a "
                         f"multiple of the batch {layer[OUTPUT_KEY].shape[0]}")
    groups.append(found)
  if map_names:
    for group in dict.fromkeys(g for found in groups for g in found):
      have = [i for i, found in enumerate(groups) if group in found]
      values = _per_layer(lambda a: lm.map_metrics(a, map_names),
                          [groups[i][group] for i in have])
      for i, metrics in zip(have, values):
        prefix = "" if group == "attention" or len(groups[i]) == 1 else f"{group}/"
        out[i].update({prefix + k: v for k, v in metrics.items()})
  return out


# --------------------------------------------------------------------------- the model


def _is_library(model: nn.Module) -> bool:
  return isinstance(model, Backbone)


def _library_layout(intermediates) -> bool:
  """Whether the sown tree is laid out as the library's models lay theirs out
  (an "encoder" of "encoderblock..." at the top or in each stage child)."""
  try:
    names = stage_names(intermediates)
  except KeyError:
    return False
  return all(holds_blocks(intermediates if n is None else intermediates[n]) for n in names)


def _sown_stages(intermediates) -> list[tuple[str | None, list[dict]]]:
  """[(stage name, per-block sown dicts)]: the layout walker for the library's
  layout (any encoder mode; stage names "stage_<k>", None for one encoder at
  the top), else the protocol's walker (stage = the blocks' parent path)."""
  if _library_layout(intermediates):
    return per_stage(intermediates)
  return [(name or None, layers) for name, layers in protocol_blocks(intermediates)]


def _library_fields(model: nn.Module) -> list[list[dict[str, Any]]] | None:
  """Per stage, each layer's BlockSpec fields (library models), else None."""
  if not _is_library(model):
    return None
  if isinstance(model, StagedBackbone):
    return [[model.block.replace(num_heads=heads).as_dict()] * depth
            for depth, heads in zip(model.depths, model.num_heads)]
  return [layer_fields(model)]


def _valid_weights(valid, rows: int):
  """valid (B,) -> (rows,) for per-window values: row b·nW + w is image b."""
  return jnp.repeat(valid, rows // valid.shape[0])


def _masked_sum(values, valid):
  """Sum over the leading (image or window) axis of the valid rows only
  (`where`, not a product: a padded image's NaN counts nowhere)."""
  mask = _valid_weights(valid, values.shape[0]).reshape((-1,) + (1,) * (values.ndim - 1))
  return jnp.where(mask, values, 0.0).sum(axis=0)


def _batch_sums(model, variables, images, valid, *, apply_kwargs, names, fields,
                per_image: bool = False, keep_maps: bool = False
                ) -> list[tuple[str | None, list[dict]]]:
  """One batch (pure: jit it): per stage, (its name, per layer {"sums": {metric:
  sum over the valid images (windows)}, "rows": {metric: their count}}, and the
  per-image "values" (per_image) and the "maps" (keep_maps)). valid: (B,) bool."""
  _, state = model.apply(variables, images, mutable=["intermediates"], **apply_kwargs)
  stages = []
  for s, (name, layers) in enumerate(_sown_stages(state.get("intermediates", {}))):
    where = "block" if name is None else f"{name}: block"
    metrics = stage_layer_metrics(layers, names, where)
    out = []
    for i, (layer, values) in enumerate(zip(layers, metrics)):
      if fields is not None:
        declared = lm.declared_sown_metrics(layer, fields[s][i]["attention"])
        values.update({k: v for k, v in declared.items() if k in names})
      entry = {"sums": {k: _masked_sum(v, valid) for k, v in values.items()},
               "rows": {k: _valid_weights(valid, v.shape[0]).sum() for k, v in values.items()}}
      if per_image:
        entry["values"] = values
      if keep_maps:
        entry["maps"] = map_groups(layer)
      out.append(entry)
    stages.append((name, out))
  return stages


def _parameter_metrics(params, names, fields, stage_names) -> list[list[dict[str, Any]]] | None:
  """Per stage, per layer, the weight diagnostics of a library model (() arrays;
  pure), None for other models."""
  if fields is None or params is None:
    return None
  out = []
  for name, stage_fields in zip(stage_names, fields):
    trees = layer_trees(params if name is None else params[name])
    out.append([{k: v for k, v in lm.parameter_metrics(tree, f).items() if k in names}
                for tree, f in zip(trees, stage_fields)])
  return out


def layer_means(model: nn.Module, variables: Mapping[str, Any], images,
                metrics: Iterable[str] | None = None,
                apply_kwargs: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
  """Every metric of every layer as one () float32 mean over the images (and
  heads, windows): the trainer's live diagnostics (`training.diagnostics`).
  Pure (jit it); the same functions as `diagnose`, on one batch.

  Returns:
    One dict per layer, in order over all stages: metric -> () array (the
    spectrum's bands are left out: one scalar per metric).
  """
  names = lm.check_metrics(metrics)
  names = lm.known_metric_names() if names is None else names
  apply_kwargs = dict(default_apply_kwargs(model) if apply_kwargs is None else apply_kwargs)
  inputs = {k: v for k, v in variables.items() if k != "intermediates"}
  fields = _library_fields(model)
  valid = jnp.ones(images.shape[0], bool)
  stages = _batch_sums(model, inputs, images, valid, apply_kwargs=apply_kwargs, names=names,
                       fields=fields)
  parameters = _parameter_metrics(inputs.get("params"), names, fields,
                                  [name for name, _ in stages])
  out = []
  for s, (_, stage) in enumerate(stages):
    for i, entry in enumerate(stage):
      means = {k: (v / entry["rows"][k]).mean() for k, v in entry["sums"].items()
               if k.split("/")[-1] != lm.SPECTRUM}
      if parameters is not None:
        means.update(parameters[s][i])
      out.append(means)
  return out


def _batch_function(model, apply_kwargs, names, fields, per_image: bool, keep_maps: bool):
  """`_batch_sums` jitted for one model and set of arguments (the arrays only:
  `_stage_names` gives the names)."""
  return jax.jit(lambda variables, images, valid: [entries for _, entries in _batch_sums(
      model, variables, images, valid, apply_kwargs=apply_kwargs, names=names, fields=fields,
      per_image=per_image, keep_maps=keep_maps)])


@dataclasses.dataclass
class _Compiled:
  """A model's jitted batch function, and its stage names per image shape."""
  model: nn.Module
  run: Any
  stage_names: dict[tuple[int, ...], tuple[str | None, ...]]


_COMPILED: dict[Any, _Compiled] = {}
_MAX_COMPILED = 16


def _compiled(model, apply_kwargs, names, fields, per_image, keep_maps) -> _Compiled:
  """One jitted function per (model, arguments), kept across calls (jax.jit
  then compiles it once per batch shape)."""
  try:
    hash(model)
    model_key = model
  except TypeError:          # a module with unhashable fields: keyed by identity
    model_key = ("id", id(model))   # (the entry holds the model: the id stays its own)
  key = (model_key, tuple(sorted(apply_kwargs.items())), names, per_image, keep_maps)
  if key not in _COMPILED:
    if len(_COMPILED) >= _MAX_COMPILED:
      _COMPILED.pop(next(iter(_COMPILED)))
    _COMPILED[key] = _Compiled(model, _batch_function(model, apply_kwargs, names, fields,
                                                      per_image, keep_maps), {})
  return _COMPILED[key]


def _stage_names(compiled: _Compiled, inputs, images, apply_kwargs) -> tuple[str | None, ...]:
  """The stages' module paths (None: a single encoder at the top), from the
  shapes of one forward (traced once per image shape, nothing computed)."""
  shape = tuple(images.shape[1:])
  if shape not in compiled.stage_names:
    model = compiled.model
    sown = jax.eval_shape(lambda v, x: model.apply(v, x, mutable=["intermediates"],
                                                   **apply_kwargs)[1], inputs, images[:1])
    compiled.stage_names[shape] = tuple(name for name, _ in
                                        _sown_stages(sown.get("intermediates", {})))
  return compiled.stage_names[shape]


# --------------------------------------------------------------------------- the result


@dataclasses.dataclass(frozen=True)
class Diagnosis:
  """The per-layer diagnostics of one model on one set of images.

  Attributes:
    model: the model's label (`diagnose(name=...)`, else its class name).
    num_images: the images the means are over.
    stage: (L,) the stage index of each layer (all 0 for a single encoder).
    stage_names: each stage's module path (None for a single encoder).
    layers: one dict per layer, in order over all stages: metric -> mean over
      the images (and windows): a float, an (H,) array per head (map
      metrics), or (H, N) for "attention_spectrum" (DC first). Metrics of
      head groups other than "attention" are "<group>/<metric>".
    per_image: with `per_image=True`, one dict per layer: metric -> (N,)
      token metrics, (N·nW, H) map metrics, (N·nW, H, K) the spectrum.
    maps: with `keep_maps=True`, one dict per layer: group -> (N·nW, H, K, K).
  """
  model: str
  num_images: int
  stage: np.ndarray
  stage_names: tuple[str | None, ...]
  layers: tuple[dict[str, Any], ...]
  per_image: tuple[dict[str, np.ndarray], ...] | None = None
  maps: tuple[dict[str, np.ndarray], ...] | None = None

  @property
  def num_layers(self) -> int:
    return len(self.layers)

  def metric_names(self) -> list[str]:
    """The metrics of any layer, in first-seen order."""
    return list(dict.fromkeys(k for layer in self.layers for k in layer))

  def values(self, metric: str) -> np.ndarray:
    """(L,) the per-layer value of `metric`, the mean over heads where it has
    heads (NaN at layers without it).

    Raises:
      KeyError: no layer has `metric` (names the ones there are).
    """
    if not any(metric in layer for layer in self.layers):
      raise KeyError(f"no layer of {self.model} has the metric {metric!r}; it has "
                     f"{self.metric_names()}")
    return np.array([float(np.mean(layer[metric])) if metric in layer else np.nan
                     for layer in self.layers])

  def to_frame(self):
    """A tidy pandas DataFrame, one row per (layer, head, metric): columns
    model, layer, stage, head (<NA> for per-layer metrics), metric, value.
    The spectrum's bands are in `layers` only."""
    import pandas as pd

    rows = []
    for index, layer in enumerate(self.layers):
      stage = int(self.stage[index])
      for metric, value in layer.items():
        if metric.split("/")[-1] == lm.SPECTRUM:
          continue
        value = np.asarray(value)
        if value.ndim == 0:
          rows.append((self.model, index, stage, None, metric, float(value)))
        else:
          rows += [(self.model, index, stage, h, metric, float(v)) for h, v in enumerate(value)]
    frame = pd.DataFrame(rows, columns=["model", "layer", "stage", "head", "metric", "value"])
    frame["head"] = frame["head"].astype("Int64")
    return frame

  def per_layer(self):
    """A wide pandas DataFrame: one row per layer (index "layer", and a
    "stage" column), one column per metric (the mean over heads)."""
    frame = self.to_frame()
    wide = frame.groupby(["layer", "metric"])["value"].mean().unstack("metric")
    wide.insert(0, "stage", self.stage[wide.index.to_numpy()])
    return wide

  def to_csv(self, path: str) -> str:
    """Writes `to_frame()` to `path` as CSV; returns the path."""
    self.to_frame().to_csv(path, index=False)
    return path

  def to_json_dict(self) -> dict[str, Any]:
    """Plain-JSON form: model, num_images, stage, stage_names and per layer
    every metric (per-head lists and the spectrum included)."""
    return {"model": self.model, "num_images": self.num_images,
            "stage": [int(s) for s in self.stage], "stage_names": list(self.stage_names),
            "layers": [{k: np.asarray(v).tolist() for k, v in layer.items()}
                       for layer in self.layers]}

  def plot(self, metrics: Sequence[str] | None = None):
    """The per-layer curves (paper 000 Figs. 4 and 12, paper 004 Fig. 2 and
    App. I); returns the matplotlib Figure (`analysis.plots`)."""
    from vit_spectral.analysis.plots import plot_diagnoses
    return plot_diagnoses({self.model: self}, metrics)


# --------------------------------------------------------------------------- diagnose


def _as_images(images) -> np.ndarray:
  images = np.asarray(images)
  if images.ndim != 4:
    raise ValueError(f"diagnose images must be (N, H, W, C); got shape {images.shape}")
  if not len(images):
    raise ValueError("diagnose images: got 0 images")
  return images


def diagnose(model: nn.Module, variables: Mapping[str, Any], images, *,
             metrics: Iterable[str] | None = None, batch_size: int = DEFAULT_BATCH_SIZE,
             keep_maps: bool = False, per_image: bool = False,
             apply_kwargs: Mapping[str, Any] | None = None, name: str | None = None
             ) -> Diagnosis:
  """Every per-layer diagnostic of `model` on `images` (means over the images).

  Args:
    model: any Flax module that follows `analysis.protocol`, or a library
      model (ViT, DeiT, CaiT, Swin, CSwin, any attention variant or layout).
    variables: its variables ({"params": ...}; an "intermediates" collection
      in them is ignored).
    images: (N, H, W, C) inputs, as the model takes them.
    metrics: the metric names to compute (`layer_metrics.known_metric_names`);
      None = all.
    batch_size: images per forward pass (memory grows with it, not with N).
    keep_maps: also return every attention map (`Diagnosis.maps`: N·L·H·T²
      floats).
    per_image: also return each image's values (`Diagnosis.per_image`).
    apply_kwargs: keyword arguments of the forward; None = the model's
      inference switch (`protocol.default_apply_kwargs`: train=False, ...).
    name: the label of the result (frames and figures); None = class name.

  Returns:
    A `Diagnosis`.

  Raises:
    ValueError: bad images, batch_size or metric names.
    KeyError: the model does not sow what the protocol asks (names what it did).
  """
  names = lm.check_metrics(metrics)
  names = lm.known_metric_names() if names is None else names
  if not isinstance(batch_size, int) or batch_size <= 0:
    raise ValueError(f"diagnose batch_size={batch_size!r} must be a positive int")
  images = _as_images(images)
  apply_kwargs = dict(default_apply_kwargs(model) if apply_kwargs is None else apply_kwargs)
  inputs = {k: v for k, v in variables.items() if k != "intermediates"}
  fields = _library_fields(model)
  compiled = _compiled(model, apply_kwargs, names, fields, per_image, keep_maps)
  stage_names = _stage_names(compiled, inputs, images, apply_kwargs)

  count = len(images)
  batch = min(batch_size, count)
  sums: list[list[dict[str, np.ndarray]]] | None = None
  rows: list[list[dict[str, float]]] | None = None
  kept: list[list[dict[str, list]]] = []
  for start in range(0, count, batch):
    chunk = images[start:start + batch]
    real = len(chunk)
    valid = np.arange(batch) < real
    if len(chunk) < batch:
      chunk = np.concatenate([chunk, np.zeros((batch - len(chunk),) + chunk.shape[1:],
                                              chunk.dtype)])
    result = jax.device_get(compiled.run(inputs, chunk, valid))
    if sums is None:
      sums = [[{k: np.zeros(np.shape(v), np.float64) for k, v in e["sums"].items()}
               for e in stage] for stage in result]
      rows = [[{k: 0.0 for k in e["rows"]} for e in stage] for stage in result]
      kept = [[{"values": {}, "maps": {}} for _ in stage] for stage in result]
    for s, stage in enumerate(result):
      for i, entry in enumerate(stage):
        for k, v in entry["sums"].items():
          sums[s][i][k] += v
          rows[s][i][k] += float(entry["rows"][k])
        for part in ("values", "maps"):
          for k, v in entry.get(part, {}).items():
            keep = len(v) * real // batch       # the rows of real images (windows)
            kept[s][i][part].setdefault(k, []).append(np.asarray(v[:keep]))

  params = inputs.get("params")
  parameters = _parameter_metrics(params, names, fields, stage_names)
  stage_index, layers, values, maps = [], [], [], []
  for s, stage in enumerate(sums):
    for i, layer_sums in enumerate(stage):
      means = {k: (v / rows[s][i][k]).astype(np.float32) for k, v in layer_sums.items()}
      means = {k: (float(v) if v.ndim == 0 else v) for k, v in means.items()}
      if parameters is not None:
        means.update({k: float(v) for k, v in parameters[s][i].items()})
      stage_index.append(s)
      layers.append(means)
      values.append({k: np.concatenate(v) for k, v in kept[s][i]["values"].items()})
      maps.append({k: np.concatenate(v) for k, v in kept[s][i]["maps"].items()})
  return Diagnosis(model=name or type(model).__name__, num_images=count,
                   stage=np.asarray(stage_index, np.int32), stage_names=stage_names,
                   layers=tuple(layers), per_image=tuple(values) if per_image else None,
                   maps=tuple(maps) if keep_maps else None)



@dataclasses.dataclass(frozen=True)
class Comparison:
  """Several `Diagnosis` results side by side (`compare`).

  Attributes:
    diagnoses: label -> Diagnosis, in the order given.
  """
  diagnoses: Mapping[str, Diagnosis]

  def to_frame(self):
    """One tidy DataFrame (`Diagnosis.to_frame` columns), "model" = the label."""
    import pandas as pd
    frames = [d.to_frame().assign(model=label) for label, d in self.diagnoses.items()]
    return pd.concat(frames, ignore_index=True)

  def per_layer(self):
    """One row per (model, layer), one column per metric (mean over heads)."""
    import pandas as pd
    return pd.concat({label: d.per_layer() for label, d in self.diagnoses.items()},
                     names=["model", "layer"])

  def to_csv(self, path: str) -> str:
    """Writes `to_frame()` to `path` as CSV; returns the path."""
    self.to_frame().to_csv(path, index=False)
    return path

  def plot(self, metrics: Sequence[str] | None = None):
    """One figure, one panel per metric, one line per model (`analysis.plots`)."""
    from vit_spectral.analysis.plots import plot_diagnoses
    return plot_diagnoses(self.diagnoses, metrics)


def compare(diagnoses: Mapping[str, Diagnosis]) -> Comparison:
  """Lines models up: `compare({"baseline": d0, "attn_scale": d1})`.

  Raises:
    ValueError: empty, or a value that is not a Diagnosis.
  """
  if not diagnoses:
    raise ValueError("compare needs at least one Diagnosis")
  for label, d in diagnoses.items():
    if not isinstance(d, Diagnosis):
      raise ValueError(f"compare: {label!r} is a {type(d).__name__}, not a Diagnosis "
                       "(the result of analysis.diagnose)")
  return Comparison(dict(diagnoses))
