"""Greedy compression: joint kernel herding (JKH) and average conditional kernel herding (ACKH).

Both come in two flavours: over a finite candidate pool (gradient-free, exact greedy steps) and by
gradient steps from a seed (the paper's version). Every step is one compiled function on a fixed buffer of m
slots with a mask of the slots used so far, so the set grows without recompiling.
"""

from functools import partial

import jax
import jax.numpy as jnp
from jax import lax

from .._interrupt import Interrupted
from ..kernels import TensorProduct
from ..kernels.blockwise import kernel_row_sums
from ..kernels.base import Kernel
from ..linalg.dense import cho_solve_unchecked
from ..optim import optax_scan
from ..sharding import RowShards
from ._inputs import rows_at
from .objectives import JITTER, DataBlocks, ackip_objective, compressed_factor, herding_score, herding_terms

_herding_terms = jax.jit(herding_terms)

__all__ = ["jkh_mean_embedding", "jkh_pool_scores", "ackh_pool_scores", "herd_pool", "herd_gradient"]


# --- pool scorers -------------------------------------------------------------------------------------------
def jkh_mean_embedding(kernel_x: Kernel, kernel_y: Kernel, px, py, x, y, block_size=1024):
    """kappa_bar(pi) = (1/n) sum_i k(x_pi, x_i) l(y_pi, y_i) for every pool pair: (P,). O(nP) time, chunked."""
    pairs = x.with_values((x.values, y.values)) if isinstance(x, RowShards) else (x, y)
    return kernel_row_sums(TensorProduct(kernel_x, kernel_y), (px, py), pairs, block_size=block_size) / x.shape[0]


def jkh_pool_scores(kappa_bar, running, self_kernel, t):
    """The greedy JMMD score s_t on the pool: kappa_bar - (r + kappa(pi, pi) / 2) / (t + 1), r = sum_s kappa(pi, z_s)."""
    return kappa_bar - (running + 0.5 * self_kernel) / (t + 1)


def ackh_pool_scores(px, py, data: DataBlocks, kernel_x: Kernel, kernel_y: Kernel, cx, cy, row_mask, lam_c):
    """F(C_t u {c}) for every pool candidate c at once by the Schur complement of the enlarged Gram matrix: (P,).

    (cx, cy)[row_mask] is C_t; the ridge is (t + 1) lam_C (+ JITTER, as in :func:`ackip_objective`).
    Cost O(P n t) streamed over data blocks, memory O(P * block + m P).
    """
    t = jnp.sum(row_mask)
    r = (t + 1) * lam_c
    chol, _ = compressed_factor(kernel_x, cx, r, row_mask)
    r = r + JITTER
    used = row_mask.astype(px.dtype)
    L_t = kernel_y.evaluate(cy, cy) * (used[:, None] * used[None, :])
    k_tp = kernel_x.evaluate(cx, px) * used[:, None]  # (m, P)
    V = cho_solve_unchecked(chol, k_tp)  # columns v_c
    s = kernel_x.evaluate_paired(px, px) + r - jnp.sum(k_tp * V, axis=0)
    Q = kernel_y.evaluate(cy, py) * used[:, None]  # columns q_c
    LV = L_t @ V

    def block(carry, blk):
        xb, yb, mb = blk
        K_tb = kernel_x.evaluate(cx, xb) * (used[:, None] * mb[None, :])
        U = cho_solve_unchecked(chol, K_tb)
        L_tb = kernel_y.evaluate(cy, yb) * (used[:, None] * mb[None, :])
        rho = (kernel_x.evaluate(px, xb) * mb[None, :] - V.T @ K_tb) / s[:, None]
        c1, c2, a, b1, b2, d, e = carry
        return (c1 + jnp.sum(U * (L_t @ U)), c2 + jnp.sum(L_tb * U), a + jnp.sum(rho**2, 1),
                b1 + jnp.sum(rho * (LV.T @ U), 1), b2 + jnp.sum(rho * (Q.T @ U), 1),
                d + jnp.sum(rho * (V.T @ L_tb), 1), e + jnp.sum(rho * kernel_y.evaluate(py, yb), 1)), None

    P = px.shape[0]
    zero, zeros = jnp.zeros(()), jnp.zeros(P)
    (c1, c2, a, b1, b2, d, e), _ = lax.scan(block, (zero, zero, zeros, zeros, zeros, zeros, zeros),
                                            (data.x, data.y, data.mask))
    quad = jnp.sum(V * LV, 0) - 2.0 * jnp.sum(Q * V, 0) + kernel_y.evaluate_paired(py, py)
    norm_term = c1 - 2.0 * b1 + a * quad + 2.0 * b2
    return (norm_term - 2.0 * (c2 - d + e)) / data.n


# --- pool herding ----------------------------------------------------------------------------------------------
def _jkh_step(state, px, py, kernel_x, kernel_y, kappa_bar, self_kernel, replace):
    *_, t, (running, self_sum, cross_sum), taken = state
    score = jkh_pool_scores(kappa_bar, running, self_kernel, t)
    score = score if replace else jnp.where(taken, -jnp.inf, score)
    j = jnp.argmax(score)
    self_sum = self_sum + 2.0 * running[j] + self_kernel[j]
    cross_sum = cross_sum + kappa_bar[j]
    running = running + kernel_x.evaluate(px, px[j][None])[:, 0] * kernel_y.evaluate(py, py[j][None])[:, 0]
    J = self_sum / (t + 1) ** 2 - 2.0 * cross_sum / (t + 1)  # J for C_{t+1}
    return j, J, (running, self_sum, cross_sum)


def _ackh_step(state, px, py, data, kernel_x, kernel_y, lam_c, replace):
    cx, cy, mask, _, _, taken = state
    score = ackh_pool_scores(px, py, data, kernel_x, kernel_y, cx, cy, mask, lam_c)
    score = score if replace else jnp.where(taken, jnp.inf, score)
    j = jnp.argmin(score)
    return j, score[j], None


@partial(jax.jit, static_argnames=("method", "replace"))
def _pool_step(state, px, py, data, kernel_x, kernel_y, extras, method, replace):
    if method == "jkh":
        kappa_bar, self_kernel = extras
        j, value, running = _jkh_step(state, px, py, kernel_x, kernel_y, kappa_bar, self_kernel, replace)
    else:
        j, value, running = _ackh_step(state, px, py, data, kernel_x, kernel_y, extras, replace)
    cx, cy, mask, t, old_running, taken = state
    state = (cx.at[t].set(px[j]), cy.at[t].set(py[j]), mask.at[t].set(True), t + 1,
             old_running if running is None else running, taken.at[j].set(True))
    return state, j, value


def herd_pool(method: str, px, py, data: DataBlocks, kernel_x: Kernel, kernel_y: Kernel, m: int, *,
              x=None, y=None, lam_c=None, replace: bool = False, progress=None):
    """Greedy selection of m pool pairs: JKH maximises s_t, ACKH minimises F(C_t u {c}).

    Returns (indices into the pool (m,), objective trace (m,)): J(C_{t+1}) for JKH, F(C_{t+1}) for ACKH.
    ``x``, ``y``: the unblocked data (for JKH's mean embedding). Ctrl-C raises :class:`bayeskern.Interrupted`
    with (indices, trace) of the points chosen so far.
    """
    P = px.shape[0]
    if not replace and m > P:
        raise ValueError(f"herding without replacement needs m <= pool size {P}, got m = {m}")
    if method == "jkh":
        extras = (jkh_mean_embedding(kernel_x, kernel_y, px, py, x, y),
                  kernel_x.evaluate_paired(px, px) * kernel_y.evaluate_paired(py, py))
    else:
        extras = jnp.asarray(lam_c, dtype=px.dtype)
    state = (jnp.zeros((m,) + px.shape[1:], px.dtype), jnp.zeros((m,) + py.shape[1:], py.dtype),
             jnp.zeros(m, bool), jnp.asarray(0), (jnp.zeros(P, px.dtype), jnp.zeros(()), jnp.zeros(())),
             jnp.zeros(P, bool))
    indices, trace = [], []
    try:
        for _ in range(m):
            state, j, value = _pool_step(state, px, py, data, kernel_x, kernel_y, extras, method, replace)
            indices.append(int(j))
            trace.append(float(value))
            if progress is not None:
                progress.update(1)
    except KeyboardInterrupt:
        done = min(len(indices), len(trace))
        raise Interrupted((jnp.asarray(indices[:done], int), jnp.asarray(trace[:done])),
                          f"{method.upper()}: interrupted after {done} of {m} points") from None
    return jnp.asarray(indices), jnp.asarray(trace)


# --- gradient herding -----------------------------------------------------------------------------------------
def _candidate_loss(method, zx, zy, data, kernel_x, kernel_y, cx, cy, mask, t, lam_c):
    if method == "jkh":
        return -herding_score(zx, zy, data, kernel_x, kernel_y, cx, cy, mask)
    return ackip_objective(cx.at[t].set(zx), cy.at[t].set(zy), data, kernel_x, kernel_y, lam_c, mask.at[t].set(True))


@partial(jax.jit, static_argnames=("method", "steps", "optimizer", "discrete", "n_classes"))
def _gradient_step(seeds_x, seeds_y, cx, cy, mask, t, data, kernel_x, kernel_y, lam_c, method, steps, optimizer,
                   discrete, n_classes):
    loss = partial(_candidate_loss, method, data=data, kernel_x=kernel_x, kernel_y=kernel_y, cx=cx, cy=cy, mask=mask,
                   t=t, lam_c=lam_c)
    seed_losses = jax.vmap(lambda a, b: loss(a, b))(seeds_x, seeds_y)
    best = jnp.argmin(seed_losses)
    zx, zy = seeds_x[best], seeds_y[best]
    params = zx if discrete else (zx, zy)
    objective = (lambda p: loss(p, zy)) if discrete else (lambda p: loss(*p))

    params = optax_scan(lambda p, c, d, k: (objective(p), c), params, optimizer, optimizer.init(params), None, None,
                        length=steps)[0]
    if discrete:  # exhaustive class search at the optimised features
        zx = params
        class_losses = jax.vmap(lambda c: loss(zx, c.astype(zy.dtype)))(jnp.arange(n_classes))
        zy = jnp.argmin(class_losses).astype(zy.dtype)
    else:
        zx, zy = params
    return zx, zy, loss(zx, zy)


def herd_gradient(method: str, x, y, data: DataBlocks, kernel_x: Kernel, kernel_y: Kernel, m: int, *, key,
                  steps_per_point: int, optimizer, lam_c=None, n_seeds: int = 10, n_classes=None, progress=None):
    """The paper's herding: each new pair starts at the best of ``n_seeds`` random data pairs and takes
    ``steps_per_point`` optimiser steps (features only for discrete responses, then the best class).

    Returns (cx (m, d_x), cy, objective trace (m,)) with the trace as in :func:`herd_pool`. Ctrl-C raises
    :class:`bayeskern.Interrupted` with the same triple for the points completed.
    """
    sums = (0.0, 0.0)  # JKH: running self and cross sums of J
    discrete = n_classes is not None
    cx, cy = jnp.zeros((m,) + x.shape[1:], x.dtype), jnp.zeros((m,) + y.shape[1:], y.dtype)
    mask = jnp.zeros(m, bool)
    lam = jnp.asarray(0.0 if lam_c is None else lam_c, dtype=x.dtype)
    trace = []
    try:
        for t, k in enumerate(jax.random.split(key, m)):
            idx = jax.random.choice(k, x.shape[0], (n_seeds,), replace=False)
            zx, zy, value = _gradient_step(rows_at(x, idx), rows_at(y, idx), cx, cy, mask, t, data, kernel_x,
                                           kernel_y, lam, method, steps_per_point, optimizer, discrete, n_classes)
            if method == "jkh":
                kappa_bar, chosen, self_term = map(float, _herding_terms(zx, zy, data, kernel_x, kernel_y, cx, cy,
                                                                         mask))
                sums = (sums[0] + 2.0 * chosen + self_term, sums[1] + kappa_bar)
                value = sums[0] / (t + 1) ** 2 - 2.0 * sums[1] / (t + 1)
            cx, cy, mask = cx.at[t].set(zx), cy.at[t].set(zy), mask.at[t].set(True)
            trace.append(float(value))
            if progress is not None:
                progress.update(1)
    except KeyboardInterrupt:   # the points completed so far: those the mask holds and the trace scored
        done = min(len(trace), int(mask.sum()))
        raise Interrupted((cx[:done], cy[:done], jnp.asarray(trace[:done])),
                          f"{method.upper()}: interrupted after {done} of {m} points") from None
    return cx, cy, jnp.asarray(trace)
