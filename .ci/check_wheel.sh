#!/usr/bin/env bash
# The installed package works without the repository: builds the wheel,
# installs it with constraints.txt into a new virtual environment outside the
# checkout (its own site-packages: nothing from this machine's environment),
# then, from a directory outside the checkout, imports every public module,
# loads every recipe, builds every registered model (.ci/check_installed.py)
# and trains a few steps of the digits recipe with the installed
# `vit-spectral-train` (the recipe ships inside the wheel), then evaluates and
# analyses that run with the installed `vit-spectral-evaluate` and
# `vit-spectral-analyse`, and lists the registries with `vit-spectral-list`.
#
#   bash .ci/check_wheel.sh
#
# The dependencies' wheels are kept in a wheelhouse (VIT_SPECTRAL_WHEELHOUSE,
# default ~/.cache/vit_spectral/wheels): `pip download` fetches only what is not
# there yet, and the install reads the wheelhouse alone (--no-index).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"; elapsed "removed the temporary venv"' EXIT
PIP=(--quiet --disable-pip-version-check)
START=$SECONDS
elapsed() { echo "[check_wheel] $1 at $((SECONDS - START)) s"; }

# Build from a clean copy: setuptools builds in the source tree, and a stale
# build/ there could put modules into the wheel that the checkout no longer has.
mkdir "$TMP/src"
tar -C "$ROOT" --exclude=.git --exclude=build --exclude='*.egg-info' --exclude=workdir \
    --exclude=.venv --exclude=__pycache__ -cf - . | tar -C "$TMP/src" -xf -
python -m pip wheel "${PIP[@]}" --no-deps --wheel-dir "$TMP/dist" "$TMP/src"
WHEEL=("$TMP"/dist/vit_spectral-*.whl)
elapsed "built ${WHEEL[0]##*/}"
WHEELHOUSE="${VIT_SPECTRAL_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/vit_spectral/wheels}"
mkdir -p "$WHEELHOUSE"
python -m venv "$TMP/venv"
install_from_wheelhouse() {
  # --no-compile: byte-compiling all of TensorFlow costs minutes; Python
  # compiles the modules it imports.
  "$TMP/venv/bin/python" -m pip install "${PIP[@]}" --no-compile --no-index \
      --find-links "$WHEELHOUSE" -c "$ROOT/constraints.txt" "${WHEEL[0]}"
}
# pip resolves everything before it installs anything, so a wheelhouse that
# lacks a pinned wheel fails without touching the venv: fetch it, then install.
if ! install_from_wheelhouse 2>"$TMP/wheelhouse.err"; then
  echo "the wheelhouse $WHEELHOUSE lacks wheels ($(grep -m1 ERROR "$TMP/wheelhouse.err")); downloading"
  python -m pip download "${PIP[@]}" -c "$ROOT/constraints.txt" --dest "$WHEELHOUSE" "${WHEEL[0]}"
  rm -f "$WHEELHOUSE"/vit_spectral-*.whl  # the wheel under test is installed by path
  install_from_wheelhouse
fi
elapsed "installed it into a new venv"

mkdir "$TMP/elsewhere"
cp "$ROOT/.ci/check_installed.py" "$TMP/"
cd "$TMP/elsewhere"
"$TMP/venv/bin/python" "$TMP/check_installed.py" "$ROOT"
elapsed "checked modules, recipes and models"
"$TMP/venv/bin/vit-spectral-train" --config=digits_vit:steps=20 \
    --config.optim.warmup_steps=5 --config.log_every=10 --config.eval_every=20 \
    --config.checkpoint_every=20 --workdir="$TMP/workdir"
if ! ls "$TMP/workdir" | grep -q .; then
  echo "vit-spectral-train wrote nothing to its workdir $TMP/workdir" >&2
  exit 1
fi
elapsed "trained 20 digits steps with the installed vit-spectral-train into $(ls "$TMP/workdir" | tr '\n' ' ')"
"$TMP/venv/bin/vit-spectral-analyse" --workdir="$TMP/workdir" --num_images=16 \
    --out="$TMP/analysis" >/dev/null
for name in diagnosis.csv diagnosis.json layers.png spectrum.png; do
  if [ ! -s "$TMP/analysis/$name" ]; then
    echo "vit-spectral-analyse did not write $name to $TMP/analysis" >&2
    exit 1
  fi
done
elapsed "analysed that run with the installed vit-spectral-analyse: $(ls "$TMP/analysis" | tr '\n' ' ')"
evaluation="$("$TMP/venv/bin/vit-spectral-evaluate" --workdir="$TMP/workdir")"
if ! grep -q "eval_accuracy" <<<"$evaluation"; then
  echo "vit-spectral-evaluate printed no eval_accuracy:" >&2
  echo "$evaluation" >&2
  exit 1
fi
elapsed "evaluated its checkpoint with the installed vit-spectral-evaluate"
listing="$("$TMP/venv/bin/vit-spectral-list")"
for name in Ti/16 attn_scale hopfield digits_vit; do
  if ! grep -q "$name" <<<"$listing"; then
    echo "vit-spectral-list does not list $name" >&2
    exit 1
  fi
done
elapsed "listed models, attention variants, backbones and recipes with the installed vit-spectral-list"
