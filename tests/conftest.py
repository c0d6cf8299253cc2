"""Test-wide setup: 8 fake CPU devices and cheap compiles (`cpu_flags`, set before
JAX is imported) and quiet TF."""

import os
import sys

# The repo root, so the tests import the checkout even where it is not installed.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.cpu_flags import xla_flags  # noqa: E402

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + xla_flags(8)).strip()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402

assert jax.device_count() == 8, "tests/conftest.py must run before JAX is imported"

# Cheap compiles (the Flax examples do the same in their smoke tests); numerics
# tests compare two computations compiled the same way.
jax.config.update("jax_disable_most_optimizations", True)
