"""Imports every paper's experiments, which registers them in `ledger.EXPERIMENTS`."""

from benchmarks.claims import (  # noqa: F401
    headline, paper000, paper000_depth24, paper000_mnist1d, paper001, paper001_threshold, paper002,
    paper002_long, paper002_teacher, paper003, paper003_mnist1d, paper003_not_low_pass, paper004,
    paper004_depths)
