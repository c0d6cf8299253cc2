"""The same logits at the same weights: every registered model name (shrunk to a
test-sized shape of the same structure) and every token attention variant on a
small ViT, in scan and in loop mode, against the logits stored in
tests/fixtures/model_logits/ (written by scripts/make_model_logits_fixture.py
with the code from before the BlockSpec / EncoderSpec refactor, issue 28).

The weights are stored in the loop layout; scan mode gets them re-stacked into
the layout the scan model declares (`jax.eval_shape` of its init).
"""

from __future__ import annotations

import json
import pathlib

import jax
import numpy as np
import pytest

from vit_spectral.models import build_model
from vit_spectral.models.layouts import to_layout, tree_layout
from vit_spectral.pretrained.converter import nest_paths
from vit_spectral.models.backbone import registered_model_names

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "model_logits"
NUM_CLASSES = 3


def _load() -> dict[str, dict]:
  cases = {}
  for path in sorted(FIXTURES.glob("*.npz")):
    with np.load(path) as z:
      for key, meta in json.loads(str(z["index"])).items():
        flat, offset = {}, 0
        weights = z[f"{key}:params"].astype(np.float32)
        for name, shape in meta["params"]:
          size = int(np.prod(shape, dtype=int))
          flat[name] = weights[offset:offset + size].reshape(shape)
          offset += size
        cases[meta["name"]] = dict(config=meta["config"], params=nest_paths(flat),
                                   images=z[f"{key}:images"].astype(np.float32),
                                   logits=z[f"{key}:logits"])
  return cases


def _in_layout_of(loop_params, abstract):
  """`loop_params` with every encoder re-stored in the layout of `abstract`'s."""
  if not isinstance(abstract, dict):
    return loop_params
  out = {k: _in_layout_of(loop_params[k], v) for k, v in abstract.items() if k != "encoder"}
  if "encoder" in abstract:
    restored = to_layout({"encoder": loop_params["encoder"]}, tree_layout(abstract))
    out["encoder"] = restored["encoder"]
  return out


CASES = _load()


def test_the_fixture_covers_every_registered_model_name():
  assert set(registered_model_names()) <= set(CASES)


# Scan mode for every name is an every-model compile: the `extended` step runs it
# (each family's own tests check scan = loop in the default run).
@pytest.mark.parametrize("mode", [pytest.param("scan", marks=pytest.mark.extended), "loop"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_logits_match_the_stored_ones(name, mode):
  case = CASES[name]
  model = build_model(dict(case["config"], encoder_mode=mode), NUM_CLASSES)
  images = case["images"]
  abstract = jax.eval_shape(model.init, jax.random.PRNGKey(0), images)["params"]
  params = _in_layout_of(case["params"], abstract)
  assert jax.tree_util.tree_structure(params) == jax.tree_util.tree_structure(abstract)
  logits = jax.jit(model.apply)({"params": params}, images)
  np.testing.assert_allclose(np.asarray(logits), case["logits"], rtol=2e-5, atol=2e-5)
