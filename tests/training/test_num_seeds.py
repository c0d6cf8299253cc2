"""config.num_seeds: K seeds in one program equal K separate runs (params and
final metrics), resume losing nothing, and the one-line refusals."""

import json

import jax
import numpy as np
import pytest

from tests.training.run_control import assert_trees_equal, stop_at
from vit_spectral import errors
from vit_spectral.configs import digits_vit
from vit_spectral.durability import checkpointing, preemption
from vit_spectral.planning import dry_run
from vit_spectral.training import config_checks, replicas, robustness, trainer

SEED, K, STEPS = 3, 2, 6


def tiny_config(**over):
  config = digits_vit.get_config(f"depth=1,width=16,heads=2,steps={STEPS}")
  config.log_every = 3
  config.eval_every = config.checkpoint_every = STEPS
  config.optim.warmup_steps = 1
  config.seed = SEED
  # Every per-seed random stream in play: dropout (the recipe's 0.1), Mixup/CutMix, EMA.
  config.mixup.mixup_alpha = 0.8
  config.mixup.cutmix_alpha = 1.0
  config.ema_decay = 0.9
  for key, value in over.items():
    config[key] = value
  return config


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """K seeds in one run, and each seed in a run of its own."""
  root = tmp_path_factory.mktemp("num_seeds")
  together = str(root / "together")
  metrics = trainer.train_and_evaluate(tiny_config(num_seeds=K), together)
  alone = {}
  for seed in range(SEED, SEED + K):
    workdir = str(root / f"seed{seed}")
    alone[seed] = (workdir, trainer.train_and_evaluate(tiny_config(seed=seed), workdir))
  return together, metrics, alone


def test_seeds_in_one_program_equal_separate_runs(runs):
  together, metrics, alone = runs
  state, step = checkpointing.latest_state(together)
  assert step == STEPS
  final = json.loads(open(f"{together}/final_metrics.json").read())
  assert final["seeds"] == [SEED, SEED + 1] and final["step"] == STEPS
  for i, (workdir, seed_metrics) in enumerate(alone.values()):
    seed_state, _ = checkpointing.latest_state(workdir)
    # atol: the key projection's bias has a gradient of exactly 0 in exact
    # arithmetic (softmax ignores a shift shared by all keys); Adam scales its
    # float noise (~1e-11) to steps of ~1e-6, which differ between programs.
    # Every other parameter agrees to ~1e-7; one step moves them ~2e-3.
    for key in ("params", "ema_params"):
      jax.tree_util.tree_map(
          lambda a, b: np.testing.assert_allclose(a[i], b, rtol=1e-4, atol=1e-4),
          state[key], seed_state[key])
    assert set(seed_metrics) == set(metrics) == {"eval_loss", "eval_accuracy",
                                                 "eval_ema_loss", "eval_ema_accuracy"}
    for name, value in seed_metrics.items():
      assert len(metrics[name]) == K
      np.testing.assert_allclose(metrics[name][i], value, rtol=1e-5)
      np.testing.assert_allclose(final[name][i], value, rtol=1e-5)
  # The seeds differ: a program that gave every replica one seed's stream would not.
  assert not np.allclose(metrics["eval_loss"][0], metrics["eval_loss"][1])


def test_a_stopped_run_resumes_and_loses_nothing(runs, tmp_path, monkeypatch):
  together, _, _ = runs
  workdir = str(tmp_path)
  with monkeypatch.context() as patch:
    patch.setattr(preemption.StopSignals, "should_stop", stop_at(4))
    with pytest.raises(errors.RunPreempted):
      trainer.train_and_evaluate(tiny_config(num_seeds=K), workdir)
  assert checkpointing.saved_steps(f"{workdir}/checkpoints")[-1] == 4
  trainer.train_and_evaluate(tiny_config(num_seeds=K), workdir)
  assert_trees_equal(checkpointing.latest_state(workdir)[0],
                     checkpointing.latest_state(together)[0])


def test_resume_with_another_num_seeds_is_one_line(runs):
  together, _, _ = runs
  with pytest.raises(errors.ConfigMismatchError,
                     match=r"config.num_seeds=3, but this workdir trains 2 seed\(s\)"):
    trainer.train_and_evaluate(tiny_config(num_seeds=3), together)


@pytest.mark.parametrize("over, field", [
    (dict(num_seeds=0), r"config.num_seeds=0 must be an int >= 1"),
    (dict(on_nonfinite="rollback"), r"num_seeds=2 cannot be combined with "
                                    r"config.on_nonfinite='rollback'"),
    (dict(diagnostics=dict(every=2)), r"num_seeds=2 cannot be combined with diagnostics.every=2"),
    (dict(init_from=dict(path="w.npz")), r"num_seeds=2 cannot be combined with init_from.path"),
])
def test_what_num_seeds_refuses_is_one_line(over, field):
  config = tiny_config(num_seeds=2)
  for key, value in over.items():
    if isinstance(value, dict):
      config[key].update(value)
    else:
      config[key] = value
  with pytest.raises(ValueError, match=field) as raised:
    config_checks.check_config(config)
  assert "\n" not in str(raised.value)


def test_a_nonfinite_loss_names_its_seed():
  with pytest.raises(trainer.NonFiniteLossError, match=r"loss of seed 8 is nan .* at step 5"):
    trainer._check_finite(5, (np.array([1.0, np.nan]), np.array([1.0, 1.0])), 3, (7, 8))


def test_dry_run_compiles_the_replica_axis():
  one, many = (dry_run.plan(tiny_config(num_seeds=k)) for k in (1, 4))
  assert many.num_params == one.num_params
  assert many.batch["image"].shape == (4, *one.batch["image"].shape)
  leaf = jax.tree_util.tree_leaves(many.state.params)[0]
  assert leaf.shape[0] == 4 and leaf.sharding.spec[0] is None
  many.lower()


def test_corruption_metrics_are_summarised_per_seed():
  accuracies = {("noise", 1): [0.9, 0.5], ("blur", 1): [0.7, 0.3], ("noise", 2): [0.4, 0.1]}
  got = replicas.per_seed(robustness.summarize, accuracies)
  for i in range(2):
    alone = robustness.summarize({k: v[i] for k, v in accuracies.items()})
    assert {k: v[i] for k, v in got.items()} == alone
  assert replicas.per_seed(robustness.summarize, {("noise", 1): 0.9}) == robustness.summarize(
      {("noise", 1): 0.9})


def test_a_metric_writer_gets_one_scalar_per_seed():
  assert replicas.scalars({"eval_loss": [1.0, 2.0], "lr": 0.1}, (3, 4)) == {
      "eval_loss_seed3": 1.0, "eval_loss_seed4": 2.0, "lr": 0.1}
