"""Polynomial JPDL: JDL on orthonormal polynomial bases, with sum-of-squares positivity.

The kernel k_q(x, x') = tau_q(x) G^{-1} tau_q(x')^T (G the empirical Gram matrix of the monomials) has the
factor L = V G^{-1/2} exactly (eps = 0, Lambda = n I), so the JDL problem has W = 1 + lam. Pointwise positivity
1 + h = tau_q(z) A tau_q(z)^T with A >= 0 in the monomials of z = (x, y) is a semidefinite program, solved with
the Clarabel conic solver (optional dependency: ``pip install bayeskern[jpdl]``).
"""

import itertools
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from .._validation import as_matrix, as_points, check_count, check_same_length
from ..fitted import saveable
from .model import JointDistributionModel
from .problem import jdl_problem
from .solvers import JDLSolution, _normalisation_residual, solve_normalised, solve_unconstrained

__all__ = ["monomial_exponents", "PolynomialBasis", "polynomial_basis", "fit_jpdl", "sos_certificate"]


def monomial_exponents(dim: int, degree: int) -> np.ndarray:
    """Exponents of all monomials of total degree <= degree in dim variables, in graded lexicographic order
    (constant first; within a degree the first variable's exponent descends).

    Args:
        dim: the number of variables, >= 1.
        degree: the largest total degree, >= 0.

    Returns:
        (m, dim) integer array, m = C(dim + degree, dim).

    Raises:
        TypeError: for dim or degree not an integer.
        ValueError: for dim below 1 or degree below 0.
    """
    dim, degree = check_count(dim, "dim"), check_count(degree, "degree", minimum=0)
    rows = []
    for total in range(degree + 1):
        rows += sorted((e for e in itertools.product(range(total + 1), repeat=dim) if sum(e) == total), reverse=True)
    return np.array(rows, dtype=int).reshape(-1, dim)


def _vandermonde(X, exponents):
    return jnp.prod(jnp.asarray(X)[:, None, :] ** jnp.asarray(exponents)[None], axis=-1)


@saveable
class PolynomialBasis(NamedTuple):
    """The orthonormalised monomials psi(u) = tau_q(u) W, orthonormal in L^2 of the sample.

    Attributes:
        A: (n, m) = V W, the basis at the sample (A^T A = n I).
        eigenvalues: (m,) all n (the basis's Gram spectrum, as for a RotatedBasis).
        W: (m, m) the symmetric inverse square root of the monomials' Gram matrix.
        exponents: (m, d) the monomials' exponents.
    """

    A: jnp.ndarray
    eigenvalues: jnp.ndarray
    W: jnp.ndarray
    exponents: np.ndarray

    def evaluate(self, kernel, U, name: str = "U"):
        """The basis functions at new points.

        Args:
            kernel: unused (the basis defines its kernel); kept so every basis evaluates alike.
            U: (q, d) points.
            name: the argument name that error messages use.

        Returns:
            (q, m) array.

        Raises:
            TypeError: for points that are not real numbers.
            ValueError: for non-finite points or points of another dimension.
        """
        U = as_points(U, name)
        if U.shape[1] != self.exponents.shape[1]:
            raise ValueError(f"{name} has dimension {U.shape[1]}, the basis {self.exponents.shape[1]}")
        return _vandermonde(U, self.exponents) @ self.W


def polynomial_basis(X, degree: int) -> PolynomialBasis:
    """The orthonormalised monomial basis of degree <= ``degree`` on a sample; W = G^{-1/2} symmetric.

    Args:
        X: (n, d) sample.
        degree: the largest total degree, >= 1.

    Returns:
        PolynomialBasis: the basis.

    Raises:
        TypeError: for data that are not real numbers or degree not an integer.
        ValueError: for non-finite data, degree below 1, fewer points than monomials, or points on an algebraic
            variety of that degree (a singular Gram matrix).
    """
    X = as_points(X, "X")
    exponents = monomial_exponents(X.shape[1], check_count(degree, "degree"))
    m = exponents.shape[0]
    if X.shape[0] < m:
        raise ValueError(f"degree {degree} in {X.shape[1]} dimensions needs at least {m} points, got {X.shape[0]}")
    V = np.asarray(_vandermonde(X, exponents))
    lam, U = np.linalg.eigh(V.T @ V / X.shape[0])
    if lam[0] <= 1e-12 * lam[-1]:
        raise ValueError("the monomial Gram matrix is singular: the points lie on an algebraic variety of this degree")
    W = (U / np.sqrt(lam)) @ U.T
    n = X.shape[0]
    return PolynomialBasis(jnp.asarray(V @ W), jnp.full(m, float(n)), jnp.asarray(W), exponents)


def fit_jpdl(X, Y, degree: int, lam: float, *, constraint: str = "unconstrained") -> JointDistributionModel:
    """Polynomial JPDL: JDL on orthonormal polynomial bases (Filipović et al. 2021, Appendix B).

    Graded monomials up to ``degree``, whitened by the symmetric inverse square root of their empirical Gram
    matrix, make the bases exact and the problem diagonal with W = 1 + lam.

    Args:
        X: (n, d_X) inputs; n must exceed the number of monomials and the points must not lie on an algebraic
            variety of that degree.
        Y: (n, d_Y) outcomes, row i paired with X[i].
        degree: polynomial degree q >= 1.
        lam: ridge > 0.
        constraint: ``"unconstrained"`` (H = Gamma / (1 + lam)), ``"normalised"``, or ``"sos"``: normalisation
            plus 1 + h a sum of squares, i.e. positive everywhere, solved by Clarabel
            (``pip install bayeskern[jpdl]``).

    Returns:
        JointDistributionModel: the fitted model (same read-outs as :func:`fit_jdl`).

    Raises:
        ValueError: for an unknown constraint, lam <= 0, unpaired inputs, too few points for the degree, or a
            singular monomial Gram matrix.
        ImportError: for ``"sos"`` without Clarabel.
    """
    if constraint not in ("unconstrained", "normalised", "sos"):
        raise ValueError(f"constraint must be 'unconstrained', 'normalised' or 'sos', got {constraint!r}")
    X, Y = as_points(X, "X"), as_points(Y, "Y")
    check_same_length(X, Y, "X and Y")
    bx, by = polynomial_basis(X, degree), polynomial_basis(Y, degree)
    problem = jdl_problem(bx, by, lam)
    if constraint == "unconstrained":
        solution = solve_unconstrained(problem)
    elif constraint == "normalised":
        solution = solve_normalised(problem)
    else:
        solution = _solve_sos(problem, bx, by, degree)
    return JointDistributionModel(X, Y, None, None, bx, by, jnp.asarray(solution.H), float(lam), f"jpdl-{constraint}",
                                  solution)


def _sos_layout(bx, by, degree):
    """Exponent bookkeeping of the SOS program: the joint monomials tau_q(z), z = (x, y), and their pair sums."""
    d_x, d_y = bx.exponents.shape[1], by.exponents.shape[1]
    joint = monomial_exponents(d_x + d_y, degree)
    targets = {tuple(e): k for k, e in enumerate(monomial_exponents(d_x + d_y, 2 * degree))}
    index_x = {tuple(e): k for k, e in enumerate(bx.exponents)}
    index_y = {tuple(e): k for k, e in enumerate(by.exponents)}
    return joint, targets, index_x, index_y, d_x


def _solve_sos(problem, bx, by, degree) -> JDLSolution:
    try:
        import clarabel
        from scipy import sparse
    except ImportError as err:  # pragma: no cover - exercised only without the optional dependency
        raise ImportError("constraint='sos' needs the Clarabel conic solver: pip install bayeskern[jpdl]") from err
    joint, targets, index_x, index_y, d_x = _sos_layout(bx, by, degree)
    m_y, m_x = problem.W.shape
    N_h, N_z = m_y * m_x, joint.shape[0]
    tri = [(r, c) for c in range(N_z) for r in range(c + 1)]  # Clarabel's packed upper triangle, by columns
    N_a = len(tri)
    W_x, W_y = np.asarray(bx.W), np.asarray(by.W)
    # coefficient matching, one row per exponent gamma: sum over ordered pairs mu + nu = gamma of A_{mu nu}
    # (off-diagonal svec entries carry sqrt 2) minus the coefficient (W_Y H W_X^T)[gamma_Y, gamma_X] of h
    r_idx, c_idx, vals = [], [], []
    for k, (r, c) in enumerate(tri):
        r_idx.append(targets[tuple(joint[r] + joint[c])])
        c_idx.append(N_h + k)
        vals.append(1.0 if r == c else np.sqrt(2.0))
    rhs = np.zeros(len(targets))
    for gamma, t in targets.items():
        gx, gy = gamma[:d_x], gamma[d_x:]
        if gx in index_x and gy in index_y:
            r_idx += [t] * N_h
            c_idx += range(N_h)
            vals += list(-np.outer(W_y[index_y[gy]], W_x[index_x[gx]]).ravel())
        rhs[t] = 1.0 if not any(gamma) else 0.0
    matching = sparse.coo_matrix((vals, (r_idx, c_idx)), shape=(len(targets), N_h + N_a))
    normalisation = sparse.coo_matrix(np.r_[np.asarray(problem.S).ravel(), np.zeros(N_a)][None])
    psd = sparse.hstack([sparse.csc_matrix((N_a, N_h)), -sparse.identity(N_a)])  # s = svec(A) in the PSD cone
    A = sparse.vstack([matching, normalisation, psd]).tocsc()
    b = np.r_[rhs, 0.0, np.zeros(N_a)]
    P = sparse.diags(np.r_[2.0 * np.asarray(problem.W).ravel(), np.zeros(N_a)]).tocsc()
    q = np.r_[-2.0 * np.asarray(problem.Gamma).ravel(), np.zeros(N_a)]
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = 1e-10
    result = clarabel.DefaultSolver(P, q, A, b, [clarabel.ZeroConeT(len(targets) + 1), clarabel.PSDTriangleConeT(N_z)],
                                    settings).solve()
    if str(result.status) not in ("Solved", "AlmostSolved"):
        raise RuntimeError(f"JPDL SOS program: Clarabel returned {result.status}")
    x = np.asarray(result.x)
    H = x[:N_h].reshape(m_y, m_x)
    gram = np.zeros((N_z, N_z))
    for k, (r, c) in enumerate(tri):
        gram[r, c] = gram[c, r] = x[N_h + k] / (1.0 if r == c else np.sqrt(2.0))
    certificate = sos_certificate(H, gram, bx, by, degree)
    if certificate["max_residual"] > 1e-7 or certificate["min_eigenvalue"] < -1e-7:
        raise RuntimeError(f"JPDL SOS program: the solution fails its certificate {certificate}")
    return JDLSolution(H, None, None, _normalisation_residual(np.asarray(problem.S), H),
                       certificate["min_eigenvalue"], int(result.iterations))


def sos_certificate(H, gram, bx: PolynomialBasis, by: PolynomialBasis, degree: int) -> dict:
    """Checks of the sum-of-squares certificate 1 + h = tau_q(z) A tau_q(z)^T.

    Args:
        H: (m_Y, m_X) coefficients of h.
        gram: the Gram matrix A of the certificate, over the joint monomials of degree <= degree.
        bx: polynomial basis of X.
        by: polynomial basis of Y.
        degree: the degree q of the certificate's monomials.

    Returns:
        dict with ``min_eigenvalue`` of A (>= 0 for a valid certificate) and ``max_residual``, the largest
        coefficient mismatch of the identity.

    Raises:
        TypeError: for bases that are not PolynomialBasis objects or degree not an integer.
        ValueError: for H of another shape, non-finite H or degree below 1.
    """
    for name, basis in (("bx", bx), ("by", by)):
        if not isinstance(basis, PolynomialBasis):
            raise TypeError(f"{name} must be a PolynomialBasis (polynomial_basis), got {type(basis).__name__}")
    degree = check_count(degree, "degree")
    H = as_matrix(H, "H", (by.W.shape[1], bx.W.shape[1]))
    joint, targets, index_x, index_y, d_x = _sos_layout(bx, by, degree)
    M = np.asarray(by.W) @ np.asarray(H) @ np.asarray(bx.W).T
    residual = np.zeros(len(targets))
    for r in range(joint.shape[0]):
        for c in range(joint.shape[0]):
            residual[targets[tuple(joint[r] + joint[c])]] += gram[r, c]
    for gamma, t in targets.items():
        gx, gy = gamma[:d_x], gamma[d_x:]
        if gx in index_x and gy in index_y:
            residual[t] -= M[index_y[gy], index_x[gx]]
        residual[t] -= 1.0 if not any(gamma) else 0.0
    return {"min_eigenvalue": float(np.linalg.eigvalsh(gram)[0]), "max_residual": float(np.abs(residual).max())}
