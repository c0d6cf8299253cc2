# Setup (the same first code cell in every notebook; scripts/run_notebooks.py writes it
# in, with REPO_URL from pyproject.toml's [project.urls]). Inside a checkout of
# vit_spectral it uses that checkout; in a fresh Colab runtime it clones REPO_URL and
# installs it. No runtime restart: the checkout goes first on sys.path. TensorFlow (the
# input pipeline) is imported without its start-up lines and kept off the accelerators,
# which JAX uses.
REPO_URL = "https://github.com/vit-spectral/vit_spectral"

import os, pathlib, subprocess, sys


def _checkout_around(path):
  for root in (path, *path.parents):
    if (root / "pyproject.toml").is_file() and (root / "vit_spectral" / "__init__.py").is_file():
      return root
  return None


ROOT = _checkout_around(pathlib.Path.cwd().resolve())
SOURCE = "the checkout around this notebook"
if ROOT is None:
  ROOT = pathlib.Path("/content/vit_spectral" if "google.colab" in sys.modules
                      else pathlib.Path.home() / "vit_spectral")
  SOURCE = f"a clone of {REPO_URL}"
  if not ROOT.exists():
    cloned = subprocess.run(["git", "clone", "--depth=1", REPO_URL, str(ROOT)],
                            capture_output=True, text=True)
    if cloned.returncode != 0:
      raise SystemExit(
          f"Could not clone {REPO_URL}: {(cloned.stderr.strip().splitlines() or ['git failed'])[-1]}\n"
          "Without the network, or if the repository has moved: upload a checkout of "
          f"vit_spectral to {ROOT} (or open this notebook from inside one) and run this "
          "cell again; or set REPO_URL above to where the repository now lives.")
  subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", f"{ROOT}[notebooks]"],
                 check=True)
sys.path.insert(0, str(ROOT))

import vit_spectral
from vit_spectral.data.tensorflow_import import tf  # quiet, and off the GPUs and TPUs

SMOKE = os.environ.get("VIT_SPECTRAL_SMOKE", "0") == "1"  # CI: a few steps per run
if SMOKE:  # CI checks that every cell runs: cheap compiles (a full run is unaffected)
  import jax
  jax.config.update("jax_disable_most_optimizations", True)
print(f"vit_spectral {vit_spectral.__version__} from {SOURCE}; SMOKE={SMOKE}")
