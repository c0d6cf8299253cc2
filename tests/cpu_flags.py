"""XLA flags of every test process: N fake CPU devices, cheap compiles.

The fusion emitters cut XLA:CPU's compile time by about a third in this suite
(the tests compile far more than they run); numerics tests compare two
computations compiled the same way.
"""


def xla_flags(num_devices: int) -> str:
  return (f"--xla_force_host_platform_device_count={num_devices} "
          "--xla_cpu_use_fusion_emitters=false")
