"""Row-sharded JDL on two forced CPU host devices gives the unsharded result."""

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
    from bayeskern.jdl import fit_jdl, jdl_bases
    from bayeskern.sharding import shard_rows
    from bayeskern.kernels import RBF

    assert len(jax.devices()) == 2
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 2))
    Y = X + rng.standard_normal((400, 2))
    plain = jdl_bases(X, Y, RBF(1.0), RBF(1.0), tol=1e-4)
    sharded = jdl_bases(shard_rows(X), shard_rows(Y), RBF(1.0), RBF(1.0), tol=1e-4)  # RowShards
    A = sharded.basis_x.A
    assert not A.sharding.is_fully_replicated and len(A.sharding.device_set) == 2  # rows live on both devices
    assert np.array_equal(np.asarray(plain.basis_x.pivots), np.asarray(sharded.basis_x.pivots))
    assert np.abs(np.asarray(plain.basis_y.A) - np.asarray(sharded.basis_y.A)).max() < 1e-10
    H = [np.asarray(fit_jdl(None, None, None, None, 1e-5, bases=b).H) for b in (plain, sharded)]
    assert np.abs(H[0] - H[1]).max() < 1e-10 * np.abs(H[0]).max()
    odd = [jdl_bases(A, B, RBF(1.0), RBF(1.0), tol=1e-4) for A, B in ((X[:399], Y[:399]),
                                                                     (shard_rows(X[:399]), shard_rows(Y[:399])))]
    H = [np.asarray(fit_jdl(None, None, None, None, 1e-5, constraint="data_box", bases=b).H) for b in odd]
    assert np.abs(H[0] - H[1]).max() < 1e-10 * np.abs(H[0]).max()  # 399 rows: padded to 400, masked
    print("ok")
""")


def test_sharded_factorisation_and_fit_match_the_single_device_run():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr
