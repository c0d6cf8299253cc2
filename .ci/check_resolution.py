"""Checks that each accelerator extra resolves, with constraints.txt, to one jax.

  python .ci/check_resolution.py tpu cuda12

For every extra, runs `pip install --dry-run --ignore-installed --report` of
`.[EXTRA]` with `-c constraints.txt` (the package index is needed, nothing is
installed) and reads pip's installation report (a JSON list of the
distributions pip would install). It fails, with one line naming the extra and
the cause, when pip finds no solution, when jax and its accelerator packages
do not share one version, or when the solution holds a distribution that
constraints.txt does not pin (the file must stay the whole tested set).
Prints the versions each extra resolved to.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent import futures

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONSTRAINTS = os.path.join(ROOT, "constraints.txt")
# The accelerator packages each extra must bring, and whether their version
# must equal jax's (libtpu has its own numbering; jax pins the one it needs).
ACCELERATOR_PACKAGES = {
    "tpu": {"libtpu": False},
    "cuda12": {"jax-cuda12-plugin": True, "jax-cuda12-pjrt": True},
}
# Installed by pip itself or by a fresh virtual environment, never pinned.
NOT_PINNED = {"pip", "setuptools", "wheel", "vit-spectral"}


def canonical(name: str) -> str:
  """PEP 503 name: lower case, runs of -_. become one '-'."""
  out, last_dash = [], False
  for ch in name.lower():
    dash = ch in "-_."
    if not (dash and last_dash):
      out.append("-" if dash else ch)
    last_dash = dash
  return "".join(out)


def read_constraints(path: str) -> dict[str, str]:
  """constraints.txt -> {canonical name: pinned version}."""
  pins = {}
  with open(path) as f:
    for line in f:
      line = line.split("#", 1)[0].strip()
      if line:
        name, sep, version = line.partition("==")
        if not sep:
          raise SystemExit(f"{path}: {line!r} is not a NAME==VERSION pin")
        pins[canonical(name)] = version.strip()
  return pins


def resolve(extra: str) -> tuple[int, str, dict[str, str]]:
  """pip's dry-run of `.[extra]` -> (exit code, pip's stderr tail, {name: version})."""
  with tempfile.TemporaryDirectory() as tmp:
    report = os.path.join(tmp, "report.json")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
         "--quiet", "--disable-pip-version-check", "--report", report,
         "-c", CONSTRAINTS, f".[{extra}]"],
        cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
      return proc.returncode, proc.stderr.strip()[-2000:], {}
    with open(report) as f:
      installs = json.load(f)["install"]
  return 0, "", {canonical(item["metadata"]["name"]): item["metadata"]["version"]
                 for item in installs}


def problems(extra: str, resolved: dict[str, str], pins: dict[str, str]) -> list[str]:
  """Everything wrong with one extra's resolution, one line each."""
  found = []
  jax = resolved.get("jax")
  if jax is None:
    return [f"extra {extra}: jax is not in the resolution"]
  if resolved.get("jaxlib") != jax:
    found.append(f"extra {extra}: jaxlib {resolved.get('jaxlib')} differs from jax {jax}")
  for name, same_version in ACCELERATOR_PACKAGES[extra].items():
    if name not in resolved:
      found.append(f"extra {extra}: {name} is missing (jax[{extra}] of jax {jax} "
                   "did not bring its accelerator build)")
    elif same_version and resolved[name] != jax:
      found.append(f"extra {extra}: {name} {resolved[name]} differs from jax {jax}")
  for name, version in sorted(resolved.items()):
    if name in NOT_PINNED:
      continue
    if name not in pins:
      found.append(f"extra {extra}: {name}=={version} is not pinned in constraints.txt")
    elif pins[name] != version:
      found.append(f"extra {extra}: {name} resolved to {version}, constraints.txt "
                   f"pins {pins[name]}")
  return found


def main(extras: list[str]) -> int:
  unknown = [e for e in extras if e not in ACCELERATOR_PACKAGES]
  if not extras or unknown:
    print(f"usage: check_resolution.py EXTRA...; extras: {sorted(ACCELERATOR_PACKAGES)}"
          f" (unknown: {unknown})", file=sys.stderr)
    return 2
  pins = read_constraints(CONSTRAINTS)
  with futures.ThreadPoolExecutor(len(extras)) as pool:
    results = dict(zip(extras, pool.map(resolve, extras)))
  failed = False
  for extra, (code, stderr, resolved) in results.items():
    if code != 0:
      print(f"FAIL extra {extra}: pip could not resolve .[{extra}] with "
            f"constraints.txt (exit {code}):\n{stderr}", file=sys.stderr)
      failed = True
      continue
    found = problems(extra, resolved, pins)
    for line in found:
      print(f"FAIL {line}", file=sys.stderr)
    failed |= bool(found)
    accelerators = ", ".join(f"{n} {resolved.get(n)}" for n in ACCELERATOR_PACKAGES[extra])
    print(f"extra {extra}: jax {resolved.get('jax')}, jaxlib {resolved.get('jaxlib')}, "
          f"{accelerators} ({len(resolved)} distributions)")
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
