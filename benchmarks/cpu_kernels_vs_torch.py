r"""The train step's kernels one by one, XLA:CPU against CPU PyTorch.

`vs_timm.py` compares whole train steps; this script times the kernels they
are made of at the same shape (batch 128, 65 tokens, width 192, 3 heads of 64,
MLP 768, float32), each jitted alone (jax) or called eagerly (torch, 2
threads), median of 30 calls after warm-up. It shows where XLA:CPU sets the
limit: which kernels it runs as fast as PyTorch and which it does not.

Measured 2026-11-23 on the quiet 2-core AMD EPYC (jax 0.10.2, torch 2.14.1),
milliseconds, 2 cores (1 core under `taskset -c 0`):
  dense GEMM (8320 x 192) @ (192 x 768)   torch 13.9-16.7 (30.4)  jax 15.2-15.3 (28.6)
  scores, 384 batched (65 x 64)(64 x 65)  torch 1.8-1.9   (5.6)   jax 4.2-5.0   (4.6)
  GELU, erf                               torch 2.7-3.4   (4.4)   jax 3.6-7.0   (7.2)
  GELU, tanh                              torch 5.4       (10.9)  jax 1.9       (3.7)
  softmax over (128, 3, 65, 65)           torch 0.85      (1.7)   jax 0.74      (1.9)
So the dense matmuls (over half of the step) run at the same speed; XLA:CPU
runs the many small batched attention dots on one core (the same time on 1
and on 2 cores) where PyTorch splits them, 2.3-2.7x slower; splitting the
batch into 2 or 4 dots in one program did not make XLA run them side by side
(4.1-7.3 ms, noise). Element-wise work is a wash (tanh GELU, our default, is
faster in XLA; erf GELU slower).

  PYTHONPATH=. /work/torchenv/bin/python benchmarks/cpu_kernels_vs_torch.py
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

BATCH, TOKENS, WIDTH, HEADS, MLP = 128, 65, 192, 3, 768


def median_ms(call: Callable[[], object], repeats: int = 30) -> float:
  """Median wall time of `call()` in ms, after two warm-up calls."""
  call()
  call()
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    call()
    times.append(time.perf_counter() - start)
  return 1e3 * statistics.median(times)


def main() -> None:
  import jax
  import jax.numpy as jnp
  import numpy as np
  try:
    import torch
  except ImportError:
    raise SystemExit("error: benchmarks/cpu_kernels_vs_torch.py needs torch; run it with a "
                     "Python that has it (pip install torch)") from None
  torch.set_num_threads(2)
  rng = np.random.default_rng(0)
  head_dim = WIDTH // HEADS
  tokens = rng.standard_normal((BATCH * TOKENS, WIDTH), np.float32)
  kernel = rng.standard_normal((WIDTH, MLP), np.float32)
  queries = rng.standard_normal((BATCH * HEADS, TOKENS, head_dim), np.float32)
  hidden = rng.standard_normal((BATCH, TOKENS, MLP), np.float32)
  scores = rng.standard_normal((BATCH, HEADS, TOKENS, TOKENS), np.float32)

  def both(name, jax_fn, torch_fn, *arrays):
    jitted = jax.jit(jax_fn)
    on_device = [jnp.asarray(a) for a in arrays]
    as_torch = [torch.from_numpy(a) for a in arrays]
    ours = median_ms(lambda: jitted(*on_device).block_until_ready())
    theirs = median_ms(lambda: torch_fn(*as_torch))
    print(f"| {name} | {theirs:.2f} | {ours:.2f} | {ours / theirs:.2f} |")

  print(f"jax {jax.__version__} ({jax.default_backend()}), torch {torch.__version__} "
        f"({torch.get_num_threads()} threads); ms, median of 30")
  print("| kernel | torch ms | jax ms | jax / torch |\n|---|---|---|---|")
  both("dense GEMM", lambda a, b: a @ b, lambda a, b: a @ b, tokens, kernel)
  both("batched scores", lambda q: jnp.einsum("btd,bsd->bts", q, q),
       lambda q: torch.bmm(q, q.transpose(1, 2)), queries)
  both("GELU erf", lambda x: jax.nn.gelu(x, approximate=False),
       torch.nn.functional.gelu, hidden)
  both("GELU tanh", lambda x: jax.nn.gelu(x, approximate=True),
       lambda x: torch.nn.functional.gelu(x, approximate="tanh"), hidden)
  both("softmax", lambda s: jax.nn.softmax(s, axis=-1), lambda s: torch.softmax(s, -1), scores)


if __name__ == "__main__":
  main()
