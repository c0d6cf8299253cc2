"""Lipschitz bounds of LipsFormer (paper 001) and an empirical estimate to test them.

* `scsa_lipschitz_bound`: Theorem 1 (App. H), the ∞- and 2-norm bounds of one
  head of scaled cosine similarity attention.
* `multihead_scsa_lipschitz_bound`: the heads of a "cosine" attention module,
  combined as in App. A.2 (sum of head bounds, times 1/K when the concatenation
  is scaled), times the norm of the output projection.
* `lipsformer_lipschitz_bound`: eq. (19), ∏_i (1 + α_i·Lip(f_i)); with α = 1/L it
  is at most exp(κ), κ = max_i Lip(f_i) (Theorem 2, eq. 20; `exp_kappa_bound`).
* `vit_lipschitz_bound`: eq. (19) evaluated on a built ViT's parameters, branch
  by branch, with per-block factors (`LipschitzReport`).
* `empirical_lipschitz`: a lower estimate of a function's local Lipschitz
  constant (2-norm): power iteration on JᵀJ with jvp/vjp.

Conventions. A token matrix X is (N, D); a projection maps a row x ↦ xW with W
of shape (D_in, D_out) (the paper's x_iᵀW). The 2-norm of a map on (N, D)
matrices is the Frobenius norm of its argument (the vectorised 2-norm), the
∞-norm the max-abs entry; a matrix's induced ∞-norm is its max absolute row sum.
In the ∞ bound, √D is the √ of the width of the normalised rows (the head
width): it comes from ‖Q̂‖_∞ ≤ √D_h for rows of ℓ2-norm ≤ 1.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from vit_spectral.attention.cosine import CosineAttention
from vit_spectral.layers.spectral_init import kernel_matrix
from vit_spectral.models.layouts import layer_fields, layer_trees
from vit_spectral.models.specs import BlockSpec, BranchSpec

NORM_KINDS = ("2", "inf")


def matrix_norm(w, kind: str = "2") -> float:
  """Induced norm of the matrix W (D_in, D_out): spectral ("2") or max row sum ("inf")."""
  w = np.asarray(w, np.float64)
  if kind == "2":
    return float(np.linalg.norm(w, 2))
  if kind == "inf":
    return float(np.abs(w).sum(axis=1).max())
  raise ValueError(f"norm={kind!r}; choose one of {list(NORM_KINDS)}")


def scsa_lipschitz_bound(w_q, w_k, w_v, num_tokens: int, *, tau: float, nu: float,
                         epsilon: float, norm: str = "2") -> float:
  """Theorem 1: upper bound on the Lipschitz constant of one SCSA head.

  Lip_∞ ≤ N²√D ντ ε^{-1/2}‖W^K‖_∞ + N√D ντ ε^{-1/2}‖W^Q‖_∞ + 2N ν ε^{-1/2}‖W^{V⊤}‖_∞
  Lip_2 ≤ 2N(N−1) ντ ε^{-1/2}‖W^K‖_2 + 2(N−1) ντ ε^{-1/2}‖W^Q‖_2 + 2N ν ε^{-1/2}‖W^{V⊤}‖_2

  Args:
    w_q: (D_in, D_h) query projection of the head (rows x ↦ xW).
    w_k: (D_in, D_h) its key projection.
    w_v: (D_in, D_h) its value projection.
    num_tokens: N.
    tau: τ of eq. 6.
    nu: ν of eq. 6.
    epsilon: ε of eq. 6.
    norm: "2" or "inf".

  Returns:
    The bound, a float.
  """
  if epsilon <= 0:
    raise ValueError(f"epsilon={epsilon} must be positive")
  n, scale = num_tokens, nu / math.sqrt(epsilon)
  if norm == "inf":
    root_d = math.sqrt(np.shape(w_q)[-1])
    return (n * n * root_d * tau * scale * matrix_norm(w_k, "inf")
            + n * root_d * tau * scale * matrix_norm(w_q, "inf")
            + 2 * n * scale * matrix_norm(np.transpose(w_v), "inf"))
  if norm == "2":
    return (2 * n * (n - 1) * tau * scale * matrix_norm(w_k)
            + 2 * (n - 1) * tau * scale * matrix_norm(w_q)
            + 2 * n * scale * matrix_norm(np.transpose(w_v)))
  raise ValueError(f"norm={norm!r}; choose one of {list(NORM_KINDS)}")


def _cosine_options(attention_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
  """A "cosine" attention's options: `attention_kwargs` over CosineAttention's
  defaults (the one place they are written)."""
  defaults = {f.name: f.default for f in dataclasses.fields(CosineAttention)
              if f.default is not dataclasses.MISSING}
  return {**defaults, **dict(attention_kwargs or {})}


def multihead_scsa_lipschitz_bound(attention_params: Mapping[str, Any], num_tokens: int,
                                   *, tau: float | None = None, nu: float | None = None,
                                   epsilon: float | None = None,
                                   scale_heads: bool | None = None,
                                   norm: str = "2") -> float:
  """Bound for a "cosine" attention module's parameters (App. A.2).

  The concatenation of K heads is at most the sum of their constants (scaled by
  1/K with `scale_heads`), and the output projection multiplies by its norm
  (‖W^O‖_2, or for "inf" the max absolute column sum, the ∞-norm of x ↦ xW^O).
  Biases do not change a Lipschitz constant. Learned "tau"/"nu" parameters,
  when present, override the arguments. An argument left None takes
  `CosineAttention`'s default.
  """
  given = dict(tau=tau, nu=nu, epsilon=epsilon, scale_heads=scale_heads)
  options = _cosine_options({k: v for k, v in given.items() if v is not None})
  epsilon, scale_heads = options["epsilon"], options["scale_heads"]
  tau = float(attention_params.get("tau", options["tau"]))
  nu = float(attention_params.get("nu", options["nu"]))
  kernels = {n: np.asarray(attention_params[n]["kernel"]) for n in ("query", "key", "value")}
  heads = kernels["query"].shape[1]
  total = sum(
      scsa_lipschitz_bound(kernels["query"][:, h], kernels["key"][:, h],
                           kernels["value"][:, h], num_tokens, tau=tau, nu=nu,
                           epsilon=epsilon, norm=norm)
      for h in range(heads))
  out = np.asarray(attention_params["out"]["kernel"])
  out = out.reshape(-1, out.shape[-1])                     # (H·D_h, D)
  out_norm = matrix_norm(out) if norm == "2" else matrix_norm(out.T, "inf")
  return total / (heads if scale_heads else 1) * out_norm


def lipsformer_lipschitz_bound(alphas: Sequence[Any], lips: Sequence[float]) -> float:
  """Eq. (19): Lip(F) ≤ ∏_i (1 + α_i·Lip(f_i)) over the residual branches.

  Args:
    alphas: per-branch residual weights, scalars or per-channel vectors (the
      largest |α| counts: ‖diag(α)‖_2 = max|α|).
    lips: per-branch Lipschitz constants (or bounds) of f_i.
  """
  if len(alphas) != len(lips):
    raise ValueError(f"{len(alphas)} alphas but {len(lips)} Lipschitz constants")
  return float(np.prod([1.0 + float(np.max(np.abs(a))) * float(l)
                        for a, l in zip(alphas, lips)]))


def exp_kappa_bound(lips: Sequence[float]) -> float:
  """Theorem 2: exp(κ), κ = max_i Lip(f_i), the bound of eq. (19) when α = 1/L."""
  return float(math.exp(max(lips)))


@functools.lru_cache(maxsize=None)
def gelu_lipschitz() -> float:
  """sup |GELU'| of flax's (tanh-approximated) GELU, ≈ 1.129, found on a fine grid.

  The paper quotes 1.0998 for the sigmoid approximation x·σ(1.702x) (App. A.1);
  the MLP here uses `flax.linen.gelu`, so its own constant is used.
  """
  grid = jnp.linspace(-8.0, 8.0, 320_001)
  return float(jnp.max(jnp.abs(jax.vmap(jax.grad(jax.nn.gelu))(grid))))


def norm_lipschitz(norm: str, norm_params: Mapping[str, Any]) -> float:
  """Lip of a registered norm: CenterNorm's D/(D−1)·max|γ|; LayerNorm has none."""
  if norm != "center_norm":
    raise ValueError(f"norm={norm!r} has no Lipschitz bound (LayerNorm is not "
                     "Lipschitz, §4.1.1); use 'center_norm' or include_norms=False")
  leaf = norm_params.get("scale", norm_params.get("bias"))
  if leaf is None:
    raise ValueError("CenterNorm without scale or bias: its width is unknown")
  width = np.shape(leaf)[-1]
  gamma = float(np.max(np.abs(norm_params["scale"]))) if "scale" in norm_params else 1.0
  return width / (width - 1) * gamma


class Branch(NamedTuple):
  """One weighted residual branch: its name (`BranchSpec.name`: "conv",
  "attention", "mlp"), α, Lip(f) (a pre-norm counted inside f) and the
  Lipschitz constant of the norm after the residual sum (1 if none)."""
  name: str
  alpha: Any
  lip: float
  post_norm_lip: float


class LipschitzReport(NamedTuple):
  """Eq. (19) on a built model.

  Attributes:
    branches: per block, its `Branch`es in call order.
    block_bounds: per block, ∏ over its branches of post_norm_lip·(1 + |α|·lip).
    network_bound: eq. (19) over every branch, times every post-branch norm
      constant (1 when the norms are left out, the paper's simplification).
  """
  branches: list[list[Branch]]
  block_bounds: list[float]
  network_bound: float


def _branch_lip(spec: BranchSpec, params: Mapping[str, Any],
                block_fields: Mapping[str, Any], num_tokens: int) -> float:
  """Lipschitz bound of the branch function f itself (no norm, no α)."""
  if spec.name == "conv":   # point-wise ∘ depth-wise convolution on the patch grid
    # depth-wise, zero padding: ≤ max_c ‖k_c‖_1 (Young), whatever the grid size
    dw, pw = (params[module]["conv"]["kernel"] for module in spec.modules)
    depthwise = np.asarray(dw)                                     # (k, k, 1, D)
    pointwise = kernel_matrix(pw)                                  # 1×1: a Dense map per token
    return float(np.abs(depthwise).sum(axis=(0, 1, 2)).max()) * matrix_norm(pointwise)
  if spec.name == "conv_depthwise":   # the extra depth-wise branch: the same Young bound
    (module,) = spec.modules
    return float(np.abs(np.asarray(params[module]["conv"]["kernel"])).sum(axis=(0, 1, 2)).max())
  if spec.name == "attention":
    if block_fields["attention"] != "cosine":
      raise ValueError(f"attention={block_fields['attention']!r} has no Lipschitz "
                       "bound (dot-product attention is not Lipschitz, Kim et al.); "
                       "only 'cosine' has one (Theorem 1)")
    options = _cosine_options(block_fields["attention_kwargs"])
    if not options["normalize_value"]:
      raise ValueError("cosine attention with normalize_value=False is not Lipschitz "
                       "(App. K); Theorem 1 needs the normalised V")
    (module,) = spec.modules
    return multihead_scsa_lipschitz_bound(
        params[module], num_tokens, tau=options["tau"], nu=options["nu"],
        epsilon=options["epsilon"], scale_heads=options["scale_heads"])
  if spec.name == "mlp":    # fc2 ∘ GELU ∘ fc1, token-wise
    (module,) = spec.modules
    mlp = params[module]
    return (matrix_norm(mlp["fc1"]["kernel"]) * gelu_lipschitz()
            * matrix_norm(mlp["fc2"]["kernel"]))
  raise ValueError(f"no Lipschitz bound for the block branch {spec.name!r}")


def block_branches(block_params: Mapping[str, Any], block_fields: Mapping[str, Any],
                   num_tokens: int, include_norms: bool = True) -> list[Branch]:
  """The residual branches of one `Block` (loop-layout parameters).

  The branches and where their norms sit come from `BlockSpec.branches` (the
  block's own description), not from parameter names.

  Args:
    block_params: the block's parameters ("encoderblock_i" subtree).
    block_fields: the `BlockSpec` fields (attention, attention_kwargs, norm,
      block_order, residual_alpha, conv_block, ...), e.g. an entry of
      `models.layouts.layer_fields(model)`; other keys are ignored.
    num_tokens: N, tokens per image (CLS included).
    include_norms: count the norms' Lipschitz constants (a pre-norm inside f,
      a post-norm after the residual sum; a branch without a norm counts
      none); False = the paper's simplification that CenterNorm is 1-Lipschitz.
  """
  names = {f.name for f in dataclasses.fields(BlockSpec)}
  block = BlockSpec(**{k: v for k, v in block_fields.items() if k in names})
  block_fields = block.as_dict()
  branches = []
  for spec in block.branches():
    if not spec.residual:
      raise ValueError(f"model.block.attention_residual="
                       f"{block_fields['attention_residual']!r}: the attention output "
                       "is the stream, not a residual branch; eq. (19) needs 'add'")
    lip = _branch_lip(spec, block_params, block_fields, num_tokens)
    norm_lip = 1.0
    if include_norms and (spec.pre_norm or spec.post_norm):
      norm_lip = norm_lipschitz(block_fields["norm"],
                                block_params[f"norm{spec.suffix}"])
    alpha = block_params[f"alpha{spec.suffix}"] if spec.weighted else 1.0
    if spec.pre_norm:
      branches.append(Branch(spec.name, alpha, lip * norm_lip, 1.0))
    else:
      branches.append(Branch(spec.name, alpha, lip, norm_lip))
  return branches


def vit_lipschitz_bound(model, params: Mapping[str, Any], num_tokens: int,
                        include_norms: bool = True) -> LipschitzReport:
  """Eq. (19) for the encoder blocks of a built `ViT`, in any encoder layout.

  Each block is bounded with its own parameters and its own Block fields
  (`models.layouts.layer_trees` and `layer_fields`, so `layer_overrides` are
  respected). The bound covers the stack of blocks (the map from the first
  block's input to the last block's output); the encoder's final norm, the
  patch embedding and the head are outside it.
  """
  trees, fields = layer_trees(params), layer_fields(model)
  if len(trees) != len(fields):
    raise ValueError(f"params have {len(trees)} layers; model.depth={len(fields)}")
  branches = [block_branches(tree, block, num_tokens, include_norms)
              for tree, block in zip(trees, fields)]
  block_bounds = [float(np.prod([b.post_norm_lip * (1 + float(np.max(np.abs(b.alpha))) * b.lip)
                                 for b in block])) for block in branches]
  flat = [b for block in branches for b in block]
  network = (lipsformer_lipschitz_bound([b.alpha for b in flat], [b.lip for b in flat])
             * float(np.prod([b.post_norm_lip for b in flat])))
  return LipschitzReport(branches, block_bounds, network)


def empirical_lipschitz(fn: Callable[[jax.Array], jax.Array], x: jax.Array, *,
                        num_iters: int = 50, key: jax.Array | None = None) -> float:
  """Lower estimate of fn's local Lipschitz constant at x: ‖J(x)‖_2 by power iteration.

  Iterates v ← JᵀJv/‖JᵀJv‖ with one jvp (linearisation) and one vjp (its
  transpose) per step, and returns ‖Jv‖ for the final unit v, which is ≤ ‖J(x)‖_2
  ≤ Lip(fn): a certified lower bound on the operator norm that converges to it.

  Args:
    fn: a differentiable map between arrays (any shapes; 2-norm = Frobenius).
    x: the point.
    num_iters: power iterations.
    key: PRNG key for the random start (default key 0).

  Returns:
    The estimate, a float.
  """
  x = jnp.asarray(x, jnp.float32)
  _, jvp = jax.linearize(fn, x)
  vjp = jax.linear_transpose(jvp, x)

  def unit(v):
    return v / jnp.maximum(jnp.linalg.norm(v.ravel()), 1e-30)

  def step(_, v):
    (w,) = vjp(jvp(v))
    return unit(w)

  key = jax.random.key(0) if key is None else key
  v = unit(jax.random.normal(key, x.shape, x.dtype))
  v = jax.jit(lambda v: jax.lax.fori_loop(0, num_iters, step, v))(v)
  return float(jnp.linalg.norm(jvp(v).ravel()))
