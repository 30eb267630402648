"""Two processes on localhost (CPU, Gloo collectives), each holding its own rows, reproduce the single-process run.

Each worker pins itself to one core (two JAX programs sharing both cores slow each other down many times), joins
with ``bayeskern.distributed.initialize``, shards its own rows with ``shard_rows`` (uneven counts: 120 and 181
rows) and checks every row-scaled computation against the same call on the whole sample in one process.
"""

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "howto" / "cluster.md"
EXAMPLE = ROOT / "examples" / "cluster" / "two_sample_and_lengthscale.py"

WORKER = textwrap.dedent("""
    import os, sys
    pid, port, data, part = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    os.sched_setaffinity(0, {pid % os.cpu_count()})
    os.environ["JAX_PLATFORMS"] = "cpu"
    import bayeskern as bk
    from bayeskern import distributed
    assert distributed.initialize(f"127.0.0.1:{port}", 2, pid)
    bk.enable_x64()
    import jax
    import numpy as np
    from bayeskern import compression, cyclic
    from bayeskern.bke import log_pseudolikelihood
    from bayeskern.inference import run_nuts
    from bayeskern.jdl import fit_jdl
    from bayeskern.models import bke_model
    from bayeskern.sharding import load_rows, local_rows, shard_rows

    def close(a, b, rtol):
        a, b = np.asarray(a, float), np.asarray(b, float)
        assert np.all(np.abs(a - b) <= rtol * np.maximum(np.abs(b), 1e-300)), (a, b)

    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((301, 2)), rng.standard_normal((250, 2)) + 0.3
    W = X[:, :1] ** 2 + 0.1 * rng.standard_normal((301, 1))
    cut_x, cut_y = [0, 120, 301][pid:pid + 2], [0, 200, 250][pid:pid + 2]
    Xs, Ys, Ws = (shard_rows(A[a:b]) for A, (a, b) in ((X, cut_x), (Y, cut_y), (W, cut_x)))
    assert Xs.num_rows == 301 and not Xs.values.is_fully_addressable
    # each process holds only its own rows (padded to 181 per process)
    assert sum(s.data.shape[0] for s in Xs.values.addressable_shards) == 181
    assert np.array_equal(local_rows(Xs), X[cut_x[0]:cut_x[1]])

    # the sharded calls run on both processes (they are collectives); process 0 then checks them against the
    # single-process answers, computed once
    k, q = bk.RBF(0.8), np.linspace(-1.5, 1.5, 7)[:, None]
    Z, X_rest = X[:10], X[10:]
    Rs = load_rows(data, start=10)  # the rows of X_rest, read from the file: each process reads its half
    assert np.array_equal(local_rows(Rs), X_rest[[0, 145, 291][pid]:[0, 145, 291][pid + 1]])
    f = jax.value_and_grad(lambda ell, A: log_pseudolikelihood(A, Z, bk.RBF(ell), 1.0))
    x, y, xs, ys = X[:, :1], W, Xs[:, :1], Ws  # compression of the (x, w) pairs: a column of the sharded X
    assert np.array_equal(local_rows(xs), X[cut_x[0]:cut_x[1], :1]) and not xs.values.is_fully_addressable
    assert np.array_equal(local_rows(Xs[:, 1]), X[cut_x[0]:cut_x[1], 1])  # an integer index drops the axis
    assert np.array_equal(local_rows(Xs[:, [1, 0]]), X[cut_x[0]:cut_x[1], ::-1])

    def compute(X, Y, W, R, x, y):
        if part == "statistics":
            # the random-feature tests: every process gathers the rows, the chunks (several, with this cap) are dealt
            # out between the processes and their sums added
            cyclic._CHUNK_ENTRIES = 20_000
            mmd = bk.mmd_test(X, Y, "bayes", key=jax.random.key(7), method="features", num_features=8,
                              n_permutations=99)
            hsic = bk.hsic_test(X, W, "bayes", "median", key=jax.random.key(8), method="features", num_features=8,
                                n_permutations=99)
            return {"mmd": bk.mmd2_unbiased(X, Y, k, block_size=64),
                    "hsic": bk.hsic_unbiased(X, W, k, bk.RBF(0.5), block_size=64),
                    "kernel_sum": bk.kernels.kernel_sum(k, X, Y),
                    "bke": f(0.7, R),
                    "mmd_test": (mmd.p_value, mmd.kernel_statistics), "hsic_test": (hsic.p_value, hsic.kernel_statistics)}
        model = fit_jdl(W, X, bk.RBF(0.5), bk.RBF(0.5), 1e-4, constraint="data_box")  # masked column extremes too
        if X is Xs:
            assert sum(s.data.shape[0] for s in model.basis_x.A.addressable_shards) == 181  # the factor stays split
        return {"jdl": model.conditional_expectation(q).mean,
                "jkh": compression.jkh(x, y, 4, key=jax.random.key(2), lam_c=1e-2, candidates=60,
                                       progress_bar=False).indices,
                "ackip": compression.ackip(x, y, 5, key=jax.random.key(1), lam_c=1e-2, num_steps=20, n_init=2,
                                           progress_bar=False).x,
                "nuts": run_nuts(bke_model, R, Z, key=jax.random.key(3), num_chains=1, num_warmup=15, num_samples=15,
                                 progress_bar=False, rhat_max=10.0, min_ess=1).samples["lengthscale"]}

    got = compute(Xs, Ys, Ws, Rs, xs, ys)
    if pid == 0:
        want = compute(X, Y, W, X_rest, x, y)
        for name, value in got.items():
            if name == "jkh":
                assert np.array_equal(value, want[name])
            elif name in ("mmd_test", "hsic_test"):   # the same decision, statistics equal to rounding
                assert value[0] == want[name][0], (name, value[0], want[name][0])
                close(value[1], want[name][1], 1e-10)
            elif name == "bke":
                close(value[0], want[name][0], 1e-10)
                close(value[1], want[name][1], 1e-10)
            else:
                close(value, want[name], 1e-10 if name in ("mmd", "hsic", "kernel_sum") else 1e-8)
    print("ok", pid)
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(commands, cwd, timeout=240):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    procs = [subprocess.Popen(c, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c in commands]
    try:
        outs = [p.communicate(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            p.kill()
    return [(p.returncode, out, err) for p, (out, err) in zip(procs, outs)]


def _two_processes(tmp_path, part):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", rng.standard_normal((301, 2)))  # the same X the workers draw
    port = _free_port()
    results = _launch([[sys.executable, "-c", WORKER, str(i), str(port), str(tmp_path / "x.npy"), part]
                       for i in (0, 1)], tmp_path)
    for i, (code, out, err) in enumerate(results):
        assert code == 0 and f"ok {i}" in out, err[-3000:]


def test_two_processes_reproduce_the_single_process_statistics(tmp_path):
    """MMD, HSIC, kernel sums, the BKE pseudolikelihood and its gradient; the random-feature MMD and HSIC tests."""
    _two_processes(tmp_path, "statistics")


@pytest.mark.slow  # suite time: the solvers on sharded rows are checked on several devices of one process, and
def test_two_processes_reproduce_the_single_process_solvers(tmp_path):  # NUTS adds nothing sharded to the BKE gradient
    """A JDL fit, kernel herding, ACKIP and NUTS on rows split over two processes."""
    _two_processes(tmp_path, "solvers")


@pytest.mark.slow  # suite time: the statistics test runs two processes already
def test_the_cluster_guide_local_launch_runs(tmp_path):
    """The guide's two-process command, as written there, with small data."""
    text = GUIDE.read_text()
    line = next(ln.strip() for ln in text.splitlines() if "--process-id 0" in ln)
    assert line.startswith("python examples/cluster/two_sample_and_lengthscale.py")
    rng = np.random.default_rng(1)
    np.save(tmp_path / "P.npy", rng.standard_normal((160, 2)))
    np.save(tmp_path / "Q.npy", rng.laplace(size=(150, 2)))
    port = _free_port()
    commands = []
    for i in (0, 1):
        args = line.rstrip(" &").split()[1:]
        args = [a.replace("P.npy", str(tmp_path / "P.npy")).replace("Q.npy", str(tmp_path / "Q.npy"))
                .replace("localhost:12345", f"127.0.0.1:{port}") for a in args]
        args[args.index("--process-id") + 1] = str(i)
        pin = f"import os, runpy, sys; os.sched_setaffinity(0, {{{i}}}); sys.argv = sys.argv[1:]; " \
              "runpy.run_path(sys.argv[0], run_name='__main__')"
        commands.append([sys.executable, "-c", pin, str(ROOT / args[0])] + args[1:] + ["--samples", "10"])
    results = _launch(commands, ROOT)
    for code, out, err in results:
        assert code == 0, err[-3000:]
    out = results[0][1]
    assert "processes: 2, rows of X: 160, rows of Y: 150" in out and "MMD^2" in out and "lengthscale" in out
    assert "MMD^2" not in results[1][1]  # only process 0 reports


def test_initialize_is_a_no_op_in_one_process_and_checks_its_arguments(monkeypatch):
    from bayeskern import distributed

    for name in distributed.CLUSTER_SIZE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert distributed.initialize() is False
    assert distributed.initialize(num_processes=1) is False
    with pytest.raises(ValueError, match="together"):
        distributed.initialize("127.0.0.1:1234", 2)
    with pytest.raises(ValueError, match="process_id"):
        distributed.initialize("127.0.0.1:1234", 2, 2)
    with pytest.raises(ValueError, match="num_processes"):
        distributed.initialize("127.0.0.1:1234", 0, 0)
    with pytest.raises(ValueError, match="cpu_collectives"):
        distributed.initialize(cpu_collectives="nccl")


def test_shard_rows_pads_uneven_rows_with_a_mask_in_one_process():
    import jax

    import bayeskern as bk
    from bayeskern.sharding import local_rows, shard_rows

    X = np.random.default_rng(2).standard_normal((7, 3))
    Xs = shard_rows(X)
    assert Xs.num_rows == 7 and Xs.shape == (7, 3) and Xs.values.shape[0] % len(jax.devices()) == 0
    assert np.array_equal(local_rows(Xs), X)
    with pytest.raises(ValueError, match="empty"):
        shard_rows(np.zeros((0, 3)))
    with pytest.raises(TypeError, match="mmd_test with method='auto' takes X and Y on one process"):
        bk.mmd_test(Xs, X, bk.RBF(1.0), key=jax.random.key(0))
    for columns in (slice(0, 1), 2, [2, 0]):  # columns of the sharded sample, rows still split
        part = Xs[:, columns]
        assert np.array_equal(local_rows(part), X[:, columns]) and part.num_rows == 7
        assert part.values.sharding.spec[0] == "rows"
    with pytest.raises(TypeError, match=r"rows\[:, columns\]"):
        Xs[:3]
