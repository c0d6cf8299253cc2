"""benchmarks/*: each experiment's results dict -> its figure -> the PNG beside the
JSON, through the script's own `--replot` (no training), on small made-up results."""

import json
import os

import numpy as np
import pytest

from benchmarks import (eigen_digits, figures, hopfield_digits, hopfield_rank_collapse,
                        lipsformer_lr_sweep, oversmoothing_families, probe_digits)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _replot(script, results, tmp_path, name: str) -> str:
  """Writes `results` as <tmp>/<name>.json, runs `script.main(--replot)`; the PNG's path."""
  out = str(tmp_path / f"{name}.json")
  with open(out, "w") as f:
    json.dump(results, f)
  script.main(["--replot", f"--out={out}"])
  png = figures.png_path(out)
  with open(png, "rb") as f:
    assert f.read(8) == PNG_MAGIC
  assert 5_000 < os.path.getsize(png) < 300_000
  return png


def test_png_path_sits_beside_the_json():
  assert figures.png_path("benchmarks/results/x.json") == "benchmarks/results/x.png"
  with pytest.raises(ValueError, match="must end in .json"):
    figures.png_path("benchmarks/results/x.png")


def test_new_figure_hides_the_unused_cells():
  fig, axes = figures.new_figure(5, 6.0, 4.0, columns=3)
  assert len(axes) == 5
  assert sum(ax.get_visible() for ax in fig.axes) == 5 and len(fig.axes) == 6


def test_rank_collapse_curves(tmp_path):
  depths, seeds = 4, 2
  columns = {name: (0.5 ** np.arange(1, depths + 1)[:, None] * np.ones(seeds)).tolist()
             for name in hopfield_rank_collapse.COLUMNS}
  results = dict(seeds=seeds, max_depth=depths, num_images=360, columns=columns)
  _replot(hopfield_rank_collapse, results, tmp_path, "hopfield_rank_collapse")


def test_lr_sweep_curves_mark_diverged_runs(tmp_path):
  rows = [dict(config=name, learning_rate=rate, steps=300, depth=12, width=32,
               diverged=diverged, eval_accuracy=None if diverged else 0.5,
               eval_loss=None if diverged else 1.0)
          for name in ("baseline", "lipsformer")
          for rate, diverged in ((1e-3, False), (1e-2, False), (1e-1, name == "baseline"))]
  fig = lipsformer_lr_sweep.plot_lr_sweep(rows)
  labels = fig.axes[0].get_legend_handles_labels()[1]
  assert labels == ["baseline, 300 steps", "baseline, 300 steps: diverged",
                    "lipsformer, 300 steps"]
  _replot(lipsformer_lr_sweep, rows, tmp_path, "lipsformer_lr_sweep")


def test_hopfield_violins_from_histograms(tmp_path):
  rng = np.random.default_rng(0)
  models = {}
  for name, centre in (("dot_product", 0.6), ("hopfield", 0.3)):
    layers = [hopfield_digits.layer_row(layer, np.clip(rng.normal(centre, 0.2, 5000), -1, 1),
                                        rng.uniform(0.1, 1, 360), rng.uniform(0, 2, 1440))
              for layer in (1, 2, 3)]
    models[name] = dict(eval_accuracy=0.95, layers=layers)
  row = models["hopfield"]["layers"][0]
  assert sum(row["cosine_histogram"]) == 5000
  assert len(row["cosine_histogram"]) == hopfield_digits.HISTOGRAM_BINS
  assert row["quantiles"][2] == pytest.approx(0.3, abs=0.02)
  _replot(hopfield_digits, dict(steps=10, workdir="w", models=models), tmp_path,
          "hopfield_digits")


def test_probe_figure_from_probe_arrays(tmp_path):
  layers, images, heads, tokens = 3, 4, 2, 5
  rng = np.random.default_rng(0)
  probe_result = {name: rng.uniform(0, 1, (layers, images)) for name in probe_digits.COLUMNS}
  probe_result["attention_spectrum"] = rng.uniform(0, 1, (layers, images, heads, tokens))
  model = probe_digits.model_results(probe_result)
  assert np.allclose(model["hc_dc_ratio"], probe_result["hc_dc_ratio"].mean(axis=1))
  assert np.asarray(model["attention_spectrum"]).shape == (layers, tokens)
  results = dict(workdir="w", step=10, attention="dot_product", accuracy=0.9, num_images=images,
                 trained=model, init=model)
  _replot(probe_digits, results, tmp_path, "probe_digits")


def test_eigen_figure(tmp_path):
  rng = np.random.default_rng(0)

  def variant(accuracy):
    spectra = [[rng.normal(size=8).tolist(), rng.normal(size=8).tolist()] for _ in range(4)]
    table = dict(low_pass=0.9, not_low_pass=0.1, tied=0, cases=100)
    return dict(accuracy=accuracy, hfc_lfc_per_layer=[2.0, 1.5, 1.0, 0.8], hfc_lfc_last=0.8,
                table1_full=table, table1_per_head=table, asymmetry_per_layer=[1, 1, 1, 1],
                h_eigenvalues_per_layer=spectra, h_condition_per_layer=[10, 20, 30, 40])

  results = dict(steps=10, seed=0,
                 results={name: variant(0.9) for name in ("standard", "minus", "plus")})
  _replot(eigen_digits, results, tmp_path, "eigen_digits")


def test_oversmoothing_families_curves_init_and_trained(tmp_path):
  curve = lambda depth, scale: {m: (scale * 0.9 ** np.arange(depth)).tolist()
                                for m in oversmoothing_families.METRICS}
  families = {"ViT": {"layers": 4, "init": curve(4, 1.0), "trained": curve(4, 2.0)},
              "CaiT": {"layers": 6, "init": curve(6, 0.5), "trained": None}}
  results = dict(num_images=2, image_size=224, families=families)
  png = _replot(oversmoothing_families, results, tmp_path, "oversmoothing_families")
  assert png.endswith("oversmoothing_families.png")


def test_every_family_of_the_benchmark_builds_from_its_timm_name():
  for label, name in oversmoothing_families.FAMILIES.items():
    model = oversmoothing_families.architecture(name)
    assert type(model).__name__ in ("ViT", "CaiT", "Swin"), label
