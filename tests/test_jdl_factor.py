"""Algorithm 1 (pivoted Cholesky, bi-orthogonal basis) and the double-orthogonal rotation."""

import jax
import numpy as np
import pytest

from bayeskern.jdl import fit_jdl, rotate
from bayeskern.linalg import pivoted_cholesky
from bayeskern.kernels import RBF


@pytest.mark.parametrize("tol", [1e-2, 1e-6])
def test_theorem_4_1_invariants(tol, rng):
    X = rng.standard_normal((120, 2))
    k = RBF(0.8)
    K = np.asarray(k.gram(X))
    f = pivoted_cholesky(k, X, tol=tol)
    L, Bt, p, d = (np.asarray(a) for a in f)
    m = f.rank
    assert 1 <= m <= 120 and len(set(p.tolist())) == m
    E = K - L @ L.T
    assert np.linalg.eigvalsh(E).min() >= -1e-10  # K - L L^T is PSD
    assert np.trace(E) <= tol * np.trace(K) + 1e-12  # relative trace tolerance (15)
    np.testing.assert_allclose(d, np.diag(E), atol=1e-12)
    B = np.zeros((120, m))
    B[p] = Bt
    np.testing.assert_allclose(B.T @ L, np.eye(m), atol=1e-8)  # (17)
    np.testing.assert_allclose(K @ B, L, atol=1e-8)  # (18)
    Lp = L[p]
    assert np.allclose(np.triu(Lp, 1), 0, atol=1e-12) and np.all(np.diag(Lp) > 0)
    np.testing.assert_allclose(Lp @ Lp.T, K[np.ix_(p, p)], atol=1e-12)  # the pivot block is reproduced
    assert np.allclose(np.tril(Bt, -1), 0)
    np.testing.assert_allclose(Bt, np.linalg.inv(Lp).T, rtol=1e-8, atol=1e-8)
    # greedy pivots: the first is the first index of the largest diagonal (all ones here: index 0)
    assert p[0] == 0


def test_rank_cap_exact_low_rank_and_bad_inputs(rng):
    X = rng.standard_normal((50, 3))
    f = pivoted_cholesky(RBF(1.0), X, tol=0.0, max_rank=7)
    assert f.rank == 7
    # a rank-3 Gram matrix (linear kernel) is recovered exactly in 3 steps
    from bayeskern.kernels import Linear

    f = pivoted_cholesky(Linear(), X, tol=0.0)
    assert f.rank == 3
    np.testing.assert_allclose(np.asarray(f.L) @ np.asarray(f.L).T, X @ X.T, atol=1e-10)
    with pytest.raises(ValueError, match="tol"):
        pivoted_cholesky(RBF(1.0), X, tol=1.5)
    with pytest.raises(ValueError, match="max_rank"):
        pivoted_cholesky(RBF(1.0), X, max_rank=80)
    with pytest.raises(ValueError, match="X contains"):
        pivoted_cholesky(RBF(1.0), np.where(X > 2, np.nan, X))


def test_double_orthogonal_rotation(rng):
    X = rng.standard_normal((80, 2))
    k = RBF(0.7)
    K = np.asarray(k.gram(X))
    f = pivoted_cholesky(k, X, tol=1e-8)
    basis = rotate(f, X)
    m = f.rank
    Q = np.zeros((80, m))
    Q[np.asarray(f.pivots)] = np.asarray(basis.R)
    lam = np.asarray(basis.eigenvalues)
    assert np.all(np.diff(lam) <= 0) and np.all(lam > 0)
    np.testing.assert_allclose(Q.T @ K @ Q, np.eye(m), atol=1e-7)
    np.testing.assert_allclose(np.asarray(basis.A).T @ np.asarray(basis.A), np.diag(lam), atol=1e-8 * lam[0])
    np.testing.assert_allclose(Q.T @ K @ K @ Q, np.diag(lam), atol=1e-7 * lam[0])
    np.testing.assert_allclose(basis.evaluate(k, X), basis.A, atol=1e-8)  # psi at the training points = A


def test_buffers_grow_past_the_first_width(rng):
    """Ranks above the initial 64-column buffer: the doubling path gives the same factor as one wide run."""
    X = rng.uniform(-3, 3, (300, 1))
    k = RBF(0.05)
    f = pivoted_cholesky(k, X, tol=1e-4)
    assert f.rank > 64
    capped = pivoted_cholesky(k, X, tol=1e-4, max_rank=f.rank)
    np.testing.assert_array_equal(f.pivots, capped.pivots)
    K = np.asarray(k.gram(X))
    assert np.trace(K - np.asarray(f.L) @ np.asarray(f.L).T) <= 1e-4 * np.trace(K) + 1e-12


class _CountingRBF(RBF):
    """An RBF kernel that reports the shape of every block it evaluates (a counting column oracle)."""

    calls: list = []

    def evaluate(self, X, Y):
        jax.debug.callback(lambda a, b: _CountingRBF.calls.append((a.shape[0], b.shape[0])), X, Y)
        return super().evaluate(X, Y)


def test_algorithm_1_calls_the_column_oracle_exactly_m_times(rng):
    """One column per pivot and no call that forms K, across a buffer doubling (m > 64)."""
    X = rng.uniform(-3, 3, (300, 2))
    _CountingRBF.calls.clear()
    factor = pivoted_cholesky(_CountingRBF(0.4), X, tol=1e-6)
    jax.effects_barrier()
    assert factor.rank > 64
    assert _CountingRBF.calls == [(300, 1)] * factor.rank
    assert factor.L.shape == (300, factor.rank) and factor.B_tilde.shape == (factor.rank, factor.rank)


def test_factorisation_and_fit_are_deterministic(rng):
    """The same inputs give identical pivots, rank and solution, bit for bit."""
    X, Y = rng.standard_normal((200, 2)), rng.standard_normal((200, 1))
    runs = [fit_jdl(X, Y, RBF(0.7), RBF(0.9), 1e-4, constraint="data_box", tol=1e-4) for _ in range(2)]
    assert np.array_equal(np.asarray(runs[0].basis_x.pivots), np.asarray(runs[1].basis_x.pivots))
    assert np.array_equal(np.asarray(runs[0].H), np.asarray(runs[1].H))
