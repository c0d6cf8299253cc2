"""Paper 001 (Qi et al., LipsFormer): its claims.

At initialisation / theorems:
  001-eq2      CenterNorm is Lipschitz with constant ≤ √D/(√D−1)·… (eq. 2: ‖γ‖∞·D/(D−1) bound)
  001-eq5      spectral initialisation gives every weight matrix spectral norm 1 (eq. 5)
  001-thm1     the SCSA bound of Thm 1 holds over a sampled Lipschitz estimate
  001-thm2     a LipsFormer-ViT's empirical Lipschitz constant stays below its bound; the
               plain ViT's is orders larger at init (Thm 2, eq. 19, §1)
  001-appj     DropPath's expected training output equals the evaluation output (App. J)
Training (digits LipsFormer-ViT, 12 blocks, no warmup, every seed):
  001-table3-norm       LayerNorm in place of CenterNorm does not converge
  001-table3-attention  dot-product attention in place of SCSA diverges
  001-table3-alpha      large α initialisations (0.4, 1) diverge or do not converge
ImageNet only:
  001-table2   LipsFormer-CSwin-T 83.5 % / LipsFormer-Swin-T 82.7 % (not testable here)
"""

from __future__ import annotations

import functools

import numpy as np

from benchmarks.claims import probes
from benchmarks.claims.digits_runs import train
from benchmarks.claims.ledger import entry, experiment, verdict

PAPER = "001"


_entry = functools.partial(entry, PAPER)


# ---------------------------------------------------------------- at init


@experiment("lipsformer_init", PAPER, ("001-eq2", "001-eq5", "001-thm1", "001-thm2", "001-appj"))
def lipsformer_init(seeds, small):
  import jax  # noqa: PLC0415
  import jax.numpy as jnp  # noqa: PLC0415
  from vit_spectral.configs import lipsformer_digits  # noqa: PLC0415
  from vit_spectral.layers.norms import make_norm  # noqa: PLC0415
  from vit_spectral.models import build_model  # noqa: PLC0415

  rng = np.random.default_rng(0)
  entries = []
  # eq. 2: CenterNorm(x) = γ ⊙ D/(D−1) (x − mean(x)) + β; Lip = ‖γ‖∞ D/(D−1).
  dim = 32
  norm = make_norm("center_norm", 1e-6)
  variables = norm.init(jax.random.PRNGKey(0), jnp.zeros((1, dim)))
  fn = jax.jit(lambda x: norm.apply(variables, x))
  trials = 50 if small else 2000
  x = rng.normal(size=(trials, dim)) * rng.uniform(0.01, 10, size=(trials, 1))
  dx = rng.normal(size=(trials, dim)) * 1e-2
  ratios = (np.linalg.norm(np.asarray(fn(jnp.asarray(x + dx, jnp.float32)))
                           - np.asarray(fn(jnp.asarray(x, jnp.float32))), axis=-1)
            / np.linalg.norm(dx, axis=-1))
  ln_norm = make_norm("layer_norm", 1e-6)
  ln_vars = ln_norm.init(jax.random.PRNGKey(0), jnp.zeros((1, dim)))
  ln = jax.jit(lambda v: ln_norm.apply(ln_vars, v))
  x_small = rng.normal(size=(trials, dim)) * 1e-3
  dx_small = rng.normal(size=(trials, dim)) * 1e-5
  ln_ratios = (np.linalg.norm(np.asarray(ln(jnp.asarray(x_small + dx_small, jnp.float32)))
                              - np.asarray(ln(jnp.asarray(x_small, jnp.float32))), axis=-1)
               / np.linalg.norm(dx_small, axis=-1))
  bound = dim / (dim - 1)
  ok = float(ratios.max()) <= bound * (1 + 1e-3)
  entries.append(_entry(
      "001-eq2", "§4.1.1, eq. 2",
      "CenterNorm is Lipschitz with constant D/(D−1)·‖γ‖∞; LayerNorm is not Lipschitz (near zero variance).",
      f"Library CenterNorm (D={dim}, γ = 1 at init): ‖Δy‖/‖Δx‖ over {trials} random x (scales 0.01–10) "
      "and small Δx; LayerNorm (ε = 1e-6) at inputs of scale 1e-3 for contrast.",
      {"max_ratio_centernorm": float(ratios.max()), "bound_D_over_D-1": bound,
       "max_ratio_layernorm_small_inputs": float(ln_ratios.max())},
      "reproduced" if ok else "not_reproduced", "a ratio exceeded D/(D−1)"))
  # eq. 5 on the digits LipsFormer-ViT: every block kernel, as a matrix (in, out).
  depth = 2 if small else 4
  config = lipsformer_digits.get_config(f"depth={depth},conv=false")
  config.model.encoder_mode = "loop"          # one kernel per block
  model = build_model(config.model, 10)
  images = jnp.asarray(probes.probe_images(2 if small else 8))
  params = model.init(jax.random.PRNGKey(0), images, train=False)["params"]
  norms = []
  for path, leaf in jax.tree_util.tree_flatten_with_path(params["encoder"])[0]:
    key = jax.tree_util.keystr(path)
    if key.endswith("['kernel']"):
      leaf = np.asarray(leaf)
      # DenseGeneral's (fan_in, out) reading: q/k/v (D, H, Dh) -> (D, H·Dh),
      # the output projection (H, Dh, D) -> (H·Dh, D).
      mat = leaf.reshape(-1, leaf.shape[-1]) if "'out'" in key else leaf.reshape(leaf.shape[0], -1)
      norms.append(float(np.linalg.norm(mat, 2)))
  ok = bool(norms) and max(abs(n - 1.0) for n in norms) < 1e-2
  entries.append(_entry(
      "001-eq5", "§4.1.4, eq. 5",
      "Spectral initialisation divides each Xavier-initialised weight by its largest singular value: spectral norm 1.",
      f"Digits LipsFormer-ViT (depth {depth}, width 32, no conv branch), every Dense kernel of the encoder at init, "
      "read as an (inputs × outputs) matrix.",
      {"kernels": len(norms), "min_spectral_norm": min(norms), "max_spectral_norm": max(norms)},
      "reproduced" if ok else "not_reproduced", "a kernel's spectral norm is not 1"))
  iters = 5 if small else 40
  lips = _block_lipschitz(model, params, images, iters)
  base_config = lipsformer_digits.get_config(f"depth={depth},conv=false,baseline=true")
  base_model = build_model(base_config.model, 10)
  base_params = base_model.init(jax.random.PRNGKey(0), images, train=False)["params"]
  base = _block_lipschitz(base_model, base_params, images, iters, with_bound=False)
  ok1 = all(e <= b for e, b in zip(lips["empirical"], lips["bounds"]))
  entries.append(_entry(
      "001-thm1", "§4.1.2, Thm. 1; §4.2, eq. 19 per block",
      "Each LipsFormer block (SCSA with Thm. 1's bound, CenterNorm, weighted residuals) is Lipschitz, below its bound.",
      f"Digits LipsFormer-ViT (depth {depth}, width 32, τ = 12, ε = 1e-6) at init, {len(images)} test digits: per block the "
      "bound of `analysis.vit_lipschitz_bound` and a power-iteration estimate of ‖J‖₂ at the tokens "
      "entering it (`analysis.empirical_lipschitz`, a lower bound of the constant).",
      {"bound_per_block": lips["bounds"], "estimate_per_block": lips["empirical"]},
      "reproduced" if ok1 else "not_reproduced", "an estimate exceeded its bound"))
  ok2 = lips["stack"] <= lips["network_bound"] and lips["stack"] < base["stack"]
  entries.append(_entry(
      "001-thm2", "§4.2, Thm. 2, eq. 19; §1",
      "A LipsFormer's Lipschitz constant is bounded at init (eq. 19) and small, unlike a standard ViT's.",
      "The same LipsFormer-ViT and the pre-LN LayerNorm/dot-product ViT of the same shape at init: eq. 19's "
      "bound of the stack of blocks and power-iteration estimates of the stack's ‖J‖₂.",
      {"lipsformer_stack_bound": lips["network_bound"], "lipsformer_stack_estimate": lips["stack"],
       "plain_vit_stack_estimate": base["stack"],
       "plain_vit_estimate_per_block": base["empirical"]},
      "reproduced" if ok2 else "not_reproduced",
      "the estimate exceeded the bound or the plain ViT's"))
  entries.append(_drop_path_entry(small))
  return entries


def _block_lipschitz(model, params, images, iters: int, with_bound: bool = True) -> dict:
  """Per block and for the stack: power-iteration estimates of ‖J‖₂ at the
  tokens entering each block (and eq. 19's bounds when `with_bound`)."""
  import flax.linen as nn  # noqa: PLC0415
  from vit_spectral.analysis import empirical_lipschitz, vit_lipschitz_bound  # noqa: PLC0415
  from vit_spectral.models import per_layer  # noqa: PLC0415
  from vit_spectral.models.layouts import layer_specs_of, layer_trees  # noqa: PLC0415
  from vit_spectral.models.token_layouts import TokenLayout  # noqa: PLC0415
  from vit_spectral.models.vit import Block, Encoder  # noqa: PLC0415
  seen = {}

  def grab(next_fun, args, kwargs, context):
    if isinstance(context.module, Encoder) and context.method_name == "__call__":
      seen["input"] = args[0]
    return next_fun(*args, **kwargs)

  with nn.intercept_methods(grab):
    _, state = model.apply({"params": params}, images, train=False, mutable=["intermediates"])
  outputs = [layer["block_output"] for layer in per_layer(state["intermediates"])]
  inputs = [seen["input"]] + outputs[:-1]
  grid = (images.shape[1] // model.patch_size,) * 2
  prefix = inputs[0].shape[1] - grid[0] * grid[1]
  blocks = [(Block(spec, TokenLayout(grid, prefix)), tree)
            for spec, tree in zip(layer_specs_of(model), layer_trees(params))]

  def run_blocks(x, chosen):
    for block, tree in chosen:
      (x, _), _ = block.apply({"params": tree}, (x, None), 0.0)
    return x

  out = dict(
      empirical=[float(empirical_lipschitz(lambda x, b=b: run_blocks(x, [b]), x, num_iters=iters))
                 for b, x in zip(blocks, inputs)],
      stack=float(empirical_lipschitz(lambda x: run_blocks(x, blocks), inputs[0], num_iters=iters)))
  if with_bound:
    report = vit_lipschitz_bound(model, params, num_tokens=inputs[0].shape[1])
    out.update(bounds=[float(b) for b in report.block_bounds],
               network_bound=float(report.network_bound))
  return out


def _drop_path_entry(small):
  import jax  # noqa: PLC0415
  import jax.numpy as jnp  # noqa: PLC0415
  from vit_spectral.layers.drop_path import DropPath  # noqa: PLC0415
  x = jnp.ones((4096 if not small else 512, 8), jnp.float32)
  out = {}
  for rescale in (True, False):
    layer = DropPath(rescale=rescale)
    train_out = layer.apply({}, x, 0.5, False, rngs={"dropout": jax.random.PRNGKey(0)})
    eval_out = layer.apply({}, x, 0.5, True)
    out[f"rescale_{rescale}"] = {"mean_train": float(train_out.mean()),
                                 "eval": float(eval_out.mean())}
  ok = all(abs(v["mean_train"] - v["eval"]) < 0.05 for v in out.values())
  return _entry(
      "001-appj", "App. J",
      "DropPath lowers the Lipschitz bound; at test time the branch is scaled so that evaluation sees the "
      "training expectation.",
      "Library DropPath at p = 0.5 on ones: mean over examples of the training output vs the evaluation "
      "output, with and without the 1/(1−p) rescaling (LipsFormer's form).",
      out, "reproduced" if ok else "not_reproduced",
      "evaluation differs from the expected training output")


# ---------------------------------------------------------------- training

PARTS = {
    "lipsformer": {},
    "layer_norm": {"norm": "layer_norm"},
    "dot_product": {"attention": "dot_product"},
    "alpha_0.4": {"alpha": 0.4},
    "alpha_1": {"alpha": 1.0},
}
RATES = (2e-3, 1e-2)


def part_config(part: str, depth: int, width: int, lr: float, steps: int):
  from vit_spectral.configs import lipsformer_digits  # noqa: PLC0415
  from vit_spectral.configs.lipsformer_parts import lipsformer_model_fields  # noqa: PLC0415
  change = PARTS[part]
  config = lipsformer_digits.get_config(f"depth={depth},width={width},lr={lr},steps={steps},"
                                        "conv=true")
  config.model.encoder_mode = "loop"
  # α = 1/L with L the number of blocks (eq. 4, Table 6) unless the part sets it.
  fields = lipsformer_model_fields(depth, conv_block=True, alpha=change.get("alpha", 1.0 / depth))
  config.model.block.residual_alpha = fields["block"]["residual_alpha"]
  if "norm" in change:
    config.model.norm = change["norm"]
  if "attention" in change:
    config.model.attention = {"name": change["attention"]}
  return config


def _mean_accuracy(table: dict) -> float:
  """Mean test accuracy over the rates and seeds of a `table` of runs (NaN counts as 0)."""
  values = [run["accuracy"] for runs in table.values() for run in runs.values()]
  return float(np.mean([v if isinstance(v, float) and v == v else 0.0 for v in values]))


def outcome(losses: np.ndarray, diverged: bool) -> str:
  """"diverged" (a NaN/inf loss), "not_converged" (the last 10 % of steps average
  above 90 % of the first step's loss) or "converged"."""
  if diverged or not np.all(np.isfinite(losses)):
    return "diverged"
  tail = losses[-max(1, len(losses) // 10):].mean()
  return "not_converged" if tail > 0.9 * losses[0] else "converged"


@experiment("lipsformer_stability", PAPER,
            ("001-table3-norm", "001-table3-attention", "001-table3-alpha"),
            trains=True)
def lipsformer_stability(seeds, small):
  from benchmarks.figures import new_figure  # noqa: PLC0415
  depth, width = (2, 16) if small else (12, 32)
  steps = 20 if small else 400
  results = {}
  for part in PARTS:
    for lr in RATES:
      for seed in seeds:
        config = part_config(part, depth, width, lr, steps)
        run = train(config, seed=seed, steps=steps, batch_size=64)
        results[(part, lr, seed)] = dict(
            outcome=outcome(run.losses, run.diverged), accuracy=run.test_accuracy,
            final_loss=float(run.losses[-max(1, len(run.losses) // 10):].mean()),
            curve=run.losses[::max(1, steps // 50)].tolist())
        print(f"[lipsformer_stability] {part} lr {lr} seed {seed}: "
              f"{results[(part, lr, seed)]['outcome']} acc {run.test_accuracy:.3f}", flush=True)

  def table(part):
    return {f"lr {lr:g}": {f"seed {s}": {k: results[(part, lr, s)][k]
                                         for k in ("outcome", "accuracy", "final_loss")}
                           for s in seeds} for lr in RATES}

  def outcomes(part, lr=None):
    return [results[(part, r, s)]["outcome"] for r in RATES if lr in (None, r) for s in seeds]

  setup = (f"Digits LipsFormer-ViT (`configs/lipsformer_digits.py`: CenterNorm, SCSA τ = 12, spectral "
           f"init, conv branch, LipsFormer order, α = 1/L with L = {depth} blocks), depth {depth}, width "
           f"{width}, batch 64, {steps} steps of AdamW without warmup at lr {', '.join(map(str, RATES))}; "
           f"one part swapped at a time; seeds {seeds}. The paper: LipsFormer-CSwin-T, ImageNet, 100 "
           "epochs, lr 2e-3 at batch 2048. 'not_converged': the last 10 % of the losses average above 90 % "
           "of the first loss; 'diverged': a NaN/inf loss.")
  fig, axes = new_figure(len(PARTS), 14, 6, columns=4)
  for ax, part in zip(axes, PARTS):
    for lr, color in zip(RATES, ("C0", "C3")):
      for s in seeds:
        curve = results[(part, lr, s)]["curve"]
        ax.plot(np.arange(len(curve)) * max(1, steps // 50), curve, color=color, lw=0.8,
                label=f"lr {lr:g}" if s == seeds[0] else None)
    ax.set(title=part, xlabel="step", ylabel="train loss", ylim=(0, 4))
    ax.legend(fontsize=7)
  full = outcomes("lipsformer")
  base_ok = all(o == "converged" for o in full)
  entries = []
  for cid, part, where, claim in (
      ("001-table3-norm", "layer_norm", "§5.3, Table 3 (Normalization)",
       "LipsFormer with LayerNorm in place of CenterNorm does not converge without warmup; with CenterNorm it does."),
      ("001-table3-attention", "dot_product", "§5.3, Table 3 (Attention)",
       "LipsFormer with dot-product attention in place of SCSA diverges without warmup; with SCSA it trains.")):
    swapped = outcomes(part)
    fails = [o != "converged" for o in swapped]
    entries.append(_entry(
        cid, where, claim, setup,
        {"swapped": table(part), "lipsformer": table("lipsformer")},
        verdict([f and base_ok for f in fails], [any(fails) and base_ok] * len(fails)),
        ("LipsFormer itself did not converge in every run" if not base_ok else
         f"the swapped model converged in {fails.count(False)} of {len(fails)} runs (mean test "
         f"accuracy {_mean_accuracy(table(part)):.1%} vs LipsFormer's "
         f"{_mean_accuracy(table('lipsformer')):.1%}): at {depth} blocks of width {width} on 17 tokens "
         "the failure the paper meets on CSwin-T/ImageNet (not converging, diverging) does not appear"),
        fig if part == "layer_norm" else None))
  large = outcomes("alpha_0.4") + outcomes("alpha_1")
  small_alpha = full
  fails = [o != "converged" for o in large]
  entries.append(_entry(
      "001-table3-alpha", "§5.3, Table 3 (α)",
      "Large initial residual weights (α = 0.4, 1) diverge or do not converge; small ones (α = 1/L) train.",
      setup, {f"alpha {a}": table(p) for a, p in (("1/L", "lipsformer"), ("0.4", "alpha_0.4"),
                                                  ("1", "alpha_1"))},
      verdict([f and all(o == "converged" for o in small_alpha) for f in fails],
              [any(fails)] * len(fails)),
      f"large α failed in {sum(fails)} of {len(fails)} runs: the digits model ({depth} blocks of "
      f"width {width}) tolerates α up to 1 without warmup, unlike the 4-stage CSwin-T"))
  return entries


@experiment("lipsformer_imagenet", PAPER, ("001-table2",))
def lipsformer_imagenet(seeds, small):
  del seeds, small
  return [_entry(
      "001-table2", "§5.2, Table 2",
      "LipsFormer-CSwin-T reaches 83.5 % and LipsFormer-Swin-T 82.7 % top-1 on ImageNet-1K in 300 epochs without warmup.",
      "Not run: ImageNet-1K, 300 epochs at batch 2048. Recipes: `configs/lipsformer_cswin_imagenet.py`, "
      "`configs/imagenet_swin.py:model=LipsFormer-Swin-T`.",
      {"paper_top1": {"LipsFormer-CSwin-T": 83.5, "LipsFormer-Swin-T": 82.7}},
      "not_testable",
      "ImageNet is not on this machine; check with `python train.py "
      "--config=configs/lipsformer_cswin_imagenet.py --workdir=WORKDIR` where TFDS imagenet2012 is prepared")]
