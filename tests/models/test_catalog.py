"""`models.catalog`: the committed facts equal what the live registries say
(regenerate with `python -m vit_spectral.models.catalog`), and the config a
recipe writes from them equals the one the classes give."""

import json

import pytest
from ml_collections import config_dict

from vit_spectral.models import build, catalog, model_settings


def test_the_committed_catalog_is_what_the_registries_say():
  live = json.loads(json.dumps(catalog.live(), sort_keys=True))
  assert live == catalog.facts(), (
      "models/catalog.json is out of date: run `python -m vit_spectral.models.catalog`")


def test_encode_decode_round_trip_keeps_types():
  value = {"a": (1, 2.0, "x"), "b": config_dict.placeholder(int), "c": {"d": (True,)}}
  decoded = catalog.decode(json.loads(json.dumps(catalog.encode(value))))
  assert decoded["a"] == (1, 2.0, "x") and isinstance(decoded["a"], tuple)
  assert isinstance(decoded["b"], config_dict.FieldReference)
  assert decoded["b"].get_type() is int and decoded["b"].get() is None
  assert decoded["c"] == {"d": (True,)}


@pytest.mark.parametrize("variant", [None, "S/16", "Swin-T", "CaiT-S24", "CSwin-T"])
def test_model_config_keys_and_placeholders_are_the_classes(variant):
  written = dict(model_settings.model_config(variant=variant).items(
      preserve_field_references=True))
  expected = build.live_defaults(build.model_class(variant))
  assert sorted(written) == sorted(expected)
  for key, value in expected.items():
    if isinstance(value, config_dict.FieldReference) and key not in ("variant",):
      held = written[key]
      assert held is None or not isinstance(held, config_dict.FieldReference) or (
          held.get_type() is value.get_type()), key


def test_a_variant_registered_by_user_code_is_found_live():
  from vit_spectral.attention import register_attention  # pylint: disable=import-outside-toplevel
  from vit_spectral.attention.dot_product import DotProductAttention  # pylint: disable=import-outside-toplevel

  from vit_spectral.attention import registry  # pylint: disable=import-outside-toplevel

  @register_attention("catalog_test_variant")
  class _Mine(DotProductAttention):  # pylint: disable=unused-variable
    pass

  try:
    facts = catalog.FACTS.attention("catalog_test_variant")
    assert facts.class_name == "_Mine" and "qkv_bias" in facts.options
    with pytest.raises(ValueError, match=r"'catalog_test_varian' is not a registered attention "
                       r"variant \(did you mean 'catalog_test_variant'\?\)"):
      catalog.FACTS.attention("catalog_test_varian")
  finally:   # the registry is the process's: leave it as found
    registry._REGISTRY.pop("catalog_test_variant")  # pylint: disable=protected-access
