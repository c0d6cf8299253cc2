"""The fused attention call: softmax(scale·q kᵀ + bias, masked)·v, map not returned.

Every variant with a fused path (`Attention.supports_fused`, chosen per call by
`Attention.use_fused`) mixes its values through `fused_attention`, in our
layout (B, T, H, Dh). `kernel_for` picks the kernel from the platform the
program is compiled for (`backends.Backend.attention_kernel`):

* "cudnn" (GPU): cuDNN's flash attention (`jax.nn.dot_product_attention(
  implementation="cudnn")`), for bf16/fp16 and head widths that are multiples
  of 8 up to 128. cuDNN refuses token counts such as ViT's 197 ("Unsupported
  sequence length", on an H200, issue 40), so `padded_attention` zero-pads the
  token axes to a multiple of CUDNN_TOKEN_MULTIPLE and passes the true lengths
  (`query_seq_lengths`, `key_value_seq_lengths`): padded keys get no weight,
  padded queries are sliced off, exactly. A bias or mask enters as cuDNN's
  bias, in the inputs' dtype.
* "splash" (TPU): Pallas' splash attention (`splash_attention`), tokens padded
  to a multiple of SPLASH_BLOCK, the padding given its own segment id so no
  real token sees a padded one. No bias or mask, and no more padding than
  SPLASH_MAX_PADDING (short sequences such as CSwin's stripes take XLA's path).
* "xla": jax's XLA path, which forms the (B, H, T, S) scores inside the step;
  the CPU's kernel, and every call the platform's kernel cannot take.

Precision: the scores accumulate and the softmax runs in float32 on every
kernel, the probabilities meet v in the inputs' dtype: the explicit path's
policy (`attention.base`). The XLA path and splash scale differently (XLA
scales the float32 scores; splash takes q pre-scaled in its dtype, as the
explicit path does). Masks: a query whose keys are all masked gets the
uniform row on XLA's path, as the explicit path's −1e30 gives.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from vit_spectral import backends

# Token counts cuDNN takes: ViT's 197 runs padded to 208 (issue 40's H200 run).
CUDNN_TOKEN_MULTIPLE = 16
_CUDNN_DTYPES = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))
_CUDNN_MAX_HEAD_DIM = 128
# Splash attention's query and key blocks (TPU lanes are 128 wide).
SPLASH_BLOCK = 128
# The most padding (padded tokens / true tokens, queries and keys) splash takes;
# past it XLA's path runs. Compiled for v4-32 (`--dry_run --target`, issue 44):
# ViT's 197 -> 256 (1.30x) gained throughput; CSwin-T's 56-token stripes -> 128
# (2.29x) doubled the memory (7.34 -> 15.78 GiB) and cost 14-16 % of it. The
# bound sits between the two; CSwin-T's 98-token stage-3 stripes (1.31x) keep
# splash.
SPLASH_MAX_PADDING = 1.5


# The kernels' calls in a jaxpr (a Pallas kernel by its name), by name prefix:
# how many B·H·T·S·Dh products each computes (forward QKᵀ and PV; backward
# dV, dP, dQ, dK, without the recomputed QKᵀ; splash splits its backward
# into a dK/dV and a dQ kernel), and which are forward calls.
KERNEL_CALLS = {
    "dot_product_attention_fwd_wrapper": 2, "dot_product_attention_bwd_wrapper": 4,
    "splash_mha_fwd": 2, "splash_mha_dkv": 3, "splash_mha_dq": 1}
_FORWARD_CALLS = ("dot_product_attention_fwd_wrapper", "splash_mha_fwd")


def kernel_call(primitive, params) -> str | None:
  """The `KERNEL_CALLS` entry a jaxpr equation is a call of, or None."""
  name = str(params.get("name") or "") if primitive.name == "pallas_call" else primitive.name
  return next((key for key in KERNEL_CALLS if name.startswith(key)), None)


def is_kernel_forward(primitive, *avals, **params) -> bool:
  """A remat policy: saves a fused kernel's forward outputs (its output and
  softmax statistics), so the backward pass does not run it again."""
  del avals
  return kernel_call(primitive, params) in _FORWARD_CALLS


def kernel_for(platform: str | None, *, dtype: Any, head_dim: int, has_bias: bool,
               has_mask: bool, num_queries: int, num_keys: int) -> str:
  """The kernel (`backends.ATTENTION_KERNELS`) a fused call with these inputs
  (T = `num_queries`, S = `num_keys` tokens) runs on `platform` (None = this
  process's): the platform's, or "xla" where that kernel cannot take the call
  or, for splash, would pad it past SPLASH_MAX_PADDING (module docstring)."""
  kernel = backends.resolve(platform).attention_kernel
  if kernel == "cudnn" and (jnp.dtype(dtype) not in _CUDNN_DTYPES or head_dim % 8
                            or head_dim > _CUDNN_MAX_HEAD_DIM):
    return "xla"
  if kernel == "splash" and (has_bias or has_mask or max(
      _round_up(n, SPLASH_BLOCK) / n for n in (num_queries, num_keys)) > SPLASH_MAX_PADDING):
    return "xla"
  return kernel


def fused_attention(q, k, v, *, dtype: Any, scale: float | None = None, bias=None,
                    mask=None, platform: str | None = None):
  """softmax(scale·q kᵀ + bias, where mask) v per head, without returning the map.

  Args:
    q: (B, T, H, Dh) queries.
    k: (B, S, H, Dh) keys (same head width as q).
    v: (B, S, H, Dh) values.
    dtype: the compute dtype q, k and v are cast to (the module's `dtype`).
    scale: multiplies the scores q·kᵀ (a Python number); None = 1/√Dh, the
      scaling of `base.scaled_dot_logits`.
    bias: optional float scores added after scaling, broadcastable to
      (B, H, T, S) (any rank ≤ 4, heads axis 1 or H).
    mask: optional bool broadcastable to (B, H, T, S); True = may attend.
    platform: what the program is compiled for (`kernel_for`); None = this
      process's backend.

  Returns:
    (B, T, H, Dh) in `dtype`.
  """
  if scale is None:
    scale = 1.0 / np.sqrt(q.shape[-1])
  q, k, v = (jnp.asarray(t).astype(dtype) for t in (q, k, v))
  if bias is not None:
    bias = jnp.asarray(bias, jnp.float32)
  if mask is not None:
    mask = jnp.asarray(mask, bool)
  kernel = kernel_for(platform, dtype=dtype, head_dim=q.shape[-1],
                      has_bias=bias is not None, has_mask=mask is not None,
                      num_queries=q.shape[1], num_keys=k.shape[1])
  if kernel == "cudnn":
    return padded_attention(q, k, v, scale=scale, bias=bias, mask=mask,
                            multiple=CUDNN_TOKEN_MULTIPLE, implementation="cudnn")
  if kernel == "splash":
    return splash_attention(q, k, v, scale=scale)
  # Looked up at call time: tests spy on it to see which path ran.
  return jax.nn.dot_product_attention(q, k, v, bias=bias, mask=mask, scale=scale,
                                      implementation=None)


def _round_up(n: int, multiple: int) -> int:
  return -(-n // multiple) * multiple


def _pad_tokens(x, axis: int, length: int, value=0):
  """x with `axis` zero-padded (or `value`-padded) at the end to `length`."""
  widths = [(0, 0)] * x.ndim
  widths[axis] = (0, length - x.shape[axis])
  return jnp.pad(x, widths, constant_values=value)


def padded_attention(q, k, v, *, scale: float, bias=None, mask=None, multiple: int,
                     implementation: str | None):
  """`jax.nn.dot_product_attention` on token axes padded to a multiple of
  `multiple`, with the true lengths passed: the same softmax·v as unpadded.

  Args:
    q: (B, T, H, Dh), in the compute dtype.
    k: (B, S, H, Dh), likewise.
    v: (B, S, H, Dh), likewise.
    scale: as `fused_attention`.
    bias: as `fused_attention` (float32).
    mask: as `fused_attention` (bool).
    multiple: the padded token counts' multiple.
    implementation: `jax.nn.dot_product_attention`'s ("cudnn"; None = XLA).

  Returns:
    (B, T, H, Dh).
  """
  batch, t, heads, _ = q.shape
  s = k.shape[1]
  tp, sp = _round_up(t, multiple), _round_up(s, multiple)

  def padded(scores, value):
    scores = scores.reshape((1,) * (4 - scores.ndim) + scores.shape)
    scores = jnp.broadcast_to(scores, (scores.shape[0], heads, t, s))
    return _pad_tokens(_pad_tokens(scores, 2, tp, value), 3, sp, value)

  values = v
  q = _pad_tokens(q, 1, tp)
  k, v = _pad_tokens(k, 1, sp), _pad_tokens(v, 1, sp)
  bias = None if bias is None else padded(bias, 0.0)
  out = jax.nn.dot_product_attention(
      q, k, v, bias=bias, mask=None if mask is None else padded(mask, False), scale=scale,
      query_seq_lengths=jnp.full((batch,), t, jnp.int32),
      key_value_seq_lengths=jnp.full((batch,), s, jnp.int32),
      implementation=implementation)[:, :t]
  if mask is None:
    return out
  # A query whose keys are all masked takes the uniform row over the true
  # keys, as the unpadded call and the explicit path give.
  empty = ~jnp.broadcast_to(mask.reshape((1,) * (4 - mask.ndim) + mask.shape),
                            (mask.shape[0] if mask.ndim == 4 else 1, heads, t, s)).any(-1)
  uniform = values.mean(axis=1, keepdims=True).astype(out.dtype)       # (B, 1, H, Dh)
  return jnp.where(empty.transpose(0, 2, 1)[..., None], uniform, out)


def _splash_kernel(heads: int, tp: int, sp: int, interpret: bool):
  from jax.experimental.pallas.ops.tpu import splash_attention as splash  # pylint: disable=import-outside-toplevel
  blocks = splash.BlockSizes(
      block_q=SPLASH_BLOCK, block_kv=SPLASH_BLOCK, block_kv_compute=SPLASH_BLOCK,
      block_q_dkv=SPLASH_BLOCK, block_kv_dkv=SPLASH_BLOCK,
      block_kv_dkv_compute=SPLASH_BLOCK, block_q_dq=SPLASH_BLOCK, block_kv_dq=SPLASH_BLOCK)
  mask = splash.MultiHeadMask([splash.FullMask((tp, sp))] * heads)
  # Made per call (its block masks are arrays of the trace that calls it).
  kernel = splash.make_splash_mha(mask, head_shards=1, q_seq_shards=1,
                                  block_sizes=blocks, interpret=interpret)
  return kernel, splash.SegmentIds


def splash_attention(q, k, v, *, scale: float, interpret: bool = False):
  """Pallas' splash attention (TPU) in our layout, tokens padded to a multiple
  of SPLASH_BLOCK, the padding in a segment of its own.

  Args:
    q: (B, T, H, Dh); k, v: (B, S, H, Dh), in the compute dtype.
    scale: multiplies q before the product (splash scales nothing itself).
    interpret: run the kernel in Pallas' interpreter (any backend; tests).

  Returns:
    (B, T, H, Dh) in q's dtype.
  """
  t, heads, s = q.shape[1], q.shape[2], k.shape[1]
  tp, sp = _round_up(t, SPLASH_BLOCK), _round_up(s, SPLASH_BLOCK)
  dtype = q.dtype

  def attend(q, k, v):   # one device's examples
    kernel, segment_ids = _splash_kernel(heads, tp, sp, interpret)
    q = _pad_tokens(q * jnp.asarray(scale, dtype), 1, tp).transpose(0, 2, 1, 3)
    k, v = (_pad_tokens(x, 1, sp).transpose(0, 2, 1, 3) for x in (k, v))
    ids = segment_ids(q=(jnp.arange(tp) >= t).astype(jnp.int32),
                      kv=(jnp.arange(sp) >= s).astype(jnp.int32))
    out = jax.vmap(lambda a, b, c: kernel(a, b, c, segment_ids=ids))(q, k, v)
    return out.transpose(0, 2, 1, 3)[:, :t].astype(dtype)

  axes = _batch_split(q.shape[0])
  if not axes:
    return attend(q, k, v)
  # XLA cannot partition a Pallas kernel: each device runs it on its examples.
  spec = jax.sharding.PartitionSpec(axes)
  return jax.shard_map(attend, in_specs=(spec, spec, spec), out_specs=spec,
                       check_vma=False)(q, k, v)


def _batch_split(batch: int) -> tuple[str, ...]:
  """The context mesh's axes (`jax.sharding.get_abstract_mesh`; the trainer sets its mesh) the
  batch is split over for a kernel mapped per device: every axis of size > 1,
  in order, while their product divides `batch`; () without a mesh."""
  mesh = jax.sharding.get_abstract_mesh()
  axes, size = [], 1
  for name, n in zip(mesh.axis_names, mesh.axis_sizes):
    if n > 1 and batch % (size * n) == 0:
      axes.append(name)
      size *= n
  return tuple(axes)
