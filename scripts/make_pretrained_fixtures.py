"""Writes tests/fixtures/pretrained/: timm's own outputs for random-weight ViTs.

  PYTHONPATH=. /path/to/torch-venv/bin/python scripts/make_pretrained_fixtures.py [--check]

Needs torch, timm and (for --check) this package's own dependencies; run it
from the repository root in an environment that has them all.

Decision: the tests compare our converters with fixtures, not with a live
timm. The suite must stay under 10 minutes on 2 CPU cores and CI does not
install PyTorch (~3 GB) to run it; torch and timm are never needed by the
package or its tests. What is committed is small (names, shapes, seeds,
timm's logits, versions: no weights): the weights are regenerated from the
seed by `tests/models/pretrained_fixtures.random_weights`, NumPy only, which
this script and the tests share.

For each fixture the script draws the weights from the seed, loads them into
the timm model (a `state_dict` for the timm models; `_load_weights` of an
`.npz` written to a temporary file for the big_vision ones), runs timm's
forward in float32 on two seeded 224² images, and writes the logits:

  deit_small_patch16_224.json     timm DeiT-S/16 (names/shapes: its state_dict)
  vit_base_patch16_224.json       timm ViT-B/16
  big_vision_augreg_b16.json      an AugReg-named ViT-B/16 .npz (encoderblock_{i}),
                                  read by timm's VisionTransformer
  big_vision_scanned_ti16.json    big_vision's own naming, blocks scanned into
                                  one stack, Ti/16 with depth 3 and gap pooling,
                                  read by VisionTransformer(class_token=False,
                                  global_pool="avg", fc_norm=False, no_embed_class=True)
  cait_xxs24_224.json             timm CaiT-XXS24 (LayerScale γ and talking heads at
  cait_s24_224.json               the scales of pretrained_fixtures.scale_of); read by
                                  models.cait_timm through pretrained.load_timm
  swin_tiny_patch4_window7_224.json  timm Swin-T, read by models.swin_timm
  posemb_resample.json            timm's resample_abs_pos_embed on seeded
                                  1+7x7 -> 1+12x12 and 1+14x14 -> 1+10x10 embeddings

--check also runs our converters (models.pretrained) on the same weights and
prints the relative error ‖ours - timm‖ / ‖timm‖ of each (the tests require
<= 1e-4).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile

import numpy as np
import timm
import torch
from timm.layers import resample_abs_pos_embed
from timm.models.vision_transformer import VisionTransformer, _load_weights

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.models import pretrained_fixtures as fx  # noqa: E402  pylint: disable=C0413

TIMM_MODELS = {"deit_small_patch16_224": 1, "vit_base_patch16_224": 2,
               "cait_xxs24_224": 6, "cait_s24_224": 7, "swin_tiny_patch4_window7_224": 8}
# name: (seed, big_vision_tensors arguments, timm VisionTransformer arguments, our variant)
BIG_VISION = {
    "big_vision_augreg_b16": (
        3, dict(width=768, depth=12, heads=12, mlp_dim=3072, patch=16, classes=1000,
                image_size=224, augreg=True),
        dict(embed_dim=768, depth=12, num_heads=12, num_classes=1000), "B/16", {}),
    "big_vision_scanned_ti16": (
        4, dict(width=192, depth=3, heads=3, mlp_dim=768, patch=16, classes=10,
                image_size=224, augreg=False),
        dict(embed_dim=192, depth=3, num_heads=3, num_classes=10, class_token=False,
             global_pool="avg", fc_norm=False, no_embed_class=True), "Ti/16", {"depth": 3}),
}
POSEMB_SEED = 5
POSEMB_CASES = ((7, 12), (14, 10))       # (old side, new side), one prefix (CLS) row, width 8


def versions() -> dict[str, str]:
  return {"torch": torch.__version__, "timm": timm.__version__, "numpy": np.__version__,
          "python": platform.python_version()}


def timm_logits(model: torch.nn.Module, images: np.ndarray) -> np.ndarray:
  model.eval()
  with torch.no_grad():
    return model(torch.from_numpy(images)).numpy().astype(np.float32)


def write(name: str, content: dict) -> None:
  path = os.path.join(fx.FIXTURE_DIR, f"{name}.json")
  with open(path, "w", encoding="utf-8") as f:
    json.dump(content, f, indent=None, separators=(",", ":"))
    f.write("\n")
  print(f"wrote {os.path.relpath(path, ROOT)} ({os.path.getsize(path)} bytes)")


def make_timm(name: str, seed: int, images: np.ndarray, check: bool) -> None:
  model = timm.create_model(name, pretrained=False).float()
  tensors = [(k, list(v.shape)) for k, v in model.state_dict().items()]
  weights = fx.random_weights(tensors, seed)
  model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=True)
  logits = timm_logits(model, images)
  write(name, {"kind": "timm", "model": name, "seed": seed, "image_seed": fx.IMAGE_SEED,
               "tensors": tensors, "logits": logits.tolist(), "versions": versions()})
  if check:
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    from vit_spectral.models import pretrained  # pylint: disable=import-outside-toplevel
    ours_model, variables = pretrained.load_timm(weights, name)
    ours = np.asarray(ours_model.apply(variables, jnp.asarray(images.transpose(0, 2, 3, 1))))
    print(f"  check {name}: relative error {fx.relative_error(ours, logits):.2e}, "
          f"max |logit| {np.abs(logits).max():.2f}")


def make_big_vision(name: str, seed: int, tensor_args: dict, timm_args: dict, variant: str,
                    overrides: dict, images: np.ndarray, check: bool) -> None:
  tensors = [(k, list(s)) for k, s in fx.big_vision_tensors(**tensor_args)]
  weights = fx.random_weights(tensors, seed)
  model = VisionTransformer(**timm_args).float()
  with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, f"{name}.npz")
    np.savez(path, **weights)
    _load_weights(model, path)
    logits = timm_logits(model, images)
    write(name, {"kind": "big_vision", "variant": variant, "overrides": overrides,
                 "seed": seed, "image_seed": fx.IMAGE_SEED, "tensors": tensors,
                 "timm_model": {"class": "VisionTransformer", **timm_args},
                 "logits": logits.tolist(), "versions": versions()})
    if check:
      import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
      from vit_spectral.models import pretrained  # pylint: disable=import-outside-toplevel
      x = jnp.asarray(images.transpose(0, 2, 3, 1))
      for activation in ("gelu_erf", "gelu_tanh"):
        ours_model, variables = pretrained.load_big_vision(
            path, variant, block=dict(mlp_activation=activation), **overrides)
        ours = np.asarray(ours_model.apply(variables, x))
        print(f"  check {name} ({activation}): relative error to timm "
              f"{fx.relative_error(ours, logits):.2e}, max |logit| {np.abs(logits).max():.2f}")


def make_posemb() -> None:
  rng = np.random.default_rng(POSEMB_SEED)
  cases = []
  for old, new in POSEMB_CASES:
    posemb = rng.standard_normal((1, 1 + old * old, 8), dtype=np.float32)
    out = resample_abs_pos_embed(torch.from_numpy(posemb), [new, new], num_prefix_tokens=1)
    cases.append({"old": old, "new": new, "width": 8, "num_prefix_tokens": 1,
                  "output": out.numpy().astype(np.float32).tolist()})
  write("posemb_resample", {"seed": POSEMB_SEED, "function": "timm.layers.resample_abs_pos_embed"
                            " (bicubic, antialias=True)", "cases": cases,
                            "versions": versions()})


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--check", action="store_true",
                      help="also run our converters and print their relative error")
  parser.add_argument("--only", nargs="*", default=None, metavar="NAME",
                      help="write only these fixtures (names without .json)")
  args = parser.parse_args()
  wanted = lambda name: args.only is None or name in args.only  # noqa: E731
  torch.set_num_threads(max(1, os.cpu_count() or 1))
  os.makedirs(fx.FIXTURE_DIR, exist_ok=True)
  images = fx.images()
  for name, seed in TIMM_MODELS.items():
    if wanted(name):
      make_timm(name, seed, images, args.check)
  for name, (seed, tensor_args, timm_args, variant, overrides) in BIG_VISION.items():
    if wanted(name):
      make_big_vision(name, seed, tensor_args, timm_args, variant, overrides, images,
                      args.check)
  if wanted("posemb_resample"):
    make_posemb()


if __name__ == "__main__":
  main()
