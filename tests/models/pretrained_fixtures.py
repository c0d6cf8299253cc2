"""The random weights and images behind tests/fixtures/pretrained/, from their seeds.

Shared by `scripts/make_pretrained_fixtures.py` (which runs timm on them and
writes the fixtures) and `tests/models/test_pretrained.py` (which runs our
converters on the same arrays): the weights are never committed, only the
names, shapes and seed they are regenerated from. NumPy only (no torch).

Scales make the function non-trivial: weights N(0, 0.04²) (attention logits and
MLP activations of order 1), biases N(0, 0.02²), LayerNorm scales 1 + N(0, 0.1²),
position embedding and CLS token N(0, 0.1²), the head N(0, 0.1²) so that the
logits are of order 1; the distillation token and registers (timm `dist_token`,
`reg_token`) as the CLS token, the distillation head as the head, `norm_pre` as
the other norms. CaiT, DeiT-III, DINOv2: LayerScale's γ (timm `gamma_1`,
`gamma_2`, `ls1.gamma`, `ls2.gamma`) 0.5 + N(0, 0.1²) rather than its 1e-5 /
1e-6 init, so every block changes the function;
the talking-heads maps (`attn.proj_l`, `attn.proj_w`, heads × heads)
N(0, 0.5²), so the mixed logits stay of order 1 and the heads really mix.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Sequence

import numpy as np

FIXTURE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "fixtures", "pretrained")
IMAGE_SHAPE = (2, 3, 224, 224)        # NCHW, as timm takes them
IMAGE_SEED = 100

_NORM_SCALE = re.compile(
    r"(^|[./])(norm\d?|norm_pre|encoder_norm|LayerNorm_\d+)[./](weight|scale)$")
_HEAD = re.compile(r"^head(_dist)?[./](fc[./])?(weight|kernel)$")   # timm's Swin: head.fc
_LAYER_SCALE = re.compile(r"[./](gamma_[12]|ls[12][./]gamma)$")
_TALKING_HEADS = re.compile(r"[./]attn[./]proj_[lw][./]weight$")
_EMBEDDING = re.compile(r"^(cls_token|dist_token|reg_token|pos_embed|cls|pos_embedding|"
                        r"Transformer/posembed_input/pos_embedding)$")


def scale_of(name: str) -> tuple[float, float]:
  """(mean, std) of the tensor `name` (timm or big_vision naming)."""
  if _NORM_SCALE.search(name):
    return 1.0, 0.1
  if _HEAD.match(name):
    return 0.0, 0.1
  if _LAYER_SCALE.search(name):
    return 0.5, 0.1
  if _TALKING_HEADS.search(name):
    return 0.0, 0.5
  if _EMBEDDING.match(name):
    return 0.0, 0.1
  if name.endswith("bias"):
    return 0.0, 0.02
  return 0.0, 0.04


def random_weights(tensors: Sequence[tuple[str, Sequence[int]]], seed: int
                   ) -> dict[str, np.ndarray]:
  """{name: float32 array} drawn name by name, in the order of `tensors`, from
  np.random.default_rng(seed)."""
  rng = np.random.default_rng(seed)
  weights = {}
  for name, shape in tensors:
    mean, std = scale_of(name)
    weights[name] = (mean + std * rng.standard_normal(tuple(shape), dtype=np.float32)
                     ).astype(np.float32)
  return weights


def images(seed: int = IMAGE_SEED) -> np.ndarray:
  """IMAGE_SHAPE float32 N(0, 1) images (NCHW: transpose to NHWC for our models)."""
  return np.random.default_rng(seed).standard_normal(IMAGE_SHAPE, dtype=np.float32)


def relative_error(ours, reference) -> float:
  """‖ours - reference‖ / ‖reference‖ (Frobenius, in float64)."""
  ours, reference = np.asarray(ours, np.float64), np.asarray(reference, np.float64)
  return float(np.linalg.norm(ours - reference) / np.linalg.norm(reference))


def big_vision_tensors(*, width: int, depth: int, heads: int, mlp_dim: int, patch: int,
                       classes: int, image_size: int, augreg: bool
                       ) -> list[tuple[str, tuple[int, ...]]]:
  """Names and shapes of a big_vision ViT `.npz`.

  augreg=True: the AugReg / original ViT naming (CLS token, per-layer
  `Transformer/encoderblock_{i}`, LayerNorm_0 / MultiHeadDotProductAttention_1
  / LayerNorm_2 / MlpBlock_3, the CLS row in
  `Transformer/posembed_input/pos_embedding`). augreg=False: big_vision's own
  naming with gap pooling (no CLS), the blocks scanned into one
  `Transformer/encoderblock` stack with a leading depth axis, and
  `pos_embedding` for the patch tokens only.
  """
  tokens = (image_size // patch) ** 2
  dh = width // heads
  modules = (("LayerNorm_0", "MultiHeadDotProductAttention_1", "LayerNorm_2", "MlpBlock_3")
             if augreg else
             ("LayerNorm_0", "MultiHeadDotProductAttention_0", "LayerNorm_1", "MlpBlock_0"))
  ln1, mha, ln2, mlp = modules
  block = [(f"{ln1}/scale", (width,)), (f"{ln1}/bias", (width,))]
  for part in ("query", "key", "value"):
    block += [(f"{mha}/{part}/kernel", (width, heads, dh)), (f"{mha}/{part}/bias", (heads, dh))]
  block += [(f"{mha}/out/kernel", (heads, dh, width)), (f"{mha}/out/bias", (width,)),
            (f"{ln2}/scale", (width,)), (f"{ln2}/bias", (width,)),
            (f"{mlp}/Dense_0/kernel", (width, mlp_dim)), (f"{mlp}/Dense_0/bias", (mlp_dim,)),
            (f"{mlp}/Dense_1/kernel", (mlp_dim, width)), (f"{mlp}/Dense_1/bias", (width,))]
  out = [("embedding/kernel", (patch, patch, 3, width)), ("embedding/bias", (width,))]
  if augreg:
    out += [("cls", (1, 1, width)),
            ("Transformer/posembed_input/pos_embedding", (1, tokens + 1, width))]
    for i in range(depth):
      out += [(f"Transformer/encoderblock_{i}/{name}", shape) for name, shape in block]
  else:
    out += [("pos_embedding", (1, tokens, width))]
    out += [(f"Transformer/encoderblock/{name}", (depth, *shape)) for name, shape in block]
  out += [("Transformer/encoder_norm/scale", (width,)),
          ("Transformer/encoder_norm/bias", (width,)),
          ("head/kernel", (width, classes)), ("head/bias", (classes,))]
  return out


def read_fixture(name: str) -> dict[str, Any]:
  """The JSON fixture `name` (without .json) of FIXTURE_DIR."""
  with open(os.path.join(FIXTURE_DIR, f"{name}.json"), encoding="utf-8") as f:
    return json.load(f)


def fixture_weights(fixture: dict[str, Any]) -> dict[str, np.ndarray]:
  """The fixture's weights, regenerated from its tensor list and seed."""
  return random_weights([(n, s) for n, s in fixture["tensors"]], fixture["seed"])
