"""Stand-ins for the data sets of Broadbent et al. (2025) and the test functions used to score compressed sets,
generated (never downloaded)."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtr

from .._validation import as_finite_array, check_count, check_key
from .standardise import Standardiser

__all__ = ["heteroscedastic", "heteroscedastic_truth", "heteroscedastic_truth_standardised",
           "heteroscedastic_quadrature", "imbalanced", "TEST_FUNCTIONS", "gaussian_expectation",
           "train_val_test_split", "sklearn_dataset"]


def heteroscedastic(n: int, key):
    """X ~ U(-3, 3), Y = X sin(3X) + (0.1 + 0.5|X|) eps, eps ~ N(0, 1).

    Args:
        n: number of pairs.
        key: PRNG key.

    Returns:
        (x, y), each (n, 1).

    Raises:
        TypeError: for a key that is not a PRNG key or n not an integer.
        ValueError: for n below 1.
    """
    check_key(key)
    n = check_count(n, "n")
    kx, ke = jax.random.split(key)
    x = jax.random.uniform(kx, (n, 1), minval=-3.0, maxval=3.0)
    mean, sd = heteroscedastic_truth(x[:, 0])
    return x, (mean + sd * jax.random.normal(ke, (n,)))[:, None]


def heteroscedastic_truth(x):
    """Conditional mean and s.d. of Y | X = x for :func:`heteroscedastic`, in the data's units.

    Args:
        x: (N,) features.

    Returns:
        (mean, sd), two (N,) arrays.

    Raises:
        TypeError: for x that is not real numbers.
        ValueError: for non-finite x.
    """
    x = as_finite_array(x, "x")
    return x * jnp.sin(3.0 * x), 0.1 + 0.5 * jnp.abs(x)


def heteroscedastic_truth_standardised(x_std, standardiser):
    """Mean and s.d. of the standardised Y given standardised features (d_x = d_y = 1).

    Args:
        x_std: (N,) standardised features.
        standardiser: the :class:`~bayeskern.compression.Standardiser` fitted to the continuous data.

    Returns:
        (mean, sd), two (N,) arrays in standardised units.

    Raises:
        TypeError: for a standardiser that is not one fitted to continuous responses.
        ValueError: for non-finite x_std.
    """
    _check_standardiser(standardiser)
    x = as_finite_array(x_std, "x_std") * standardiser.x_scale[0] + standardiser.x_mean[0]
    mean, sd = heteroscedastic_truth(x)
    return (mean - standardiser.y_mean[0]) / standardiser.y_scale[0], sd / standardiser.y_scale[0]


def heteroscedastic_quadrature(standardiser, n_nodes: int = 400):
    """Gauss-Legendre quadrature of X ~ U(-3, 3) in standardised units, with the true conditional law there.

    Args:
        standardiser: the Standardiser fitted to the continuous data.
        n_nodes: quadrature nodes Q.

    Returns:
        (nodes (Q, 1), weights (Q,) summing to 1, mean (Q,), sd (Q,)): the arguments of
        :func:`~bayeskern.compression.amcmd2_gaussian_truth`.

    Raises:
        TypeError: for a standardiser that is not one fitted to continuous responses, or n_nodes not an integer.
        ValueError: for n_nodes below 1.
    """
    _check_standardiser(standardiser)
    nodes, weights = np.polynomial.legendre.leggauss(check_count(n_nodes, "n_nodes"))
    x_std = standardiser.transform_x(3.0 * nodes[:, None])
    return (x_std, weights / 2, *heteroscedastic_truth_standardised(x_std[:, 0], standardiser))


_IMBALANCED_TARGET = np.array([0.32, 0.12, 0.19, 0.37])


def imbalanced(n: int, seed: int = 0):
    """The 4-class imbalanced stand-in: x (n, 2) from a 100-component mixture, y ~ Categorical(softmax(Wx + b)).

    Parameters are drawn with ``numpy.random.default_rng(seed)`` in a fixed order; b is calibrated to the class
    marginals (0.32, 0.12, 0.19, 0.37).

    Args:
        n: number of points.
        seed: the seed of the parameters and the draws.

    Returns:
        (x (n, 2), y (n,) labels in 0..3, probabilities (n, 4)): the true class probabilities at each x.

    Raises:
        TypeError: for n not an integer.
        ValueError: for n below 1.
    """
    n = check_count(n, "n")
    r = np.random.default_rng(seed)
    means = r.uniform(-4, 4, (100, 2))
    sds = r.uniform(0.2, 0.6, 100)
    weights = r.dirichlet(np.ones(100))
    W = r.standard_normal((4, 2))

    def draw_x(rng, size):
        comp = rng.choice(100, size, p=weights)
        return means[comp] + sds[comp, None] * rng.standard_normal((size, 2))

    x_cal = draw_x(np.random.default_rng(seed + 1), 200_000)
    b = np.zeros(4)
    logits_cal = x_cal @ W.T
    for _ in range(200):  # fixed-point iteration on the log marginals, to round-off
        step = np.log(_IMBALANCED_TARGET / _softmax(logits_cal + b).mean(0))
        b = b + step - step.mean()
        if np.max(np.abs(step)) < 1e-13:
            break
    x = draw_x(r, n)
    logits = x @ W.T + b
    y = np.argmax(logits + r.gumbel(size=(n, 4)), axis=1)
    return x, y, _softmax(logits)


def _softmax(z):
    z = z - z.max(1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(1, keepdims=True)


def _abs_mean(mu, tau):
    r = mu / tau
    return tau * jnp.sqrt(2 / jnp.pi) * jnp.exp(-(r**2) / 2) + mu * (1 - 2 * ndtr(-r))


TEST_FUNCTIONS = {
    "y": (lambda y: y, lambda mu, tau: mu),
    "y^2": (lambda y: y**2, lambda mu, tau: mu**2 + tau**2),
    "y^3": (lambda y: y**3, lambda mu, tau: mu**3 + 3 * mu * tau**2),
    "sin y": (jnp.sin, lambda mu, tau: jnp.sin(mu) * jnp.exp(-(tau**2) / 2)),
    "cos y": (jnp.cos, lambda mu, tau: jnp.cos(mu) * jnp.exp(-(tau**2) / 2)),
    "exp(-y^2)": (lambda y: jnp.exp(-(y**2)), lambda mu, tau: jnp.exp(-(mu**2) / (1 + 2 * tau**2)) / jnp.sqrt(1 + 2 * tau**2)),
    "1[y > 0]": (lambda y: (y > 0).astype(float), lambda mu, tau: ndtr(mu / tau)),
    "|y|": (jnp.abs, _abs_mean),
}
"""Test functions h of the response, each with E h(Y) for Y ~ N(mu, tau^2): name -> (h, exact mean)."""


def gaussian_expectation(name: str, mu, tau):
    """Closed-form E h(Y) for Y ~ N(mu, tau^2) and the test function ``name`` of :data:`TEST_FUNCTIONS`.

    Args:
        name: a key of TEST_FUNCTIONS.
        mu: means, any shape.
        tau: standard deviations, broadcastable against mu.

    Returns:
        Array of E h(Y), the broadcast shape.

    Raises:
        TypeError: for mu or tau that are not real numbers.
        ValueError: for an unknown name or non-finite mu or tau.
    """
    if name not in TEST_FUNCTIONS:
        raise ValueError(f"name must be one of {sorted(TEST_FUNCTIONS)}, got {name!r}")
    mu, tau = as_finite_array(mu, "mu"), as_finite_array(tau, "tau")
    return TEST_FUNCTIONS[name][1](mu, tau)


def train_val_test_split(x, y, key, val: float = 0.1, test: float = 0.1):
    """Random train / validation / test split (80/10/10 by default).

    Args:
        x: (n, ...) features.
        y: (n, ...) responses, row i paired with x[i].
        key: PRNG key of the permutation.
        val: share of validation rows, in [0, 1).
        test: share of test rows, in [0, 1).

    Returns:
        ((x, y) train, (x, y) validation, (x, y) test), NumPy arrays.

    Raises:
        TypeError: for a key that is not a PRNG key or data that are not real numbers.
        ValueError: for non-finite or unpaired data, shares outside [0, 1) or val + test >= 1.
    """
    check_key(key)
    x, y = as_finite_array(x, "x"), as_finite_array(y, "y")
    if x.ndim == 0 or y.ndim == 0 or x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must hold the same number of rows, got shapes {x.shape} and {y.shape}")
    for name, share in (("val", val), ("test", test)):
        if not (isinstance(share, (int, float)) and 0 <= share < 1):
            raise ValueError(f"{name} must be a share in [0, 1), got {share!r}")
    if val + test >= 1:
        raise ValueError(f"val + test must leave training rows, got {val} + {test}")
    n = x.shape[0]
    perm = np.asarray(jax.random.permutation(key, n))
    n_val, n_test = int(round(val * n)), int(round(test * n))
    parts = perm[n_val + n_test:], perm[:n_val], perm[n_val:n_val + n_test]
    x, y = np.asarray(x), np.asarray(y)
    return tuple((x[p], y[p]) for p in parts)


def sklearn_dataset(name: str):
    """A data set bundled with scikit-learn (the ``examples`` extra; no network).

    Args:
        name: ``"digits"`` (the stand-in for MNIST), ``"diabetes"`` (for superconductivity), ``"iris"``,
            ``"wine"`` or ``"breast_cancer"``.

    Returns:
        (x (n, d) float array, y): integer labels (n,), or (n, 1) float responses for diabetes.

    Raises:
        ValueError: for an unknown name.
        ImportError: without scikit-learn.
    """
    names = ("digits", "diabetes", "iris", "wine", "breast_cancer")
    if name not in names:
        raise ValueError(f"name must be one of {names}, got {name!r}")
    try:
        from sklearn import datasets
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("sklearn_dataset needs scikit-learn: pip install 'bayeskern[examples]'") from err
    loaders = {"digits": datasets.load_digits, "diabetes": datasets.load_diabetes, "iris": datasets.load_iris,
               "wine": datasets.load_wine, "breast_cancer": datasets.load_breast_cancer}
    bunch = loaders[name]()
    y = bunch.target
    return bunch.data.astype(float), (y[:, None].astype(float) if name == "diabetes" else y)


def _check_standardiser(standardiser):
    if not isinstance(standardiser, Standardiser) or standardiser.y_mean is None:
        raise TypeError(f"standardiser must be a Standardiser fitted to continuous responses, got {standardiser!r}")
