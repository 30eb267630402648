"""The Bayesian aggregated kernel test's rule: kernels and weights from the BKE posterior of the unlabelled sample."""

from dataclasses import dataclass

import jax
import numpy as np

from .._kernel_choice import register_named_rule
from .._validation import as_points, check_count, check_key, check_positive, num_distinct_rows
from ..kernels.heuristics import median_heuristic
from ..kernels.stationary import squared_distances
from ..aggregate import FAMILIES, AggregatedTestResult, KernelCollection
from .hyper import spanned_posterior
from .inducing import span_coordinates
from .posterior import WitnessPosterior, witness_posterior

__all__ = ["BayesAggregate", "WIDE_POSTERIOR_SHARE", "aggregated_witness", "TWO_SAMPLE_RULE", "MARGINAL_RULE"]


def _distance_range(Z, key, max_points=500):
    """(smallest useful lengthscale, largest pairwise distance) of a random subsample of at most ``max_points`` rows.

    A Gaussian kernel of lengthscale l tells apart pairs whose squared distances differ by about l^2. In low
    dimension the 5 % quantile of the distances is the finer scale; in high dimension every pair sits at nearly the
    same distance, and the scale that resolves their spread is the root of the spread of the squared distances
    (their 5-95 % range), far below any quantile of the distances. The smaller of the two is returned.
    """
    Z = np.asarray(Z, float)
    if Z.shape[0] > max_points:
        Z = Z[np.asarray(jax.random.choice(key, Z.shape[0], (max_points,), replace=False))]
    d2 = np.asarray(squared_distances(Z, Z))[np.triu_indices(Z.shape[0], 1)]
    d2 = d2[d2 > 0]
    if d2.size == 0:
        raise ValueError("the pooled sample has fewer than two distinct points: no kernel scale can be chosen")
    d = np.sqrt(d2)
    spread = np.sqrt(np.diff(np.quantile(d2, [0.05, 0.95]))[0])
    finest = np.quantile(d, 0.05)
    return float(min(finest, spread) if spread > 0 else finest), float(d.max())


_MIN_DISTINCT = 8          # fewer distinct points resolve no kernel scale: the bandwidth floor alone
# From this span dimension on, m is capped at D: the posterior then takes the m x m side of the Jacobian, O(n m + m^3)
# per lengthscale, instead of O(n m D^2) for m > D (on the 8x8 digits, D = 58: 13 s against 4 s per test on one
# core, compilation included)
_WIDE_FROM_DIM = 32
WIDE_POSTERIOR_SHARE = 0.1
"""The posterior kernels' default weight from a span of 32 dimensions. There the posterior's modes sit at the scale
of the pooled density (in high dimension every distance is near the median one) and changes of scale show only at
finer kernels; a tenth of the weight keeps the modes' power on mean shifts and frees the floor's finer kernels."""
_SUBSAMPLE_STREAM = 0x5B   # fold_in tag of the subsample above max_points (independent of the inducing points)


def _floor_weights(grid, span: int):
    """(G,) weights of the floor's bandwidths ``grid``, summing to 1: even, or proportional to 1 / l for a sample
    spanning 32 or more dimensions. There every distance is near the median one, the kernels broader than it all
    measure much the same thing (about the difference of the means) and the changes that only finer kernels see
    would otherwise get a small share of the weight."""
    w = 1.0 / grid if span >= _WIDE_FROM_DIM else np.ones_like(grid)
    return w / w.sum()


@dataclass(frozen=True)
class BayesAggregate:
    """The kernel rule of the Bayesian aggregated test: kernels and weights from the BKE posterior of the sample.

    For a two-sample test the rule sees the pooled, unlabelled sample; for an independence test, each marginal.
    The BKE posterior over the SE lengthscale (:func:`bayeskern.bke.lengthscale_posterior`, tempered to one
    observation's worth) gives the modes and their masses; each family gets a kernel at each mode, carrying
    ``posterior_share`` of the weight in proportion to the mode's mass (by default a half, and a tenth for samples
    spanning 32 or more dimensions, where the modes describe the pooled density's scale and changes of scale show
    at finer ones). The rest of the weight goes to ``num_bandwidths`` log-spaced bandwidths per family from half the
    finest useful scale (the 5 % quantile of the pairwise distances, or in high dimension, where distances
    concentrate, the root of the 5-95 % range of the squared distances) to twice the largest pairwise distance,
    evenly, or in proportion to 1 / l from a span of 32 dimensions: a floor that keeps power where the
    pseudolikelihood points at the wrong scale.

    Attributes:
        families: kernel families, from ``"gaussian"`` (RBF) and ``"exponential"`` (Matern12, a Laplace-type kernel
            with the Euclidean distance).
        num_bandwidths: bandwidths per family in the floor (0 for posterior kernels only; a sample of fewer than
            8 distinct points, too coarse for the posterior, then gets the median heuristic's kernels).
        posterior_share: weight of the posterior kernels, in (0, 1] (1 with ``num_bandwidths=0``); None (the
            default) for 0.5, or ``WIDE_POSTERIOR_SHARE`` when the sample spans 32 or more dimensions (1 with no
            floor).
        inducing: the numbers m of inducing points held out for the pseudolikelihood, each clipped to at most a
            quarter of the number of distinct points and, for samples spanning 32 or more dimensions, to at most
            that dimension D (the m x m side of the Jacobian then costs O(n m + m^3) per lengthscale). The
            pseudolikelihood resolves the sample at a scale set by m (fewer points, coarser scales), so the rule
            averages the tempered posterior over these m (a uniform prior over them). On data with repeated rows
            the copies of the inducing points leave the likelihood points, and a random subset of those points of
            one of eight sizes per octave is kept, so that data sets of one size share the compiled posterior curve.
        max_modes: the heaviest modes kept for each m (those with at least 1 % of the heaviest one's mass).
        tau2: the noise variance of the BKE model, > 0.
        max_points: above this many pooled points the posterior is computed on a random subsample of this size (the
            kernel scale of a sample is resolved long before 10^5 points; the subsample, drawn with the test's key,
            uses no labels, so the level stays exact).

    Raises:
        ValueError: for an unknown family, a share outside (0, 1], counts below their minimum, a share below 1 with
            no floor, or tau2 not positive and finite.
    """

    families: tuple = ("gaussian", "exponential")
    num_bandwidths: int = 10
    posterior_share: float | None = None
    inducing: tuple = (10, 30, 100)
    max_modes: int = 2
    tau2: float = 1.0
    max_points: int = 2000

    def __post_init__(self):
        families = (self.families,) if isinstance(self.families, str) else tuple(self.families)
        if not families or any(f not in FAMILIES for f in families):
            raise ValueError(f"families must be a non-empty tuple from {tuple(FAMILIES)}, got {self.families!r}")
        object.__setattr__(self, "families", families)
        check_count(self.num_bandwidths, "num_bandwidths", 0)
        check_count(self.max_modes, "max_modes")
        check_count(self.max_points, "max_points", 8)
        object.__setattr__(self, "tau2", float(check_positive(self.tau2, "tau2")))
        inducing = (self.inducing,) if isinstance(self.inducing, (int, np.integer)) else tuple(self.inducing)
        if not inducing:
            raise ValueError("inducing must name at least one number of inducing points")
        object.__setattr__(self, "inducing", tuple(check_count(m, "inducing") for m in inducing))
        if self.posterior_share is None:
            return
        if not 0.0 < self.posterior_share <= 1.0:
            raise ValueError(f"posterior_share must lie in (0, 1], got {self.posterior_share}")
        if self.num_bandwidths == 0 and self.posterior_share != 1.0:
            raise ValueError("with num_bandwidths=0 every weight is the posterior's: posterior_share must be 1")

    def __call__(self, X, Y=None, *, key) -> KernelCollection:
        """The collection for a sample (pooled with Y when given); uses no labels.

        Args:
            X: (n, D) sample.
            Y: optional (m, D) second sample, pooled with X.
            key: PRNG key (inducing points and the distance subsample).

        Returns:
            KernelCollection: posterior kernels first, then the bandwidth floor.

        Raises:
            TypeError: for a key that is not a PRNG key or data that are not real numbers.
            ValueError: for non-finite data, samples of different dimension, or fewer than two distinct points.
        """
        check_key(key)
        pooled = as_points(X, "X")
        if Y is not None:
            Y = as_points(Y, "Y")
            if Y.shape[1] != pooled.shape[1]:
                raise ValueError(f"X and Y must have the same dimension, got {pooled.shape[1]} and {Y.shape[1]}")
            pooled = np.concatenate([np.asarray(pooled), np.asarray(Y)])
        k_post, k_dist = jax.random.split(key)
        if num_distinct_rows(pooled) < 2:   # every statistic is 0 under any kernel: the test answers p = 1
            return KernelCollection.single(FAMILIES[self.families[0]](1.0), "any kernel (the sample is one point)")
        modes, span = self._posterior_modes(pooled, k_post)
        share = self._share(span) if modes else 0.0
        F = len(self.families)
        kernels, weights, labels = [], [], []
        for family in self.families:
            for ell, w in modes.items():
                kernels.append(FAMILIES[family](float(ell)))
                weights.append(share * w / F)
                labels.append(f"{family} l={ell:.3g} (posterior mode, mass {w:.2f})")
        if self.num_bandwidths:
            lo, hi = _distance_range(pooled, k_dist)
            grid = np.geomspace(lo / 2, 2 * hi, self.num_bandwidths)
            floor = _floor_weights(grid, span)
            for family in self.families:
                for ell, w in zip(grid, floor):
                    kernels.append(FAMILIES[family](float(ell)))
                    weights.append((1 - share) * w / F)
                    labels.append(f"{family} l={ell:.3g} (bandwidth floor)")
        if not kernels:   # too few distinct points for the posterior and no floor: the median heuristic's kernels
            ell = float(median_heuristic(pooled, key=k_dist))
            kernels = [FAMILIES[family](ell) for family in self.families]
            weights = [1.0 / F] * F
            labels = [f"{family} l={ell:.3g} (median heuristic: too few distinct points for the posterior)"
                      for family in self.families]
        return KernelCollection(tuple(kernels), np.array(weights), tuple(labels))

    def _share(self, span: int) -> float:
        """The posterior kernels' weight for a sample spanning ``span`` dimensions."""
        if self.posterior_share is not None:
            return self.posterior_share
        if not self.num_bandwidths:
            return 1.0
        return WIDE_POSTERIOR_SHARE if span >= _WIDE_FROM_DIM else 0.5

    def _posterior_modes(self, pooled, key) -> tuple[dict, int]:
        """({lengthscale: mass} of the heaviest modes for each number of inducing points, masses averaged over
        them; the dimension of the sample's span). The modes are empty for a sample of fewer than ``_MIN_DISTINCT``
        distinct points: the floor alone then."""
        if pooled.shape[0] > self.max_points:
            pooled = jax.random.choice(jax.random.fold_in(key, _SUBSAMPLE_STREAM), pooled, (self.max_points,),
                                       replace=False)
        distinct = num_distinct_rows(pooled)
        if distinct < _MIN_DISTINCT:
            return {}, 0
        pooled = span_coordinates(pooled)
        dim = pooled.shape[1]
        cap = dim if dim >= _WIDE_FROM_DIM else pooled.shape[0]
        sizes = sorted({min(m, distinct // 4, cap) for m in self.inducing})
        med = float(median_heuristic(pooled, key=jax.random.fold_in(key, len(sizes))))
        grid = np.geomspace(0.01 * med, 3.0 * med, 81)
        modes = {}
        for i, m in enumerate(sizes):
            post = spanned_posterior(pooled, jax.random.fold_in(key, i), m, self.tau2, grid, len(grid),
                                     common_size=True)
            top, mass = post.modes[: self.max_modes], post.mode_weights[: self.max_modes]
            keep = mass >= 0.01 * mass[0]   # modes of negligible mass would only cost time
            for ell, w in zip(top[keep], mass[keep] / mass[keep].sum()):
                modes[float(ell)] = modes.get(float(ell), 0.0) + w / len(sizes)
        return dict(sorted(modes.items(), key=lambda t: -t[1])), dim


def aggregated_witness(result: AggregatedTestResult, XP, XQ, *, grid, band: float = 0.8, tau2=1.0) -> WitnessPosterior:
    """The BKE witness posterior mu_P - mu_Q under the dominant Gaussian kernel of an aggregated two-sample test.

    Args:
        result: what :func:`bayeskern.mmd_test` returned for an aggregated test.
        XP: (n_P, D) the sample of P given to the test.
        XQ: (n_Q, D) the sample of Q.
        grid: (G, D) evaluation points.
        band: probability of the pointwise credible band, in (0, 1).
        tau2: the noise variance of the BKE model.

    Returns:
        WitnessPosterior: mean, band and the fraction of the grid where the band excludes zero.

    Raises:
        TypeError: for a result that is not an AggregatedTestResult.
        ValueError: for the result of an independence test or one with no Gaussian kernel, or bad samples or grid.
    """
    if not isinstance(result, AggregatedTestResult):
        raise TypeError(f"result must be an AggregatedTestResult, got {type(result).__name__}")
    if result.kernels and isinstance(result.kernels[0], tuple):
        raise ValueError("aggregated_witness is for two-sample results; this one is an independence test")
    return witness_posterior(XP, XQ, result.dominant("gaussian"), tau2, grid=grid, band=band)


TWO_SAMPLE_RULE = BayesAggregate()
# the independence rule keeps half the weight on the posterior in any dimension: the lower share of wide samples
# was chosen on two-sample problems, and on high-dimensional dependence problems it has not been shown to help
MARGINAL_RULE = BayesAggregate(families=("gaussian",), num_bandwidths=5, max_modes=1, posterior_share=0.5)
register_named_rule("bayes", two_sample=TWO_SAMPLE_RULE, marginal=MARGINAL_RULE)

