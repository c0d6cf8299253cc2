"""The recipe side of the optimizer: schedule formula, batch scaling, decay masks
by path, frozen parameters, epoch-valued durations."""

import dataclasses
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl import flags
from ml_collections import config_flags

from vit_spectral.configs import common, lipsformer_digits
from vit_spectral import settings
from vit_spectral.models import BlockSpec, EncoderSpec, ViT, build_model
from vit_spectral.models.build import ModelSpec
from vit_spectral.training import diagnostics, durations, init_from, mixing, optim, robustness, sharding
from vit_spectral.training import steps
from vit_spectral.training.train_state import TrainState
from vit_spectral.sections.logging import LoggingSettings
from vit_spectral.sections.run import RunSettings, run_settings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _schedule_by_formula(t, *, peak, warmup, cooldown, total, init, end):
  """The documented formula, written out directly."""
  if t < warmup:
    return init + (peak - init) * t / warmup
  if t >= total - cooldown:
    return end
  progress = (t - warmup) / (total - cooldown - warmup)
  return end + (peak - end) * (1 + math.cos(math.pi * progress)) / 2


@pytest.mark.parametrize("warmup,cooldown,init,end", [
    (0, 0, 0.0, 0.0),      # no warmup (LipsFormer)
    (10, 0, 0.0, 1e-5),    # the spine's default shape with a floor
    (20, 10, 1e-6, 1e-6),  # paper 004 Table 10 shape
])
def test_schedule_matches_formula(warmup, cooldown, init, end):
  total, peak = 100, 1e-3
  cfg = common.optim_config("adamw", learning_rate=peak, warmup_steps=warmup,
                            cooldown_steps=cooldown, warmup_init_learning_rate=init,
                            end_learning_rate=end)
  schedule = optim.learning_rate_schedule(cfg, total)
  for t in (0, 1, 5, warmup, warmup + 1, 50, total - cooldown - 1,
            total - cooldown, total - 1, total):
    expected = _schedule_by_formula(t, peak=peak, warmup=warmup, cooldown=cooldown,
                                    total=total, init=init, end=end)
    np.testing.assert_allclose(float(schedule(t)), expected, rtol=1e-5, atol=1e-6 * peak,  # float32
                               err_msg=f"step {t}")
  if warmup == 0:
    assert float(schedule(0)) == pytest.approx(peak)  # trains at the peak at once


def test_batch_size_scaling():
  cfg = common.optim_config("adamw", learning_rate=5e-4, base_batch_size=512,
                            warmup_steps=0)
  schedule = optim.learning_rate_schedule(cfg, 10, batch_size=1024)
  assert float(schedule(0)) == pytest.approx(1e-3)
  with pytest.raises(ValueError, match="batch_size"):
    optim.learning_rate_schedule(cfg, 10)
  cfg.base_batch_size = 0
  with pytest.raises(ValueError, match="base_batch_size"):
    optim.learning_rate_schedule(cfg, 10, batch_size=8)


@pytest.mark.parametrize("scaling,exponent", [("linear", 1.0), ("sqrt", 0.5)])
def test_batch_scaling_linear_or_sqrt(scaling, exponent, caplog):
  """peak = learning_rate · (B / B0)^k, k = 1 (DeiT) or ½ (timm's AdamW rule);
  make_optimizer logs the rate it trains at."""
  cfg = common.optim_config("adamw", learning_rate=6.25e-5, base_batch_size=256,
                            batch_scaling=scaling, warmup_steps=0)
  for batch in (32, 128, 256, 1024):
    expected = 6.25e-5 * (batch / 256) ** exponent
    assert optim.peak_learning_rate(cfg, batch) == pytest.approx(expected, rel=1e-12)
    schedule = optim.learning_rate_schedule(cfg, 10, batch_size=batch)
    assert float(schedule(0)) == pytest.approx(expected, rel=1e-6)    # float32
  caplog.set_level("INFO")
  optim.make_optimizer(cfg, 10, batch_size=128)
  assert f"{6.25e-5 * 0.5 ** exponent:.6g}" in caplog.text and scaling in caplog.text
  cfg.batch_scaling = "cubic"
  with pytest.raises(ValueError, match=r"optim.batch_scaling='cubic'; choose one of"):
    optim.peak_learning_rate(cfg, 8)


def test_schedule_rejects_too_long_warmup_and_unresolved_epochs():
  cfg = common.optim_config("adamw", warmup_steps=8, cooldown_steps=2)
  with pytest.raises(ValueError, match="cooldown_steps"):
    optim.learning_rate_schedule(cfg, 10)
  cfg = common.optim_config("adamw", warmup_epochs=1)
  with pytest.raises(ValueError, match="warmup_epochs"):
    optim.make_optimizer(cfg, 100)


@pytest.mark.parametrize("encoder_mode", ["scan", "loop"])
def test_weight_decay_mask_by_path(encoder_mode):
  model = build_model(dict(hidden_size=16, depth=2, num_heads=2, mlp_dim=32,
                           patch_size=4, encoder_mode=encoder_mode), num_classes=3)
  params = jax.eval_shape(
      lambda: model.init(jax.random.key(0), jnp.zeros((1, 8, 8, 1)))["params"])
  mask = optim.weight_decay_mask(params, optim.DEIT_NO_DECAY)
  decayed = {optim.param_path(p) for p, v in
             jax.tree_util.tree_leaves_with_path(mask) if v}
  # Independently: the matrices (kernels) and nothing else.
  kernels = {optim.param_path(p) for p, _ in jax.tree_util.tree_leaves_with_path(params)
             if optim.param_path(p).endswith("kernel")}
  assert decayed == kernels
  all_paths = {optim.param_path(p) for p, _ in jax.tree_util.tree_leaves_with_path(params)}
  assert {"pos_embedding", "cls"} <= all_paths - decayed
  # Without DeiT's patterns the (1, T, D) position embedding is decayed.
  plain = optim.weight_decay_mask(params)
  assert plain["pos_embedding"] and plain["cls"]
  # A paper's own exemption by regex, e.g. one layer's MLP.
  custom = optim.weight_decay_mask(params, (r"mlp/fc1/kernel$",))
  custom_decayed = {optim.param_path(p) for p, v in
                    jax.tree_util.tree_leaves_with_path(custom) if v}
  assert not any("fc1" in p for p in custom_decayed)
  assert any("fc2" in p for p in custom_decayed)
  # exempt_vectors_and_biases=False (torch's SGD over every parameter): only
  # the patterns exempt.
  everything = optim.weight_decay_mask(params, (r"mlp/fc1/kernel$",),
                                       exempt_vectors_and_biases=False)
  exempt = {optim.param_path(p) for p, v in
            jax.tree_util.tree_leaves_with_path(everything) if not v}
  assert exempt == {p for p in all_paths if p.endswith("mlp/fc1/kernel")}


def test_frozen_parameters_do_not_change_in_a_train_step():
  """Linear probing: with FREEZE_ALL_BUT_HEAD and weight decay on, a train
  step moves the head and nothing else; frozen leaves hold no Adam moments."""
  model = build_model(dict(hidden_size=16, depth=1, num_heads=2, mlp_dim=32, patch_size=2),
                      num_classes=3)
  images = jax.random.normal(jax.random.key(1), (8, 8, 8, 1))
  params = model.init(jax.random.key(0), images[:1])["params"]
  settings = optim.OptimSettings(learning_rate=0.1, weight_decay=0.5,
                                 freeze_patterns=optim.FREEZE_ALL_BUT_HEAD,
                                 grad_clip_norm=1.0)
  tx, schedule = optim.make_optimizer(settings, total_steps=10)
  state = TrainState(step=jnp.zeros((), jnp.int32), params=params,
                     opt_state=tx.init(params), ema_params=None)
  moments = sum(x.size for x in jax.tree_util.tree_leaves(state.opt_state))
  head = sum(x.size for x in jax.tree_util.tree_leaves(params["head"]))
  assert moments <= 2 * head + 2       # mu and nu of the head, counters
  batch = {"image": images, "label": jnp.arange(8) % 3}
  new, _ = jax.jit(lambda s, b: steps.train_step(s, b, model=model, tx=tx, schedule=schedule,
                                                  base_rng=jax.random.key(2)))(state, batch)
  for path, before in jax.tree_util.tree_flatten_with_path(params)[0]:
    name = optim.param_path(path)
    after = dict(jax.tree_util.tree_flatten_with_path(new.params)[0])[path]
    if name.startswith("head/"):
      assert not np.allclose(after, before), name
    else:
      np.testing.assert_array_equal(after, before, err_msg=name)
  with pytest.raises(ValueError, match=r"optim.freeze_patterns: '\(' is not a regex"):
    optim.OptimSettings(freeze_patterns=("(",))


def test_durations_resolve_epochs():
  run = RunSettings(num_epochs=2.5, eval_every=None, eval_every_epochs=0.5,
                    checkpoint_every=None, checkpoint_every_epochs=1)
  optim_settings = optim.OptimSettings(warmup_steps=None, warmup_epochs=0.25,
                                       cooldown_steps=None, cooldown_epochs=1)
  # 1050 examples in batches of 100: 10 steps per epoch.
  resolved, resolved_optim = durations.resolve(run, optim_settings, batch_size=100,
                                               num_train_examples=1050)
  assert resolved.total_steps == 25 and resolved.num_epochs is None
  assert resolved.eval_every == 5 and resolved.checkpoint_every == 10
  assert resolved.eval_every_epochs is None and resolved.checkpoint_every_epochs is None
  assert resolved_optim.warmup_steps == 2  # round(0.25 * 10), half to even
  assert resolved_optim.cooldown_steps == 10
  assert resolved_optim.warmup_epochs is None and resolved_optim.cooldown_epochs is None
  # Settings in steps come back unchanged.
  steps_run = RunSettings(total_steps=40)
  steps_optim = optim.OptimSettings(warmup_steps=4)
  assert durations.resolve(steps_run, steps_optim, batch_size=100,
                           num_train_examples=1050) == (steps_run, steps_optim)


def test_durations_reject_both_units():
  with pytest.raises(ValueError, match="eval_every"):
    RunSettings(total_steps=40, eval_every=5, eval_every_epochs=1)
  with pytest.raises(ValueError, match="eval_every"):
    RunSettings(total_steps=40, eval_every=None)
  with pytest.raises(ValueError, match="warmup_epochs"):
    optim.OptimSettings(warmup_steps=5, warmup_epochs=1)
  with pytest.raises(ValueError, match="batch_size"):
    durations.resolve(RunSettings(num_epochs=1), optim.OptimSettings(), batch_size=2000,
                      num_train_examples=1000)


def test_config_sections_take_the_settings_defaults():
  """configs/common.py writes each section from its dataclass: same fields,
  same values (so no default is written twice)."""
  checks = [
      (common.optim_config(), optim.OptimSettings()),
      (common.mixup_config(), mixing.MixSettings()),
      (common.base_config().robustness, robustness.RobustnessSettings()),
      (common.base_config().init_from, init_from.InitFromSettings()),
      (common.base_config().mesh, sharding.MeshSettings()),
      (common.base_config().diagnostics, diagnostics.DiagnosticsSettings()),
      (common.base_config().logging, LoggingSettings()),
  ]
  for config, defaults in checks:
    assert settings.from_config(type(defaults), config) == defaults
    assert set(config.keys()) == set(settings.field_names(type(defaults)))
  base = common.base_config()
  run_fields = settings.field_names(RunSettings)
  for field in dataclasses.fields(RunSettings):
    value = base[field.name]
    assert (tuple(value) if isinstance(value, (list, tuple)) else value) == field.default, field.name
  assert set(base.keys()) == set(run_fields) | {"mixup", "robustness", "init_from", "mesh",
                                                "diagnostics", "logging"}
  # The model section at its defaults builds the ViT at its defaults.
  shape = dict(hidden_size=16, depth=2, patch_size=2)
  built = build_model(common.model_config(num_heads=2, mlp_dim=32, **shape), num_classes=3)
  # ... with this process's backend defaults written in, as the build writes them.
  default = ViT(num_classes=3, **ModelSpec(ViT, dict(
      block=BlockSpec(num_heads=2, mlp_dim=32), encoder=EncoderSpec(), **shape)).for_backend(None))
  for field in dataclasses.fields(ViT):
    if field.name not in ("parent", "name"):
      assert getattr(built, field.name) == getattr(default, field.name), field.name
  assert not built.block.attention_kwargs and not default.block.attention_kwargs


@pytest.mark.parametrize("path,text,value", [
    ("optim.grad_clip_norm", "0.5", 0.5),
    ("robustness.dataset", "cifar10_corrupted", "cifar10_corrupted"),
    ("robustness.every", "100", 100),
    ("logging.wandb", "my_project", "my_project"),
    ("optim.warmup_epochs", "2.5", 2.5),
    ("num_epochs", "300", 300.0),
    ("model.variant", "S/2", "S/2"),
])
def test_command_line_overrides_reach_none_default_fields(path, text, value):
  """`--config.<path>=<text>` through ml_collections.config_flags, on fields
  whose default is None."""
  def field(config):
    for name in path.split("."):
      config = config[name]
    return config

  assert field(lipsformer_digits.get_config()) is None
  values = flags.FlagValues()
  argv = ["train.py", f"--config={ROOT}/configs/lipsformer_digits.py",
          f"--config.{path}={text}"]
  config_flag = config_flags.DEFINE_config_file("config", None, flag_values=values,
                                                sys_argv=argv, lock_config=True)
  values(argv)
  overridden = field(config_flag.value)
  assert overridden == value and type(overridden) is type(value)


@pytest.mark.parametrize("recipe,overrides,expected", [
    # A recipe in epochs switched to steps, and a digits run switched to epochs.
    ("cifar10_vit.py", ["--config.eval_every=500", "--config.eval_every_epochs=0"],
     {"eval_every": 500, "eval_every_epochs": 0.0}),
    ("digits_vit.py", ["--config.num_epochs=2.5", "--config.total_steps=0"],
     {"num_epochs": 2.5, "total_steps": 0}),
])
def test_command_line_switches_between_steps_and_epochs(recipe, overrides, expected):
  """Fields that may be None keep their type whatever value a recipe gives them,
  so the flags can set them (and unset them) either way."""
  from vit_spectral.training import config_checks  # noqa: PLC0415
  values = flags.FlagValues()
  argv = ["train.py", f"--config={ROOT}/configs/{recipe}", *overrides]
  config_flag = config_flags.DEFINE_config_file("config", None, flag_values=values,
                                                sys_argv=argv, lock_config=True)
  values(argv)
  config = config_flag.value
  assert {k: config[k] for k in expected} == expected
  run = run_settings(config)  # 0 unsets the other unit of the pair
  assert (run.eval_every, run.eval_every_epochs) == (500, None) or run.num_epochs == 2.5
  if recipe == "digits_vit.py":
    config_checks.validate_config(config)
