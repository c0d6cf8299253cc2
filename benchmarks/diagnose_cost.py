r"""What `analysis.diagnose` costs: three calls on ViT-B/16 at 224², the peak host memory.

  python benchmarks/diagnose_cost.py [--variant=B/16] [--num_images=64]
      [--batch_size=8] [--out=benchmarks/results/diagnose_cost.json]

Builds the model, draws `num_images` N(0, 1) images and random parameters
(the library's init), then calls `diagnose` three times on the same model and
images (every metric, means only): the first call compiles, the later ones
reuse it (the number of compiles is read from the jitted function's cache).
Peak memory is the process's peak resident set (`ru_maxrss`), before the
first call (model, parameters and images in memory) and after each call;
what `diagnose` adds is the difference. Writes the times and peaks to --out.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import numpy as np  # noqa: E402

from vit_spectral import analysis  # noqa: E402
from vit_spectral.analysis import diagnosis as diagnosis_lib  # noqa: E402
from vit_spectral.models import build_model  # noqa: E402
from benchmarks.figures import RESULTS_DIR, write_results  # noqa: E402


def peak_gib() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20   # KiB on Linux


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--variant", default="B/16")
  parser.add_argument("--num_images", type=int, default=64)
  parser.add_argument("--image_size", type=int, default=224)
  parser.add_argument("--batch_size", type=int, default=diagnosis_lib.DEFAULT_BATCH_SIZE)
  parser.add_argument("--out", default=os.path.join(RESULTS_DIR, "diagnose_cost.json"))
  args = parser.parse_args(argv)

  model = build_model({"variant": args.variant}, num_classes=1000)
  size = args.image_size
  images = np.asarray(jax.random.normal(jax.random.key(1), (args.num_images, size, size, 3)),
                      np.float32)
  variables = jax.jit(model.init)(jax.random.key(0), images[:1])
  before = peak_gib()
  print(f"ViT-{args.variant} at {size}², {args.num_images} images, batch {args.batch_size}: "
        f"peak RSS before diagnose {before:.2f} GiB", flush=True)
  calls = []
  for k in range(3):
    start = time.perf_counter()
    d = analysis.diagnose(model, variables, images, batch_size=args.batch_size)
    seconds = time.perf_counter() - start
    compiled = diagnosis_lib._COMPILED[next(reversed(diagnosis_lib._COMPILED))]
    calls.append({"seconds": round(seconds, 2), "peak_rss_gib": round(peak_gib(), 3),
                  "compiled_shapes": compiled.run._cache_size()})
    print(f"call {k + 1}: {seconds:.1f} s, peak RSS {calls[-1]['peak_rss_gib']:.2f} GiB, "
          f"{calls[-1]['compiled_shapes']} compiled shape(s)", flush=True)
  result = {
      "command": " ".join(["python", "benchmarks/diagnose_cost.py", *sys.argv[1:]]),
      "variant": args.variant, "image_size": size, "num_images": args.num_images,
      "batch_size": args.batch_size, "metrics": len(d.metric_names()),
      "layers": d.num_layers, "peak_rss_before_gib": round(before, 3), "calls": calls,
      "added_peak_gib": round(max(c["peak_rss_gib"] for c in calls) - before, 3),
      "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, jax {jax.__version__}",
      "hc_dc_ratio_per_layer": d.values("hc_dc_ratio").round(4).tolist(),
  }
  print(f"wrote {write_results(result, args.out)}")


if __name__ == "__main__":
  main()
