r"""Every ImageNet and CIFAR recipe compiled by the TPU compiler for the slice
it is meant for (and one that does not fit), and two on GPU hosts, on a
machine with neither.

  python benchmarks/target_dry_runs.py                  # every row, 2 at a time
  python benchmarks/target_dry_runs.py --only imagenet_deit
  python benchmarks/target_dry_runs.py --render         # rewrite docs/running.md's table
                                                        # and redraw the PNG
  python benchmarks/target_dry_runs.py --check          # exit 1 if it is stale

Each row is one command, `train.py --dry_run --target=SLICE` (it is in the
JSON beside its figures), run in its own process with libtpu and, for the
GPU rows, jax's CUDA plugin importable (`pip install -e .[tpu]` / `.[cuda12]`,
or libtpu, jax-cuda12-plugin and jax-cuda12-pjrt alone on PYTHONPATH). Results:
benchmarks/results/target_dry_runs.json (and .png); docs/running.md shows them between
`<!-- target-dry-runs:begin -->` and `<!-- target-dry-runs:end -->`. The figures are
the TPU compiler's memory analysis and our roofline over its cost analysis
(`vit_spectral.planning.target_dry_run`), not measurements.
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
sys.path.insert(0, REPO)   # `benchmarks.figures` when run as a script
RESULTS = os.path.join(REPO, "benchmarks", "results", "target_dry_runs.json")
PAGE = os.path.join(REPO, "docs", "running.md")   # the page that shows the tables
BEGIN, END = "<!-- target-dry-runs:begin -->", "<!-- target-dry-runs:end -->"


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
    # GPU hosts (jax's CUDA plugin compiles for them without a GPU).
    Row("DeiT-S/16 on 8 H100", "imagenet_deit", "a3-highgpu-8g", paper=T1.format("1589.4")),
    Row("LipsFormer-Swin-T, batch 256, one A100", "imagenet_swin:row=lipsformer_swin_t,batch=256",
        "a2-highgpu-1g",
        paper="paper 001 §5: 963 img/s on one A100-40GB, batch 256, mixed precision"),
)


# ViT-B/16 bf16 on one v5e chip (batch 64): the fused against the explicit
# attention path, the scanned encoder against the loop (`--set=paths`).
_PATH_FLAGS = {"fused": (), "scan": (), "loop": ("--config.model.encoder_mode=loop",),
               "explicit": ("--config.model.attention={'name': 'dot_product', "
                            "'implementation': 'explicit'}",)}
PATH_ROWS = tuple(
    Row(f"ViT-B/16 {path}, {mode}", "imagenet_deit:variant=B/16,batch=64", "v5litepod-1",
        _PATH_FLAGS[path] + _PATH_FLAGS[mode])
    for mode in ("scan", "loop") for path in ("fused", "explicit"))
PATHS_RESULTS = os.path.join(REPO, "benchmarks", "results", "target_attention_paths.json")


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
  """docs/running.md's Markdown table of `results`."""
  lines = ["| recipe | slice or host (mesh) | memory per chip or GPU | fits | "
           "est. img/s (per chip or GPU) | "
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


def paths_table(results: list[dict]) -> str:
  """docs/running.md's table of `--set=paths`: ViT-B/16's attention paths and
  encoder modes on one v5e chip."""
  lines = ["| ViT-B/16 bf16, batch 64, one v5e chip | HBM | est. step | bound | "
           "TFLOP per step | GB accessed | compile s |", "|---|---|---|---|---|---|---|"]
  for result in results:
    report = result["report"]
    lines.append(
        f"| {result['label'].removeprefix('ViT-B/16 ')} | "
        f"{report['hbm_per_chip_bytes']['total'] / 2**30:.2f} GiB | "
        f"{report['step_seconds'] * 1e3:.1f} ms | {report['bound']} | "
        f"{report['flops_per_chip'] / 1e12:.2f} | {report['bytes_accessed_per_chip'] / 1e9:.1f} | "
        f"{report['compile_seconds']:.0f} |")
  return "\n".join(lines)


def readme_block(results: list[dict], paths: list[dict] | None = None) -> str:
  parts = [BEGIN, "<!-- generated by `python benchmarks/target_dry_runs.py --render` "
           "from benchmarks/results/target_dry_runs.json and target_attention_paths.json; "
           "do not edit by hand -->", table(results)]
  if paths:
    parts += ["", "The attention paths and encoder modes as the TPU cost model sees them "
              "(`--set=paths`; `auto`, the default, takes the fused path in the train "
              "step, where no one reads the maps, and the default encoder mode is scan):",
              "", paths_table(paths)]
  return "\n".join(parts + [END])


def plot(results: list[dict]) -> str:
  """Draws the rows that fit: memory per device as a share of what it has, and
  the estimated images/s per device, beside the JSON (results PNG path)."""
  from benchmarks import figures  # noqa: PLC0415 (matplotlib only when plotting)
  fitted = [r for r in results if r["report"].get("fits")]
  labels = [f"{r['label']} @ {r['target']}" for r in fitted][::-1]
  share = [r["report"]["hbm_per_chip_bytes"]["total"] / r["report"]["hbm_capacity_bytes"]
           for r in fitted][::-1]
  speed = [r["report"]["images_per_second"] / r["report"]["chips"] for r in fitted][::-1]
  fig, (memory, images) = figures.new_figure(2, 13.0, 0.32 * len(fitted) + 1.2)
  memory.barh(labels, [100 * x for x in share], color="tab:blue")
  memory.set_xlabel("memory per chip or GPU, % of what it has")
  images.barh(labels, speed, color="tab:green")
  images.set_yticklabels([])
  images.set_xlabel("estimated images/s per chip or GPU (roofline)")
  fig.suptitle("Train steps compiled for TPU slices and GPU hosts: compiler estimates, "
               "not measurements", fontsize=10)
  fig.tight_layout()
  return figures.save_next_to(fig, RESULTS)


def render(check: bool = False) -> bool:
  """Rewrites docs/running.md's tables from the results (or, with `check`, says
  whether it is current). Returns True when it was current."""
  results = json.load(open(RESULTS, encoding="utf-8"))["rows"]
  paths = (json.load(open(PATHS_RESULTS, encoding="utf-8"))["rows"]
           if os.path.exists(PATHS_RESULTS) else None)
  with open(PAGE, encoding="utf-8") as f:
    text = f.read()
  head, rest = text.split(BEGIN, 1)
  _, tail = rest.split(END, 1)
  new = head + readme_block(results, paths) + tail
  if check:
    return new == text
  with open(PAGE, "w", encoding="utf-8") as f:
    f.write(new)
  return True


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--only", action="append", default=[], help="a row's config (repeatable)")
  parser.add_argument("--jobs", type=int, default=2)
  parser.add_argument("--set", choices=("recipes", "paths"), default="recipes",
                      help="recipes: docs/running.md table's rows; paths: ViT-B/16's attention "
                           "paths and encoder modes on one v5e chip")
  parser.add_argument("--render", action="store_true")
  parser.add_argument("--check", action="store_true")
  args = parser.parse_args()
  if args.render or args.check:
    current = render(check=args.check)
    if args.render:
      plot(json.load(open(RESULTS, encoding="utf-8"))["rows"])
    if args.check and not current:
      sys.exit("docs/running.md's TPU dry-run table is stale: python benchmarks/target_dry_runs.py --render")
    return
  all_rows, results = (ROWS, RESULTS) if args.set == "recipes" else (PATH_ROWS, PATHS_RESULTS)
  rows = [r for r in all_rows
          if not args.only or r.config in args.only or r.label in args.only]
  old = {}
  if os.path.exists(results):
    old = {(r["label"]): r for r in json.load(open(results, encoding="utf-8"))["rows"]}
  with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
    for result in pool.map(run_row, rows):
      old[result["label"]] = result
      print(f"{result['label']}: exit {result['exit_code']} in {result['wall_seconds']:.0f} s"
            + (f" ({result['error']})" if result["error"] and result["exit_code"] else ""),
            flush=True)
      ordered = [old[r.label] for r in all_rows if r.label in old]
      with open(results, "w", encoding="utf-8") as f:
        json.dump({"command": f"python benchmarks/target_dry_runs.py --set={args.set}",
                   "note": "TPU compiler estimates (memory analysis, cost analysis, "
                           "roofline), not measurements", "rows": ordered}, f, indent=1)


if __name__ == "__main__":
  main()
