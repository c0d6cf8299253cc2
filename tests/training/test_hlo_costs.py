"""`planning.hlo_costs`: a compiled step's FLOPs with every loop iteration
counted, checked against the same computation unrolled and against 2·M·N·K;
trip counts, data-dependent loops and collectives read from the HLO."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from vit_spectral.planning import hlo_costs, jaxpr_costs

M, K = 32, 64
LAYERS = 6


def _scanned(w, x):
  def body(h, wi):
    return jnp.tanh(h @ wi), None
  return jax.lax.scan(body, x, w)[0].sum()


def _unrolled(w, x):
  h = x
  for i in range(LAYERS):
    h = jnp.tanh(h @ w[i])
  return h.sum()


def _compile(fn, *args):
  return jax.jit(fn).lower(*args).compile()


@pytest.fixture(scope="module")
def args():
  return (jax.ShapeDtypeStruct((LAYERS, K, K), jnp.float32),
          jax.ShapeDtypeStruct((M, K), jnp.float32))


def test_scan_counts_every_iteration_as_unrolled_code_does(args):
  scanned = hlo_costs.step_costs(_compile(_scanned, *args))
  unrolled = hlo_costs.step_costs(_compile(_unrolled, *args))
  matmuls = LAYERS * 2 * M * K * K
  # XLA itself counts the body once: one layer's matmul, not six.
  assert scanned.compiled_flops < 0.5 * matmuls
  assert scanned.flops == pytest.approx(unrolled.flops, rel=0.05)
  assert scanned.flops == pytest.approx(matmuls, rel=0.1)
  (loop,) = scanned.loops
  assert loop.trips == LAYERS and loop.runs == LAYERS
  assert not unrolled.loops and unrolled.flops == unrolled.compiled_flops


def test_gradient_of_a_scan_counts_forward_and_backward_loops(args):
  scanned = hlo_costs.step_costs(_compile(jax.grad(_scanned), *args))
  unrolled = hlo_costs.step_costs(_compile(jax.grad(_unrolled), *args))
  assert sorted(loop.trips for loop in scanned.loops) == [LAYERS, LAYERS]
  assert scanned.flops == pytest.approx(unrolled.flops, rel=0.05)
  assert scanned.flops == pytest.approx(3 * LAYERS * 2 * M * K * K, rel=0.1)


def test_nested_loops_multiply():
  def nested(w, x):
    def outer(h, _):
      def inner(g, wi):
        return jnp.tanh(g @ wi), None
      return jax.lax.scan(inner, h, w)[0], None
    return jax.lax.scan(outer, x, None, length=3)[0].sum()

  w = jax.ShapeDtypeStruct((4, K, K), jnp.float32)
  x = jax.ShapeDtypeStruct((M, K), jnp.float32)
  costs = hlo_costs.step_costs(_compile(nested, w, x))
  assert costs.flops == pytest.approx(3 * 4 * 2 * M * K * K, rel=0.1)
  assert sorted(loop.runs for loop in costs.loops) == [3, 12]


def test_a_loop_body_is_costed_as_a_module_of_the_computations_it_calls(args):
  module = hlo_costs.HloModule.parse(_compile(jax.grad(_scanned), *args).as_text())
  bodies = [dict(i.called())["body"] for instructions in module.computations.values()
            for i in instructions if i.opcode == "while"]
  assert len(bodies) == 2   # forward and backward scans
  for body in bodies:
    alone = hlo_costs.HloModule.parse(module.with_entry(body))
    assert alone.entry == body
    assert set(alone.computations) == module.callees(body) < set(module.computations)
    assert hlo_costs._cpu_cost(module.with_entry(body))["flops"] >= 2 * M * K * K  # pylint: disable=protected-access


def test_data_dependent_loop_is_counted_once_and_named():
  def until_small(x):
    return jax.lax.while_loop(lambda h: jnp.abs(h).sum() > 1.0, lambda h: 0.5 * h @ h.T, x)

  costs = hlo_costs.step_costs(_compile(until_small, jax.ShapeDtypeStruct((K, K), jnp.float32)))
  assert len(costs.uncounted_loops) == 1 and not costs.loops
  assert costs.flops == costs.compiled_flops


def test_collectives_are_counted_per_loop_iteration():
  mesh = Mesh(np.array(jax.devices()[:8]), ("data",))
  split = NamedSharding(mesh, P("data"))

  def summed_each_step(x):
    def body(total, _):
      return total + jnp.sum(x * total, axis=0), None
    return jax.lax.scan(body, jnp.ones((K,), jnp.float32), None, length=5)[0]

  compiled = jax.jit(summed_each_step, in_shardings=split).lower(
      jax.ShapeDtypeStruct((8 * M, K), jnp.float32)).compile()
  costs = hlo_costs.step_costs(compiled)
  kinds = {c.kind: c for c in costs.collectives}
  assert set(kinds) == {"all-reduce"}
  assert kinds["all-reduce"].count == 5
  assert kinds["all-reduce"].bytes == 5 * K * 4


def test_array_bytes_reads_tuples_layouts_and_tiles():
  assert hlo_costs.array_bytes("bf16[64,197,384]{2,1,0:T(8,128)(2,1)S(1)}") == [64 * 197 * 384 * 2]
  assert hlo_costs.array_bytes("(s32[]{:T(128)}, f32[2,3]{1,0}, /*index=2*/pred[4])") == [4, 24, 4]


def test_jaxpr_matmul_flops_count_dots_convolutions_and_scans(args):
  assert jaxpr_costs.matmul_flops(jax.make_jaxpr(_scanned)(*args)) == LAYERS * 2 * M * K * K

  def conv(x, k):
    return jax.lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))
  x = jax.ShapeDtypeStruct((2, 8, 8, 3), jnp.float32)
  k = jax.ShapeDtypeStruct((3, 3, 3, 16), jnp.float32)
  assert jaxpr_costs.matmul_flops(jax.make_jaxpr(conv)(x, k)) == 2 * (2 * 8 * 8 * 16) * (3 * 3 * 3)


def test_largest_arrays_are_the_biggest_outputs_largest_first():
  def fn(x):
    big = jnp.outer(x, x)           # (K, K)
    return (jnp.tanh(big) @ x).sum()
  arrays = jaxpr_costs.largest_arrays(jax.make_jaxpr(fn)(jnp.ones((K,))), 2)
  assert arrays[0].shape == (K, K) and arrays[0].bytes == K * K * 4
  assert arrays[0].bytes >= arrays[1].bytes
