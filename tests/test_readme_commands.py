"""The commands the README, docs/*.md and the recipes' docstrings print run as printed:
each `python train.py ...`, `vit-spectral-train ...` and `launch/*.sh ... -- ...`
command's flags parse with the command line's own parser (`main`) and its
config builds: file, arguments and overrides loaded, every training section
checked (`sections.run.training_settings`), the durations in epochs turned
into steps with the data set's planned size (`input_pipeline.planned_meta`)
and the schedule checked against the run's length, and the model built. No
data, no compile. Each `vit-spectral-analyse ...` command parses with its own
parser, and a `--timm` name is one timm has."""

import ast
import dataclasses
import itertools
import re
import shlex

import pytest

from tests import markdown_docs
from vit_spectral import configs, main
from vit_spectral.data.input_pipeline import planned_meta
from vit_spectral.models.build import build_model
from vit_spectral.training import durations
from vit_spectral.training.optim import check_schedule_length
from vit_spectral.sections.run import training_settings

# What starts a command whose arguments are train.py's; a launcher's come after `--`.
TRAIN = re.compile(r"^(?:\S*python3?|vit-spectral-train)$")
LAUNCHER = re.compile(r"^launch/\w+\.sh$")
SHELL_OPERATORS = {"&&", "||", ";", "|", ">", "<", "do", "done"}


def _texts() -> list[tuple[str, str]]:
  """(where, text) of the fenced code blocks and inline code of README.md and
  docs/*.md, and of every recipe's module docstring."""
  texts = []
  for path in markdown_docs.paths():
    text = markdown_docs.read(path)
    texts += [(path, block) for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S)]
    # Inline code too, unless it holds a placeholder (`--config=...`, `ARGS`).
    texts += [(path, span) for span in re.findall(r"`([^`\n]+)`", text)
              if "..." not in span and not re.search(r"\b[A-Z]{3,}\b(?!=)", span)]
  for name in configs.recipe_names():
    with open(configs.recipe_path(name), encoding="utf-8") as f:
      texts.append((f"configs/{name}.py", ast.get_docstring(ast.parse(f.read())) or ""))
  return texts


def _expansions(text: str, line: str) -> list[str]:
  """`line` once per combination of the values of the `for VAR in ...; do`
  loops of `text` that it uses; any other $VAR becomes a directory /VAR."""
  loops = dict(re.findall(r"for (\w+) in ([^;]+);", text))
  used = [name for name in loops if re.search(rf"\${{?{name}\b", line)]
  lines = []
  for values in itertools.product(*(loops[name].split() for name in used)):
    expanded = line
    for name, value in zip(used, values):
      expanded = re.sub(rf"\${{?{name}}}?", value, expanded)
    lines.append(re.sub(r"\$\{?(\w+)\}?", r"/\1", expanded))
  return lines


def _train_args(tokens: list[str]) -> list[str] | None:
  """train.py's arguments in a shell command's tokens, or None if it runs no
  train.py."""
  for i, token in enumerate(tokens):
    if TRAIN.match(token) and token != "vit-spectral-train" and (
        i + 1 >= len(tokens) or not tokens[i + 1].endswith("train.py")):
      continue
    if TRAIN.match(token):
      start = i + 1 if token == "vit-spectral-train" else i + 2
    elif LAUNCHER.match(token) and "--" in tokens[i:]:
      start = tokens.index("--", i) + 1
    else:
      continue
    args = []
    for arg in tokens[start:]:
      if arg in SHELL_OPERATORS:
        break
      if arg != "...":  # "and the rest as above"
        args.append(arg)
    return args
  return None


def _commands() -> list[tuple[str, list[str]]]:
  found = []
  for where, text in _texts():
    joined = text.replace("\\\n", " ")
    for line in joined.splitlines():
      if "train.py" not in line and "vit-spectral-train" not in line and "launch/" not in line:
        continue
      for expanded in _expansions(joined, line):
        try:
          tokens = shlex.split(expanded.lstrip("!"), comments=True)
        except ValueError:  # not a shell line (prose)
          continue
        args = _train_args(tokens)
        if args is not None:
          found.append((where, args))
  return found


COMMANDS = _commands()


def test_the_commands_are_found():
  where = {w for w, _ in COMMANDS}
  assert len(COMMANDS) >= 25 and "README.md" in where and "configs/cifar100_eigen.py" in where
  assert ["--config=configs/cifar10_vit.py", "--config.input.data_dir=/data/tfds"] in [
      args for _, args in COMMANDS]


@pytest.mark.parametrize("where,args", COMMANDS, ids=[" ".join(a) or "(none)" for _, a in COMMANDS])
def test_a_printed_command_parses_and_its_config_builds(where, args):
  del where
  if main.wants_help(["train.py", *args]):  # answered before any parsing
    assert "--config.a.b=value" in main.help_text()
    return
  try:
    config = main.parse_command_line(["train.py", *args]).config.value
  except main.CommandLineError as e:
    pytest.fail(f"train.py {' '.join(args)}: {e}")
  sections = training_settings(config)
  # The split sizes do not depend on where the data lies (and gs:// is offline here).
  meta = planned_meta(dataclasses.replace(sections.input, data_dir=None))
  run, optim = durations.resolve(sections.run, sections.optim,
                                 batch_size=sections.input.batch_size,
                                 num_train_examples=meta.num_train_examples)
  check_schedule_length(optim, run.total_steps)
  build_model(config.model, num_classes=meta.num_classes)


def _analyse_commands() -> list[tuple[str, list[str]]]:
  """The arguments of each `vit-spectral-analyse ...` command the documents print."""
  found = []
  for where, text in _texts():
    for line in text.replace("\\\n", " ").splitlines():
      try:
        tokens = shlex.split(line, comments=True)
      except ValueError:
        continue
      if tokens[:1] == ["vit-spectral-analyse"] and len(tokens) > 1:  # not the bare name
        found.append((where, [t for t in tokens[1:] if t not in SHELL_OPERATORS]))
  return found


ANALYSE_COMMANDS = _analyse_commands()


def test_the_analyse_commands_are_found():
  assert len(ANALYSE_COMMANDS) >= 3, ANALYSE_COMMANDS


@pytest.mark.parametrize("where,args", ANALYSE_COMMANDS,
                         ids=[" ".join(a) for _, a in ANALYSE_COMMANDS])
def test_a_printed_analyse_command_parses(where, args):
  del where
  from vit_spectral import analyse  # noqa: PLC0415
  from vit_spectral.pretrained.timm_preprocessing import timm_preprocessing  # noqa: PLC0415
  try:
    parsed = analyse.parse_args(args)
  except SystemExit:
    pytest.fail(f"vit-spectral-analyse {' '.join(args)}: does not parse")
  if parsed.timm:
    timm_preprocessing(parsed.timm)  # a name timm has
