"""CI's accelerator step: recipes compiled by the TPU compiler for real TPU
slices and by the GPU compiler for a GPU host, on this machine with neither
(`train.py --dry_run --target=...`).

  python .ci/check_target_dry_runs.py

libtpu, and jax's CUDA plugin (jax-cuda12-plugin, jax-cuda12-pjrt), at the
versions constraints.txt pins, are installed with --no-deps into folders of
their own (.ci/libtpu, .ci/cuda; git-ignored) and put on PYTHONPATH of these
commands only: the test environment never imports them (libtpu prints at
import). Seven commands, each checked:

1. DeiT-S ImageNet (imagenet_deit) on a v5e slice (v5litepod-16): exit 0, the
   step fits, FLOPs over all layers exceed XLA's count of one scanned block,
   a positive step time, images/s and an MFU ceiling in (0, 1].
2. ViT-L/16 with FSDP over 16 chips on a v4 slice (v4-32): exit 0, fits, and
   the FSDP collectives (all-gather of weights) are in the step.
3. DeiT-S with a global batch 16x the recipe's on v5litepod-16: exit 1, one
   `error:` line that says it does not fit.
4. DeiT-S ImageNet on an A3 host (8 H100, a3-highgpu-8g): exit 0, fits, the
   FLOPs from the jaxpr, a positive step time.
5. Backend defaults (issue 44), for v5litepod-16 (command 1) and one H100
   (a3-highgpu-1g, batch 256): the report names the target's platform and its
   fused attention kernel (splash, cuDNN), the kernel's custom calls are in the
   compiled step, and the same command with the resolved defaults written out
   compiles to the same memory figures.

Prints each command's wall time (the compile times this step costs).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = {"libtpu": os.path.join(ROOT, ".ci", "libtpu"),
           "cuda": os.path.join(ROOT, ".ci", "cuda")}
PACKAGES = {"libtpu": ("libtpu",),
            "cuda": ("jax-cuda12-plugin", "jax-cuda12-pjrt", "nvidia-cudnn-cu12")}


def pinned(package: str) -> str:
  with open(os.path.join(ROOT, "constraints.txt"), encoding="utf-8") as f:
    match = re.search(rf"^{re.escape(package)}==(\S+)$", f.read(), re.M)
  if match is None:
    sys.exit(f"constraints.txt pins no {package}")
  return match[1]


def install(kind: str) -> str:
  """Installs the packages of `kind` into their folder (once); the folder."""
  folder = FOLDERS[kind]
  wanted = [f"{name}=={pinned(name)}" for name in PACKAGES[kind]]
  markers = [os.path.join(folder, f"{name.replace('-', '_')}-{pinned(name)}.dist-info")
             for name in PACKAGES[kind]]
  if not all(os.path.isdir(marker) for marker in markers):
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                    "--disable-pip-version-check", "--no-deps", "--upgrade", "--target",
                    folder, *wanted], check=True)
    print(f"[targets] installed {' '.join(wanted)} in {time.perf_counter() - start:.0f} s")
  return folder


def dry_run(args: list[str], expect_exit: int, folder: str) -> tuple[dict, str]:
  """Runs train.py --dry_run ARGS with `folder` on PYTHONPATH; (its JSON
  report, stderr)."""
  with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "report.json")
    command = [sys.executable, "train.py", *args, "--dry_run", f"--dry_run_json={path}"]
    env = dict(os.environ, XLA_FLAGS="", JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join(filter(None, [folder,
                                                        os.environ.get("PYTHONPATH")])))
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                          check=False)
    print(f"[targets] {' '.join(command[1:-1])}: exit {done.returncode} in "
          f"{time.perf_counter() - start:.0f} s", flush=True)
    if done.returncode != expect_exit:
      sys.stderr.write(done.stdout + done.stderr[-5000:])
      sys.exit(f"expected exit {expect_exit}, got {done.returncode}")
    report = json.load(open(path, encoding="utf-8")) if os.path.exists(path) else {}
  print("\n".join("    " + line for line in done.stdout.strip().splitlines()), flush=True)
  return report, done.stderr


def check(condition: bool, what: str) -> None:
  if not condition:
    sys.exit(f"TPU dry run check failed: {what}")


def main() -> None:
  libtpu = install("libtpu")
  deit, _ = dry_run(["--config=imagenet_deit", "--target=v5litepod-16"], 0, libtpu)
  check(deit["fits"] and deit["chips"] == 16, "DeiT-S fits on 16 chips")
  check_target_defaults(deit, "tpu", "splash", ["--config=imagenet_deit",
                                                "--target=v5litepod-16"], libtpu)
  check(deit["flops_per_chip"] > 5 * deit["flops_as_compiled"],
        "the scanned encoder's 12 blocks are all counted")
  check(deit["step_seconds"] > 0 and 0 < deit["mfu_ceiling"] <= 1, "step time and MFU ceiling")

  large, _ = dry_run(["--config=imagenet_deit:variant=L/16", "--config.mesh.data=1",
                      "--config.mesh.fsdp=16", "--target=v4-32"], 0, libtpu)
  kinds = {c["kind"] for c in large["collectives"]}
  check(large["fits"] and large["mesh"]["fsdp"] == 16, "ViT-L/16 with FSDP fits on v4-32")
  check("all-gather" in kinds, f"FSDP gathers the weights (collectives: {sorted(kinds)})")

  refused, stderr = dry_run(["--config=imagenet_deit:batch=16384", "--target=v5litepod-16"],
                            1, libtpu)
  errors = [line for line in stderr.splitlines() if line.startswith("error:")]
  check(len(errors) == 1 and "does not fit in HBM" in errors[0], f"one refusal line: {errors}")
  check(refused["fits"] is False and refused["hbm_needed_bytes"] > refused["hbm_available_bytes"],
        "the refusal's JSON says needed > available")
  print(f"[targets] refused: {errors[0]}")

  gpu, _ = dry_run(["--config=imagenet_deit", "--target=a3-highgpu-8g"], 0, install("cuda"))
  check(gpu["fits"] and gpu["chips"] == 8 and gpu["device"] == "GPU", "DeiT-S fits on 8 H100")
  check(gpu["flops_source"] == "jaxpr" and gpu["step_seconds"] > 0, "GPU FLOPs and step time")
  one_gpu = ["--config=imagenet_deit", "--config.input.batch_size=256",
             "--target=a3-highgpu-1g"]
  single, _ = dry_run(one_gpu, 0, install("cuda"))
  check_target_defaults(single, "gpu", "cudnn", one_gpu, install("cuda"))


def check_target_defaults(report: dict, platform: str, kernel: str, args: list[str],
                          folder: str) -> None:
  """The dry run resolved the target's defaults (not this CPU's), compiled
  the target's fused attention kernel, and compiles the same step as a run
  with those defaults written out (issue 44)."""
  defaults = report["backend_defaults"]
  check(defaults["platform"] == platform and defaults["attention_kernel"] == kernel,
        f"the {platform} target's defaults: {defaults}")
  check(report["attention_kernels"].get(kernel, 0) > 0,
        f"{kernel} attention is in the compiled step: {report['attention_kernels']}")
  written = [f"--config.model.encoder_residuals={defaults['encoder_residuals']}",
             f"--config.model.encoder_unroll={defaults['encoder_unroll']}",
             "--config.model.attention.implementation=fused"]
  explicit, _ = dry_run(args + written, 0, folder)
  check(explicit["hbm_per_chip_bytes"] == report["hbm_per_chip_bytes"],
        f"defaults written out compile the same step: {explicit['hbm_per_chip_bytes']} vs "
        f"{report['hbm_per_chip_bytes']}")
  print(f"[targets] {platform}: {defaults}; compiled {report['attention_kernels']}")


if __name__ == "__main__":
  main()
