"""Resume checks and the config record (skeleton)."""

from __future__ import annotations

import json
from typing import Any

import jax
from etils import epath


def previous_config(workdir: str) -> dict | None:
  path = epath.Path(workdir) / "config.json"
  return json.loads(path.read_text()) if path.exists() else None


def check_structure(step: int, stored: Any, *, abstract_state: Any, config: Any,
                    previous_config: dict | None) -> None:
  del step, stored, abstract_state, config, previous_config


def record_config(config, workdir: str, previous: dict | None, *, start_step: int) -> None:
  del previous, start_step
  if jax.process_index() == 0:
    (epath.Path(workdir) / "config.json").write_text(
        config.to_json_best_effort(indent=2, sort_keys=True))
