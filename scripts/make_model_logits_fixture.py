"""Writes tests/fixtures/model_logits/*.npz: weights, inputs and logits of every
registered model name (and of every token attention variant on a small ViT),
each shrunk to a test-sized shape of the same structure.

The fixture pins the numbers a refactor must keep: `tests/models/
test_model_logits.py` loads the stored weights into the model the same config
builds today, in scan and in loop mode, and compares the logits. It was first
written by the code of commit 55ef70f (before the BlockSpec / EncoderSpec
refactor, issue 28); re-running this script writes what the current code
computes, so only re-run it on purpose, after a change that is meant to move
the numbers.

    python scripts/make_model_logits_fixture.py
"""

from __future__ import annotations

import json
import pathlib

import jax
import numpy as np

from vit_spectral.models import build_model, registered_model_names
from vit_spectral.models.backbone import model_entry
from vit_spectral.models.layouts import scan_to_loop
from vit_spectral.pretrained.converter import flat_paths
from vit_spectral.models.variants import MODEL_NAMES

OUT = pathlib.Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "model_logits"
NUM_CLASSES = 3

# The other backbones' registered names -> their family ("swin", "cait", "cswin").
BACKBONE_NAMES = {name: model_entry(name)[0].__name__.lower()
                  for name in registered_model_names() if name not in MODEL_NAMES}

_ISOTROPIC = dict(hidden_size=8, depth=2, num_heads=2, mlp_dim=16)
_SHRUNK = {
    "swin": dict(embed_dim=4, depths=(2, 2, 1, 1), num_heads=(1, 2, 2, 2), window_size=2,
                 mlp_ratio=2.0),
    "cait": dict(hidden_size=8, depth=2, num_heads=2, mlp_dim=16),
    "cswin": dict(hidden_size=4, depths=(1, 2, 1, 1), num_heads=(2, 2, 2, 2),
                  stripe_widths=(1, 2, 2, 2), mlp_ratio=2.0),
}
# Every token attention variant (and the shared attention and block options)
# on a small ViT, the paths the model names do not take.
_VIT_CASES = {
    "vit-attn_scale-feat_scale": dict(attention={"name": "attn_scale"},
                                      block={"feat_scale": True}),
    "vit-cosine-lipsformer": dict(attention={"name": "cosine", "tau": 12.0}, norm="center_norm",
                                  block={"block_order": "lipsformer", "residual_alpha": 0.5,
                                         "conv_block": True, "conv_kernel_size": 3}),
    "vit-quadratic": dict(attention={"name": "quadratic"}, pooling="mean"),
    "vit-gaussian": dict(attention={"name": "gaussian"}),
    "vit-relative_learned": dict(attention={"name": "relative_learned", "content": True}),
    "vit-hopfield": dict(attention={"name": "hopfield", "alpha": 0.3, "alpha_hidden": 0.4}),
    "vit-hopfield-replace": dict(attention={"name": "hopfield"},
                                 block={"attention_residual": "replace"}),
    "vit-eigen-star": dict(attention={"name": "dot_product", "value_output": "plus"},
                           layer_overrides=({"start": 0, "stop": 1,
                                             "attention": {"value_output": "minus"}},)),
    "vit-talking-heads-lepe-rpb": dict(attention={"name": "dot_product", "talking_heads": True,
                                                  "lepe": True,
                                                  "relative_position_bias": True},
                                       pooling="mean", posemb="sincos2d"),
    "vit-post-norm-authors-featscale": dict(block={"block_order": "post_norm",
                                                   "feat_scale": True,
                                                   "feat_scale_form": "authors_deit"},
                                            stem="space_to_depth"),
}


def cases() -> dict[str, tuple[dict, int]]:
  """case name -> (config.model in config form, image side)."""
  out = {}
  for name in MODEL_NAMES:
    patch = int(name.split("/")[1])
    out[name] = (dict(variant=name, **_ISOTROPIC), patch)
  for name, family in BACKBONE_NAMES.items():
    out[name] = (dict(variant=name, **_SHRUNK[family]), 32)
  for name, fields in _VIT_CASES.items():
    out[name] = (dict(patch_size=2, **_ISOTROPIC, **fields), 8)
  return out


def _half(a):
  """float32 values that float16 holds exactly (stored as float16: half the bytes)."""
  return np.asarray(a, np.float32).astype(np.float16).astype(np.float32)


def group(name: str) -> str:
  """The fixture file a case is stored in (each under 1 MB)."""
  if name in MODEL_NAMES:
    return "vit_names"
  return "backbones" if name in BACKBONE_NAMES else "vit_options"


def write(records: dict[str, dict]) -> None:
  """records: case name -> {config, params (flat path -> array), images, logits}.

  One file per `group`; per case, every weight in one float16 vector
  ("<key>:params", in `index[key]["params"]` order of (path, shape)), the
  float16 images and the float32 logits."""
  files: dict[str, dict] = {}
  for n, (name, record) in enumerate(records.items()):
    arrays, index = files.setdefault(group(name), ({}, {}))
    key = f"case{n:02d}"
    flat = record["params"]
    arrays[f"{key}:params"] = np.concatenate(
        [np.ravel(v) for v in flat.values()]).astype(np.float16)
    arrays[f"{key}:images"] = record["images"].astype(np.float16)
    arrays[f"{key}:logits"] = record["logits"].astype(np.float32)
    index[key] = {"name": name, "config": record["config"],
                  "params": [[path, list(np.shape(v))] for path, v in flat.items()]}
  OUT.mkdir(parents=True, exist_ok=True)
  for file, (arrays, index) in files.items():
    path = OUT / f"{file}.npz"
    np.savez_compressed(path, index=np.asarray(json.dumps(index)), **arrays)
    print(f"wrote {path} ({path.stat().st_size / 1e3:.0f} kB)")


def main() -> None:
  records = {}
  rng = np.random.default_rng(0)
  for n, (name, (config, side)) in enumerate(cases().items()):
    model = build_model(dict(config, encoder_mode="loop"), NUM_CLASSES)
    images = _half(rng.normal(size=(2, side, side, 3)))
    params = jax.jit(model.init)(jax.random.PRNGKey(n), images)["params"]
    # A zero head would hide everything before it: give it weights.
    head = params["head"]
    params = dict(params, head=dict(
        kernel=jax.random.normal(jax.random.PRNGKey(1000 + n), head["kernel"].shape),
        bias=head["bias"]))
    params = jax.tree_util.tree_map(_half, scan_to_loop(params) if "encoder" in params
                                    else params)
    logits = np.asarray(jax.jit(model.apply)({"params": params}, images))
    records[name] = dict(config=config, params=flat_paths(params), images=images, logits=logits)
    print(f"{name:32s} logits {logits.shape} |logits| {np.abs(logits).mean():.4f}")
  write(records)


if __name__ == "__main__":
  main()
