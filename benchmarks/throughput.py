r"""Train-step throughput, memory, FLOPs and MFU of one model, or a sweep.

Times the library's real train step (`training.steps.train_step`: forward,
backward, AdamW update from `training.optim`), jitted the way the trainer jits
it (`trainer.sharded_steps`: the state donated, the batch split over a
data-parallel mesh of every device, parameters placed by the tensor-parallel
rules), on synthetic images. For each configuration it reports:

  compile_s            wall time of lowering and compiling the train step
  step_ms              median of `--steps` single steps after `--warmup`
                       steps, each timed to `jax.block_until_ready`
  images_per_s         global batch / step time (and per device)
  memory_bytes         per device, from the compiled step's `memory_analysis()`:
                       argument + output + temp - alias (donated inputs that
                       the outputs overwrite are counted once), the same sum
                       as `train.py --dry_run`
  flops_per_image      model FLOPs of the train step (forward + backward) per
                       image: every matmul and convolution of its jaxpr
                       (`planning.jaxpr_costs.matmul_flops`, the counter of
                       `train.py --dry_run`; "flops_source": "jaxpr"), on
                       every backend, so MFU means the same on a GPU (where
                       XLA's cost analysis has no FLOPs: cuBLAS and cuDNN
                       calls), a TPU and a CPU. Counted on the step traced
                       (not compiled) with encoder_mode="loop" and remat off
                       (nothing recomputed: model FLOPs, not hardware FLOPs)
                       and the attention "explicit" (a fused kernel's matmuls
                       are one opaque call in the jaxpr; the FLOPs are the same)
  xla_flops_per_image  XLA's `cost_analysis()` of that step lowered (elementwise
                       work and the optimizer update included); None where
                       XLA has no count (GPUs)
  analytic_flops_per_image   3 x the forward matmuls of a plain ViT (see
                       `analytic_flops_per_image`) and the ratios of XLA's
                       and the jaxpr's counts to it
  mfu                  images_per_s x flops_per_image / (devices x peak FLOP/s
                       of one device), the peak from PEAKS by `device_kind`
                       (or --peak_tflops); "n/a" for an unknown kind (a CPU)

  python benchmarks/throughput.py                         # one model (defaults below)
  python benchmarks/throughput.py --model=B/16 --image=224 --dtype=bfloat16 --batch=256
  python benchmarks/throughput.py --model=Ti/4 --image=32 --attention=attn_scale
  python benchmarks/throughput.py --model=S/4 --image=32 --width=192 --depth=4  # overrides
  python benchmarks/throughput.py --sweep                 # variants x sizes (SWEEP_*)
  python benchmarks/throughput.py --model=Swin-T --image=224 --batch=32   # a backbone
  python benchmarks/throughput.py --model=LipsFormer-Swin-T --image=224 --batch=32

`--model` takes the ViT names and the other backbones' names (BACKBONE_NAMES:
the registered names that are not ViT names); a backbone keeps its own shape (no
--patch/--width/... overrides) and its own attention unless --attention is
given, and has no analytic FLOP count.

Defaults pick the backend's shape: on CPU Ti/4 at 32x32, batch 128, float32
(the CIFAR shape of `benchmarks/vs_timm.py`); elsewhere B/16 at 224x224,
batch 256, bfloat16. `--sweep` runs every variant of SWEEP_VARIANTS at every
size of SWEEP_SIZES_CPU (CPU: small shapes, a few minutes on 2 cores) or
SWEEP_SIZES_ACCELERATOR (GPU/TPU: Ti/S/B/L at 224 in bfloat16, the per-device
batch halved until the compiled step fits the device's memory), one compile per
row; `--variants` and `--sizes` pick a subset. Results go to
benchmarks/results/throughput*.json (--out) and a markdown table on stdout.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import json
import os
import platform
import re
import statistics
import sys
import time
from typing import Any, Sequence

# Run from a checkout without installing: the repo root, as train.py sees it.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from vit_spectral.attention import registered_attentions  # noqa: E402
from vit_spectral.attention.base import IMPLEMENTATIONS  # noqa: E402
from vit_spectral.attention.value_output import VALUE_OUTPUTS  # noqa: E402
from vit_spectral.models import build_model, registered_model_names  # noqa: E402
from vit_spectral.models.specs import ENCODER_MODES  # noqa: E402
from vit_spectral.models.variants import MODEL_NAMES, variant_fields  # noqa: E402
from vit_spectral.planning import jaxpr_costs  # noqa: E402
from vit_spectral.training import sharding, steps  # noqa: E402
from vit_spectral.training.optim import OptimSettings, make_optimizer  # noqa: E402
from vit_spectral.training.train_state import TrainState  # noqa: E402

# The other backbones' registered names (Swin, CaiT, CSwin, ...): every
# registered name that is not a ViT name.
BACKBONE_NAMES = tuple(n for n in registered_model_names() if n not in MODEL_NAMES)
RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
DTYPES = ("float32", "bfloat16")
NUM_CLASSES = 1000
# MemoryStats fields summed into the per-device total (total = a + o + t - alias).
MEMORY_FIELDS = ("argument", "output", "temp", "alias")


# ---------------------------------------------------------------------------
# Peak dense FLOP/s per device.
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Peak:
  """Peak dense (no sparsity) TFLOP/s of one device (one chip / one GPU).

  Attributes:
    name: the device as its spec sheet names it.
    pattern: regex matched against jax's `device.device_kind`, lower-cased,
      with spaces, dashes and underscores removed ("TPU v5 lite" -> "tpuv5lite").
    bf16: dense bfloat16 matmul peak.
    float32: the peak for float32 matmuls at jax's default precision: on TPU
      the MXU runs them as bfloat16 passes (no separate fp32 figure is
      published; the bf16 peak is the ceiling), on Ampere/Hopper GPUs XLA
      runs them on TF32 tensor cores (dense TF32 peak).
    float32_highest: the plain FP32 (CUDA core) peak, used when
      `jax_default_matmul_precision` is "highest"/"float32" (GPUs only).
    source: the spec sheet.
  """
  name: str
  pattern: str
  bf16: float
  float32: float
  float32_highest: float | None
  source: str


# Order matters: the first match wins (H100 PCIe/NVL before the SXM catch-all).
PEAKS = (
    # Cloud TPU docs, "TPU v4": 275 TFLOPs bf16 peak compute per chip.
    Peak("TPU v4", r"^tpuv4", 275.0, 275.0, None, "cloud.google.com/tpu/docs/v4"),
    # Cloud TPU docs, "TPU v5e": 197 TFLOPs bf16 per chip ("TPU v5 lite" in jax).
    Peak("TPU v5e", r"^tpuv5(lite|e)", 197.0, 197.0, None, "cloud.google.com/tpu/docs/v5e"),
    # Cloud TPU docs, "TPU v5p": 459 TFLOPs bf16 per chip ("TPU v5p" / "TPU v5").
    Peak("TPU v5p", r"^tpuv5(p)?$", 459.0, 459.0, None, "cloud.google.com/tpu/docs/v5p"),
    # Cloud TPU docs, "TPU v6e" (Trillium): 918 TFLOPs bf16 per chip ("TPU v6 lite").
    Peak("TPU v6e", r"^tpuv6(lite|e)", 918.0, 918.0, None, "cloud.google.com/tpu/docs/v6e"),
    # NVIDIA A100 Tensor Core GPU datasheet (SXM4 and PCIe, 40/80 GB alike):
    # BF16 312 TF, TF32 156 TF, FP32 19.5 TF (dense; sparsity doubles the first two).
    Peak("A100", r"a100", 312.0, 156.0, 19.5, "NVIDIA A100 datasheet"),
    # NVIDIA H100 datasheet, H100 PCIe: BF16 1,513 TF / TF32 756 TF with sparsity
    # (dense: half), FP32 51 TF.
    Peak("H100 PCIe", r"h100.*pcie", 756.5, 378.0, 51.0, "NVIDIA H100 datasheet"),
    # Same datasheet, H100 NVL: BF16 1,671 TF / TF32 835 TF with sparsity, FP32 60 TF.
    Peak("H100 NVL", r"h100.*nvl", 835.5, 417.5, 60.0, "NVIDIA H100 datasheet"),
    # Same datasheet, H100 SXM ("NVIDIA H100 80GB HBM3"): BF16 1,979 TF / TF32
    # 989 TF with sparsity, FP32 67 TF.
    Peak("H100 SXM", r"h100", 989.5, 494.5, 67.0, "NVIDIA H100 datasheet"),
    # NVIDIA GH200 Grace Hopper datasheet (the GPU of "NVIDIA GH200 480GB"; matched
    # before the H200 patterns, which its name also contains): BF16 1,979 TF / TF32
    # 989 TF with sparsity, FP32 67 TF.
    Peak("GH200", r"gh200", 989.5, 494.5, 67.0, "NVIDIA GH200 datasheet"),
    # NVIDIA H200 datasheet, H200 NVL: BF16 1,671 TF / TF32 835 TF with sparsity, FP32 60 TF.
    Peak("H200 NVL", r"h200.*nvl", 835.5, 417.5, 60.0, "NVIDIA H200 datasheet"),
    # Same datasheet, H200 SXM: BF16 1,979 TF / TF32 989 TF with sparsity, FP32 67 TF.
    Peak("H200 SXM", r"h200", 989.5, 494.5, 67.0, "NVIDIA H200 datasheet"),
)


def _normalise_kind(device_kind: str) -> str:
  return re.sub(r"[\s\-_]", "", device_kind.lower())


def find_peak(device_kind: str) -> Peak | None:
  """The PEAKS entry for jax's `device_kind` string, or None (e.g. "cpu")."""
  kind = _normalise_kind(device_kind)
  return next((p for p in PEAKS if re.search(p.pattern, kind)), None)


def peak_tflops(device_kind: str, dtype: str, matmul_precision: str | None = None
                ) -> float | None:
  """Peak dense TFLOP/s of one `device_kind` device for `dtype` matmuls.

  Args:
    device_kind: jax's `device.device_kind`.
    dtype: the model's compute dtype, one of DTYPES.
    matmul_precision: `jax.config.jax_default_matmul_precision` (None = default).

  Returns:
    TFLOP/s, or None for a kind not in PEAKS (MFU is then "n/a").
  """
  if dtype not in DTYPES:
    raise ValueError(f"--dtype={dtype!r}; choose one of {list(DTYPES)}")
  peak = find_peak(device_kind)
  if peak is None:
    return None
  if dtype == "bfloat16":
    return peak.bf16
  if matmul_precision in ("highest", "float32") and peak.float32_highest is not None:
    return peak.float32_highest
  return peak.float32


def mfu(flops_per_image: float, images_per_s: float, num_devices: int,
        device_peak_tflops: float | None) -> float | None:
  """Model FLOPs utilisation: achieved FLOP/s over the devices' summed peak."""
  if device_peak_tflops is None:
    return None
  return flops_per_image * images_per_s / (num_devices * device_peak_tflops * 1e12)


# ---------------------------------------------------------------------------
# What one row measures.
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Spec:
  """One benchmark configuration.

  Attributes:
    model: a registered model name ("Ti/16", or a backbone: "Swin-T"), a
      ViT's shape overridden by any of patch, width, depth, heads, mlp that
      is not None.
    image: image side (square images, 3 channels).
    attention: a registered attention variant; None = the model's own
      (dot_product for a ViT, the variant's for a backbone).
    implementation: `model.attention.implementation`, one of IMPLEMENTATIONS.
    feat_scale: FeatScale on every block (paper 000).
    value_output: `model.attention.value_output` (paper 003's eigen modes).
    mlp_activation: `model.block.mlp_activation` (None = the Block's default).
    encoder_mode: "scan" or "loop"; None = the library's default
      (`models.specs.EncoderSpec`); remat: rematerialise each block.
    dtype: compute dtype (parameters stay float32).
    batch: global batch (split over all devices).
  """
  model: str = "Ti/4"
  image: int = 32
  patch: int | None = None
  width: int | None = None
  depth: int | None = None
  heads: int | None = None
  mlp: int | None = None
  attention: str | None = None
  implementation: str = "auto"
  feat_scale: bool = False
  value_output: str = "standard"
  encoder_mode: str | None = None
  remat: bool = False
  dtype: str = "float32"
  batch: int = 128
  mlp_activation: str | None = None

  def check(self) -> None:
    """Raises ValueError (one line naming the option and the choices)."""
    choices = [("model", self.model, MODEL_NAMES + tuple(BACKBONE_NAMES)),
               ("attention", self.attention or "dot_product", registered_attentions()),
               ("implementation", self.implementation, IMPLEMENTATIONS),
               ("value_output", self.value_output, VALUE_OUTPUTS),
               ("encoder_mode", self.encoder_mode, ENCODER_MODES),
               ("dtype", self.dtype, DTYPES)]
    for option, value, valid in choices:
      if value is not None and value not in valid:   # None: the library's default
        raise ValueError(f"--{option}={value!r}; choose one of {list(valid)}")
    shape = dict(patch=self.patch, width=self.width, depth=self.depth, heads=self.heads,
                 mlp=self.mlp)
    given = [k for k, v in shape.items() if v is not None]
    if self.model in BACKBONE_NAMES and given:
      raise ValueError(f"--{given[0]} overrides a ViT's shape; --model={self.model!r} keeps "
                       "its own (drop the shape flags)")
    if self.batch % jax.device_count():
      raise ValueError(f"--batch={self.batch} does not split over the "
                       f"{jax.device_count()} devices")

  def model_config(self) -> dict[str, Any]:
    """`config.model` of this spec (`models.build_model` reads it)."""
    if self.model in BACKBONE_NAMES:
      fields = dict(variant=self.model)
    else:
      fields = variant_fields(self.model)
      overrides = dict(patch_size=self.patch, hidden_size=self.width, depth=self.depth,
                       num_heads=self.heads, mlp_dim=self.mlp)
      fields.update({k: v for k, v in overrides.items() if v is not None})
    attention = dict(implementation=self.implementation)
    if self.attention is not None or self.model not in BACKBONE_NAMES:
      attention["name"] = self.attention or "dot_product"
    if self.value_output != "standard":
      attention["value_output"] = self.value_output
    block = dict(feat_scale=True) if self.feat_scale else {}
    if self.mlp_activation is not None:
      block["mlp_activation"] = self.mlp_activation
    encoder = {} if self.encoder_mode is None else dict(encoder_mode=self.encoder_mode)
    return dict(fields, attention=attention, block=block, remat=self.remat, dtype=self.dtype,
                **encoder)

  def label(self) -> str:
    """The variant as a short name: "attn_scale", "dot_product+feat_scale", ..."""
    parts = [self.attention or ("own attention" if self.model in BACKBONE_NAMES
                                else "dot_product")]
    if self.feat_scale:
      parts.append("feat_scale")
    if self.value_output != "standard":
      parts.append(f"value_output={self.value_output}")
    if self.mlp_activation is not None:
      parts.append(self.mlp_activation)
    return "+".join(parts)


def analytic_flops_per_image(image: int, patch: int, width: int, depth: int, mlp: int,
                             num_classes: int = NUM_CLASSES, channels: int = 3) -> float:
  """Matmul FLOPs of one image through a plain pre-norm ViT (CLS token) in
  one train step: forward + backward = 3 x forward (the backward pass does two
  matmuls per forward one), except the patch embedding's 2 x (no image
  gradient). Per block: Q, K, V and out projections 2·T·4D², MLP 2·T·2DM,
  scores and value mixing 2·2·T²·D; patch embedding 2·N·p²·C·D; head 2·D·K.
  Norms, softmax, GELU and the optimizer update are not counted (XLA counts
  them: its figure is up to a few percent higher on narrow models)."""
  grid = (image // patch) ** 2
  tokens = grid + 1
  block = 2 * tokens * 4 * width ** 2 + 2 * tokens * 2 * width * mlp + 4 * tokens ** 2 * width
  embedding = 2 * grid * patch ** 2 * channels * width
  return 3.0 * (depth * block + 2 * width * num_classes) + 2.0 * embedding


def build_step(spec: Spec, mesh: jax.sharding.Mesh, num_classes: int = NUM_CLASSES):
  """(model, jitted train step, jitted init, abstract batch): as
  `trainer.sharded_steps` builds them (state donated, batch on "data" × "fsdp",
  parameters by `sharding.TENSOR_PARALLEL_RULES` and `fsdp_spec`, the blocks'
  carry pinned by `sharding.split_blocks_by_batch`), without importing the
  input pipeline (TensorFlow)."""
  model = build_model(spec.model_config(), num_classes)
  tx, schedule = make_optimizer(OptimSettings(name="adamw", warmup_steps=100), 10_000)

  def init(rng):
    dummy = jnp.zeros((1, spec.image, spec.image, 3), jnp.float32)
    params = model.init({"params": rng}, dummy, train=False)["params"]
    return TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params))

  abstract_state = jax.eval_shape(init, jax.random.key(0))
  state_sharding = sharding.tree_shardings(abstract_state, mesh)
  data = sharding.batch_sharding(mesh)
  train_step = jax.jit(
      sharding.split_blocks_by_batch(functools.partial(
          steps.train_step, model=model, tx=tx, schedule=schedule,
          base_rng=jax.random.key(1)), mesh),
      in_shardings=(state_sharding, data),
      out_shardings=(state_sharding, sharding.replicated(mesh)),
      donate_argnums=0)
  batch = {"image": jax.ShapeDtypeStruct((spec.batch, spec.image, spec.image, 3), jnp.float32,
                                         sharding=data),
           "label": jax.ShapeDtypeStruct((spec.batch,), jnp.int32, sharding=data)}
  state = jax.tree_util.tree_map(
      lambda leaf, s: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=s),
      abstract_state, state_sharding)
  return model, train_step, jax.jit(init, out_shardings=state_sharding), state, batch


def _cost(analysis) -> dict[str, float]:
  if isinstance(analysis, (list, tuple)):  # older jax: one dict per executable
    analysis = analysis[0] if analysis else {}
  return dict(analysis or {})


def counted_spec(spec: Spec) -> Spec:
  """`spec` as its FLOPs are counted: encoder_mode="loop" and remat off, so
  every block is counted once and no forward work is recomputed (remat and a
  scan's residual policy would add some; XLA counts a while-loop body once),
  and the attention "explicit" (a fused kernel's matmuls would be one opaque
  call in the jaxpr; the model FLOPs are the same)."""
  return dataclasses.replace(spec, encoder_mode="loop", remat=False, implementation="explicit")


def counted_step(spec: Spec, mesh) -> jax.stages.Traced:
  """The train step of `counted_spec(spec)`, traced (not compiled)."""
  _, step, _, state, batch = build_step(counted_spec(spec), mesh)
  return step.trace(state, batch)


def matmul_flops_per_image(spec: Spec, mesh, traced: jax.stages.Traced | None = None) -> float:
  """Model FLOPs of one train step per image: the matmuls and convolutions of
  its jaxpr (`jaxpr_costs.matmul_flops`) for the whole batch, over the batch.
  `traced`: `counted_step(spec, mesh)`, traced here where not given."""
  traced = counted_step(spec, mesh) if traced is None else traced
  return jaxpr_costs.matmul_flops(traced.jaxpr) / spec.batch


def xla_flops_per_image(spec: Spec, mesh, traced: jax.stages.Traced | None = None
                        ) -> float | None:
  """XLA's FLOPs of one train step per image (elementwise work and the update
  included): `cost_analysis()` of `counted_step` lowered, not compiled; None
  where XLA has no count (GPUs: cuBLAS and cuDNN calls hide theirs)."""
  traced = counted_step(spec, mesh) if traced is None else traced
  flops = _cost(traced.lower().cost_analysis()).get("flops")
  return None if flops is None else float(flops) / spec.batch


def memory_per_device(compiled) -> dict[str, int] | None:
  """Bytes per device of the compiled step (MEMORY_FIELDS and their total)."""
  stats = compiled.memory_analysis()
  if stats is None:
    return None
  memory = {k: int(getattr(stats, f"{k}_size_in_bytes")) for k in MEMORY_FIELDS}
  memory["total"] = memory["argument"] + memory["output"] + memory["temp"] - memory["alias"]
  return memory


def synthetic_batch(batch_spec, num_classes: int = NUM_CLASSES) -> dict[str, jax.Array]:
  """Normal images and uniform labels, placed as `batch_spec` (build_step's) says."""
  rng = np.random.default_rng(2)  # numpy: no random-number kernels to compile
  images = rng.standard_normal(batch_spec["image"].shape, np.float32)
  labels = rng.integers(0, num_classes, batch_spec["label"].shape, np.int32)
  return {"image": jax.device_put(images, batch_spec["image"].sharding),
          "label": jax.device_put(labels, batch_spec["label"].sharding)}


def benchmark(spec: Spec, *, steps_timed: int = 10, warmup: int = 2,
              device_kind: str | None = None, peak: float | None = None,
              memory_limit: int | None = None) -> dict[str, Any]:
  """Compiles and times the train step of `spec`; returns one result row.

  Args:
    spec: the configuration (checked first).
    steps_timed: steps timed one by one after the warm-up (median reported).
    warmup: steps run before timing (the first one waits for nothing else).
    device_kind: the device kind MFU is computed for (default: the first
      device's `device_kind`; tests inject one).
    peak: TFLOP/s of one device, overriding PEAKS (e.g. a CPU's measured peak).
    memory_limit: bytes one device may hold; the step is not run (the row
      says "does not fit") when the compiled step needs more.
  """
  spec.check()
  if steps_timed < 1 or warmup < 0:
    raise ValueError(f"--steps={steps_timed} must be >= 1 and --warmup={warmup} >= 0")
  devices = jax.devices()
  mesh = sharding.make_mesh(sharding.MeshSettings(), devices)
  kind = device_kind or devices[0].device_kind
  model, step, init, state_spec, batch_spec = build_step(spec, mesh)

  start = time.perf_counter()
  compiled = step.lower(state_spec, batch_spec).compile()
  compile_s = time.perf_counter() - start
  memory = memory_per_device(compiled)
  traced = counted_step(spec, mesh)
  flops = matmul_flops_per_image(spec, mesh, traced)
  xla_flops = xla_flops_per_image(spec, mesh, traced)
  cfg = spec.model_config()
  if spec.model in BACKBONE_NAMES:   # its own shape; no analytic count of a plain ViT
    analytic, shape, tokens = None, dict(variant=spec.model), None
  else:
    analytic = analytic_flops_per_image(spec.image, cfg["patch_size"], cfg["hidden_size"],
                                        cfg["depth"], cfg["mlp_dim"])
    shape = dict((k, cfg[k]) for k in ("patch_size", "hidden_size", "depth", "num_heads",
                                       "mlp_dim"))
    tokens = (spec.image // cfg["patch_size"]) ** 2 + 1
  row: dict[str, Any] = dict(
      spec=dataclasses.asdict(spec), variant=spec.label(),
      encoder_mode=model.encoder.mode, shape=shape, tokens=tokens,
      backend=jax.default_backend(), device_kind=kind, devices=len(devices),
      compile_s=compile_s, memory_bytes_per_device=memory,
      flops_per_image=flops, flops_source="jaxpr", xla_flops_per_image=xla_flops,
      analytic_flops_per_image=analytic,
      flops_ratio_to_analytic=None if analytic is None else flops / analytic,
      flops_ratio_xla_to_analytic=None if xla_flops is None or analytic is None
      else xla_flops / analytic)
  if memory_limit is not None and memory is not None and memory["total"] > memory_limit:
    row["does_not_fit"] = True
    return row

  state = init(jax.random.key(0))
  row["num_params"] = int(sum(np.prod(x.shape) for x in jax.tree_util.tree_leaves(state.params)))
  batch = synthetic_batch(batch_spec)
  for _ in range(warmup):
    state, metrics = compiled(state, batch)
  jax.block_until_ready((state, metrics) if warmup else state)
  times = []
  for _ in range(steps_timed):
    start = time.perf_counter()
    state, metrics = compiled(state, batch)
    jax.block_until_ready((state, metrics))
    times.append(time.perf_counter() - start)
  step_s = statistics.median(times)
  images_per_s = spec.batch / step_s
  device_peak = peak if peak is not None else peak_tflops(
      kind, spec.dtype, jax.config.jax_default_matmul_precision)
  row.update(
      step_ms=1e3 * step_s, step_ms_min=1e3 * min(times), step_ms_max=1e3 * max(times),
      steps_timed=steps_timed, warmup=warmup,
      images_per_s=images_per_s, images_per_s_per_device=images_per_s / len(devices),
      achieved_tflops_per_device=flops * images_per_s / len(devices) / 1e12,
      peak_tflops_per_device=device_peak,
      peak_source="--peak_tflops" if peak is not None else
      (find_peak(kind).source if find_peak(kind) else None),
      mfu=mfu(flops, images_per_s, len(devices), device_peak),
      final_loss=float(metrics.compute()["loss"]))
  stats = devices[0].memory_stats() or {}
  if "peak_bytes_in_use" in stats:  # the allocator's view (GPU/TPU), device 0
    row["allocator_peak_bytes_device0"] = int(stats["peak_bytes_in_use"])
  return row


# ---------------------------------------------------------------------------
# Sweep.
# ---------------------------------------------------------------------------

# name -> Spec fields of the variant (attention, FeatScale, value/output mode).
SWEEP_VARIANTS = {
    "dot_product": dict(),
    "attn_scale": dict(attention="attn_scale"),
    "feat_scale": dict(feat_scale=True),
    "cosine": dict(attention="cosine"),
    "hopfield": dict(attention="hopfield"),
    "quadratic": dict(attention="quadratic"),
    "eigen": dict(value_output="minus"),
}
# CPU: ViT-Ti and ViT-S widths on 32x32 images in 4x4 patches (65 tokens),
# 4 blocks; the whole sweep takes a few minutes on 2 cores.
SWEEP_SIZES_CPU = {
    "Ti/4-d4": dict(model="Ti/4", image=32, depth=4, batch=64, dtype="float32"),
    "S/4-d4": dict(model="S/4", image=32, depth=4, batch=32, dtype="float32"),
}
# GPU/TPU: the real models at 224 in bfloat16; batch per device, halved until it fits.
SWEEP_SIZES_ACCELERATOR = {
    "Ti/16": dict(model="Ti/16", image=224, batch=512, dtype="bfloat16"),
    "S/16": dict(model="S/16", image=224, batch=512, dtype="bfloat16"),
    "B/16": dict(model="B/16", image=224, batch=256, dtype="bfloat16"),
    "L/16": dict(model="L/16", image=224, batch=128, dtype="bfloat16"),
}


# Timed steps per row of a CPU sweep (the whole sweep in a few minutes on 2 cores).
CPU_SWEEP_STEPS = 6


def sweep_sizes(backend: str) -> dict[str, dict[str, Any]]:
  return SWEEP_SIZES_CPU if backend == "cpu" else SWEEP_SIZES_ACCELERATOR


def _pick(names: Sequence[str] | None, valid: dict, option: str) -> list[str]:
  if not names:
    return list(valid)
  unknown = [n for n in names if n not in valid]
  if unknown:
    raise ValueError(f"--{option} has unknown names {unknown}; choose from {list(valid)}")
  return list(names)


def sweep(args, overrides: dict[str, Any]) -> list[dict[str, Any]]:
  """Every variant x size (filtered by --variants / --sizes), with the flags
  given (`overrides`: --batch is then the global batch of every row); on an
  accelerator the batch is halved until the step fits 90% of the device's
  memory (`bytes_limit` of its allocator)."""
  backend = jax.default_backend()
  sizes = sweep_sizes(backend)
  rows = []
  limit = (jax.devices()[0].memory_stats() or {}).get("bytes_limit")
  for size in _pick(args.sizes, sizes, "sizes"):
    for variant in _pick(args.variants, SWEEP_VARIANTS, "variants"):
      fields = {**sizes[size], **SWEEP_VARIANTS[variant], **overrides}
      if backend != "cpu" and "batch" not in overrides:  # per device -> global
        fields["batch"] = fields["batch"] * jax.device_count()
      while True:
        spec = Spec(**fields)
        steps_timed = args.steps if args.steps is not None else (
            CPU_SWEEP_STEPS if backend == "cpu" else 10)
        row = benchmark(spec, steps_timed=steps_timed, warmup=args.warmup, peak=args.peak_tflops,
                        memory_limit=None if limit is None else int(0.9 * limit))
        if not row.get("does_not_fit") or spec.batch <= jax.device_count():
          break
        print(f"{size} {variant}: batch {spec.batch} needs "
              f"{row['memory_bytes_per_device']['total'] / 2**30:.1f} GiB per device; halving",
              flush=True)
        fields["batch"] = spec.batch // 2
      row["size"] = size
      rows.append(row)
      print(table_line(row), flush=True)
  return rows


# ---------------------------------------------------------------------------
# Output.
# ---------------------------------------------------------------------------

COLUMNS = ("size", "variant", "mode", "dtype", "batch", "compile s", "step ms", "img/s",
           "img/s/dev", "GiB/dev", "GFLOP/img", "XLA/analytic", "MFU")


def _fmt(value, spec: str, missing: str = "n/a") -> str:
  return missing if value is None else format(value, spec)


def table_line(row: dict[str, Any]) -> str:
  spec = row["spec"]
  memory = row["memory_bytes_per_device"]
  mode = (row.get("encoder_mode") or spec["encoder_mode"] or "default") + (
      "+remat" if spec["remat"] else "")
  if spec["implementation"] != "auto":
    mode += f" {spec['implementation']}"
  overrides = [f"{k}={spec[k]}" for k in ("patch", "width", "depth", "heads", "mlp")
               if spec[k] is not None]
  size = row.get("size") or spec["model"] + (f" ({', '.join(overrides)})" if overrides else "")
  cells = [size, row["variant"], mode, spec["dtype"], str(spec["batch"]),
           f"{row['compile_s']:.1f}"]
  if row.get("does_not_fit"):
    cells += ["does not fit"] + [""] * 2
  else:
    cells += [f"{row['step_ms']:.1f}", f"{row['images_per_s']:.1f}",
              f"{row['images_per_s_per_device']:.1f}"]
  cells += [_fmt(memory and memory["total"] / 2**30, ".3f"),
            _fmt(row["flops_per_image"] and row["flops_per_image"] / 1e9, ".3f"),
            _fmt(row["flops_ratio_xla_to_analytic"], ".3f"),
            "" if row.get("does_not_fit") else _fmt(row.get("mfu") and 100 * row["mfu"], ".1f")
            + ("%" if row.get("mfu") else "")]
  return "| " + " | ".join(cells) + " |"


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
  header = "| " + " | ".join(COLUMNS) + " |"
  rule = "|" + "|".join("---" for _ in COLUMNS) + "|"
  return "\n".join([header, rule] + [table_line(r) for r in rows])


def machine() -> dict[str, Any]:
  devices = jax.devices()
  return dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              host=platform.node(), processor=platform.processor() or platform.machine(),
              cpu_count=os.cpu_count(), backend=jax.default_backend(),
              device_kind=devices[0].device_kind, devices=len(devices),
              jax=jax.__version__, xla_flags=os.environ.get("XLA_FLAGS", ""),
              matmul_precision=jax.config.jax_default_matmul_precision)


def write_results(rows: Sequence[dict[str, Any]], path: str) -> None:
  """{"machine": `machine()`, "rows": rows} as JSON at `path`."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(dict(machine=machine(), rows=list(rows)), f, indent=1)


# ---------------------------------------------------------------------------
# Command line.
# ---------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--model", help=f"a registered name, e.g. Ti/16 (default: Ti/4 on CPU, "
                      f"B/16 elsewhere); one of {list(MODEL_NAMES)}")
  parser.add_argument("--image", type=int, help="image side (default: 32 on CPU, 224 elsewhere)")
  for name in ("patch", "width", "depth", "heads", "mlp"):
    parser.add_argument(f"--{name}", type=int, help=f"override the model's {name}")
  parser.add_argument("--attention",
                      help=f"attention variant, one of {list(registered_attentions())} "
                      "(default: the model's own; dot_product for a ViT)")
  parser.add_argument("--implementation", default="auto", help=f"one of {list(IMPLEMENTATIONS)}")
  parser.add_argument("--feat_scale", action="store_true", help="FeatScale on every block")
  parser.add_argument("--value_output", default="standard", help=f"one of {list(VALUE_OUTPUTS)}")
  parser.add_argument("--encoder_mode", help=f"one of {list(ENCODER_MODES)} (default: the "
                      "library's)")
  parser.add_argument("--remat", action="store_true", help="rematerialise every block")
  parser.add_argument("--dtype", help=f"compute dtype, one of {list(DTYPES)} "
                      "(default: float32 on CPU, bfloat16 elsewhere)")
  parser.add_argument("--batch", type=int, help="global batch (default: 128 on CPU, 256 elsewhere)")
  parser.add_argument("--steps", type=int, help="timed steps, median reported (default: 10; "
                      f"{CPU_SWEEP_STEPS} per row of a CPU sweep)")
  parser.add_argument("--warmup", type=int, default=2, help="untimed steps after the compile")
  parser.add_argument("--peak_tflops", type=float,
                      help="peak TFLOP/s of one device, for a device kind not in PEAKS")
  parser.add_argument("--sweep", action="store_true", help="variants x sizes (module docstring)")
  parser.add_argument("--variants", nargs="*", help=f"sweep subset of {list(SWEEP_VARIANTS)}")
  parser.add_argument("--sizes", nargs="*", help="sweep subset of the backend's sizes")
  parser.add_argument("--out", help="JSON path (default: benchmarks/results/throughput*.json)")
  return parser.parse_args(argv)


def single_spec(args) -> Spec:
  """The Spec of a single run: the flags, with the backend's defaults."""
  cpu = jax.default_backend() == "cpu"
  return Spec(model=args.model or ("Ti/4" if cpu else "B/16"),
              image=args.image or (32 if cpu else 224),
              patch=args.patch, width=args.width, depth=args.depth, heads=args.heads,
              mlp=args.mlp, attention=args.attention, implementation=args.implementation,
              feat_scale=args.feat_scale, value_output=args.value_output,
              encoder_mode=args.encoder_mode, remat=args.remat,
              dtype=args.dtype or ("float32" if cpu else "bfloat16"),
              batch=args.batch or (128 if cpu else 256))


def main(argv: Sequence[str] | None = None) -> int:
  args = parse_args(argv)
  try:
    if args.sweep:
      overrides = {k: getattr(args, k) for k in ("encoder_mode", "implementation")}
      given = dict(remat=args.remat, dtype=args.dtype, image=args.image, batch=args.batch,
                   patch=args.patch, width=args.width, depth=args.depth, heads=args.heads,
                   mlp=args.mlp)
      overrides.update({k: v for k, v in given.items() if v})
      print(f"sweep on {jax.default_backend()} ({jax.devices()[0].device_kind} x "
            f"{jax.device_count()})\n" + markdown_table([]), flush=True)
      rows = sweep(args, overrides)
      name = f"throughput_sweep_{jax.default_backend()}.json"
    else:
      spec = single_spec(args)
      steps_timed = 10 if args.steps is None else args.steps
      rows = [benchmark(spec, steps_timed=steps_timed, warmup=args.warmup,
                        peak=args.peak_tflops)]
      name = f"throughput_{jax.default_backend()}.json"
  except ValueError as error:
    print(f"error: {error}", file=sys.stderr)
    return 2
  out = args.out or os.path.join(RESULTS_DIR, name)
  write_results(rows, out)
  print(f"\n{machine()['date']}, {jax.devices()[0].device_kind} x {jax.device_count()}, "
        f"jax {jax.__version__}. GiB/dev: argument + output + temp - alias of the compiled "
        "step. GFLOP/img: the matmuls of fwd + bwd in the step's jaxpr (no remat), the "
        "FLOPs of MFU on every backend. XLA/analytic: XLA's cost analysis of fwd + bwd + "
        "AdamW (encoder looped, no remat; n/a on GPUs) over the matmul count of a plain ViT "
        "of the same shape (variants without Q/K projections, e.g. quadratic, sit below 1). "
        "MFU: against the device kind's peak (n/a: kind not in PEAKS, e.g. a CPU; see "
        "--peak_tflops).\n")
  print(markdown_table(rows))
  print(f"\nwrote {out}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
