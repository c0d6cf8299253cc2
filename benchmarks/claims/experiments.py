"""Imports every paper's experiments, which registers them in `ledger.EXPERIMENTS`."""

from benchmarks.claims import paper000, paper001, paper002, paper003, paper004  # noqa: F401
