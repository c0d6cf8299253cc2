"""benchmarks/throughput.py: the harness's fields, its FLOP count against the
analytic one, MFU from the peak table, and its one-line errors; the pure
helpers of benchmarks/vs_timm.py (torch itself is not a test dependency)."""

import dataclasses
import json

import jax
import pytest

from benchmarks import throughput, vs_timm

TINY = dict(model="Ti/4", image=8, patch=4, width=16, depth=1, heads=2, mlp=32, batch=8)


@pytest.fixture(scope="module")
def tiny_row():
  """One harness run on a tiny model, MFU computed as for a TPU v5e."""
  return throughput.benchmark(throughput.Spec(**TINY), steps_timed=2, warmup=1,
                              device_kind="TPU v5 lite")


def test_harness_reports_every_field(tiny_row):
  for field in ("compile_s", "step_ms", "images_per_s", "images_per_s_per_device",
                "memory_bytes_per_device", "flops_per_image", "analytic_flops_per_image",
                "mfu", "num_params", "final_loss"):
    assert tiny_row[field] is not None, field
  assert tiny_row["devices"] == jax.device_count() == 8
  assert tiny_row["images_per_s"] == pytest.approx(8 / (tiny_row["step_ms"] / 1e3))
  memory = tiny_row["memory_bytes_per_device"]
  assert memory["total"] == memory["argument"] + memory["output"] + memory["temp"] - memory["alias"]
  # The donated state is aliased: the outputs overwrite the parameters' buffers.
  assert memory["alias"] > 0
  assert tiny_row["final_loss"] == pytest.approx(6.9, abs=0.2)  # log(1000) at a zero head


def test_mfu_comes_from_the_peak_table(tiny_row):
  # TPU v5e: float32 matmuls at jax's default precision run at the bf16 peak.
  assert tiny_row["peak_tflops_per_device"] == 197.0
  expected = tiny_row["flops_per_image"] * tiny_row["images_per_s"] / (8 * 197e12)
  assert tiny_row["mfu"] == pytest.approx(expected)
  assert tiny_row["peak_source"] == "cloud.google.com/tpu/docs/v5e"
  assert "%" in throughput.table_line(tiny_row)


def test_flops_per_image_match_the_analytic_count():
  """The jaxpr's matmuls of the whole train step (fwd + bwd) are the matmul
  count of a plain ViT at ViT-Ti width, exactly; XLA's count (fwd + bwd +
  AdamW) is within 5% above it (norms, softmax, GELU and the update are the
  difference). A scanned, rematerialised encoder is counted as the loop (every
  block once, nothing recomputed): counted from the scan by XLA, two blocks
  would count as one (about half), and remat would add a forward."""
  spec = throughput.Spec(model="Ti/4", image=32, depth=2, batch=8, encoder_mode="scan",
                         remat=True)
  mesh = throughput.sharding.make_mesh(throughput.sharding.MeshSettings())
  analytic = throughput.analytic_flops_per_image(32, 4, 192, 2, 768)
  traced = throughput.counted_step(spec, mesh)
  assert throughput.matmul_flops_per_image(spec, mesh, traced) == pytest.approx(analytic,
                                                                                rel=1e-9)
  assert 1.0 <= throughput.xla_flops_per_image(spec, mesh, traced) / analytic <= 1.05


def test_flops_and_mfu_without_xla_cost_analysis(monkeypatch):
  """Where XLA's cost analysis has no FLOPs (a GPU: cuBLAS calls), the row's
  FLOPs are still the jaxpr's matmul count, and MFU comes from them."""
  monkeypatch.setattr(jax.stages.Lowered, "cost_analysis", lambda self: None)
  spec = throughput.Spec(**TINY)
  row = throughput.benchmark(spec, steps_timed=1, warmup=0, peak=1.0)
  mesh = throughput.sharding.make_mesh(throughput.sharding.MeshSettings())
  assert row["xla_flops_per_image"] is None and row["flops_ratio_xla_to_analytic"] is None
  assert row["flops_source"] == "jaxpr"
  assert row["flops_per_image"] == throughput.matmul_flops_per_image(spec, mesh) > 0
  assert row["mfu"] == pytest.approx(row["flops_per_image"] * row["images_per_s"] / (8 * 1e12))
  cells = throughput.table_line(row).strip("| ").split(" | ")
  assert cells[-3] == f"{row['flops_per_image'] / 1e9:.3f}" and cells[-1].endswith("%")


def test_spec_leaves_the_encoder_mode_to_the_library():
  assert "encoder_mode" not in throughput.Spec().model_config()
  assert throughput.Spec(encoder_mode="loop").model_config()["encoder_mode"] == "loop"


@pytest.mark.parametrize("kind, name", [
    ("TPU v4", "TPU v4"), ("TPU v5 lite", "TPU v5e"), ("TPU v5e", "TPU v5e"),
    ("TPU v5p", "TPU v5p"), ("TPU v5", "TPU v5p"), ("TPU v6 lite", "TPU v6e"),
    ("NVIDIA A100-SXM4-80GB", "A100"), ("NVIDIA A100-PCIE-40GB", "A100"),
    ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA H100 NVL", "H100 NVL"), ("NVIDIA H200", "H200 SXM"),
    ("NVIDIA H200 NVL", "H200 NVL"), ("NVIDIA GH200 480GB", "GH200")])
def test_device_kinds_find_their_peak(kind, name):
  assert throughput.find_peak(kind).name == name


def test_peaks_per_dtype_and_precision():
  assert throughput.peak_tflops("NVIDIA H100 80GB HBM3", "bfloat16") == 989.5
  assert throughput.peak_tflops("NVIDIA H100 80GB HBM3", "float32") == 494.5  # TF32
  assert throughput.peak_tflops("NVIDIA H100 80GB HBM3", "float32", "highest") == 67.0
  assert throughput.peak_tflops("NVIDIA A100-SXM4-40GB", "bfloat16") == 312.0


def test_unknown_device_kind_gives_no_mfu():
  assert throughput.peak_tflops("cpu", "float32") is None
  assert throughput.mfu(1e9, 100.0, 1, None) is None
  row = dict(spec=dataclasses.asdict(throughput.Spec()), variant="dot_product",
             compile_s=1.0, step_ms=10.0,
             images_per_s=800.0, images_per_s_per_device=800.0,
             memory_bytes_per_device=None, flops_per_image=1e9,
             flops_ratio_xla_to_analytic=1.0, mfu=None)
  assert throughput.table_line(row).rstrip(" |").endswith("n/a")


@pytest.mark.parametrize("flag, choices", [
    ("--attention=softmax", "dot_product"), ("--model=XL/16", "Ti/16"),
    ("--implementation=flash", "explicit"), ("--encoder_mode=unrolled", "loop")])
def test_bad_names_fail_with_one_line_naming_the_choices(flag, choices, capsys, tmp_path):
  assert throughput.main([flag, f"--out={tmp_path / 'x.json'}"]) == 2
  error = capsys.readouterr().err.strip()
  assert error.count("\n") == 0
  assert flag.split("=")[0] in error and choices in error
  assert not (tmp_path / "x.json").exists()


def test_sweep_rejects_unknown_variants(capsys):
  assert throughput.main(["--sweep", "--variants", "flash"]) == 2
  assert "dot_product" in capsys.readouterr().err


def test_results_are_json(tiny_row, tmp_path):
  out = tmp_path / "row.json"
  throughput.write_results([tiny_row], str(out))
  result = json.loads(out.read_text())
  assert result["machine"]["devices"] == 8
  assert result["rows"][0]["mfu"] == pytest.approx(tiny_row["mfu"])


def test_vs_timm_helpers():
  times = {"timm": [2.0, 4.0, 3.0], "dot_product/scan": [1.0, 4.0, 6.0]}
  assert vs_timm.paired_ratios(times, "timm") == {"timm": 1.0, "dot_product/scan": 1.0}
  rounds = vs_timm.shuffled_rounds(["a", "b", "c"], 4)
  assert len(rounds) == 4 and all(sorted(r) == ["a", "b", "c"] for r in rounds)
  assert vs_timm.overhead_base("cosine/scan") == "dot_product/scan"
  assert set(vs_timm.OURS) >= {"dot_product/scan", "attn_scale/scan", "feat_scale/scan",
                               "cosine/scan", "hopfield/scan"}


def test_before_after_verdict_reads_the_declared_criterion():
  from benchmarks import vs_timm_before_after as before_after
  above, below = before_after.NO_SLOWER_AT, before_after.SLOWER_BELOW
  assert before_after.verdict({"a": [above, 2.0, above], "b": [1.0]}) == "no_slower"
  # The median decides: one slow pair of three does not.
  assert before_after.verdict({"a": [below - 0.1, above, 1.1]}) == "no_slower"
  assert before_after.verdict({"a": [1.0], "b": [below - 0.01]}) == "slower"
  assert before_after.verdict({"a": [1.0], "b": [(above + below) / 2]}) == "inconclusive"


def test_before_after_rejects_unknown_configurations(capsys):
  from benchmarks import vs_timm_before_after as before_after
  with pytest.raises(SystemExit):
    before_after.parse_args(["--before=HEAD", "--ours", "nope/scan"])
  err = capsys.readouterr().err.strip().splitlines()[-1]
  assert "--ours" in err and "dot_product/scan" in err
