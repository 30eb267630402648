import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayeskern as bk
from bayeskern.linalg import CholeskyError, cholesky, jittered_cholesky


def _run(code):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd="/")


def test_import_changes_no_global_state_and_subpackages_install_under_bayeskern():
    out = _run(
        """
        import importlib.util, jax
        from jax._src import xla_bridge
        import bayeskern, bayeskern.models, bayeskern.inference, bayeskern.cli
        assert importlib.util.find_spec("models") is None and importlib.util.find_spec("inference") is None
        # no computation on import: JAX's backend is not started, so numpyro.set_host_device_count still works
        assert not xla_bridge._backends, "importing bayeskern started JAX's backend"
        print(jax.config.jax_enable_x64)
        bayeskern.enable_x64()
        print(jax.config.jax_enable_x64)
        """
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"]


def test_the_compilation_cache_lets_a_second_process_skip_compilation(tmp_path):
    """The first process writes its compiled programs to the folder; a second one with the same program finds them
    (JAX counts persistent-cache hits) and writes nothing new. A file is refused as the folder."""
    code = f"""
        import jax, jax.numpy as jnp, bayeskern as bk
        from jax._src import monitoring
        hits = []
        monitoring.register_event_listener(lambda event, **kw: hits.append(event) if "cache_hits" in event else None)
        print(bk.enable_compilation_cache({str(tmp_path / "cache")!r}))
        jax.jit(lambda x: jnp.sin(x) @ jnp.cos(x).T)(jnp.ones((7, 3))).block_until_ready()
        print(len(hits))
        """
    first = _run(code)
    assert first.returncode == 0, first.stderr
    entries = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert first.stdout.split() == [str(tmp_path / "cache"), "0"] and entries
    second = _run(code)
    assert second.returncode == 0, second.stderr
    assert int(second.stdout.split()[1]) >= 1 and sorted(p.name for p in (tmp_path / "cache").iterdir()) == entries
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="path must be a folder"):
        bk.enable_compilation_cache(tmp_path / "file")


def test_gram_solves_refuse_float32():
    out = _run(
        """
        import numpy as np, bayeskern as bk
        from bayeskern import kbr
        from bayeskern.bke import log_pseudolikelihood
        X = np.arange(6.0).reshape(3, 2)
        calls = [lambda: bk.skmse(X[:, :1], bk.RBF(1.0), 0.1),
                 lambda: kbr.kbr_iw_weights(np.eye(3), np.ones(3), np.ones((3, 1)), 0.1),
                 lambda: kbr.cme_weights(np.eye(3), np.ones((3, 1)), 0.1),
                 lambda: log_pseudolikelihood(X[:2, :1], X[2:, :1], bk.RBF(1.0))]
        for call in calls:
            try:
                call()
            except RuntimeError as e:
                print(e)
        """
    )
    assert out.stdout.count("bayeskern.enable_x64()") == 4, out.stdout + out.stderr


def test_cholesky_adds_jitter_only_when_needed_and_reports_failure(rng):
    A = rng.standard_normal((5, 5))
    A = A @ A.T
    L, added, ok = jittered_cholesky(A)
    assert bool(ok) and float(added) == 0.0
    np.testing.assert_allclose(L @ L.T, A, rtol=1e-12)
    singular = np.ones((4, 4))  # rank one: needs jitter
    L, added, ok = jittered_cholesky(singular)
    assert bool(ok) and float(added) > 0 and np.all(np.isfinite(L))
    with pytest.raises(CholeskyError, match="not positive definite"):
        cholesky(-np.eye(3), what="test matrix")
    with pytest.raises(ValueError, match="must be a square matrix"):
        cholesky(np.ones((2, 3)))


def test_cholesky_derivatives_are_those_of_the_factor_found(rng):
    """Forward and reverse mode (and under vmap) equal jnp.linalg.cholesky's where no jitter is needed; with jitter
    they are the derivatives of chol(A + added I) at the added jitter (held constant)."""
    A, C = rng.standard_normal((6, 6)), rng.standard_normal((6, 6))
    A = A @ A.T + 0.1 * np.eye(6)
    ours = lambda A: jnp.sum(jittered_cholesky(A)[0] * C)
    plain = lambda A: jnp.sum(jnp.linalg.cholesky(A) * C)
    np.testing.assert_allclose(jax.grad(ours)(A), jax.grad(plain)(A), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(jax.jacfwd(ours)(A), jax.jacfwd(plain)(A), rtol=1e-10, atol=1e-12)
    batch = np.stack([A, 2 * A])
    np.testing.assert_allclose(jax.vmap(jax.grad(ours))(batch), jax.vmap(jax.grad(plain))(batch), rtol=1e-10)
    singular = np.ones((4, 4))  # rank one: factorised with jitter
    added = float(jittered_cholesky(singular)[1])
    assert added > 0
    shifted = lambda A: jnp.sum(jnp.linalg.cholesky(A + added * jnp.eye(4)))
    np.testing.assert_allclose(jax.grad(lambda A: jnp.sum(jittered_cholesky(A)[0]))(singular),
                               jax.grad(shifted)(singular), rtol=1e-8)


def test_blobs_generator_matches_its_design():
    P, Q = bk.datasets.blobs(3.0, per=2000, seed=1)
    assert P.shape == Q.shape == (18000, 2)
    grid = np.array([(a, b) for a in (-1, 0, 1) for b in (-1, 0, 1)]) * 10 * np.sqrt(2)
    nearest = lambda A: np.argmin(((A[:, None, :] - grid[None]) ** 2).sum(-1), axis=1)   # noise << spacing / 2
    cp, cq = nearest(P), nearest(Q)
    assert np.all(np.abs(np.bincount(cp, minlength=9) - 2000) <= 2) and np.all(np.abs(np.bincount(cq, minlength=9) - 2000) <= 2)
    for c in range(9):
        np.testing.assert_allclose(np.cov((Q - grid[c])[cq == c].T), [[2.0, 1.0], [1.0, 2.0]], atol=0.15)
        np.testing.assert_allclose(np.cov((P - grid[c])[cp == c].T), np.eye(2), atol=0.1)
    assert abs(np.mean(cp == cq) - 1 / 9) < 0.01   # each sample in its own random order: rows are not paired by centre
    xp, xq = bk.datasets.normal_vs_laplace(20000, seed=0)
    assert xp.shape == xq.shape == (20000, 1)
    assert np.var(xq) == pytest.approx(1.0, rel=0.05)
    assert np.mean(np.abs(xq)) == pytest.approx(np.sqrt(0.5), rel=0.05)


def test_perturbed_uniform_samples_its_density():
    from bayeskern.datasets import _perturbed_density

    rng = np.random.default_rng(0)
    for d in (1, 2):
        theta = rng.choice([-1.0, 1.0], size=(3,) * d)
        points = rng.uniform(size=(200_000, d))
        f = _perturbed_density(points, theta, 1.0)
        assert f.min() >= 0 and f.mean() == pytest.approx(1.0, abs=0.01)   # a density on [0, 1]^d at full height
    assert np.all(_perturbed_density(np.array([[1.5], [-0.1]]), np.ones(2), 0.5) == 0)
    XP, XQ = bk.datasets.perturbed_uniform(40_000, 1, 2, 0.8, seed=3)
    assert XP.shape == XQ.shape == (40_000, 1) and XP.min() >= 0 and XP.max() <= 1
    theta = np.random.default_rng(3).choice([-1.0, 1.0], size=(2,))    # the signs the sampler drew first
    edges = np.linspace(0, 1, 33)
    mids = (edges[:-1] + edges[1:]) / 2
    fine = np.linspace(0, 1, 32 * 200 + 1)[:-1] + 1 / (2 * 32 * 200)
    expected = _perturbed_density(fine[:, None], theta, 0.8).reshape(32, 200).mean(1) / 32
    observed = np.histogram(XP[:, 0], edges)[0] / len(XP)
    assert np.max(np.abs(observed - expected) / np.sqrt(expected / len(XP))) < 4.5, (observed, expected, mids)
    same, uniform = bk.datasets.perturbed_uniform(5000, 2, 2, 0.0, seed=4)
    assert abs(same.mean() - 0.5) < 0.02 and abs(uniform.mean() - 0.5) < 0.02


def test_plot_ranges_draws_mean_and_min_max_per_group():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bayeskern.plotting import plot_ranges

    fig, ax = plt.subplots()
    plot_ranges(ax, {"a": [[1.0, 4.0], [3.0, 2.0]], "b": [[0.0, 1.0], [2.0, 1.0]]}, ["m1", "m2"])
    (line_a, _, (bars_a,)), _ = ax.containers
    np.testing.assert_allclose(line_a.get_ydata(), [2.0, 3.0])  # means over repetitions
    np.testing.assert_allclose(line_a.get_xdata(), [-0.125, 0.875])  # groups offset around each name
    segments = np.array([seg[:, 1] for seg in bars_a.get_segments()])
    np.testing.assert_allclose(segments, [[1.0, 3.0], [2.0, 4.0]])  # min-max ranges
    assert [t.get_text() for t in ax.get_xticklabels()] == ["m1", "m2"]
    plt.close(fig)
