"""benchmarks/gpu_step_plans.py: its HLO, buffer-assignment and live-range
readers on a hand-written module and on a tiny scan compiled for this CPU
(the GPU compiles themselves are the benchmark's, not a test's)."""

import jax
import jax.numpy as jnp
import pytest

from benchmarks import gpu_step_plans as plans

# A loop of 12 trips whose body has one fusion and one cuBLAS call; one more
# fusion and a cuDNN attention call after it.
HLO = """HloModule test

%fused_add (p0: f32[4]) -> f32[4] {
  %p0 = f32[4]{0} parameter(0)
  ROOT %add = f32[4]{0} add(%p0, %p0)
}

%body (arg: (s32[], f32[4])) -> (s32[], f32[4]) {
  %arg = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%arg), index=0
  %x = f32[4]{0} get-tuple-element(%arg), index=1
  %f = f32[4]{0} fusion(%x), kind=kLoop, calls=%fused_add
  %g = f32[4]{0} custom-call(%f), custom_call_target="__cublas$lt$matmul"
  ROOT %t = (s32[], f32[4]{0}) tuple(%i, %g)
}

%cond (arg: (s32[], f32[4])) -> pred[] {
  %arg = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%arg), index=0
  %n = s32[] constant(12)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %c = s32[] constant(0)
  %t = (s32[], f32[4]{0}) tuple(%c, %x)
  %w = (s32[], f32[4]{0}) while(%t), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"12"}}
  %y = f32[4]{0} get-tuple-element(%w), index=1
  %z = f32[4]{0} fusion(%y), kind=kLoop, calls=%fused_add
  ROOT %r = f32[4]{0} custom-call(%z), custom_call_target="__cudnn$fmhaSoftmax"
}
"""

# ViT-S/16 at 224², batch 256 per device.
VIT_S = plans.Dims(batch=256, tokens=197, width=384, heads=6, head_dim=64, mlp=1536,
                   depth=12, classes=1000, image=224)


def test_hlo_counts_fusions_and_custom_calls_per_loop_trip():
  counts = plans.hlo_counts(HLO)
  assert counts["fusions_static"] == 2
  assert counts["fusions_per_step"] == 12 + 1
  assert counts["cublas_static"] == 1 and counts["cublas_per_step"] == 12
  assert counts["cudnn_fmha_per_step"] == 1
  assert counts["while_trip_counts"] == [12]
  assert counts["custom_call_targets"] == {"__cublas$lt$matmul": 12, "__cudnn$fmhaSoftmax": 1}


@pytest.mark.parametrize("dtype, shape, expected", [
    ("f32", (12, 256, 197, 384), "width-D activations (B,T,D)"),
    ("bf16", (12, 256, 197, 1536), "MLP hidden (B,T,M)"),
    ("bf16", (50432, 1536), "MLP hidden (B,T,M)"),            # B·T flattened
    ("f32", (256, 6, 197, 197), "attention maps (B,H,T,T)"),
    ("bf16", (1536, 197, 197), "attention maps (B,H,T,T)"),   # B·H flattened
    ("bf16", (12, 256, 208, 6, 64), "q, k, v, attention out (B,T,H,Dh)"),   # padded T
    ("f32", (12, 256, 6, 208), "attention softmax stats (B,H,T)"),
    ("f32", (12, 256, 197, 1), "norm statistics (B,T)"),
    ("pred", (12, 256, 197, 384), "masks (pred)"),
    ("f32", (12, 384, 6, 64), "parameters, gradients, optimizer state"),
    ("f32", (256, 224, 224, 3), "input images"),
    ("f32", (256, 1000), "logits (B,K)"),
])
def test_classify_shape(dtype, shape, expected):
  assert plans.classify_shape(dtype, shape, VIT_S) == expected


def test_settings_and_flags():
  assert plans.parse_settings("scan/dots/u2") == ("scan", "dots", 2)
  assert plans.parse_settings("scan/all/uL") == ("scan", "all", 0)
  assert plans.parse_settings("loop/remat") == ("loop", "remat", 1)
  row = plans.Row("B/16", "scan", "remat", unroll=0)
  assert row.settings == "scan/remat/uL"
  assert row.flags(depth=12) == [
      "--config=imagenet_deit:variant=B/16,batch=256", "--config.model.remat=True",
      "--config.model.encoder_unroll=12", "--dry_run", "--target=a3-highgpu-1g"]
  policy_rows = plans.matrix(["S/16"], ["auto"], ["scan/dots-mlp/u1"], "a3-highgpu-1g", 256)
  assert [r.policy for r in policy_rows] == ["dots-mlp"]


def test_tuple_elements_split_at_top_level_only():
  text = "(s32[], f32[3,4]{1,0}, /*index=2*/(u32[1], bf16[2]{0}))"
  assert plans._tuple_elements(text) == ["s32[]", "f32[3,4]{1,0}", "(u32[1], bf16[2]{0})"]


def test_readers_on_a_scan_compiled_for_this_cpu(tmp_path):
  layers, batch, tokens, width = 3, 16, 40, 160   # activations outweigh weights
  dims = plans.Dims(batch=batch, tokens=tokens, width=width, heads=2, head_dim=80,
                    mlp=640, depth=layers, classes=10, image=32)

  def loss(w, x):
    def body(h, wl):
      return jnp.tanh(h @ wl) * h, None
    return jax.lax.scan(body, x, w)[0].sum()

  w = jnp.ones((layers, width, width))
  x = jnp.ones((batch, tokens, width))
  compiled = jax.jit(jax.grad(loss)).lower(w, x).compile(
      compiler_options={"xla_dump_to": str(tmp_path), "xla_dump_hlo_as_text": True})
  text = compiled.as_text()

  counts = plans.hlo_counts(text)
  assert layers in counts["while_trip_counts"]
  assert counts["fusions_per_step"] >= counts["fusions_static"]

  # The forward loop hands (L, B, T, D) residuals to the backward loop.
  stacked = plans.stacked_residuals(text, dims)
  assert stacked["count"] >= 1
  assert set(stacked["by_class"]) == {"width-D activations (B,T,D) [f32]"}
  assert stacked["bytes"] == stacked["count"] * layers * batch * tokens * width * 4

  dumped = plans.read_dump(str(tmp_path))
  assert dumped is not None
  values = plans.parse_buffer_assignment(dumped[0])
  assert values and all(name.endswith("}") for name in values)
  position, live = plans.peak_live(dumped[1])
  assert position is not None and live
  peak = plans.peak_buffers(*dumped, dims)
  stats = compiled.memory_analysis()
  # Each buffer once: no more than the step's whole memory.
  assert 0 < peak["live_bytes"] <= (stats.argument_size_in_bytes + stats.output_size_in_bytes
                                    + stats.temp_size_in_bytes)
  assert peak["largest"][0]["shape"] == f"f32[{layers},{batch},{tokens},{width}]"
