"""Compression objectives with data blocks split over two forced CPU host devices equal the one-device values."""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import os
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
    os.environ["JAX_PLATFORMS"] = "cpu"  # two forced host devices, also on a GPU machine
    import jax
    import numpy as np
    import bayeskern
    bayeskern.enable_x64()
    from bayeskern import RBF, compression as bc
    from bayeskern.compression.objectives import ackip_objective, data_blocks, jkip_objective
    from bayeskern.sharding import row_mesh

    assert len(jax.devices()) == 2
    x, y = bc.data.heteroscedastic(301, jax.random.key(0))
    plain, sharded = data_blocks(x, y, 64), data_blocks(x, y, 63, row_mesh())
    assert sharded.x.shape[1] == 64 and len(sharded.x.sharding.device_set) == 2
    assert not sharded.x.sharding.is_fully_replicated
    cx, cy = x[:7] + 0.1, y[:7]
    kx, ky = RBF(0.5), RBF(0.7)
    for f in (lambda a, b, d: jkip_objective(a, b, d, kx, ky), lambda a, b, d: ackip_objective(a, b, d, kx, ky, 1e-2)):
        g = jax.jit(jax.value_and_grad(f, argnums=(0, 1)))
        (v0, g0), (v1, g1) = g(cx, cy, plain), g(cx, cy, sharded)
        assert abs(float(v0) - float(v1)) < 1e-12
        assert max(np.abs(np.asarray(a) - np.asarray(b)).max() for a, b in zip(g0, g1)) < 1e-11
    runs = [bc.ackip(x, y, 6, key=jax.random.key(1), lam_c=1e-2, num_steps=30, progress_bar=False, mesh=mesh)
            for mesh in (None, row_mesh())]
    assert np.abs(runs[0].x - runs[1].x).max() < 1e-9
    print("ok")
""")


def test_sharded_compression_objectives_match_the_single_device_run():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr
