"""Fine-tuning: a run that starts from pretrained weights (`config.init_from`).

`InitFromSettings` is the section's one definition (path None = off). A run
with no checkpoint of its own reads the source, fits it to the model
(`pretrained.load_into`: every tensor that fits, the position embedding
resampled to the model's grid, the head re-initialised with `reinit_head`,
mechanism parameters the source lacks at their init) and starts from it; a
run that has checkpoints resumes from its own latest one and never reads the
source again (`training.trainer`).

  config.init_from = init_from_config("deit_small_patch16_224.safetensors",
                                      format="timm", reinit_head=False)
  config.init_from = init_from_config("workdir/imagenet", format="vit_spectral",
                                      use_ema=True)

Sources by format: "timm" a `.safetensors` file (or a `.pth` state dict,
read with `torch.load(weights_only=True)`), "big_vision" an `.npz` file,
"vit_spectral" a trainer workdir (its checkpoint at `step`, default the
latest; the EMA parameters with `use_ema`). Every process reads the source
itself (multi-host: the same path must be readable everywhere).
"""

from __future__ import annotations

from typing import Any, Mapping

from etils import epath

from vit_spectral import errors
from vit_spectral import settings as settings_lib
from vit_spectral.pretrained import loading as pretrained
from vit_spectral.durability import checkpointing

# The section's one definition (JAX-free, for the command line), re-exported.
from vit_spectral.sections.init_from import (  # noqa: E402,F401
    SUFFIXES, InitFromSettings, init_from_config)


def check_source_exists(settings: InitFromSettings) -> None:
  """Raises ValueError naming `init_from.path` when it names nothing (a file
  for "timm" / "big_vision", a workdir with checkpoints for "vit_spectral").
  Remote paths ("gs://...") are left to the load: checking needs the network.
  """
  if not settings.enabled or "://" in settings.path:
    return
  path = epath.Path(settings.path)
  if settings.format == "vit_spectral":
    settings_lib.require(
        (path / "checkpoints").is_dir(),
        f"init_from.path={settings.path!r} is not a trainer workdir (no checkpoints/ "
        "in it); init_from.format='vit_spectral' reads the checkpoint of a run")
  else:
    settings_lib.require(path.is_file(), f"init_from.path={settings.path!r}: no such file")


def read_source(settings: InitFromSettings) -> Any:
  """What `pretrained.load_into` takes: the file's path, or for
  "vit_spectral" the workdir's parameters (host arrays) at `step`."""
  if settings.format != "vit_spectral":
    return settings.path
  try:
    params, _ = checkpointing.latest_params(
        settings.path, settings.step, key="ema_params" if settings.use_ema else "params")
  except (FileNotFoundError, KeyError) as e:  # no such step; no EMA kept
    raise errors.ConfigError(f"init_from.path={settings.path!r}: {e.args[0]}") from e
  return params


def load(settings: InitFromSettings, model: Any, init_params: Mapping[str, Any]
         ) -> tuple[Any, pretrained.LoadReport]:
  """The source fitted to `model` (`pretrained.load_into`): NumPy params
  in `init_params`' layout and dtypes, and what was done.

  Raises:
    errors.WeightsMismatchError: a tensor does not fit (named).
    errors.ConfigError: the workdir has no checkpoint at `step`, or no EMA
      parameters with `use_ema`.
  """
  return pretrained.load_into(read_source(settings), settings.format, model, init_params,
                              reinit_head=settings.reinit_head)
