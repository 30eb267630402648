"""Compression metrics and objectives against brute force."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeskern import RBF, Indicator
from bayeskern.compression import amcmd, amcmd2, jmmd2, kcd2_tower, kcme_weights
from bayeskern.compression.objectives import JITTER, ackip_objective, data_blocks, jkip_objective


def rbf(a, b, ell):
    a, b = np.atleast_2d(a), np.atleast_2d(b)
    return np.exp(-np.sum((a[:, None, :] - b[None, :, :]) ** 2, -1) / (2 * ell**2))


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((30, 2))
    y = (np.sin(x[:, 0]) + 0.3 * rng.standard_normal(30))[:, None]
    cx, cy = rng.standard_normal((5, 2)), rng.standard_normal((5, 1))
    return x, y, cx, cy, RBF(0.9), RBF(0.7)


def test_jmmd2_is_zero_on_the_data_and_equals_the_triple_loop(problem):
    x, y, cx, cy, kx, ky = problem
    assert abs(float(jmmd2((x, y), (x, y), kx, ky))) < 1e-12
    n, m = len(x), len(cx)
    brute = 0.0
    for a, wa in ((x, 1 / n), (cx, -1 / m)):
        for b, wb in ((x, 1 / n), (cx, -1 / m)):
            ya, yb = (y if a is x else cy), (y if b is x else cy)
            for i in range(len(a)):
                for j in range(len(b)):
                    brute += wa * wb * rbf(a[i], b[j], 0.9)[0, 0] * rbf(ya[i], yb[j], 0.7)[0, 0]
    assert float(jmmd2((x, y), (cx, cy), kx, ky)) == pytest.approx(brute, abs=1e-12)
    assert float(jmmd2((x, y), (cx, cy), kx, ky, block_size=7)) == pytest.approx(brute, abs=1e-12)
    labels = np.arange(30) % 3
    assert abs(float(jmmd2((x, labels), (x, labels), kx, Indicator()))) < 1e-12


def _kcme(x, q, ell, lam):
    n = len(x)
    return np.linalg.solve(rbf(x, x, ell) + n * lam * np.eye(n), rbf(x, q, ell))


def test_tower_kcd2_equals_a_pointwise_brute_force_and_the_regression_form(problem):
    x, y, cx, cy, kx, ky = problem
    lam_c, lam_p, n, m = 1e-2, 1e-3, len(x), len(cx)
    beta = _kcme(x, x, 0.9, lam_p)  # full-data KCME at each x_i
    W = np.linalg.inv(rbf(cx, cx, 0.9) + (m * lam_c + JITTER) * np.eye(m))
    alpha = W @ rbf(cx, x, 0.9)
    Lyy, Lcc, Lcy = rbf(y, y, 0.7), rbf(cy, cy, 0.7), rbf(cy, y, 0.7)
    self_term = np.mean([beta[:, i] @ Lyy @ beta[:, i] for i in range(n)])
    cross = np.mean([alpha[:, i] @ Lcy[:, i] for i in range(n)])  # tower: mu^C_{x_i}(y_i)
    norm = np.mean([alpha[:, i] @ Lcc @ alpha[:, i] for i in range(n)])
    F = float(kcd2_tower((x, y), (cx, cy), kx, ky, lam_c))
    assert float(kcd2_tower((x, y), (cx, cy), kx, ky, lam_c, lam_p)) == pytest.approx(self_term - 2 * cross + norm,
                                                                                         abs=1e-10)
    # F is the unregularised H_l regression loss of the compressed KCME, minus the mean of l(y_i, y_i)
    regression = np.mean([alpha[:, i] @ Lcc @ alpha[:, i] - 2 * alpha[:, i] @ Lcy[:, i] + 1.0 for i in range(n)])
    assert F == pytest.approx(regression - 1.0, abs=1e-10)
    # plug-in minus tower = 2 lam_P tr(A_P L_YC W K_CX)
    plug_in = float(amcmd2((x, y), (cx, cy), x, kx, ky, lam_p, lam_c))
    A_p = np.linalg.inv(rbf(x, x, 0.9) + n * lam_p * np.eye(n))
    W0 = np.linalg.inv(rbf(cx, cx, 0.9) + m * lam_c * np.eye(m))
    tower0 = self_term + np.mean([a @ Lcc @ a - 2 * a @ Lcy[:, i] for i, a in enumerate((W0 @ rbf(cx, x, 0.9)).T)])
    assert plug_in - tower0 == pytest.approx(2 * lam_p * np.trace(A_p @ Lcy.T @ W0 @ rbf(cx, x, 0.9)), abs=1e-10)


def test_plug_in_amcmd2_forms_symmetry_zero_and_triangle(problem):
    x, y, cx, cy, kx, ky = problem
    rng = np.random.default_rng(1)
    z = rng.standard_normal((12, 2))
    lam_p, lam_q = 1e-3, 1e-2
    value = float(amcmd2((x, y), (cx, cy), z, kx, ky, lam_p, lam_q))
    Bp, Bq = _kcme(x, z, 0.9, lam_p), _kcme(cx, z, 0.9, lam_q)
    Lyy, Lyc, Lcc = rbf(y, y, 0.7), rbf(y, cy, 0.7), rbf(cy, cy, 0.7)
    trace_form = (np.trace(Lyy @ Bp @ Bp.T) - 2 * np.trace(Lyc @ Bq @ Bp.T) + np.trace(Lcc @ Bq @ Bq.T)) / len(z)
    quad = sum(np.sum((Bp[:, k] @ Lyy @ Bp[:, k], -2 * Bp[:, k] @ Lyc @ Bq[:, k], Bq[:, k] @ Lcc @ Bq[:, k]))
               for k in range(len(z))) / len(z)
    assert value == pytest.approx(trace_form, abs=1e-9) and value == pytest.approx(quad, abs=1e-9)
    assert float(amcmd2((cx, cy), (x, y), z, kx, ky, lam_q, lam_p)) == pytest.approx(value, abs=1e-12)
    assert float(amcmd2((x, y), (x, y), z, kx, ky, lam_p, lam_p)) == pytest.approx(0.0, abs=1e-12)
    third = (rng.standard_normal((8, 2)), rng.standard_normal((8, 1)))
    d_pq = float(amcmd((x, y), (cx, cy), z, kx, ky, lam_p, lam_q))
    d_pr = float(amcmd((x, y), third, z, kx, ky, lam_p, lam_q))
    d_rq = float(amcmd(third, (cx, cy), z, kx, ky, lam_q, lam_q))
    assert d_pq <= d_pr + d_rq + 1e-12 and value >= -1e-12


def test_localisation_by_the_averaging_law():
    rng = np.random.default_rng(0)
    xp, xq = 2 * rng.standard_normal((600, 1)), 2 * rng.standard_normal((600, 1))
    yp = np.sin(2 * xp) + 0.3 * rng.standard_normal((600, 1))
    yq = np.sin(2 * xq) + (xq > 0) + 0.3 * rng.standard_normal((600, 1))
    k = RBF(0.5)
    left = -2 + 0.5 * rng.standard_normal((400, 1))
    right = 2 + 0.5 * rng.standard_normal((400, 1))
    assert float(amcmd2((xp, yp), (xq, yq), left, k, k, 1e-3, 1e-3)) < 0.05
    assert float(amcmd2((xp, yp), (xq, yq), right, k, k, 1e-3, 1e-3)) > 0.5


def _grads(fn, cx, cy):
    return jax.grad(fn, argnums=(0, 1))(jnp.asarray(cx), jnp.asarray(cy))


def _central_difference(fn, cx, cy, h=1e-6):
    out = []
    for which, arr in ((0, cx), (1, cy)):
        g = np.zeros_like(arr)
        for idx in np.ndindex(arr.shape):
            up, down = [np.array(cx), np.array(cy)], [np.array(cx), np.array(cy)]
            up[which][idx] += h
            down[which][idx] -= h
            g[idx] = (float(fn(*up)) - float(fn(*down))) / (2 * h)
        out.append(g)
    return out


def test_objective_gradients_match_finite_differences_and_the_analytic_formulas(problem):
    x, y, cx, cy, kx, ky = problem
    blocks = data_blocks(jnp.asarray(x), jnp.asarray(y), 8)
    lam, n, m, lx, ly = 1e-2, len(x), len(cx), 0.9, 0.7
    J = jax.jit(lambda a, b: jkip_objective(a, b, blocks, kx, ky))
    F = jax.jit(lambda a, b: ackip_objective(a, b, blocks, kx, ky, lam))
    for fn in (J, F):
        auto = _grads(fn, cx, cy)
        fd = _central_difference(fn, cx, cy)
        for a, f in zip(auto, fd):
            np.testing.assert_allclose(np.asarray(a), f, rtol=1e-6, atol=1e-9)
    # analytic JKIP gradient
    P = rbf(cx, cx, lx) * rbf(cy, cy, ly)
    R = rbf(cx, x, lx) * rbf(cy, y, ly)
    gx = (-2 / (m**2 * lx**2) * np.einsum("jk,jkd->jd", P, cx[:, None] - cx[None])
          + 2 / (n * m * lx**2) * np.einsum("ji,jid->jd", R, cx[:, None] - x[None]))
    np.testing.assert_allclose(np.asarray(_grads(J, cx, cy)[0]), gx, rtol=1e-8)
    gy = (-2 / (m**2 * ly**2) * np.einsum("jk,jkd->jd", P, cy[:, None] - cy[None])
          + 2 / (n * m * ly**2) * np.einsum("ji,jid->jd", R, cy[:, None] - y[None]))
    np.testing.assert_allclose(np.asarray(_grads(J, cx, cy)[1]), gy, rtol=1e-8)
    # analytic ACKIP gradient through the matrix derivatives and the RBF chain rule
    Kcc, Kcx = rbf(cx, cx, lx), rbf(cx, x, lx)
    W = np.linalg.inv(Kcc + (m * lam + JITTER) * np.eye(m))
    A = W @ Kcx
    E = rbf(cy, cy, ly) @ A - rbf(cy, y, ly)
    G_cx, G_cc = 2 / n * W @ E, -(W @ E @ A.T + A @ E.T @ W) / n
    dK = lambda K, a, b: -K[..., None] * (a[:, None] - b[None]) / lx**2  # d k(a_j, b_i) / d a_j
    gx = np.einsum("ji,jid->jd", G_cx, dK(Kcx, cx, x)) + 2 * np.einsum("jk,jkd->jd", G_cc, dK(Kcc, cx, cx))
    np.testing.assert_allclose(np.asarray(_grads(F, cx, cy)[0]), gx, rtol=1e-7)
    Lcc, Lcy = rbf(cy, cy, ly), rbf(cy, y, ly)
    dL = lambda Lm, a, b: -Lm[..., None] * (a[:, None] - b[None]) / ly**2
    gy = 2 * np.einsum("jk,jkd->jd", A @ A.T / n, dL(Lcc, cy, cy)) + np.einsum("ji,jid->jd", -2 / n * A, dL(Lcy, cy, y))
    np.testing.assert_allclose(np.asarray(_grads(F, cx, cy)[1]), gy, rtol=1e-7)


def test_objectives_are_permutation_invariant_and_blocking_does_not_matter(problem):
    x, y, cx, cy, kx, ky = problem
    perm, data_perm = np.random.default_rng(2).permutation(5), np.random.default_rng(3).permutation(30)
    full, small = data_blocks(jnp.asarray(x), jnp.asarray(y), 64), data_blocks(jnp.asarray(x), jnp.asarray(y), 7)
    shuffled = data_blocks(jnp.asarray(x[data_perm]), jnp.asarray(y[data_perm]), 7)
    for fn in (lambda a, b, d: jkip_objective(a, b, d, kx, ky), lambda a, b, d: ackip_objective(a, b, d, kx, ky, 1e-2)):
        ref = float(fn(cx, cy, full))
        assert float(fn(cx[perm], cy[perm], full)) == pytest.approx(ref, abs=1e-13)
        assert float(fn(cx, cy, small)) == pytest.approx(ref, abs=1e-13)
        assert float(fn(cx, cy, shuffled)) == pytest.approx(ref, abs=1e-13)
    beta = kcme_weights(x, cx, kx, 1e-3)
    np.testing.assert_allclose(np.asarray(kcme_weights(x[data_perm], cx, kx, 1e-3)), np.asarray(beta)[data_perm],
                               atol=1e-10)
