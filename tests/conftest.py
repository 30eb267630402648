import os
import subprocess
import sys

# Compile time dominates this suite (many small programs, each compiled once). XLA's CPU backend compiles
# them about a third faster with its classic elemental emitters than with the newer fusion emitters, at no
# measured run-time cost here. Probed once in a subprocess (an unknown XLA flag is fatal in a future jaxlib)
# and set before jax is imported; xdist workers and the CLI subprocesses inherit the environment.
_FAST_COMPILE = "--xla_cpu_use_fusion_emitters=false"
if "BAYESKERN_TEST_XLA_PROBED" not in os.environ:
    os.environ["BAYESKERN_TEST_XLA_PROBED"] = "1"
    flags = f"{os.environ.get('XLA_FLAGS', '')} {_FAST_COMPILE}".strip()
    probe = subprocess.run([sys.executable, "-c", "import jax.numpy as jnp; jnp.zeros(1).block_until_ready()"],
                           env={**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu"}, capture_output=True)
    if probe.returncode == 0:
        os.environ["XLA_FLAGS"] = flags

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import bayeskern  # noqa: E402

bayeskern.enable_x64()


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
