#!/usr/bin/env bash
# The installed package works without the repository: builds the wheel,
# installs it with constraints.txt into a new virtual environment outside the
# checkout (its own site-packages: nothing from this machine's environment),
# then, from a directory outside the checkout, imports every public module,
# loads every recipe, builds every registered model (.ci/check_installed.py)
# and trains a few steps of the digits recipe with the installed
# `vit-spectral-train` (the recipe ships inside the wheel).
#
#   bash .ci/check_wheel.sh
#
# The dependencies' wheels are kept in a wheelhouse (VIT_SPECTRAL_WHEELHOUSE,
# default ~/.cache/vit_spectral/wheels): `pip download` fetches only what is not
# there yet, and the install reads the wheelhouse alone (--no-index).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
PIP=(--quiet --disable-pip-version-check)

# Build from a clean copy: setuptools builds in the source tree, and a stale
# build/ there could put modules into the wheel that the checkout no longer has.
mkdir "$TMP/src"
tar -C "$ROOT" --exclude=.git --exclude=build --exclude='*.egg-info' --exclude=workdir \
    --exclude=.venv --exclude=__pycache__ -cf - . | tar -C "$TMP/src" -xf -
python -m pip wheel "${PIP[@]}" --no-deps --wheel-dir "$TMP/dist" "$TMP/src"
WHEEL=("$TMP"/dist/vit_spectral-*.whl)
echo "built ${WHEEL[0]##*/}"
WHEELHOUSE="${VIT_SPECTRAL_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/vit_spectral/wheels}"
mkdir -p "$WHEELHOUSE"
python -m pip download "${PIP[@]}" -c "$ROOT/constraints.txt" --dest "$WHEELHOUSE" "${WHEEL[0]}"
rm -f "$WHEELHOUSE"/vit_spectral-*.whl  # the wheel under test is installed by path
python -m venv "$TMP/venv"
"$TMP/venv/bin/python" -m pip install "${PIP[@]}" --no-index --find-links "$WHEELHOUSE" \
    -c "$ROOT/constraints.txt" "${WHEEL[0]}"

mkdir "$TMP/elsewhere"
cp "$ROOT/.ci/check_installed.py" "$TMP/"
cd "$TMP/elsewhere"
"$TMP/venv/bin/python" "$TMP/check_installed.py" "$ROOT"
"$TMP/venv/bin/vit-spectral-train" --config=digits_vit:steps=20 \
    --config.optim.warmup_steps=5 --config.log_every=10 --config.eval_every=20 \
    --config.checkpoint_every=20 --workdir="$TMP/workdir"
if ! ls "$TMP/workdir" | grep -q .; then
  echo "vit-spectral-train wrote nothing to its workdir $TMP/workdir" >&2
  exit 1
fi
echo "installed wheel: trained 20 digits steps into $(ls "$TMP/workdir" | tr '\n' ' ')"
