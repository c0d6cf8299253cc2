"""The command line answers `--print_config` and every config error without
JAX, Flax or TensorFlow (an import blocker fails the command if one is
imported), with one line and no line but ours; every field is settable, the
attention's and the block's options included; and the checks `--print_config`
makes (`config_checks.check_config`, from the catalogued facts) are the ones a
run makes (`run_settings.training_settings`, from the live registries)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from vit_spectral import main
from vit_spectral.models import build, model_settings
from vit_spectral.training import config_checks, run_settings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="")
HEAVY = ("jax", "jaxlib", "flax", "optax", "orbax", "tensorflow", "tensorflow_datasets")

# Runs train.py's command line with an import hook that refuses the heavy
# libraries: a command that needs one fails with "BLOCKED <name>".
_BLOCKED_RUN = textwrap.dedent("""
    import sys
    HEAVY = {heavy!r}

    class Blocker:
      def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HEAVY:
          raise ImportError("BLOCKED " + name)
        return None

    sys.meta_path.insert(0, Blocker())
    sys.argv = ["train.py", *sys.argv[1:]]
    from vit_spectral import main
    main.run()
""").format(heavy=HEAVY)


def _command(*args):
  return subprocess.run([sys.executable, "-c", _BLOCKED_RUN, *args], cwd=ROOT, env=ENV,
                        capture_output=True, text=True, timeout=120, check=False)


# Mistakes that once passed `--print_config` and failed a run only after JAX had
# loaded (a width the heads do not divide, an option out of its range), or
# were ignored (a model name of another class than the recipe's).
_REFUSED_BEFORE_JAX = [
    (["--config.model.hidden_size=30", "--config.model.num_heads=4"],
     r"^error: model.hidden_size=30 is not divisible by model.num_heads=4$"),
    (["--config.model.attention.name=hopfield", "--config.model.attention.alpha=-3"],
     r"^error: model.attention.alpha=-3.0 must be in \[0, 1\]$"),
    (["--config.model.variant=Swin-T"],
     r"^error: --config.model.variant=Swin-T: Swin-T is a Swin and this recipe's model a ViT, "
     r".*start from a Swin recipe: --config=digits_swin, --config=imagenet_swin$"),
]


def test_print_config_needs_no_heavy_library_and_prints_only_the_config():
  result = _command("--config=digits_vit", "--config.model.block.feat_scale=True",
                    "--config.model.attention.name=hopfield",
                    "--config.model.attention.alpha=0.25", "--print_config")
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stderr == ""
  printed = json.loads(result.stdout)
  assert printed["model"]["block"] == {"feat_scale": True}
  assert printed["model"]["attention"] == {"name": "hopfield", "alpha": 0.25}


@pytest.mark.parametrize("args,message", [
    (["--config.model.variant=S/17"],
     r"^error: model.variant='S/17' is not a registered model name \(did you mean 'S/16'\?\)"),
    (["--config.model.attention.name=attnscale"],
     r"^error: model.attention.name='attnscale' is not a registered attention variant "
     r"\(did you mean 'attn_scale'\?\); choose one of \[.*'hopfield'"),
    (["--config.model.block.featscale=True"],
     r"^error: --config.model.block.featscale: config.model.block has no field 'featscale' "
     r"\(did you mean 'feat_scale'\?\)"),
    (["--config.model.attention.name=hopfield", "--config.model.attention.alpah=0.5"],
     r"^error: --config.model.attention.alpah: .* \(did you mean 'alpha'\?\); its fields "
     r"\(name, and the options of HopfieldAttention\)"),
    (["--config.model.block.block_order=lipsformer"],
     r"^error: model.block.block_order='lipsformer' needs model.block.residual_alpha"),
    (["--config.model.dropout_rate=1.5"], r"^error: model.dropout_rate=1.5 must be in \[0, 1\)"),
    (["--config.optim.learnig_rate=1"], r"did you mean 'learning_rate'"),
    (["--config.optim.warmup_steps=5000"],
     r"^error: optim.warmup_steps=5000 plus optim.cooldown_steps=0 must be smaller"),
    *_REFUSED_BEFORE_JAX,
])
def test_a_config_error_is_one_line_without_a_heavy_library(args, message):
  result = _command("--config=digits_vit", *args, "--print_config")
  assert result.returncode == main.USAGE_EXIT_CODE, result.stderr[-2000:]
  assert result.stdout == ""
  lines = result.stderr.splitlines()
  assert len(lines) == 1, lines
  assert "BLOCKED" not in lines[0]
  assert __import__("re").search(message, lines[0]), lines[0]


@pytest.mark.parametrize("config,message", [
    ("digits_vit:sise=S", r"unknown config argument 'sise' \(did you mean 'size'\?\)"),
    ("digit_vit", r"no config file 'digit_vit' \(did you mean 'digits_vit'\?\)"),
])
def test_recipe_names_and_arguments_suggest_the_nearest(config, message):
  if config.startswith("digits_vit"):   # digits_vit has no `size`: cifar_recipes' does
    config = "cifar10_vit:sise=S"
  result = _command(f"--config={config}", "--print_config")
  assert result.returncode == main.USAGE_EXIT_CODE
  assert len(result.stderr.splitlines()) == 1
  assert __import__("re").search(message, result.stderr), result.stderr


def test_nested_options_are_set_with_their_types_and_reach_the_model():
  config = main.parse_command_line([
      "train.py", "--config=digits_vit", "--config.model.block.feat_scale=True",
      "--config.model.block.residual_alpha=0.5", "--config.model.attention.name=hopfield",
      "--config.model.attention.alpha=1", "--config.model.attention.talking_heads"]).config.value
  assert config.model.attention.alpha == 1.0 and isinstance(config.model.attention.alpha, float)
  assert config.model.attention.talking_heads is True
  fields = build.model_kwargs(config.model)
  assert fields["block"].feat_scale and fields["block"].residual_alpha == 0.5
  assert fields["block"].attention == "hopfield"
  assert fields["block"].attention_kwargs == {"alpha": 1.0, "talking_heads": True}
  # The option's type is read from the registry's facts: a float for alpha.
  with pytest.raises(main.CommandLineError, match=r"takes a float, not 'big'"):
    main.parse_command_line(["train.py", "--config=digits_vit",
                             "--config.model.attention.name=hopfield",
                             "--config.model.attention.alpha=big"])


# Bad model sections: the command line's checks (catalogued facts) and a run's
# (live registries) must reject each with the same message.
_BAD_MODELS = [
    dict(variant="S/17"),
    dict(attention=dict(name="attnscale")),
    dict(attention=dict(name="attn_scale", scal=1.0)),
    dict(block=dict(featscale=True)),
    dict(block=dict(block_order="lipsformer")),
    dict(block=dict(attention_residual="replace")),
    dict(block=dict(mlp_activation="gelu_tan")),
    dict(block=dict(extra_depthwise_branch=True)),
    dict(norm="layer_nrom"),
    dict(kernel_init="xavier"),
    dict(dtype="bf16"),
    dict(encoder_mode="scanned"),
    dict(encoder_unroll=2, encoder_mode="loop"),
    dict(attention=dict(name="class_attention")),
    dict(mlp_dim=0),
    dict(nonsense=1),
    dict(layer_overrides=({"layers": "0-1", "block": {"feat_scal": True}},)),
    dict(attention=dict(name="hopfield", alpha=-3.0)),
    dict(attention=dict(name="cosine", epsilon=0.0)),
]


@pytest.mark.parametrize("changes", _BAD_MODELS, ids=str)
def test_print_config_and_a_run_reject_a_bad_model_alike(changes):
  from vit_spectral.configs import digits_vit  # pylint: disable=import-outside-toplevel
  config = digits_vit.get_config()
  model = config.model.to_dict()
  for key, value in changes.items():
    if isinstance(value, dict) and key in model:
      model[key] = dict(model[key], **value)
    else:
      model[key] = value
  with config.unlocked():
    config.model = model
  with pytest.raises(ValueError) as quick:
    config_checks.check_config(config)
  with pytest.raises(ValueError) as live:
    run_settings.training_settings(config)
  assert str(quick.value) == str(live.value)


def test_a_good_config_passes_both_and_the_plan_matches_the_specs():
  from vit_spectral.configs import digits_swin  # pylint: disable=import-outside-toplevel
  config = digits_swin.get_config()
  plan = config_checks.check_config(config).model
  spec = run_settings.training_settings(config).model
  assert plan.class_name == spec.model_class.__name__
  assert dict(plan.model) == {k: v for k, v in spec.fields.items()
                              if k not in ("block", "encoder")}
  assert plan.encoder == spec.fields["encoder"]
  block = spec.fields["block"].as_dict()
  for field in spec.fields["block"].SET_BY_RUN:   # the run's (its backend), not the config's
    assert block.pop(field) is None
  for field in ("dtype", "param_dtype"):
    block[field] = build.dtype_name(block[field])
  assert dict(plan.block) == block


def test_the_model_section_names_the_nearest_option():
  with pytest.raises(ValueError, match=r"model.block has unknown options \['featscale'\] "
                     r"\(did you mean 'feat_scale'\?\)"):
    model_settings.model_plan(dict(variant="Ti/16", block=dict(featscale=True)))


@pytest.mark.parametrize("recipe,changes", [
    ("digits_vit", dict(patch_size=3)),
    ("digits_vit", dict(pooling="max")),
    ("digits_vit", dict(posemb="sincos", )),
    ("digits_vit", dict(distilled=True, pooling="mean")),
    ("digits_swin", dict(window_size=3)),
    ("digits_swin", dict(attention=dict(name="hopfield"))),
    ("digits_swin", dict(merge="concat")),
    ("digits_cswin", dict(stripe_widths=(3, 3))),
    ("digits_cait", dict(class_attention="dot_product")),
    ("digits_vit", dict(hidden_size=30, num_heads=4)),
    ("digits_vit", dict(attention=dict(head_dim=8, full_width_heads=True))),
    ("digits_swin", dict(embed_dim=30, num_heads=(4, 4))),
    ("digits_cswin", dict(hidden_size=30, num_heads=(4, 4))),
], ids=str)
def test_the_model_class_checks_run_without_jax_as_the_traced_init_does(recipe, changes):
  """`check_config` runs the class's own checks (`models.model_checks`) on the
  input's image size; the run's abstract init (`validate_model`) runs the
  same functions from inside the module, and fails with the same line."""
  import importlib  # pylint: disable=import-outside-toplevel
  config = importlib.import_module(f"vit_spectral.configs.{recipe}").get_config()
  model = config.model.to_dict()
  for key, value in changes.items():
    model[key] = dict(model[key], **value) if isinstance(value, dict) else value
  with config.unlocked():
    config.model = model
  with pytest.raises(ValueError) as quick:
    config_checks.check_config(config)
  sections = run_settings.training_settings(config)
  with pytest.raises(ValueError) as traced:
    config_checks.validate_model(sections.model, sections.input.image_size,
                                 len(sections.input.mean))
  assert str(quick.value) == str(traced.value)


def test_every_recipe_prints_checked_without_a_heavy_library():
  """Each shipped recipe's --print_config, in one process per recipe, with the
  heavy libraries blocked."""
  from vit_spectral import configs  # pylint: disable=import-outside-toplevel
  failed = {}
  for name in configs.recipe_names():
    result = _command(f"--config={name}", "--print_config")
    if result.returncode or result.stderr:
      failed[name] = result.stderr.strip().splitlines()[-1:]
    else:
      json.loads(result.stdout)
  assert not failed, failed


@pytest.mark.parametrize("args,message", _REFUSED_BEFORE_JAX, ids=str)
def test_a_run_refuses_what_print_config_refuses_before_jax_loads(args, message, tmp_path):
  result = _command("--config=digits_vit", *args, f"--workdir={tmp_path / 'run'}")
  assert result.returncode == main.USAGE_EXIT_CODE, result.stderr[-2000:]
  lines = result.stderr.splitlines()
  assert len(lines) == 1 and "BLOCKED" not in lines[0], lines
  assert __import__("re").search(message, lines[0]), lines[0]
  assert not (tmp_path / "run").exists()


def test_a_model_name_on_the_command_line_builds_that_model():
  def plan(*overrides):
    config = main.parse_command_line(["train.py", "--config=digits_vit", *overrides]).config.value
    return config_checks.check_config(config).model, run_settings.training_settings(config).model

  quick, live = plan("--config.model.variant=Ti/2")
  assert quick.model["hidden_size"] == live.fields["hidden_size"] == 192
  assert quick.model["depth"] == live.fields["depth"] == 12
  assert quick.block["num_heads"] == live.fields["block"].num_heads == 3
  assert quick.model["patch_size"] == 2
  # A field set on the same command line wins over the name's; the recipe's
  # block options stay.
  quick, live = plan("--config.model.variant=Ti/2", "--config.model.depth=3")
  assert quick.model["depth"] == live.fields["depth"] == 3
  assert quick.model["hidden_size"] == 192
  # A name whose patches do not fit the recipe's images: refused, saying why.
  with pytest.raises(ValueError, match=r"^model.patch_size=16 does not divide the image size 8x8$"):
    plan("--config.model.variant=S/16")
