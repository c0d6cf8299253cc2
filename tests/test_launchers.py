"""launch/tpu_pod.sh against a fake `gcloud` on PATH, and both launchers' --print_only.

The fake gcloud records each call's argv (and, for `scp`, the archive's file
names). The train command sent over ssh is then run here by bash, in a fake
home whose venv python records its argv: the quoting is checked by what
train.py would receive, not by reading the string.
"""

import json
import os
import re
import shlex
import subprocess
import sys
import tarfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TPU_POD = os.path.join(ROOT, "launch", "tpu_pod.sh")
GPU_HOST = os.path.join(ROOT, "launch", "gpu_host.sh")
# Arguments a shell would mangle: spaces, quotes, $(...), a glob, an empty one.
TRICKY_ARGS = ["--config=digits_vit:steps=3", "--workdir=gs://bucket/run one",
               "--config.model.name=it's $(touch pwned) *", ""]

FAKE_GCLOUD = """#!{python}
import json, os, sys, tarfile
call = {{"argv": sys.argv[1:]}}
if "describe" in sys.argv:
  print(os.environ.get("FAKE_ACCELERATOR_TYPE", ""))
if "--worker=0" in sys.argv:     # the dry run on worker 0
  code = int(os.environ.get("FAKE_DRY_RUN_EXIT", "0"))
  if code:
    print("error: --target=v4-8: the train step does not fit in HBM", file=sys.stderr)
    with open(os.environ["FAKE_GCLOUD_LOG"], "a") as log:
      log.write(json.dumps(call) + "\\n")
    sys.exit(code)
if "scp" in sys.argv:
  with tarfile.open(sys.argv[sys.argv.index("scp") + 1]) as archive:
    call["archive"] = archive.getnames()
with open(os.environ["FAKE_GCLOUD_LOG"], "a") as log:
  log.write(json.dumps(call) + "\\n")
if "--worker=all" in sys.argv and any(a.startswith("--command=") and "train.py" in a
                                      for a in sys.argv):  # the workers' training
  codes = [int(c) for c in os.environ.get("FAKE_WORKER_EXITS", "0").split(",")]
  with open(os.environ["FAKE_GCLOUD_LOG"]) as log:
    runs = sum("train.py --distributed" in line for line in log)
  sys.exit(codes[runs - 1] if runs <= len(codes) else 0)
"""

RECORDING_PYTHON = """#!{python}
import json, sys
with open({record!r}, "w") as f:
  json.dump(sys.argv[1:], f)
print("training output")
"""


@pytest.fixture()
def fake_gcloud(tmp_path):
  """(environment with the fake gcloud first on PATH, its call log path)."""
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir()
  gcloud = bin_dir / "gcloud"
  gcloud.write_text(FAKE_GCLOUD.format(python=sys.executable))
  gcloud.chmod(0o755)
  log = tmp_path / "gcloud_calls.jsonl"
  env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
             FAKE_GCLOUD_LOG=str(log), FAKE_ACCELERATOR_TYPE="v4-8")
  return env, log


def launch(script, args, env=None):
  return subprocess.run(["bash", script, *args], capture_output=True, text=True,
                        env=env, check=False, timeout=60)


def gcloud_calls(log):
  return [json.loads(line) for line in log.read_text().splitlines()]


def command_of(argv):
  """The --command=... value of a recorded `gcloud ... ssh` call."""
  commands = [a[len("--command="):] for a in argv if a.startswith("--command=")]
  assert len(commands) == 1, argv
  return commands[0]


def test_tpu_setup_ships_checkout_and_installs_tpu_extra_once(fake_gcloud):
  env, log = fake_gcloud
  result = launch(TPU_POD, ["--tpu=pod", "--zone=us-central2-b", "--project=proj",
                            "--setup", "--", "--config=digits_vit"], env)
  assert result.returncode == 0, result.stderr
  scp, setup, describe, dry_run, train = gcloud_calls(log)
  assert describe["argv"][:5] == ["compute", "tpus", "tpu-vm", "describe", "pod"]
  assert "--worker=0" in dry_run["argv"]
  assert "--target=v4-8" in command_of(dry_run["argv"])
  common = ["--worker=all", "--zone=us-central2-b", "--project=proj"]

  assert scp["argv"][:4] == ["compute", "tpus", "tpu-vm", "scp"]
  assert scp["argv"][5:] == ["pod:/tmp/vit_spectral.tar.gz", *common]
  shipped = {name.removeprefix("./") for name in scp["archive"]}
  assert {"train.py", "constraints.txt", "pyproject.toml",
          "vit_spectral/configs/digits_vit.py"} <= shipped
  assert not any(name == ".git" or name.startswith(".git/") for name in shipped)

  assert setup["argv"][:6] == ["compute", "tpus", "tpu-vm", "ssh", "pod", *common[:1]]
  assert all(flag in setup["argv"] for flag in common)
  lines = [shlex.split(line) for line in command_of(setup["argv"]).splitlines()]
  venv_at = [i for i, words in enumerate(lines) if words[:4] == ["python3", "-m", "uv", "venv"]]
  assert len(venv_at) == 1, lines
  venv_line = lines[venv_at[0]]
  assert venv_line[4:] == ["--python", "3.11", "--seed", "--allow-existing", ".venv"]
  installs = [(i, words) for i, words in enumerate(lines)
              if "install" in words and words[0] == ".venv/bin/python"]
  assert len(installs) == 1, lines
  install_at, install = installs[0]
  assert install_at > venv_at[0]
  assert install[1:4] == ["-m", "pip", "install"]
  assert install[install.index("-c") + 1] == "constraints.txt"
  assert install[-2:] == ["-e", ".[tpu]"]
  assert "python3 train.py" not in command_of(train["argv"])


def test_tpu_train_command_runs_venv_python_with_arguments_intact(fake_gcloud, tmp_path):
  env, log = fake_gcloud
  result = launch(TPU_POD, ["--tpu=pod", "--zone=z", "--no_dry_run", "--", *TRICKY_ARGS], env)
  assert result.returncode == 0, result.stderr
  (train,) = gcloud_calls(log)
  assert train["argv"][:5] == ["compute", "tpus", "tpu-vm", "ssh", "pod"]
  assert "--worker=all" in train["argv"] and "--zone=z" in train["argv"]

  # Play the worker: its home holds the checkout with a venv python that
  # records the arguments it receives.
  home = tmp_path / "home"
  venv_bin = home / "vit_spectral" / ".venv" / "bin"
  venv_bin.mkdir(parents=True)
  record = tmp_path / "train_argv.json"
  (venv_bin / "python").write_text(RECORDING_PYTHON.format(python=sys.executable,
                                                           record=str(record)))
  (venv_bin / "python").chmod(0o755)
  worker = subprocess.run(["bash", "-c", command_of(train["argv"])], cwd=home,
                          capture_output=True, text=True, check=False, timeout=60)
  assert worker.returncode == 0, worker.stderr
  assert json.loads(record.read_text()) == ["train.py", "--distributed", *TRICKY_ARGS]
  assert (home / "vit_spectral" / "train.log").read_text() == "training output\n"
  assert not (home / "pwned").exists() and not (home / "vit_spectral" / "pwned").exists()


def test_tpu_print_only_prints_every_command_and_runs_no_gcloud(fake_gcloud):
  env, log = fake_gcloud
  result = launch(TPU_POD, ["--tpu=pod", "--zone=z", "--setup", "--print_only", "--",
                            "--config=digits_vit"], env)
  assert result.returncode == 0, result.stderr
  assert not log.exists()
  lines = result.stdout.splitlines()
  assert [line.split()[0] for line in lines] == ["mkdir", "tar"] + ["gcloud"] * 5
  assert lines[1].split("-czf ")[1].startswith(lines[0].split()[-1])  # tar into that folder
  assert [line.split()[4] for line in lines[2:]] == ["scp", "ssh", "describe", "ssh", "ssh"]
  assert "uv venv --python 3.11 --seed" in lines[3]
  dry_run = shlex.split(lines[5])[-1]
  assert dry_run.endswith("train.py --dry_run --target=$ACCELERATOR_TYPE --config=digits_vit")
  assert ".venv/bin/python train.py --distributed --config=digits_vit" in lines[6]


def test_tpu_dry_run_that_fails_stops_the_launch_before_the_workers(fake_gcloud, tmp_path):
  env, log = fake_gcloud
  env = dict(env, FAKE_DRY_RUN_EXIT="1")
  result = launch(TPU_POD, ["--tpu=pod", "--zone=z", "--accelerator_type=v4-8", "--",
                            "--config=imagenet_deit:batch=16384"], env)
  assert result.returncode == 1
  assert "workers were not started" in result.stderr
  (dry_run,) = gcloud_calls(log)      # no describe (the type was given), no train
  assert "--worker=0" in dry_run["argv"]
  command = command_of(dry_run["argv"])
  assert command.startswith("cd vit_spectral && JAX_PLATFORMS=cpu .venv/bin/python train.py "
                            "--dry_run --target=v4-8 --config=imagenet_deit:batch=16384")


def test_tpu_dry_run_that_fits_starts_the_workers(fake_gcloud):
  env, log = fake_gcloud
  result = launch(TPU_POD, ["--tpu=pod", "--zone=z", "--", "--config=imagenet_deit"], env)
  assert result.returncode == 0, result.stderr
  describe, dry_run, train = gcloud_calls(log)
  assert "describe" in describe["argv"] and "--target=v4-8" in command_of(dry_run["argv"])
  assert "--worker=all" in train["argv"]


def test_tpu_without_an_accelerator_type_says_what_to_pass(fake_gcloud):
  env, _ = fake_gcloud
  result = launch(TPU_POD, ["--tpu=pod", "--zone=z", "--", "--config=imagenet_deit"],
                  dict(env, FAKE_ACCELERATOR_TYPE=""))
  assert result.returncode == 2 and "--accelerator_type" in result.stderr


def test_gpu_host_print_only_makes_venv_and_installs_cuda12_extra_once(tmp_path):
  result = launch(GPU_HOST, ["--setup", "--gpus=0,1", "--print_only", "--",
                             "--config=digits_vit", "--workdir=work dir/c100"])
  assert result.returncode == 0, result.stderr
  venv = os.path.join(ROOT, ".venv")
  lines = [shlex.split(line) for line in result.stdout.splitlines()]
  assert ["python3", "-m", "uv", "venv", "--python", "3.11", "--seed",
          "--allow-existing", venv] in lines
  installs = [words for words in lines if "install" in words and words[0].startswith(venv)]
  assert installs == [[f"{venv}/bin/python", "-m", "pip", "install", "--quiet", "-c",
                       os.path.join(ROOT, "constraints.txt"), "-e", f"{ROOT}[cuda12]"]]
  assert ["export", "CUDA_VISIBLE_DEVICES=0,1"] in lines
  assert lines[-1] == [f"{venv}/bin/python", os.path.join(ROOT, "train.py"),
                       "--config=digits_vit", "--workdir=work dir/c100"]


def test_gpu_host_without_setup_or_venv_says_to_run_setup(tmp_path):
  result = launch(GPU_HOST, [f"--venv={tmp_path}/no_venv", "--", "--config=digits_vit"])
  assert result.returncode == 2
  assert "--setup" in result.stderr


@pytest.mark.parametrize("script", [TPU_POD, GPU_HOST])
def test_launchers_reject_unknown_options_pointing_at_help(script):
  result = launch(script, ["--tpu=pod", "--zone=z", "--bogus"]
                  if script == TPU_POD else ["--bogus"])
  assert result.returncode == 2
  (line,) = result.stderr.splitlines()
  name = os.path.relpath(script, ROOT)
  assert line.startswith(f"{name}: unknown option --bogus ({name} --help lists the options")


def test_tpu_pod_without_tpu_or_zone_points_at_help():
  result = launch(TPU_POD, ["--tpu=pod", "--", "--config=digits_vit"])
  assert result.returncode == 2
  assert result.stderr.splitlines() == [
      "launch/tpu_pod.sh: --tpu=NAME and --zone=ZONE are required (launch/tpu_pod.sh "
      "--help prints the usage)"]


def _parsed_options(script: str) -> list[str]:
  """The options the launcher's argument loop accepts (its `case` patterns)."""
  with open(script, encoding="utf-8") as f:
    text = f.read()
  loop = text[text.index("while [[ $# -gt 0 ]]"):]
  loop = loop[:loop.index("esac")]
  return re.findall(r"^ +(--[a-z_]+)(?:=\*)?\)", loop, re.MULTILINE)


def _help_entries(help_text: str) -> dict[str, str]:
  """{option: its whole entry} of the help's "Options:" section (an entry is
  its "  --name..." line and the indented lines that continue it)."""
  section = help_text.split("\nOptions:\n", 1)[1].split("\n\n", 1)[0]
  entries, name = {}, None
  for line in section.splitlines():
    if re.match(r"^  -", line):
      name = re.match(r"^  (-[-\w]+)", line)[1]
      entries[name] = line
    else:
      entries[name] += " " + line.strip()
  return {name: " ".join(entry.split()) for name, entry in entries.items()}


def _defaults(script: str) -> dict[str, str]:
  """The launcher's variables as first set (NAME="value" or NAME=value)."""
  with open(script, encoding="utf-8") as f:
    text = f.read()
  first = text[:text.index("usage()")]
  return dict(re.findall(r'\b([A-Z_]+)="?([^" \n]*)"?', first))


@pytest.mark.parametrize("script", [TPU_POD, GPU_HOST])
def test_help_prints_usage_every_option_with_its_default_and_an_example(script, fake_gcloud):
  env, log = fake_gcloud
  name = os.path.relpath(script, ROOT)
  for args in (["--help"], ["-h"], ["--print_only", "--bogus", "--help", "--", "x"]):
    result = launch(script, args, env)
    assert result.returncode == 0 and result.stderr == "", (args, result.stderr)
    assert result.stdout.startswith(f"Usage: {name} "), args
  assert not log.exists()  # no gcloud call
  entries = _help_entries(result.stdout)
  options = _parsed_options(script)
  assert len(options) >= 6 and set(entries) == {*options, "-h"}, (options, entries)
  for option, entry in entries.items():
    if option != "-h":
      assert re.search(r"\((default: [^)]+|required)\)$", entry), entry
  defaults = _defaults(script)
  for option, variable in (("--python", "PYTHON"), ("--venv", "VENV"),
                           ("--max_restarts", "MAX_RESTARTS")):
    assert entries[option].endswith(f"(default: {defaults[variable]})"), entries[option]
  if script == TPU_POD:
    assert entries["--repo_dir"].endswith("(default: vit_spectral)")
    assert entries["--tpu"].endswith("(required)") and entries["--zone"].endswith("(required)")


@pytest.mark.parametrize("script", [TPU_POD, GPU_HOST])
def test_the_help_example_runs_with_print_only(script, fake_gcloud):
  env, log = fake_gcloud
  help_text = launch(script, ["--help"]).stdout
  example = help_text.split("\nExample:\n", 1)[1].split("\n\n", 1)[0]
  words = shlex.split(example.replace("\\\n", " "))
  assert words[0] == os.path.relpath(script, ROOT)
  at = words.index("--")
  result = launch(script, [*words[1:at], "--print_only", *words[at:]], env)
  assert result.returncode == 0, result.stderr
  assert not log.exists()
  # The training command, last, holds TRAIN_ARGS (gpu_host: as its arguments;
  # tpu_pod: in the command sent to the workers).
  assert " ".join(words[at + 1:]) in " ".join(shlex.split(result.stdout.splitlines()[-1]))


def test_help_after_the_separator_is_train_pys():
  result = launch(GPU_HOST, ["--print_only", "--", "--help"])
  assert result.returncode == 0, result.stderr
  assert result.stdout.splitlines()[-1].endswith("train.py --help")


# A venv python standing in for train.py: the `import jax` check passes; each
# training run appends its argv to a file and exits with the next code of
# FAKE_EXIT_CODES (then 0).
STOPPING_PYTHON = """#!{python}
import json, os, sys
if sys.argv[1] == "-c":
  sys.exit(0)
with open(os.environ["FAKE_RUNS"], "a") as f:
  f.write(json.dumps(sys.argv[1:]) + "\\n")
runs = len(open(os.environ["FAKE_RUNS"]).read().splitlines())
codes = [int(c) for c in os.environ["FAKE_EXIT_CODES"].split(",")]
sys.exit(codes[runs - 1] if runs <= len(codes) else 0)
"""


@pytest.mark.parametrize("codes, max_restarts, runs, final", [
    ("75,75", 10, 3, 0),     # stopped twice by SIGTERM, resumed twice, finished
    ("75,75,75", 2, 3, 75),  # restarts used up: the launcher exits 75
    ("1", 10, 1, 1),         # a failure is not rerun
])
def test_gpu_host_reruns_train_py_while_it_exits_75(tmp_path, codes, max_restarts, runs, final):
  venv = tmp_path / "venv"
  (venv / "bin").mkdir(parents=True)
  python = venv / "bin" / "python"
  python.write_text(STOPPING_PYTHON.format(python=sys.executable))
  python.chmod(0o755)
  record = tmp_path / "runs.jsonl"
  result = launch(GPU_HOST, [f"--venv={venv}", f"--max_restarts={max_restarts}", "--",
                             "--config=digits_vit", "--workdir=w"],
                  dict(os.environ, FAKE_RUNS=str(record), FAKE_EXIT_CODES=codes))
  assert result.returncode == final, result.stderr
  argvs = [json.loads(line) for line in record.read_text().splitlines()]
  assert argvs == [[os.path.join(ROOT, "train.py"), "--config=digits_vit", "--workdir=w"]] * runs
  assert result.stderr.count("rerunning the same command to resume") == min(
      runs - 1, max_restarts)


def test_tpu_pod_reruns_the_workers_while_they_exit_75(fake_gcloud):
  env, log = fake_gcloud
  result = launch(TPU_POD, ["--tpu=pod", "--zone=z", "--no_dry_run", "--max_restarts=3", "--",
                            "--config=digits_vit"], dict(env, FAKE_WORKER_EXITS="75,0"))
  assert result.returncode == 0, result.stderr
  trains = [c for c in gcloud_calls(log) if "--worker=all" in c["argv"]]
  assert len(trains) == 2 and trains[0] == trains[1]
  assert "tee -a" in command_of(trains[0]["argv"])  # the rerun appends to the log
  assert "restart 1 of at most 3" in result.stderr
