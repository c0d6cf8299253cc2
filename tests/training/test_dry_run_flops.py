"""`--dry_run`'s FLOPs count every layer whatever the encoder mode
(`planning.dry_run`): a tiny ViT's reported matmul FLOPs equal 2·M·N·K summed
by hand over its layers, in scan and in loop mode, and grow with depth by the
blocks' share; XLA's count of the compiled step (every loop iteration) agrees
between the modes and grows alike; the hierarchical and CaiT backbones count
the same in both modes.

The configs keep everything the backward pass saves (encoder_residuals="all")
and no dropout or drop-path, so scan and loop mode compute the same products:
on CPU a scan's default residuals ("dots") recompute attention's batched
products in the backward pass, which the matmul count rightly includes.
"""

import importlib

import jax
import pytest

from vit_spectral.configs import digits_vit
from vit_spectral.planning import dry_run

# digits_vit's shape: 8×8×1 images, 2×2 patches (16 tokens + CLS), width 64,
# 4 heads, MLP 128, 10 classes.
BATCH, PATCHES, WIDTH, HEADS, MLP, CLASSES, PATCH_PIXELS = 32, 16, 64, 4, 128, 10, 4
TOKENS = PATCHES + 1
# XLA's count adds what is not a matrix product (LayerNorm, softmax, GELU, the
# loss, AdamW and the gradient norm): 5% of this step (measured 4.8% in loop
# mode, 5.9% in scan mode at depth 4; 5.1% and 6.1% at depth 2); no more than
# 10% of it at this width.
ELEMENTWISE_SHARE = 0.10
# XLA's count of the scan exceeds the loop's by 1.0% (measured): the scan
# applies drop-path with each layer's rate as a traced value (a select and a
# division per activation, with rate 0), where the loop's static rate 0
# drops it at trace time. The matmuls are the same (asserted exactly).
SCAN_OVER_LOOP = 0.02


def block_forward_flops(batch: int = BATCH) -> int:
  """2·M·N·K of one encoder block's forward pass: q, k, v and the output
  projection (D×D each), the MLP's two layers, and attention's q·kᵀ and
  weights·v per head."""
  rows = batch * TOKENS
  dense = 2 * rows * (4 * WIDTH * WIDTH + 2 * WIDTH * MLP)
  attention = 2 * (2 * batch * HEADS * TOKENS * TOKENS * (WIDTH // HEADS))
  return dense + attention


def step_matmul_flops(depth: int, batch: int = BATCH) -> int:
  """A train step's matmul FLOPs by hand: the forward pass, then its backward
  (two products per product: one for each operand's gradient) except the
  patch embedding's input gradient, which nothing needs."""
  embedding = 2 * batch * PATCHES * PATCH_PIXELS * WIDTH
  head = 2 * batch * WIDTH * CLASSES
  return 3 * (depth * block_forward_flops(batch) + head) + 2 * embedding


def _config(module: str, mode: str, depth: int | None = None):
  config = importlib.import_module(f"vit_spectral.configs.{module}").get_config()
  config.model.encoder_mode = mode
  config.model.encoder_residuals = "all"
  config.model.dropout_rate = config.model.drop_path_rate = 0.0
  config.input.batch_size = BATCH
  if depth is not None:
    config.model.depth = depth
  return config


@pytest.fixture(scope="module")
def reports():
  """{(mode, depth): DryRunReport} of the tiny ViT on one device (the loop at
  depth 2: its compile grows with depth, the scan's does not)."""
  return {(mode, depth): dry_run.dry_run(_config("digits_vit", mode, depth), jax.devices()[:1])
          for mode, depth in (("scan", 2), ("scan", 4), ("loop", 2))}


@pytest.fixture(scope="module")
def swin_scan_report():
  """The dry run of digits_swin in scan mode (its matmul count is `plan`'s)."""
  return dry_run.dry_run(_config("digits_swin", "scan"), jax.devices()[:1])


def test_the_hand_count_is_digits_vits_shape():
  config = digits_vit.get_config()
  assert (config.model.hidden_size, config.model.num_heads, config.model.mlp_dim,
          config.model.patch_size, config.input.image_size) == (WIDTH, HEADS, MLP, 2, 8)


def test_matmul_flops_are_the_hand_count_in_scan_and_loop_mode(reports):
  for (mode, depth), report in reports.items():
    assert report.flops == step_matmul_flops(depth), (mode, depth)


def test_matmul_flops_grow_by_the_blocks_with_depth(reports):
  added = reports[("scan", 4)].flops - reports[("scan", 2)].flops
  assert added == 2 * 3 * block_forward_flops()


def test_xla_count_covers_every_layer_in_scan_mode(reports):
  scan, loop = reports[("scan", 2)], reports[("loop", 2)]
  # XLA's own cost analysis counts a loop's body once: 1 of the 2 blocks,
  # about half the step's matmuls. Every iteration counted: all of them.
  for report in (scan, reports[("scan", 4)], loop):
    assert report.flops <= report.xla_flops <= (1 + ELEMENTWISE_SHARE) * report.flops
  assert scan.xla_flops == pytest.approx(loop.xla_flops, rel=SCAN_OVER_LOOP)
  added = reports[("scan", 4)].xla_flops - scan.xla_flops
  blocks = 2 * 3 * block_forward_flops()
  assert blocks <= added <= (1 + ELEMENTWISE_SHARE) * blocks
  assert scan.uncounted_loops == reports[("scan", 4)].uncounted_loops == 0


def test_summary_gives_both_counts_and_no_advice_to_rerun(reports):
  line = next(line for line in reports[("scan", 4)].summary().splitlines()
              if line.startswith("FLOPs"))
  assert line.startswith(f"FLOPs per step and device: {step_matmul_flops(4):.4g} in matmuls, "
                         "every layer (all operations, XLA's count: ")
  assert "loop" not in line


@pytest.mark.extended   # every staged backbone (the hand count above runs by default)
@pytest.mark.parametrize("module", ["digits_swin", "digits_cswin", "digits_cait"])
def test_backbones_count_the_same_matmuls_in_scan_and_loop_mode(module, request):
  counts = {}
  for mode in ("scan", "loop"):
    if (module, mode) == ("digits_swin", "scan"):   # the dry run's count, traced once
      counts[mode] = request.getfixturevalue("swin_scan_report").flops
      continue
    step = dry_run.plan(_config(module, mode), jax.devices()[:1])
    counts[mode] = dry_run.matmul_flops(step)
  assert counts["scan"] == counts["loop"] > 0


@pytest.mark.extended
def test_xla_count_covers_every_stage_of_a_scanned_swin(swin_scan_report):
  # Two stages, each a scan over its 2 blocks. XLA's own figure, each loop
  # body once, falls below the step's products alone (1.47e8 against 1.60e8,
  # measured). Swin's step at width 32 does more besides its products
  # (relative position bias, shifted windows' masks and rolls): 21% more.
  report = swin_scan_report
  assert report.flops <= report.xla_flops <= 1.3 * report.flops
