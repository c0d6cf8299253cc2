"""The command line answers `--print_config` and every config error before a
JAX backend starts and without the run's libraries (TensorFlow, optax, orbax,
clu: an import blocker fails the command if one is imported, and a started
backend is reported), with one line and no line but ours; every field is
settable, the attention's and the block's options included. The checks read
the live classes, the one declaration of each option (`config_checks.check_config`
converts the config once; a run reuses what it made)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from vit_spectral import main
from vit_spectral.models import build
from vit_spectral.sections.run import training_settings
from vit_spectral.training import config_checks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="")
HEAVY = ("optax", "orbax", "tensorflow", "tensorflow_datasets", "clu")

# Runs a script with an import hook that refuses the run's libraries (a command
# that needs one fails with "BLOCKED <name>"), writing "BACKEND STARTED" on
# stderr when a JAX backend is initialised.
_BLOCKER = textwrap.dedent("""
    import sys
    HEAVY = {heavy!r}

    class Blocker:
      def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HEAVY:
          raise ImportError("BLOCKED " + name)
        return None

    def no_backend(backend):
      sys.stderr.write("BACKEND STARTED\\n")

    from jax._src import xla_bridge
    xla_bridge.register_backend_initialization_hook(no_backend)
    sys.meta_path.insert(0, Blocker())
""").format(heavy=HEAVY)
_BLOCKED_RUN = _BLOCKER + textwrap.dedent("""
    sys.argv = ["train.py", *sys.argv[1:]]
    from vit_spectral import main
    main.run()
""")


def _command(*args, script=_BLOCKED_RUN):
  return subprocess.run([sys.executable, "-c", script, *args], cwd=ROOT, env=ENV,
                        capture_output=True, text=True, timeout=300, check=False)


# Mistakes that once passed `--print_config` and failed a run only once its
# backend had started (a width the heads do not divide, an option out of its
# range), or were ignored (a model name of another class than the recipe's).
_REFUSED_BEFORE_JAX = [
    (["--config.model.hidden_size=30", "--config.model.num_heads=4"],
     r"^error: model.hidden_size=30 is not divisible by model.num_heads=4$"),
    (["--config.model.attention.name=hopfield", "--config.model.attention.alpha=-3"],
     r"^error: model.attention.alpha=-3.0 must be in \[0, 1\]$"),
    (["--config.model.variant=Swin-T"],
     r"^error: --config.model.variant=Swin-T: Swin-T is a Swin and this recipe's model a ViT, "
     r".*start from a Swin recipe: --config=digits_swin, --config=imagenet_swin$"),
]


def test_print_config_starts_no_backend_and_prints_only_the_config():
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
def test_a_config_error_is_one_line_before_a_backend_starts(args, message):
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


# Bad model sections: each refused by the one conversion (`check_config`)
# with one line that names the field.
_BAD_MODELS = [
    (dict(variant="S/17"), r"^model.variant='S/17' is not a registered model name \(did you "
                           r"mean 'S/16'\?\)"),
    (dict(attention=dict(name="attnscale")), r"^model.attention.name='attnscale' is not a "
                                             r"registered attention variant"),
    (dict(attention=dict(name="attn_scale", scal=1.0)),
     r"^model.attention has unknown options \['scal'\]; AttnScaleAttention"),
    (dict(block=dict(featscale=True)), r"^model.block has unknown options \['featscale'\] "
                                       r"\(did you mean 'feat_scale'\?\)"),
    (dict(block=dict(block_order="lipsformer")), r"^model.block.block_order='lipsformer' needs "
                                                 r"model.block.residual_alpha"),
    (dict(block=dict(attention_residual="replace")),
     r"^model.block.attention_residual='replace' needs .*DotProductAttention has none"),
    (dict(block=dict(mlp_activation="gelu_tan")),
     r"^model.block.mlp_activation='gelu_tan' \(did you mean 'gelu_tanh'\?\)"),
    (dict(block=dict(extra_depthwise_branch=True)),
     r"^model.block.extra_depthwise_branch=True .* needs model.block.conv_block=True"),
    (dict(norm="layer_nrom"), r"^model.norm='layer_nrom' is not a registered norm \(did you "
                              r"mean 'layer_norm'\?\)"),
    (dict(kernel_init="xavier"), r"^model.kernel_init='xavier' is not a registered initializer"),
    (dict(dtype="bf16"), r"^model.dtype='bf16' \(did you mean 'bfloat16'\?\); choose one of"),
    (dict(encoder_mode="scanned"), r"^model.encoder_mode='scanned' \(did you mean 'scan'\?\)"),
    (dict(encoder_unroll=2, encoder_mode="loop"),
     r"^model.encoder_unroll=2 applies to model.encoder_mode='scan' only"),
    (dict(attention=dict(name="class_attention")),
     r"^model.attention.name='class_attention' updates the class token only"),
    (dict(mlp_dim=0), r"^model.mlp_dim=0 must be a positive integer$"),
    (dict(nonsense=1), r"^config.model has unknown options \['nonsense'\]; ViT accepts"),
    (dict(layer_overrides=({"start": 0, "stop": 1, "block": {"feat_scal": True}},)),
     r"^model.layer_overrides\[0\].block has unknown options \['feat_scal'\] \(did you mean "
     r"'feat_scale'\?\)"),
    (dict(layer_overrides=({"layers": "0-1"},)),
     r"^model.layer_overrides\[0\] has unknown keys \['layers'\]"),
    (dict(attention=dict(name="hopfield", alpha=-3.0)),
     r"^model.attention.alpha=-3.0 must be in \[0, 1\]$"),
    (dict(attention=dict(name="cosine", epsilon=0.0)),
     r"^model.attention.epsilon=0.0 must be in \(0, inf\)$"),
]


@pytest.mark.parametrize("changes,message", _BAD_MODELS, ids=str)
def test_a_bad_model_is_refused_with_one_line_naming_the_field(changes, message):
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
  with pytest.raises(ValueError) as refused:
    config_checks.check_config(config)
  assert len(str(refused.value).splitlines()) == 1
  assert __import__("re").search(message, str(refused.value)), str(refused.value)


def test_a_good_config_is_converted_once_and_handed_on_typed():
  from vit_spectral.configs import digits_swin  # pylint: disable=import-outside-toplevel
  config = digits_swin.get_config()
  settings = config_checks.check_config(config)
  assert isinstance(settings.model, build.ModelSpec)
  assert settings.model.model_class.__name__ == "Swin" and settings.config is config
  # Typed settings pass through: nothing is converted a second time.
  assert config_checks.check_config(settings) is settings
  # The spec holds what a run builds: the recipe's fields, the block's dtypes as dtypes.
  assert settings.model.fields["depths"] == tuple(config.model.depths)
  assert build.dtype_name(settings.model.fields["block"].dtype) == config.model.dtype


def test_the_model_section_names_the_nearest_option():
  with pytest.raises(ValueError, match=r"model.block has unknown options \['featscale'\] "
                     r"\(did you mean 'feat_scale'\?\)"):
    build.model_kwargs(dict(variant="Ti/16", block=dict(featscale=True)))


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
def test_the_model_class_checks_run_untraced_as_the_traced_init_does(recipe, changes):
  """`check_config` runs the class's own checks (`Backbone.check_options`, on
  the unbound module) on the input's image size; the run's abstract init
  (`validate_model`) runs the same method from inside the module, and fails
  with the same line."""
  import importlib  # pylint: disable=import-outside-toplevel
  config = importlib.import_module(f"vit_spectral.configs.{recipe}").get_config()
  model = config.model.to_dict()
  for key, value in changes.items():
    model[key] = dict(model[key], **value) if isinstance(value, dict) else value
  with config.unlocked():
    config.model = model
  with pytest.raises(ValueError) as quick:
    config_checks.check_config(config)
  sections = training_settings(config)   # the conversion alone passes
  with pytest.raises(ValueError) as traced:
    config_checks.validate_model(sections.model, sections.input.image_size,
                                 len(sections.input.mean))
  assert str(quick.value) == str(traced.value)


_EVERY_RECIPE = _BLOCKER + textwrap.dedent("""
    import json
    from vit_spectral import configs, main
    from vit_spectral.training import config_checks
    for name in configs.recipe_names():
      config = main.parse_command_line(["train.py", "--config=" + name]).config.value
      config_checks.check_config(config)
      json.loads(config.to_json_best_effort())
      print(name, flush=True)
""")


def test_every_recipe_prints_checked_before_a_backend_starts():
  """Each shipped recipe parsed, checked and printed as `--print_config`
  does, in one process with the run's libraries blocked."""
  from vit_spectral import configs  # pylint: disable=import-outside-toplevel
  result = _command(script=_EVERY_RECIPE)
  assert result.returncode == 0 and result.stderr == "", result.stderr[-2000:]
  assert result.stdout.split() == list(configs.recipe_names())


@pytest.mark.parametrize("args,message", _REFUSED_BEFORE_JAX, ids=str)
def test_a_run_refuses_what_print_config_refuses_before_a_backend_starts(args, message,
                                                                        tmp_path):
  result = _command("--config=digits_vit", *args, f"--workdir={tmp_path / 'run'}")
  assert result.returncode == main.USAGE_EXIT_CODE, result.stderr[-2000:]
  lines = result.stderr.splitlines()
  assert len(lines) == 1 and "BLOCKED" not in lines[0], lines
  assert __import__("re").search(message, lines[0]), lines[0]
  assert not (tmp_path / "run").exists()


def test_a_model_name_on_the_command_line_builds_that_model():
  def spec(*overrides):
    config = main.parse_command_line(["train.py", "--config=digits_vit", *overrides]).config.value
    return config_checks.check_config(config).model

  fields = spec("--config.model.variant=Ti/2").fields
  assert (fields["hidden_size"], fields["depth"], fields["patch_size"]) == (192, 12, 2)
  assert fields["block"].num_heads == 3
  # A field set on the same command line wins over the name's; the recipe's
  # block options stay.
  fields = spec("--config.model.variant=Ti/2", "--config.model.depth=3").fields
  assert (fields["hidden_size"], fields["depth"]) == (192, 3)
  # A name whose patches do not fit the recipe's images: refused, saying why.
  with pytest.raises(ValueError, match=r"^model.patch_size=16 does not divide the image size 8x8$"):
    spec("--config.model.variant=S/16")
