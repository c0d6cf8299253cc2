r"""Every ImageNet and CIFAR recipe compiled by the TPU compiler for the slice
it is meant for (and one that does not fit), on a machine without a TPU.

  python benchmarks/tpu_dry_runs.py                  # every row, 2 at a time
  python benchmarks/tpu_dry_runs.py --only imagenet_deit
  python benchmarks/tpu_dry_runs.py --render         # rewrite the README's table
  python benchmarks/tpu_dry_runs.py --check          # exit 1 if it is stale

Each row is one command, `train.py --dry_run --target=SLICE` (it is in the
JSON beside its figures), run in its own process with libtpu importable
(`pip install -e .[tpu]`, or libtpu alone on PYTHONPATH). Results:
benchmarks/results/tpu_dry_runs.json; the README shows them between
`<!-- tpu-dry-runs:begin -->` and `<!-- tpu-dry-runs:end -->`. The figures are
the TPU compiler's memory analysis and our roofline over its cost analysis
(`vit_spectral.training.tpu_dry_run`), not measurements.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "benchmarks", "results", "tpu_dry_runs.json")
README = os.path.join(REPO, "README.md")
BEGIN, END = "<!-- tpu-dry-runs:begin -->", "<!-- tpu-dry-runs:end -->"


@dataclasses.dataclass(frozen=True)
class Row:
  """One recipe on one slice; `paper` is a throughput a paper gives, if any."""

  label: str
  config: str
  target: str
  flags: tuple[str, ...] = ()
  paper: str = ""

  def argv(self, json_path: str) -> list[str]:
    return ["train.py", f"--config={self.config}", *self.flags, "--dry_run",
            f"--target={self.target}", f"--dry_run_json={json_path}"]

  def command(self) -> str:
    return "XLA_FLAGS= JAX_PLATFORMS=cpu python " + " ".join(
        shlex.quote(a) for a in self.argv("OUT.json"))


T1 = "paper 000 Table 1: {} img/s (GPU throughput; device and batch not given)"
ROWS = (
    Row("DeiT-S/16", "imagenet_deit", "v5litepod-16", paper=T1.format("1589.4")),
    Row("DeiT-S/16 + AttnScale", "imagenet_deit_s_fourier:method=attn_scale", "v5litepod-16",
        paper=T1.format("1416.7")),
    Row("DeiT-S/16 + FeatScale", "imagenet_deit_s_fourier:method=feat_scale", "v5litepod-16",
        paper=T1.format("1509.9")),
    Row("CaiT-S24", "imagenet_cait", "v4-32", paper=T1.format("371.9")),
    Row("Swin-S", "imagenet_swin", "v4-32", paper=T1.format("593.2")),
    Row("LipsFormer-Swin-T", "imagenet_swin:row=lipsformer_swin_t", "v4-32",
        paper="paper 001 §5: 963 img/s on one A100-40GB, batch 256, mixed precision"),
    Row("CSwin-T", "imagenet_cswin", "v4-32"),
    Row("LipsFormer-ViT", "lipsformer_imagenet", "v4-32"),
    Row("LipsFormer-CSwin-T", "lipsformer_cswin_imagenet", "v4-32"),
    Row("ViT-L/16, FSDP over 16 chips", "imagenet_deit:variant=L/16", "v4-32",
        ("--config.mesh.data=1", "--config.mesh.fsdp=16")),
    Row("DeiT-S fine-tune + AttnScale", "deit_s_finetune_fourier", "v5litepod-8"),
    Row("CaiT-S24 fine-tune + AttnScale", "cait_finetune_fourier", "v4-8"),
    Row("ViT-B linear probe (MHA)", "transfer_linear_probe", "v5litepod-8"),
    Row("ViT-Ti CIFAR-10", "cifar10_vit", "v5litepod-8"),
    Row("ViT-Ti CIFAR-100", "cifar100_vit", "v5litepod-8"),
    Row("ViT-Ti CIFAR-100, eigen W_V W_proj", "cifar100_eigen", "v5litepod-8"),
    Row("ViT-Ti CIFAR-100 + FeatScale", "cifar100_vit_ti_fourier", "v5litepod-8"),
    Row("Quadratic attention CIFAR-10", "cifar10_quadratic", "v5litepod-8"),
    Row("LipsFormer-ViT CIFAR-10", "lipsformer_cifar", "v5litepod-8"),
    Row("Hopfield ViT-Ti CIFAR-10", "hopfield_vit", "v5litepod-8"),
    Row("Hopfield attention-only ViT-Ti", "hopfield_attention_only", "v5litepod-8"),
    Row("DeiT-S/16, batch 16x (refused)", "imagenet_deit:batch=16384", "v5litepod-16"),
)


def run_row(row: Row) -> dict:
  """Runs one row's command; its JSON report with the command, exit code and
  wall time."""
  with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "report.json")
    env = dict(os.environ, XLA_FLAGS="", JAX_PLATFORMS="cpu")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *row.argv(path)], cwd=REPO, env=env,
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    report = json.load(open(path, encoding="utf-8")) if os.path.exists(path) else {}
  tail = [line for line in done.stderr.splitlines() if line.startswith("error:")]
  return {"label": row.label, "config": row.config, "target": row.target,
          "flags": list(row.flags), "paper": row.paper, "command": row.command(),
          "exit_code": done.returncode, "wall_seconds": wall,
          "error": tail[-1] if tail else None, "report": report}


def _cell_hbm(report: dict) -> str:
  if report.get("fits") is False:
    return (f"needs {report['hbm_needed_bytes'] / 2**30:.1f} of "
            f"{report['hbm_available_bytes'] / 2**30:.2f} GiB")
  memory = report["hbm_per_chip_bytes"]
  return f"{memory['total'] / 2**30:.2f} of {report['hbm_capacity_bytes'] / 2**30:g} GiB"


def table(results: list[dict]) -> str:
  """The README's Markdown table of `results`."""
  lines = ["| recipe | slice (mesh) | HBM per chip | fits | est. img/s (per chip) | "
           "bound | MFU ceiling | compile s | paper's throughput |",
           "|---|---|---|---|---|---|---|---|---|"]
  for result in results:
    report = result["report"]
    if not report:
      lines.append(f"| {result['label']} | {result['target']} | — | error | — | — | — | — | "
                   f"{result['error'] or ''} |")
      continue
    mesh = "×".join(str(v) for v in report["mesh"].values())
    fits = report["fits"]
    if fits:
      speed = (f"{report['images_per_second']:,.0f} "
               f"({report['images_per_second'] / report['chips']:,.0f})")
      bound, mfu = report["bound"], f"{100 * report['mfu_ceiling']:.0f}%"
      seconds = f"{report['compile_seconds']:.0f}"
    else:
      speed = bound = mfu = seconds = "—"
    lines.append(f"| {result['label']} (`{result['config']}`"
                 f"{' ' + ' '.join(result['flags']) if result['flags'] else ''}) | "
                 f"{result['target']} ({mesh}) | {_cell_hbm(report)} | "
                 f"{'yes' if fits else '**no**: exit 1'} | {speed} | {bound} | {mfu} | "
                 f"{seconds} | {result['paper']} |")
  return "\n".join(lines)


def readme_block(results: list[dict]) -> str:
  return "\n".join([BEGIN, "<!-- generated by `python benchmarks/tpu_dry_runs.py --render` "
                    "from benchmarks/results/tpu_dry_runs.json; do not edit by hand -->",
                    table(results), END])


def render(check: bool = False) -> bool:
  """Rewrites the README's table from the results (or, with `check`, says
  whether it is current). Returns True when it was current."""
  results = json.load(open(RESULTS, encoding="utf-8"))["rows"]
  with open(README, encoding="utf-8") as f:
    text = f.read()
  head, rest = text.split(BEGIN, 1)
  _, tail = rest.split(END, 1)
  new = head + readme_block(results) + tail
  if check:
    return new == text
  with open(README, "w", encoding="utf-8") as f:
    f.write(new)
  return True


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--only", action="append", default=[], help="a row's config (repeatable)")
  parser.add_argument("--jobs", type=int, default=2)
  parser.add_argument("--render", action="store_true")
  parser.add_argument("--check", action="store_true")
  args = parser.parse_args()
  if args.render or args.check:
    current = render(check=args.check)
    if args.check and not current:
      sys.exit("README's TPU dry-run table is stale: python benchmarks/tpu_dry_runs.py --render")
    return
  rows = [r for r in ROWS if not args.only or r.config in args.only or r.label in args.only]
  old = {}
  if os.path.exists(RESULTS):
    old = {(r["label"]): r for r in json.load(open(RESULTS, encoding="utf-8"))["rows"]}
  with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
    for result in pool.map(run_row, rows):
      old[result["label"]] = result
      print(f"{result['label']}: exit {result['exit_code']} in {result['wall_seconds']:.0f} s"
            + (f" ({result['error']})" if result["error"] and result["exit_code"] else ""),
            flush=True)
      ordered = [old[r.label] for r in ROWS if r.label in old]
      with open(RESULTS, "w", encoding="utf-8") as f:
        json.dump({"command": "python benchmarks/tpu_dry_runs.py",
                   "note": "TPU compiler estimates (memory analysis, cost analysis, "
                           "roofline), not measurements", "rows": ordered}, f, indent=1)


if __name__ == "__main__":
  main()
