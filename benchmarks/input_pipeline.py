r"""Images/s of the tf.data training pipeline per host core.

The real `input_pipeline.create_train_dataset` (read, shuffle, decode, augment,
batch, as the trainer iterates it: `.as_numpy_iterator()`) on mocked TFDS data
(`tfds.testing.mock_data`), for three cases:

  cifar10            32² PNG, 4-pixel pad-and-crop + flip (the CIFAR recipes'
                     plain input)
  cifar10_randaug    the same + RandAugment(2, m9, mstd 0.5) + random erasing 0.25
                     (`configs.common.deit_augmentation`)
  imagenet_deit      ~500×375 JPEG decode + Inception crop to 224² + flip +
                     RandAugment + erasing + repeated augmentation ×3: the input
                     section of `configs/imagenet_deit.py` unchanged (but the batch)

Records are encoded once, in memory, by this script (smooth random images plus
noise, PNG for CIFAR as TFDS stores it, JPEG quality 90 for ImageNet) and served
through `mock_data(as_dataset_fn=...)`: the default mock generates and encodes
every example in a Python generator, which would time the mock, not the
pipeline. Reading real TFRecord shards adds file reads and record parsing, so
these rates are upper bounds for the same host.

"Per core": each (case, threads) runs in its own process pinned to `threads`
cores (`os.sched_setaffinity`; the pipeline sizes its parallel map by that
affinity, `input_pipeline._options`) with TF's thread pools set to `threads`.
Two figures per run: images per wall-clock second, and images per CPU-second
of the process (user + system time of all its threads), which another load on
a shared machine slows far less than the wall clock. Rounds are interleaved;
medians are reported.

  python benchmarks/input_pipeline.py                 # threads 1 and 2, 3 rounds
  python benchmarks/input_pipeline.py --threads=1,2,4 --rounds=5 --target_rate=1000

Measured 2026-11-23 on the 2-core CPU (load ~1.5, 2 rounds, medians; wall
min-max in brackets):
  case             threads  img/s              img/s per core  img per CPU-s
  cifar10          1         9329 (8724-9933)  9329            9330
  cifar10          2        10604 (9373-11834) 5302            6011
  cifar10_randaug  1         2599 (2499-2699)  2599            2600
  cifar10_randaug  2         3142 (2428-3856)  1571            1640
  imagenet_deit    1          125 (114-136)     125             125
  imagenet_deit    2          199 (192-206)      99             103
The second thread adds less than a core's worth (tf.data's threads and the
iterator's conversion share the two cores). The ViT-Ti train step on this CPU
(32², batch 128, 3.6 s) consumes ~35 img/s, so CIFAR input costs it 0.4 %
(plain) to 1.3 % (RandAugment) of one core. The DeiT ImageNet path runs at
~100-125 img/s per core: 1000 img/s of training (about a fast GPU's ViT-B/16
rate; an assumed figure, not measured here) needs 8-10 host cores.

`--target_rate` (images/s a train step consumes, e.g. a GPU's ViT-B/16 rate) is
turned into the host cores the pipeline needs at the measured images per
CPU-second; it is an input, not a measurement. Results: printed table and
benchmarks/results/input_pipeline.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import time

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
CASES = ("cifar10", "cifar10_randaug", "imagenet_deit")
# (records encoded, images per batch, batches timed after 2 warm-up batches)
_SIZES = {"cifar10": (1024, 128, 24), "cifar10_randaug": (1024, 128, 12),
          "imagenet_deit": (256, 32, 8)}
IMAGENET_SHAPE = (375, 500)   # (H, W): about the ImageNet train set's mean size


def _cpu_seconds() -> float:
  usage = resource.getrusage(resource.RUSAGE_SELF)
  return usage.ru_utime + usage.ru_stime


def _encoded_images(tf, count: int, shape: tuple[int, int], fmt: str, seed: int):
  """`count` encoded uint8 RGB images of `shape`: a smooth random field (8×8
  upsampled) plus mild noise, closer to photographs' compressibility than
  uniform noise."""
  gen = tf.random.Generator.from_seed(seed)
  out = []
  for _ in range(count):
    coarse = gen.uniform((8, 8, 3), 0.0, 255.0)
    image = tf.image.resize(coarse[None], shape, method="bicubic")[0]
    image = image + gen.normal(image.shape, stddev=12.0)
    image = tf.cast(tf.clip_by_value(image, 0, 255), tf.uint8)
    out.append(tf.io.encode_png(image) if fmt == "png" else
               tf.io.encode_jpeg(image, quality=90))
  return tf.stack(out)


def _input_config(case: str, data_dir: str, batch: int):
  from vit_spectral.configs import common, imagenet_deit  # noqa: PLC0415
  if case == "imagenet_deit":
    cfg = imagenet_deit.get_config().input
  else:
    config = common.base_config()
    config.input = common.cifar_input("cifar10", batch_size=batch)
    if case == "cifar10_randaug":
      common.deit_augmentation(config)
    cfg = config.input
  cfg.batch_size = batch
  cfg.data_dir = data_dir
  cfg.download = True   # mock_data turns download_and_prepare into a no-op
  return cfg


def worker(case: str, threads: int) -> dict:
  """Times `case` in this process, pinned to `threads` cores."""
  os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:threads])
  import tensorflow as tf  # noqa: PLC0415
  tf.config.threading.set_inter_op_parallelism_threads(threads)
  tf.config.threading.set_intra_op_parallelism_threads(threads)
  tf.config.set_visible_devices([], "GPU")
  import tempfile  # noqa: PLC0415
  import tensorflow_datasets as tfds  # noqa: PLC0415
  from vit_spectral.data import input_pipeline  # noqa: PLC0415

  count, batch, timed = _SIZES[case]
  if case == "imagenet_deit":
    images = _encoded_images(tf, count, IMAGENET_SHAPE, "jpeg", seed=0)
  else:
    images = _encoded_images(tf, count, (32, 32), "png", seed=0)
  labels = tf.range(count, dtype=tf.int64) % 10

  def as_dataset(self, split, decoders=None, read_config=None, **kwargs):
    del self, split, decoders, read_config, kwargs   # encoded records, SkipDecoding
    return tf.data.Dataset.from_tensor_slices({"image": images, "label": labels})

  with tempfile.TemporaryDirectory() as data_dir, \
      tfds.testing.mock_data(as_dataset_fn=as_dataset):
    cfg = _input_config(case, data_dir, batch)
    stream = input_pipeline.create_train_dataset(
        cfg, seed=0, process_index=0, process_count=1).as_numpy_iterator()
    for _ in range(2):   # warm-up: the shuffle buffer fills, the threads start
      next(stream)
    wall, cpu = time.perf_counter(), _cpu_seconds()
    for _ in range(timed):
      next(stream)
    wall, cpu = time.perf_counter() - wall, _cpu_seconds() - cpu
  return {"case": case, "threads": threads, "images": timed * batch,
          "images_per_s": timed * batch / wall, "images_per_cpu_s": timed * batch / cpu,
          "mean_kb_per_record": float(tf.reduce_mean(
              tf.cast(tf.strings.length(images), tf.float32))) / 1024}


def _median(values):
  values = sorted(values)
  mid = len(values) // 2
  return values[mid] if len(values) % 2 else 0.5 * (values[mid - 1] + values[mid])


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--cases", default=",".join(CASES))
  parser.add_argument("--threads", default="1,2", help="comma-separated core counts")
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--target_rate", type=float, default=1000.0,
                      help="images/s a train step consumes (an input, e.g. a GPU's rate)")
  parser.add_argument("--out", default=os.path.join(RESULTS, "input_pipeline.json"))
  parser.add_argument("--worker", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.worker:
    case, threads = args.worker.split(":")
    print(json.dumps(worker(case, int(threads))))
    return

  cases = args.cases.split(",")
  unknown = sorted(set(cases) - set(CASES))
  if unknown:
    raise SystemExit(f"--cases: unknown {unknown}; choose from {list(CASES)}")
  threads = [int(t) for t in args.threads.split(",")]
  available = len(os.sched_getaffinity(0))
  if max(threads) > available:
    raise SystemExit(f"--threads={args.threads}: this process may use {available} cores")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
  runs = []
  for r in range(args.rounds):
    for case in cases:
      for t in threads:
        done = subprocess.run([sys.executable, os.path.abspath(__file__),
                               f"--worker={case}:{t}"], env=env, capture_output=True,
                              text=True, check=False)
        if done.returncode:
          raise SystemExit(f"worker {case}:{t} failed:\n{done.stderr[-3000:]}")
        runs.append(dict(json.loads(done.stdout.strip().splitlines()[-1]), round=r))
        print(f"round {r} {case:16s} threads {t}: {runs[-1]['images_per_s']:8.1f} img/s "
              f"{runs[-1]['images_per_cpu_s']:8.1f} img/CPU-s", flush=True)

  summary = []
  for case in cases:
    for t in threads:
      mine = [x for x in runs if x["case"] == case and x["threads"] == t]
      per_cpu = _median([x["images_per_cpu_s"] for x in mine])
      summary.append({
          "case": case, "threads": t,
          "images_per_s": _median([x["images_per_s"] for x in mine]),
          "images_per_s_range": [min(x["images_per_s"] for x in mine),
                                 max(x["images_per_s"] for x in mine)],
          "images_per_s_per_core": _median([x["images_per_s"] for x in mine]) / t,
          "images_per_cpu_s": per_cpu,
          "cores_for_target_rate": args.target_rate / per_cpu,
          "mean_kb_per_record": mine[0]["mean_kb_per_record"]})

  print(f"\n| case | threads | img/s (min–max) | img/s per core | img per CPU-s | "
        f"cores for {args.target_rate:g} img/s |")
  print("|---|---|---|---|---|---|")
  for s in summary:
    low, high = s["images_per_s_range"]
    print(f"| {s['case']} | {s['threads']} | {s['images_per_s']:.0f} ({low:.0f}–{high:.0f}) | "
          f"{s['images_per_s_per_core']:.0f} | {s['images_per_cpu_s']:.0f} | "
          f"{s['cores_for_target_rate']:.1f} |")
  load = os.getloadavg()
  result = {
      "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
      "machine": f"{platform.processor() or platform.machine()}, "
                 f"{os.cpu_count()} cores, load average {load[0]:.1f}",
      "target_rate": args.target_rate, "rounds": args.rounds,
      "summary": summary, "runs": runs}
  os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
  with open(args.out, "w") as f:
    json.dump(result, f, indent=2)
  print(f"\nwrote {args.out}")


if __name__ == "__main__":
  main()
