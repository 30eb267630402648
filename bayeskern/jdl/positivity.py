"""Grid positivity with a margin for JDL by cutting planes: a tighter treatment than the paper's (29).

The paper's tightening (29) bounds every one of the m_X m_Y terms of h by its worst case over the data box,
which shrinks the model towards independence. Here the n^2 grid constraints (21) are imposed
directly, with a margin delta >= 0:

    1 + h(x_i, y_j) = 1 + A_Y[j] H A_X[i]^T >= delta   for all training pairs (i, j),

by cutting planes: each round scans the grid in row blocks (O(n^2 m_Y) time, O(block n) memory), adds for the
most violated rows x_i the half-space of their worst y_j, and re-solves the small dual exactly as a
non-negative least-squares problem (Lawson-Hanson, scipy.optimize.nnls). A final scaling H / (1 + violation)
(which keeps the normalisation) makes every grid constraint hold. The margin buys robustness off the grid,
where (21) alone guarantees nothing.
"""

import numpy as np
from scipy.optimize import nnls

from .factor import RotatedBasis
from .._validation import as_matrix, check_count
from .problem import JDLProblem, check_bases, check_problem
from .solvers import JDLSolution, _normalisation_residual, solve_normalised

__all__ = ["solve_grid_positive", "grid_row_minima"]


def grid_row_minima(H, basis_x: RotatedBasis, basis_y: RotatedBasis, block_size: int = 1024):
    """min_j (1 + h(x_i, y_j)) and its argmin j for every training x_i, in row blocks (O(n block_size) memory).

    Args:
        H: (m_Y, m_X) coefficients.
        basis_x: rotated basis of X.
        basis_y: rotated basis of Y.
        block_size: rows of the grid per block.

    Returns:
        (minima, argmins): two (n,) arrays.

    Raises:
        TypeError: for bases that are not RotatedBasis objects, H that is not real numbers or block_size not an
            integer.
        ValueError: for H non-finite or of another shape, or block_size below 1.
    """
    check_bases(basis_x, basis_y)
    check_count(block_size, "block_size")
    H = np.asarray(as_matrix(H, "H", (basis_y.A.shape[1], basis_x.A.shape[1])))
    A_y = np.asarray(basis_y.A)
    U = np.asarray(basis_x.A) @ H.T  # (n, m_Y): u_i = H psi_X(x_i)
    minima, argmins = [], []
    for start in range(0, U.shape[0], block_size):
        grid = U[start:start + block_size] @ A_y.T
        argmins.append(grid.argmin(axis=1))
        minima.append(1.0 + grid.min(axis=1))
    return np.concatenate(minima), np.concatenate(argmins)


def solve_grid_positive(problem: JDLProblem, basis_x: RotatedBasis, basis_y: RotatedBasis, *, margin: float = 0.0,
                        cuts_per_round: int = 64, max_rounds: int = 200, tol: float = 1e-10) -> JDLSolution:
    """Normalised JDL with 1 + h >= margin on the whole training grid (module docstring), by cutting planes.

    Args:
        problem: the JDLProblem.
        basis_x: rotated basis of X.
        basis_y: rotated basis of Y.
        margin: the lower bound of 1 + h on the grid, in [0, 1).
        cuts_per_round: the most violated grid points added per round.
        max_rounds: the most rounds.
        tol: violations below this are not cut.

    Returns:
        JDLSolution: mu the normalisation multiplier, nu the sum of the grid multipliers, positivity the smallest
        grid value of 1 + h minus the margin (>= 0), iterations the number of rounds.

    Raises:
        TypeError: for a problem or bases of the wrong type, or counts that are not integers.
        ValueError: for a margin outside [0, 1) or counts below 1.
    """
    check_problem(problem)
    check_bases(basis_x, basis_y)
    if not 0 <= margin < 1:
        raise ValueError(f"margin must lie in [0, 1) (h = 0 has 1 + h = 1), got {margin}")
    check_count(cuts_per_round, "cuts_per_round"), check_count(max_rounds, "max_rounds")
    W, Gamma, S = (np.asarray(a, np.float64) for a in (problem.W, problem.Gamma, problem.S))
    A_x, A_y = np.asarray(basis_x.A), np.asarray(basis_y.A)
    H = solve_normalised(problem).H
    pairs = []  # the current cuts (i, j): half-spaces 1 + <A_y[j] A_x[i]^T, H> / (1 - margin) >= 0
    theta = np.zeros(1)
    rounds = 0
    for rounds in range(1, max_rounds + 1):
        minima, argmins = grid_row_minima(H, basis_x, basis_y)
        order = np.argsort(minima)[:cuts_per_round]
        new = [(int(i), int(argmins[i])) for i in order if minima[i] < margin - tol and (i, argmins[i]) not in pairs]
        if not new:
            break
        pairs += new
        cuts = [np.outer(A_y[j], A_x[i]) / (1.0 - margin) for i, j in pairs]
        M = np.stack([-S] + cuts).reshape(len(cuts) + 1, -1).T  # (N, 1 + cuts): H = (Gamma + M theta) / W
        theta = _dual(M, W.ravel(), Gamma.ravel())
        H = (Gamma + (M @ theta).reshape(W.shape)) / W
        keep = theta[1:] > 0  # inactive cuts leave the working set (they return if violated again)
        pairs = [pair for pair, active in zip(pairs, keep) if active]
        theta = np.r_[theta[0], theta[1:][keep]]
    worst = float(grid_row_minima(H, basis_x, basis_y)[0].min())
    if worst < margin:  # 1 + t h >= margin for t = (1 - margin) / (1 - worst): scaling restores every constraint
        H = H * (1.0 - margin) / (1.0 - worst)
        worst = float(grid_row_minima(H, basis_x, basis_y)[0].min())
    return JDLSolution(H, float(theta[0]), float(theta[1:].sum()), _normalisation_residual(S, H), worst - margin,
                       rounds)


def _dual(M, w, gamma):
    """Multipliers (mu, nu_1..nu_K), nu >= 0, minimising ||(gamma + M theta) / sqrt(w)||^2 + 2 sum(nu): the dual of
    min sum(w h^2 - 2 gamma h) s.t. <-M[:, 0], h> = 0, 1 + <M[:, c], h> >= 0.

    With Q = M^T diag(1/w) M + delta I = R^T R (delta: a 1e-12 relative ridge for dependent cuts) the objective
    is ||R theta - t||^2 + const, t = -R^{-T} q; mu is free and is profiled out by projecting on the orthogonal
    complement of R's first column, leaving an exact NNLS problem in nu."""
    Mw = M / w[:, None]
    Q = M.T @ Mw
    Q[np.diag_indices_from(Q)] += 1e-12 * np.trace(Q) / Q.shape[0]
    q = Mw.T @ gamma + np.r_[0.0, np.ones(M.shape[1] - 1)]
    R = np.linalg.cholesky(Q).T
    t = -np.linalg.solve(R.T, q)
    r0 = R[:, 0]
    P = np.eye(r0.size) - np.outer(r0, r0) / (r0 @ r0)
    nu = nnls(P @ R[:, 1:], P @ t, maxiter=50 * M.shape[1])[0]
    mu = r0 @ (t - R[:, 1:] @ nu) / (r0 @ r0)
    return np.r_[mu, nu]
