"""The one result type of every conditional read-out: E[f(Y) | X = x] at query points, with its mass and flags.

JDL/JPDL models, the low-rank CME, compression results (their KCME) and KBR posterior weights all answer
``conditional_expectation(x_query, f)`` with a :class:`ConditionalExpectation`.
"""

import jax
import jax.numpy as jnp

from ._validation import as_finite_array, as_real_array
from .fitted import fitted

__all__ = ["ConditionalExpectation", "UNDEFINED_MASS", "weighted_expectation", "self_normalised_expectation"]

UNDEFINED_MASS = 1e-12
"""A self-normalised conditional whose total mass |sum of weights| is at most this is flagged undefined."""


@fitted
class ConditionalExpectation:
    """Conditional expectations E[f(Y) | X = x] at q query points: the result of every conditional read-out.

    Attributes:
        mean: (q, ...) the estimates (NaN where ``undefined``).
        mass: (q,) the total weight the estimator gives the conditional law: 1 for an exactly normalised
            conditional; linear estimators such as the CME are not normalised, so ``mass - 1`` is their
            normalisation error.
        undefined: (q,) bool, True where a self-normalised estimate has (numerically) zero mass and cannot be
            formed. Linear estimators are defined everywhere.
    """

    mean: jax.Array
    mass: jax.Array
    undefined: jax.Array


def weighted_expectation(W, F) -> ConditionalExpectation:
    """The linear read-out W F of a linear estimator (CME, KCME): defined everywhere.

    Args:
        W: (q, n) weights of the n training outcomes, one row per query.
        F: (n, ...) values of the test function at the training outcomes.

    Returns:
        ConditionalExpectation: mean (q, ...) = W F, mass (q,) = the row sums of W, undefined all False.

    Raises:
        TypeError: for data that are not real numbers.
        ValueError: for non-finite inputs or shapes that do not match.
    """
    W, F = _real(W, "W"), _real(F, "F")
    if W.ndim != 2 or F.ndim == 0 or F.shape[0] != W.shape[1]:
        raise ValueError(f"W must be (q, n) and F (n, ...) with the same n, got shapes {W.shape} and {F.shape}")
    flat = F.reshape(F.shape[0], -1)
    mean = (W @ flat).reshape((W.shape[0],) + F.shape[1:])
    return ConditionalExpectation(mean, W.sum(axis=1), jnp.zeros(W.shape[0], bool))


def self_normalised_expectation(numerator, mass) -> ConditionalExpectation:
    """The read-out of a self-normalised estimator (JDL): numerator / mass per query.

    Args:
        numerator: (q, ...) unnormalised estimates.
        mass: (q,) their normalising masses.

    Returns:
        ConditionalExpectation: mean (q, ...), NaN and flagged ``undefined`` where |mass| <= ``UNDEFINED_MASS``.

    Raises:
        TypeError: for data that are not real numbers.
        ValueError: for non-finite inputs or shapes that do not match.
    """
    numerator, mass = _real(numerator, "numerator"), _real(mass, "mass")
    if mass.ndim != 1 or numerator.ndim == 0 or numerator.shape[0] != mass.shape[0]:
        raise ValueError(f"numerator must be (q, ...) and mass (q,), got shapes {numerator.shape} and {mass.shape}")
    return ConditionalExpectation(*_normalised(numerator, mass))


@jax.jit
def _normalised(numerator, mass):
    """(mean, mass, undefined): numerator / mass per query, NaN where |mass| <= UNDEFINED_MASS."""
    undefined = jnp.abs(mass) <= UNDEFINED_MASS
    safe = jnp.where(undefined, 1.0, mass)
    shape = (-1,) + (1,) * (numerator.ndim - 1)
    return jnp.where(undefined.reshape(shape), jnp.nan, numerator / safe.reshape(shape)), mass, undefined


def outcome_values(f, outcomes, n: int, dtype, name: str = "f"):
    """Values of the test function on the training outcomes: ``f`` a callable (applied to ``outcomes``), an array
    with one row per outcome (leading axis n), or None (the identity). Checked finite; (n, ...)."""
    values = outcomes if f is None else (f(outcomes) if callable(f) else f)
    values = as_real_array(values, name).astype(dtype)
    if values.ndim == 0 or values.shape[0] != n:
        raise ValueError(f"{name} must hold one value per training outcome (leading axis {n}), "
                         f"got shape {values.shape}")
    if not bool(jnp.all(jnp.isfinite(values))):
        raise ValueError(f"{name} contains non-finite values")
    return values


def _real(a, name):
    a = as_finite_array(a, name)
    return a if jnp.issubdtype(a.dtype, jnp.floating) else a.astype(jnp.result_type(float))
