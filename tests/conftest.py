"""Test-wide setup: 8 fake CPU devices and cheap compiles (`cpu_flags`, set before
JAX is imported), one compilation cache per session, and quiet TF."""

import os
import sys

# The repo root, so the tests import the checkout even where it is not installed.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.cpu_flags import xla_flags  # noqa: E402

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + xla_flags(8)).strip()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# One compilation cache for the whole test session: the controller makes the
# folder, the xdist workers and every subprocess a test starts inherit it, so a
# program that several tests (or processes) compile is compiled once. Nothing
# is kept between sessions.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
  import atexit  # noqa: E402
  import shutil  # noqa: E402
  import tempfile  # noqa: E402
  _CACHE = tempfile.mkdtemp(prefix="vit_spectral_test_jax_cache_")
  atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
  os.environ["JAX_COMPILATION_CACHE_DIR"] = _CACHE
  os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
  os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"

import jax  # noqa: E402

assert jax.device_count() == 8, "tests/conftest.py must run before JAX is imported"

# Cheap compiles (the Flax examples do the same in their smoke tests); numerics
# tests compare two computations compiled the same way.
jax.config.update("jax_disable_most_optimizations", True)
