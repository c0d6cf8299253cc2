"""One run per workdir (skeleton; the lock lands next)."""

from __future__ import annotations

import contextlib

from etils import epath


@contextlib.contextmanager
def hold(workdir: str):
  epath.Path(workdir).mkdir(parents=True, exist_ok=True)
  yield
