"""An option's interval, declared once on its attention class: the interval
rule itself, the class refusing a value when called directly (a user's own
Flax code, no config), and the catalogued facts the command line reads
matching the live classes'."""

import jax
import jax.numpy as jnp
import pytest

from vit_spectral.attention import get_attention, registered_attentions
from vit_spectral.option_ranges import check_ranges, in_interval


@pytest.mark.parametrize("value,interval,inside", [
    (0, "[0, 1]", True), (1, "[0, 1]", True), (1.0000001, "[0, 1]", False),
    (0, "(0, inf)", False), (1e-30, "(0, inf)", True), (float("inf"), "(0, inf)", False),
    (0.0, "[0, inf)", True), (-1e-9, "[0, inf)", False), (1, "[0, 1)", False),
    (float("nan"), "[0, 1]", False), (True, "[0, 1]", False), ("0.5", "[0, 1]", False),
])
def test_the_interval_rule(value, interval, inside):
  assert in_interval(value, interval) is inside


def test_a_malformed_interval_is_refused():
  with pytest.raises(ValueError, match=r"interval '0..1' must read like"):
    in_interval(0.5, "0..1")


def test_check_ranges_names_the_field_and_passes_options_it_does_not_name():
  check_ranges({"alpha": "[0, 1]"}, {"alpha": 0.5, "other": -7})
  with pytest.raises(ValueError, match=r"^model.attention.alpha=-3 must be in \[0, 1\]$"):
    check_ranges({"alpha": "[0, 1]"}, {"alpha": -3})


@pytest.mark.parametrize("name,option,value", [
    ("hopfield", "alpha", -3.0), ("hopfield", "alpha_hidden", 1.5),
    ("cosine", "epsilon", 0.0), ("quadratic", "alpha_init", 0.0),
    ("quadratic", "spread_init_std", -0.1),
])
def test_a_module_built_directly_refuses_an_option_out_of_its_range(name, option, value):
  grid = dict(grid_size=(2, 2), num_prefix_tokens=1) if name == "quadratic" else {}
  module = get_attention(name)(num_heads=2, **grid, **{option: value})
  with pytest.raises(ValueError, match=rf"^model.attention.{option}={value} must be in "):
    jax.eval_shape(module.init, jax.random.key(0), jnp.zeros((1, 5, 8)))
  inside = get_attention(name)(num_heads=2, **grid)      # the defaults lie inside
  jax.eval_shape(inside.init, jax.random.key(0), jnp.zeros((1, 5, 8)))


def test_the_config_checks_read_the_classes_ranges():
  """`config.model.attention` is checked against the class's own declaration:
  a range added to a subclass of one's own is enforced by the config checks."""
  from vit_spectral.attention import register_attention, registry  # pylint: disable=import-outside-toplevel
  from vit_spectral.models import build  # pylint: disable=import-outside-toplevel

  @register_attention("ranged_test_variant")
  class _Ranged(get_attention("dot_product")):  # pylint: disable=unused-variable
    OPTION_RANGES = {"value_output_eps": "(0, 1e-3]"}

  try:
    assert _Ranged.option_ranges()["value_output_eps"] == "(0, 1e-3]"
    with pytest.raises(ValueError, match=r"^model.attention.value_output_eps=0.5 must be in "
                       r"\(0, 1e-3\]$"):
      build.model_kwargs(dict(variant="Ti/16", attention=dict(name="ranged_test_variant",
                                                              value_output_eps=0.5)))
    build.model_kwargs(dict(variant="Ti/16", attention=dict(name="ranged_test_variant",
                                                            value_output_eps=1e-4)))
  finally:   # the registry is the process's: leave it as found
    registry._REGISTRY.pop("ranged_test_variant")  # pylint: disable=protected-access
