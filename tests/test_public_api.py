"""The public API: every package declares `__all__`, every name in it exists,
and the diagnostics are exported under the names the papers' specs gave them."""

import importlib
import pkgutil

import pytest

import vit_spectral

PACKAGES = sorted(
    name for _, name, is_pkg in pkgutil.walk_packages(vit_spectral.__path__, "vit_spectral.")
    if is_pkg) + ["vit_spectral"]


def test_every_subpackage_is_listed():
  assert set(PACKAGES) == {"vit_spectral", *(f"vit_spectral.{n}" for n in vit_spectral.__all__
                                             if n != "settings")}


@pytest.mark.parametrize("name", PACKAGES)
def test_package_declares_all_and_every_name_exists(name):
  package = importlib.import_module(name)
  assert hasattr(package, "__all__"), f"{name} has no __all__"
  for attr in package.__all__:
    if not hasattr(package, attr):  # submodules listed in __all__ import on use
      importlib.import_module(f"{name}.{attr}")


def test_diagnostics_exported_by_their_specified_names():
  from vit_spectral import analysis
  specified = [
      # paper 000
      "dc", "hc", "hc_dc_ratio", "hc_proportion", "attention_spectrum",
      "attention_cosine_similarity", "token_cosine_similarity", "smoothing_rate_bound",
      "probe", "diagnose", "compare", "diagnosable", "load_workdir",
      # paper 001
      "scsa_lipschitz_bound", "lipsformer_lipschitz_bound", "empirical_lipschitz",
      "vit_lipschitz_bound",
      # paper 002
      "degenerate_heads", "prune_heads", "plot_attention_centres",
      # paper 003
      "asymmetry", "dominating_eigenvalue",
      # paper 004
      "rank_residual_ratio", "attention_entropy", "token_cosine_values",
  ]
  missing = [n for n in specified if n not in analysis.__all__]
  assert not missing, f"vit_spectral.analysis does not export {missing}"


def test_attention_exports_every_registered_class():
  from vit_spectral import attention
  for name in attention.registered_attentions():
    cls = attention.get_attention(name)
    assert getattr(attention, cls.__name__, None) is cls, (
        f"{cls.__name__} ({name!r}) is not exported by vit_spectral.attention")
    assert cls.__name__ in attention.__all__


@pytest.mark.parametrize("old", sorted(vit_spectral.MOVED_MODULES))
def test_a_moved_module_imports_at_its_old_path_with_a_warning(old):
  import sys  # pylint: disable=import-outside-toplevel
  import warnings  # pylint: disable=import-outside-toplevel
  from vit_spectral import data  # pylint: disable=import-outside-toplevel
  sys.modules.pop(old, None)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    module = importlib.import_module(old)
  assert module is importlib.import_module(vit_spectral.MOVED_MODULES[old])
  # The warning names the new path and points at the importing line.
  assert any(issubclass(w.category, DeprecationWarning) and w.filename == __file__
             and vit_spectral.MOVED_MODULES[old] in str(w.message) for w in caught)
  # `data.input_settings` stays the function where a module of that name was.
  assert callable(data.input_settings) and data.input_settings.__name__ == "input_settings"
