"""The tensor-parallel rules derived from the attention variants' declared
logical axes (`Attention.PARAM_AXES`) place every parameter that the old
hand-written table (kept here) covered exactly as it did, on every model of
the logits fixture and on the options that add parameters; what it did not
cover stays replicated, but for Swin's relative position bias table, which
now splits with its heads. Bad declarations name themselves."""

import json
import pathlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_spectral.attention import Attention, registry
from vit_spectral.models import build_model
from vit_spectral.training import sharding
from vit_spectral.training.optim import param_path

# `training.sharding.TENSOR_PARALLEL_RULES` as written by hand before the
# variants declared their parameters' axes (issue 28).
OLD_RULES = (
    (r"attention/(query|key|value)/kernel$", (None, "model", None)),
    (r"attention/(query|key|value)/bias$", ("model", None)),
    (r"attention/out/kernel$", ("model", None, None)),
    (r"attention/(h_theta|h_vectors)$", (None, None)),
    (r"attention/h_psi$", ("model",)),
    (r"attention/value_bias$", ("model", None)),
    (r"attention/out_bias$", (None,)),
    (r"attention/lepe/conv/kernel$", (None, None, None, "model")),
    (r"attention/lepe/conv/bias$", ("model",)),
    (r"attention/(omega|log_alpha)$", ("model",)),
    (r"attention/centers$", ("model", None)),
    (r"attention/inv_sqrt_cov$", ("model", None, None)),
    (r"attention/position_key$", (None, "model", None)),
    (r"attention/(position_query|content_bias)$", ("model", None)),
    (r"attention/(row|col)_embedding$", (None, None)),
    (r"attention/shared_value/(kernel|bias)$", ()),
    (r"attention/(tau|nu)$", ()),
    (r"attention/talking_heads_(logits|weights)/kernel$", (None, None)),
    (r"attention/talking_heads_(logits|weights)/bias$", (None,)),
    (r"mlp/fc1/kernel$", (None, "model")),
    (r"mlp/fc1/bias$", ("model",)),
    (r"mlp/fc2/kernel$", ("model", None)),
    (r"conv_dw/conv/kernel$", (None, None, None, "model")),
    (r"conv_dw/conv/bias$", ("model",)),
    (r"conv_pw/conv/kernel$", (None, None, "model", None)),
    (r"conv_pw/conv/bias$", (None,)),
    (r"(^|/)alpha(1|2|_conv)$", (None,)),
    (r"feat_scale/(dc_scale|hc_scale)$", (None,)),
)
# Declared now, matched by no old rule: the trailing spec (a scanned stack adds
# a leading depth axis); the table's (H,) columns on "model".
NEWLY_SPLIT = {r"attention/relative_position_bias_table$": (None, "model")}

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "model_logits"
VIT = dict(patch_size=2, hidden_size=8, depth=2, num_heads=2, mlp_dim=16)
# Options that add parameters the fixture's models lack.
OPTIONS = {
    "eigen-plus_ns": dict(VIT, attention=dict(name="dot_product", value_output="plus_ns")),
    "eigen-symmetric-attn_scale": dict(VIT, attention=dict(name="attn_scale",
                                                           value_output="minus")),
    "cosine-learned": dict(VIT, attention=dict(name="cosine", learnable_tau=True,
                                               learnable_nu=True)),
    "quadratic-shared_value": dict(VIT, attention=dict(name="quadratic", shared_value=True)),
    "relative_learned-positional": dict(VIT, attention=dict(name="relative_learned")),
    "hopfield-lepe": dict(VIT, attention=dict(name="hopfield", lepe=True)),
}


def _fixture_configs():
  """name -> (model config, image shape) of the logits fixture's models (one
  plain ViT name: the others have its parameters)."""
  configs = {}
  for path in sorted(FIXTURES.glob("*.npz")):
    with np.load(path) as z:
      for key, meta in json.loads(str(z["index"])).items():
        if re.fullmatch(r"(Ti|S|B|L)/\d+", meta["name"]) and meta["name"] != "Ti/16":
          continue
        configs[meta["name"]] = (meta["config"], z[f"{key}:images"].shape[1:])
  return configs


CONFIGS = {**_fixture_configs(), **{n: (c, (8, 8, 3)) for n, c in OPTIONS.items()}}


def _params(config, image_shape):
  model = build_model(config, num_classes=3)
  return jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((1, *image_shape))))[
      "params"]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_derived_rules_place_what_the_old_table_covered_as_it_did(name):
  params = _params(*CONFIGS[name])
  mesh = sharding.make_mesh({"data": -1})   # "model" of size 1: every spec is legal
  rules = sharding.tensor_parallel_rules()
  for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
    path, shape = param_path(path), leaf.shape
    new = sharding.partition_spec(path, shape, mesh, rules)
    if any(re.search(pattern, path) for pattern, _ in OLD_RULES):
      assert new == sharding.partition_spec(path, shape, mesh, OLD_RULES), path
      continue
    newly = [spec for pattern, spec in NEWLY_SPLIT.items() if re.search(pattern, path)]
    if newly:
      trailing = newly[0]
      assert tuple(new)[-len(trailing):] == trailing, f"{path}: {new}"
      assert all(entry is None for entry in tuple(new)[:-len(trailing)]), f"{path}: {new}"
    else:   # replicated over "model", as before (P(None, ...) places as P())
      assert all(entry is None for entry in new), f"{path}: {new}"


def test_the_rules_name_no_variant_parameter_in_the_sharding_module():
  source = pathlib.Path(sharding.__file__).read_text()
  for name in registry.registered_attentions():
    for path in registry.get_attention(name).param_axes():
      if path not in Attention.PARAM_AXES:
        assert not re.search(rf"\b{re.escape(path)}\b", source), (
            f"training/sharding.py names {name}'s {path!r}")


def test_an_unknown_logical_axis_names_the_declaration(monkeypatch):
  class Typo(Attention):
    PARAM_AXES = {"scale": ("haeds",)}

  monkeypatch.setitem(registry._REGISTRY, "typo", Typo)
  with pytest.raises(ValueError, match=r"Typo.PARAM_AXES\['scale'\]: logical axes \['haeds'\]"):
    sharding.tensor_parallel_rules()


def test_two_variants_splitting_one_path_differently_is_an_error(monkeypatch):
  class Other(Attention):
    PARAM_AXES = {"omega": (None,)}

  monkeypatch.setitem(registry._REGISTRY, "other", Other)
  with pytest.raises(ValueError, match="'omega' is declared"):
    sharding.tensor_parallel_rules()
