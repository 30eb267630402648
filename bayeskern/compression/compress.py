"""Public compression algorithms: JKH, JKIP, ACKH, ACKIP.

Each takes data in the user's units, standardises it (zero mean, unit s.d. per column), picks RBF kernels by the median heuristic unless
given (in standardised units), chooses lambda_C at the compressed-set size unless given (:func:`select_lambda`), and returns a
:class:`CompressionResult` with the set in both unit systems, the objective trace and timings. ``mesh=``
(a 1-D device mesh, :func:`bayeskern.sharding.row_mesh`) splits the data blocks over several devices.
"""

import time
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from .._config import require_x64
from .._interrupt import Interrupted, until_interrupted
from .._validation import check_count, check_key, num_points
from ..kernels.base import Kernel
from ..linalg import CholeskyError
from ..optim import adam, minimise, static_partial
from ..sharding import RowShards
from ._inputs import check_lambda, check_size, default_kernels, labelled, response_kind, rows_at
from .herding import herd_gradient, herd_pool
from .kcme import select_lambda
from .objectives import (DataBlocks, ackip_objective, class_score_terms, data_blocks, jkip_objective,
                         label_sweep)
from .result import CompressionResult
from .standardise import Standardiser, fit_standardiser

__all__ = ["jkh", "jkip", "ackh", "ackip", "compression_problem", "CompressionProblem"]


@dataclass(frozen=True)
class CompressionProblem:
    """Standardised data, kernels and settings shared by the algorithms.

    Attributes:
        x: (n, d_x) standardised features (or a RowShards).
        y: (n, d_y) standardised responses or (n,) labels.
        kernel_x: kernel on standardised features.
        kernel_y: kernel on standardised responses.
        standardiser: the map from your units.
        n_classes: the number of classes for labels; None for continuous responses.
        blocks: the data cut into blocks.
        n: the number of pairs.
    """

    x: jax.Array
    y: jax.Array
    kernel_x: Kernel
    kernel_y: Kernel
    standardiser: Standardiser
    n_classes: int | None
    blocks: DataBlocks

    @property
    def n(self) -> int:
        """The number of pairs."""
        return num_points(self.x)


def compression_problem(x, y, *, kernel_x=None, kernel_y=None, response=None, standardise: bool = True,
                        block_size: int = 1024, mesh=None) -> CompressionProblem:
    """Validate and standardise labelled data and choose default kernels: what every algorithm starts from.

    Args:
        x: (n, d_x) features, or a RowShards (rows spread over processes).
        y: (n, d_y) responses or (n,) integer labels, paired with x (a RowShards of the same layout when x is).
        kernel_x: kernel on standardised features (default RBF, median heuristic).
        kernel_y: kernel on standardised responses (default RBF, median heuristic; Indicator for labels).
        response: ``"continuous"`` or ``"indicator"`` (default: from kernel_y, then the dtype of y).
        standardise: standardise columns with the data's mean and s.d.
        block_size: rows per streamed block.
        mesh: a 1-D mesh (:func:`bayeskern.sharding.row_mesh`) to split every data block's rows over.

    Returns:
        CompressionProblem: standardised data, kernels, the standardiser and the data blocks.

    Raises:
        TypeError: for data that are not real numbers.
        ValueError: for unpaired or non-finite data, negative labels, an unknown response, or a mesh with
            RowShards.
        RuntimeError: when float64 is off.
    """
    require_x64("compression")
    kind = response_kind(y, kernel_y, response)
    x, y = labelled(x, y, kind)
    discrete = kind == "indicator"
    sharded = isinstance(x, RowShards)
    if sharded and mesh is not None:
        raise ValueError("mesh= splits in-process data; row-sharded x and y (RowShards) are already split")
    if discrete:
        low, high = _label_range(y)
        if low < 0:
            raise ValueError(f"class labels must be 0, 1, ..., C - 1, got a negative label {low}")
    s = fit_standardiser(x, y, discrete=discrete) if standardise else \
        Standardiser.identity(x.shape[1], None if discrete else y.shape[1])
    xs, ys = s.transform(x, y)
    sample = _heuristic_sample(xs, ys) if sharded else (xs, ys)
    kernel_x, kernel_y = default_kernels(*sample, kind, kernel_x, kernel_y)
    n_classes = high + 1 if discrete else None
    return CompressionProblem(xs, ys, kernel_x, kernel_y, s, n_classes, data_blocks(xs, ys, block_size, mesh))


def _label_range(y) -> tuple[int, int]:
    """The smallest and largest class label (over the real rows of a RowShards)."""
    if isinstance(y, RowShards):
        big = jnp.iinfo(y.values.dtype).max
        return (int(jnp.min(jnp.where(y.mask, y.values, big))), int(jnp.max(jnp.where(y.mask, y.values, -big))))
    return int(jnp.min(y)), int(jnp.max(y))


def _heuristic_sample(xs: RowShards, ys: RowShards):
    """The rows the median heuristic looks at (the same <= 1000 rows it takes in one process), gathered."""
    n = xs.num_rows
    index = np.arange(n) if n <= 1000 else np.sort(np.asarray(jax.random.choice(jax.random.key(0), n, (1000,),
                                                                                 replace=False)))
    return xs.take(jnp.asarray(index)), ys.take(jnp.asarray(index))


def _lambda_c(problem: CompressionProblem, lam_c, m: int, key):
    """lambda_C as given, or tuned at s = m on a random 10% validation split."""
    if lam_c is not None:
        return check_lambda(lam_c, "lam_c")
    if isinstance(problem.x, RowShards):
        raise ValueError("lam_c=None tunes lambda_C on a random split gathered to one process: pass lam_c for "
                         "row-sharded data (e.g. tuned on a subsample with compression.select_lambda)")
    n = problem.n
    n_val = max(n // 10, 1)
    if n - n_val < m:
        raise ValueError(f"lam_c=None tunes lambda_C on subsets of m = {m} of the {n - n_val} non-validation points; "
                         "pass lam_c explicitly for so few data")
    perm = np.asarray(jax.random.permutation(key, n))
    val, train = perm[:n_val], perm[n_val:]
    return select_lambda(problem.x[train], problem.y[train], problem.x[val], problem.y[val], problem.kernel_x,
                         problem.kernel_y, size=m, key=jax.random.fold_in(key, 1))


def _result(method, problem, cx, cy, lam_c, trace, indices, timings):
    trace = np.asarray(trace)
    if not np.all(np.isfinite(trace)):
        raise CholeskyError(f"{method}: the objective became non-finite after {int(np.argmin(np.isfinite(trace)))} "
                            "steps: K_CC + m lam_C I could not be factorised even with jitter, or the optimiser "
                            "diverged (check lam_c, the kernels' lengthscales and the learning rate)")
    return CompressionResult(method, np.asarray(cx), np.asarray(cy), problem.kernel_x, problem.kernel_y,
                             problem.standardiser, float(lam_c), trace, None if indices is None else np.asarray(indices),
                             timings)


# --- herding -----------------------------------------------------------------------------------------------------
def _pool(problem: CompressionProblem, candidates, key):
    """Candidate pool (px, py, data indices or None) in standardised units."""
    if isinstance(candidates, str):
        if candidates != "data":
            raise ValueError(f"candidates must be 'data', a pool size, indices or a pair (x, y), got {candidates!r}")
        if isinstance(problem.x, RowShards):
            raise ValueError("candidates='data' gathers every data pair to each process: pass a pool size, "
                             "indices or a pair (x, y) for row-sharded data")
        idx = np.arange(problem.n)
    elif isinstance(candidates, (int, np.integer)):
        if not 1 <= candidates <= problem.n:
            raise ValueError(f"a candidate pool size must lie in [1, n = {problem.n}], got {candidates}")
        idx = np.sort(np.asarray(jax.random.choice(key, problem.n, (int(candidates),), replace=False)))
    elif isinstance(candidates, (tuple, list)) and len(candidates) == 2:
        kind = "continuous" if problem.n_classes is None else "indicator"
        px, py = labelled(*candidates, kind, names=("candidates[0]", "candidates[1]"))
        px, py = problem.standardiser.transform(px, py)
        return px, py, None
    else:
        idx = np.asarray(candidates)
        if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer) or idx.size == 0 or \
                idx.min() < 0 or idx.max() >= problem.n:
            raise ValueError(f"candidate indices must be a non-empty 1-D integer array in [0, {problem.n})")
    return rows_at(problem.x, jnp.asarray(idx)), rows_at(problem.y, jnp.asarray(idx)), idx


def _herd(method, x, y, m, *, lam_c, candidates, replace, gradient, steps_per_point, optimizer, key, kernel_x,
          kernel_y, response, standardise, block_size, progress_bar, mesh=None):
    check_key(key)
    start = time.perf_counter()
    problem = compression_problem(x, y, kernel_x=kernel_x, kernel_y=kernel_y, response=response,
                                  standardise=standardise, block_size=block_size, mesh=mesh)
    m = check_size(m, problem.n)
    k_lam, k_pool, k_opt = jax.random.split(key, 3)
    lam = _lambda_c(problem, lam_c, m, k_lam)
    timings = {"select_lambda": time.perf_counter() - start}
    with tqdm(total=m, desc=method.upper(), disable=not progress_bar) as bar:
        if gradient:
            (cx, cy, trace), finished = until_interrupted(lambda: herd_gradient(
                method, problem.x, problem.y, problem.blocks, problem.kernel_x, problem.kernel_y, m, key=k_opt,
                steps_per_point=steps_per_point, optimizer=optimizer or adam(0.01), lam_c=lam,
                n_classes=problem.n_classes, progress=bar))
            indices = None
        else:
            px, py, pool_idx = _pool(problem, candidates, k_pool)
            (chosen, trace), finished = until_interrupted(lambda: herd_pool(
                method, px, py, problem.blocks, problem.kernel_x, problem.kernel_y, m, x=problem.x, y=problem.y,
                lam_c=lam, replace=replace, progress=bar))
            cx, cy = px[chosen], py[chosen]
            indices = None if pool_idx is None else pool_idx[np.asarray(chosen)]
    timings["total"] = time.perf_counter() - start
    if not finished:
        partial_set = _result(method, problem, cx, cy, lam, trace, indices, timings) if len(trace) else None
        raise Interrupted(partial_set, f"{method.upper()} was interrupted after {len(trace)} of {m} points; the set "
                                       "so far is in .partial")
    return _result(method, problem, cx, cy, lam, trace, indices, timings)


def jkh(x, y, m: int, *, key, candidates="data", replace: bool = False, gradient: bool = False,
        steps_per_point: int = 100, optimizer=None, lam_c=None, kernel_x=None, kernel_y=None, response=None,
        standardise: bool = True, block_size: int = 1024, progress_bar: bool = True,
        mesh=None) -> CompressionResult:
    """Joint kernel herding: m pairs that keep the joint law of (x, y), chosen greedily one at a time.

    Each step adds the pair that most decreases JMMD^2 to the data (the kernel-herding score with the tensor
    kernel k(x, x') l(y, y'), self term included). Gradient-free by default: O(n |pool|) once, then O(|pool|)
    per step.

    Args:
        x: (n, d_x) features in your units, or a RowShards (as for :func:`ackip`).
        y: (n, d_y) responses or (n,) integer labels, paired with x.
        m: size of the compressed set, 1 <= m < n.
        key: PRNG key.
        candidates: the pool: ``"data"`` (every data pair), an integer (a random pool of that size, for large n),
            data indices, or arrays ``(x_pool, y_pool)``.
        replace: allow a pool pair to be chosen twice.
        gradient: run the paper's version instead: each pair starts at the best of 10 random data pairs and takes
            ``steps_per_point`` optimiser steps.
        steps_per_point: optimiser steps per pair with ``gradient=True``.
        optimizer: optax transformation for ``gradient=True`` (default Adam, learning rate 1e-2).
        lam_c: ridge of the result's conditional mean embedding (only used by its read-outs; JKH targets the joint
            law); tuned at size m if None.
        kernel_x: kernel on standardised features (default RBF, median heuristic).
        kernel_y: kernel on standardised responses (default RBF, median heuristic; Indicator for labels).
        response: ``"continuous"`` or ``"indicator"`` (default: from kernel_y, then the dtype of y).
        standardise: standardise columns with the data's mean and s.d.
        block_size: rows per streamed block.
        progress_bar: show progress on stderr.
        mesh: a device mesh to shard the data rows over.

    Returns:
        CompressionResult: the herded set; ``indices`` gives the pool positions chosen.

    Raises:
        TypeError: for a key that is not a PRNG key, or counts that are not integers.
        ValueError: for invalid sizes or pools, unpaired or non-finite inputs.
        RuntimeError: when float64 is off.

    Examples:
        >>> import jax, bayeskern as bk
        >>> from bayeskern import compression
        >>> x, y = compression.data.heteroscedastic(400, jax.random.key(0))
        >>> res = compression.jkh(x, y, 15, key=jax.random.key(1), progress_bar=False)
        >>> res.m, len(set(res.indices.tolist()))          # 15 distinct data pairs
        (15, 15)
    """
    return _herd("jkh", x, y, m, lam_c=lam_c, candidates=candidates, replace=replace, gradient=gradient,
                 steps_per_point=steps_per_point, optimizer=optimizer, key=key, kernel_x=kernel_x, kernel_y=kernel_y,
                 response=response, standardise=standardise, block_size=block_size, progress_bar=progress_bar,
                 mesh=mesh)


def ackh(x, y, m: int, *, key, lam_c=None, candidates="data", replace: bool = False, gradient: bool = False,
         steps_per_point: int = 100, optimizer=None, kernel_x=None, kernel_y=None, response=None,
         standardise: bool = True, block_size: int = 1024, progress_bar: bool = True,
        mesh=None) -> CompressionResult:
    """Average conditional kernel herding: m pairs that keep the conditional law of y given x, chosen greedily.

    Each step adds the pair z minimising F(C_t u {z}), the in-sample KCD^2 up to a constant, with ridge
    (t + 1) lam_C. Gradient-free by default: every pool candidate is scored at once by a Schur complement,
    O(|pool| n t) per step (pass a pool size for large n).

    Args:
        x: (n, d_x) features in your units, or a RowShards (as for :func:`ackip`).
        y: (n, d_y) responses or (n,) integer labels, paired with x.
        m: size of the compressed set, 1 <= m < n.
        key: PRNG key.
        lam_c: ridge of the compressed set's conditional mean embedding; tuned at size m if None.
        candidates: the pool, as in :func:`jkh`.
        replace: allow a pool pair to be chosen twice.
        gradient: the paper's version: each pair starts at the best of 10 random data pairs and takes
            ``steps_per_point`` optimiser steps, O(n t^2) each.
        steps_per_point: optimiser steps per pair with ``gradient=True``.
        optimizer: optax transformation for ``gradient=True`` (default Adam, learning rate 1e-2).
        kernel_x: kernel on standardised features (default RBF, median heuristic).
        kernel_y: kernel on standardised responses (default RBF, median heuristic; Indicator for labels).
        response: ``"continuous"`` or ``"indicator"`` (default: from kernel_y, then the dtype of y).
        standardise: standardise columns with the data's mean and s.d.
        block_size: rows per streamed block.
        progress_bar: show progress on stderr.
        mesh: a device mesh to shard the data rows over.

    Returns:
        CompressionResult: the herded set; ``indices`` gives the pool positions chosen.

    Raises:
        TypeError: for a key that is not a PRNG key, or counts that are not integers.
        ValueError: for invalid sizes or pools, unpaired or non-finite inputs.
        RuntimeError: when float64 is off.
    """
    return _herd("ackh", x, y, m, lam_c=lam_c, candidates=candidates, replace=replace, gradient=gradient,
                 steps_per_point=steps_per_point, optimizer=optimizer, key=key, kernel_x=kernel_x, kernel_y=kernel_y,
                 response=response, standardise=standardise, block_size=block_size, progress_bar=progress_bar,
                 mesh=mesh)


# --- kernel inducing points -----------------------------------------------------------------------------------------
def _data_loss(method, params, labels, context, key, batch_size):
    """The KIP objective at params = cx (discrete) or (cx, cy), on the data or a random minibatch."""
    problem_x, problem_y, blocks, kernel_x, kernel_y, lam_c = context
    cx, cy = (params, labels) if labels is not None else params
    if batch_size is not None:
        idx = jax.random.randint(key, (batch_size,), 0, num_points(problem_x))  # i.i.d. rows: unbiased, O(batch)
        blocks = DataBlocks(rows_at(problem_x, idx)[None], rows_at(problem_y, idx)[None],
                            jnp.ones((1, batch_size), bool), batch_size)
    if method == "jkip":
        return jkip_objective(cx, cy, blocks, kernel_x, kernel_y), labels
    return ackip_objective(cx, cy, blocks, kernel_x, kernel_y, lam_c), labels


def _data_sweep(method, n_classes, params, labels, context):
    _, _, blocks, kernel_x, _, lam_c = context
    return label_sweep(class_score_terms(method, params, blocks, kernel_x, lam_c, n_classes), labels, n_classes)


def _best_subset(loss, problem, m, n_init, key, context):
    """The best of ``n_init`` uniformly random size-m subsets of the data by the objective."""
    best, best_value = None, np.inf
    for k in jax.random.split(key, n_init):
        idx = jax.random.choice(k, problem.n, (m,), replace=False)
        chosen = (rows_at(problem.x, idx), rows_at(problem.y, idx))
        params, labels = chosen if problem.n_classes is not None else (chosen, None)
        value = float(_loss_value(loss, params, labels, context, k))
        if value < best_value:
            best, best_value = (params, labels), value
    return best


@partial(jax.jit, static_argnames="loss")
def _loss_value(loss, params, labels, context, key):
    return loss(params, labels, context, key)[0]


def _kip(method, x, y, m, *, lam_c, num_steps, n_init, optimizer, batch_size, key, kernel_x, kernel_y, response,
         standardise, block_size, tol, progress_bar, mesh=None):
    check_key(key)
    n_init = check_count(n_init, "n_init")
    start = time.perf_counter()
    problem = compression_problem(x, y, kernel_x=kernel_x, kernel_y=kernel_y, response=response,
                                  standardise=standardise, block_size=block_size, mesh=mesh)
    m = check_size(m, problem.n)
    if batch_size is not None and not 1 <= batch_size <= problem.n:
        raise ValueError(f"batch_size must lie in [1, n = {problem.n}], got {batch_size}")
    k_lam, k_init, k_opt = jax.random.split(key, 3)
    lam = _lambda_c(problem, lam_c, m, k_lam)
    context = (problem.x, problem.y, problem.blocks, problem.kernel_x, problem.kernel_y, jnp.asarray(lam))
    timings = {"select_lambda": time.perf_counter() - start}
    full_loss = static_partial(_data_loss, method, batch_size=None)
    params, labels = _best_subset(full_loss, problem, m, n_init, k_init, context)
    discrete = problem.n_classes is not None
    sweep = static_partial(_data_sweep, method, problem.n_classes) if discrete else None
    fitted, finished = until_interrupted(lambda: minimise(
        static_partial(_data_loss, method, batch_size=batch_size), params, optimizer or adam(0.01), num_steps=num_steps,
        data=context, carry=labels, key=k_opt, after_round=sweep, steps_per_round=10 if discrete else 50, tol=tol,
        progress_bar=progress_bar, description=method.upper()))
    params, labels, trace = fitted.params, fitted.carry, fitted.trace
    final = float(_loss_value(full_loss, params, labels, context, k_opt))
    cx, cy = (params, labels) if discrete else params
    timings["total"] = time.perf_counter() - start
    result = _result(method, problem, cx, cy, lam, np.append(trace, final), None, timings)
    if not finished:
        raise Interrupted(result, f"{method.upper()} was interrupted after {len(trace)} of {num_steps} steps; the set "
                                  "so far is in .partial")
    return result


def jkip(x, y, m: int, *, key, num_steps: int = 1000, n_init: int = 10, optimizer=None, batch_size=None, lam_c=None,
         kernel_x=None, kernel_y=None, response=None, standardise: bool = True, block_size: int = 1024,
         tol: float = 1e-7, progress_bar: bool = True, mesh=None) -> CompressionResult:
    """Joint kernel inducing points: m pairs that keep the joint law of (x, y), optimised jointly.

    All m pairs minimise J(C) = JMMD^2(data, C) minus its data-data constant, from the best of ``n_init`` random
    subsets, with optimiser steps (Adam, learning rate 1e-2, by default); O((n m + m^2) d) per step, streamed over
    data blocks. Discrete responses alternate 10 feature steps with a greedy label sweep.

    Args:
        x: (n, d_x) features in your units, or a RowShards (as for :func:`ackip`).
        y: (n, d_y) responses or (n,) integer labels, paired with x.
        m: size of the compressed set, 1 <= m < n.
        key: PRNG key.
        num_steps: optimiser steps.
        n_init: random subsets tried for the start.
        optimizer: an optax transformation.
        batch_size: rows per unbiased minibatch step (None: full data).
        lam_c: ridge of the result's conditional mean embedding (only used by its read-outs); tuned at size m if
            None.
        tol: stop once the objective changes by at most ``tol`` (relative) over a round of steps.
        kernel_x: kernel on standardised features (default RBF, median heuristic).
        kernel_y: kernel on standardised responses (default RBF, median heuristic; Indicator for labels).
        response: ``"continuous"`` or ``"indicator"`` (default: from kernel_y, then the dtype of y).
        standardise: standardise columns with the data's mean and s.d.
        block_size: rows per streamed block.
        progress_bar: show progress on stderr.
        mesh: a device mesh to shard the data rows over.

    Returns:
        CompressionResult: the optimised set; its objective trace ends with the full-data J of the returned set.

    Raises:
        TypeError: for a key that is not a PRNG key, or counts that are not integers.
        ValueError: for invalid sizes, unpaired or non-finite inputs.
        RuntimeError: when float64 is off.
    """
    return _kip("jkip", x, y, m, lam_c=lam_c, num_steps=num_steps, n_init=n_init, optimizer=optimizer,
                batch_size=batch_size, key=key, kernel_x=kernel_x, kernel_y=kernel_y, response=response,
                standardise=standardise, block_size=block_size, tol=tol, progress_bar=progress_bar, mesh=mesh)


def ackip(x, y, m: int, *, key, lam_c=None, num_steps: int = 1000, n_init: int = 10, optimizer=None,
          batch_size=None, kernel_x=None, kernel_y=None, response=None, standardise: bool = True,
          block_size: int = 1024, tol: float = 1e-7, progress_bar: bool = True,
          mesh=None) -> CompressionResult:
    """Average conditional kernel inducing points: m pairs that keep the conditional law of y given x.

    All m pairs jointly minimise F(C), the in-sample KCD^2 up to a constant: the compressed set's conditional
    mean embedding is fitted to every data pair. Starts at the best of ``n_init`` random subsets, then optimiser
    steps (Adam by default); O(n m^2 + m^3) per step, streamed over the data in blocks.

    Args:
        x: (n, d_x) float array of features, in your units (standardised internally unless ``standardise=False``);
            or a :class:`~bayeskern.sharding.RowShards` (rows spread over processes; then pass ``lam_c``).
        y: (n, d_y) float array of responses, or (n,) integer labels (indicator kernel, label sweeps); a
            RowShards of the same layout when x is one.
        m: size of the compressed set, 1 <= m < n.
        key: PRNG key (initial subsets, lambda tuning, minibatches).
        lam_c: ridge of the compressed set's embedding; tuned at size m on a 10% validation split if None.
        num_steps: optimiser steps.
        n_init: random subsets tried for the start.
        optimizer: an optax transformation (default Adam, learning rate 1e-2).
        batch_size: rows per unbiased minibatch step (None: full data).
        kernel_x: kernel on standardised features (default RBF, median heuristic).
        kernel_y: kernel on standardised responses (default RBF, median heuristic; Indicator for labels).
        response: ``"continuous"`` or ``"indicator"`` (default: from kernel_y, then the dtype of y).
        standardise: standardise columns with the data's mean and s.d.
        block_size: rows per streamed block.
        tol: stop once the objective changes by at most ``tol`` (relative) over a round of steps.
        progress_bar: show progress on stderr.
        mesh: a device mesh to shard the data rows over.

    Returns:
        CompressionResult: the set (``x``, ``y`` standardised; ``x_original``, ``y_original`` in your units), the
        kernels, ``lam_c`` and the objective trace; ``conditional_expectation`` reads it out.

    Raises:
        TypeError: for a key that is not a PRNG key, or counts that are not integers.
        ValueError: for invalid sizes, unpaired or non-finite inputs, or too few data to tune lam_c.
        RuntimeError: when float64 is off.

    Examples:
        >>> import jax, numpy as np, bayeskern as bk
        >>> from bayeskern import compression
        >>> x, y = compression.data.heteroscedastic(500, jax.random.key(0))
        >>> res = compression.ackip(x, y, 20, key=jax.random.key(1), num_steps=100, progress_bar=False)
        >>> res.x_original.shape, res.y_original.shape
        ((20, 1), (20, 1))
        >>> res.conditional_expectation(np.zeros((3, 1))).mean.shape   # E[Y | x = 0] from 20 pairs
        (3, 1)
    """
    return _kip("ackip", x, y, m, lam_c=lam_c, num_steps=num_steps, n_init=n_init, optimizer=optimizer,
                batch_size=batch_size, key=key, kernel_x=kernel_x, kernel_y=kernel_y, response=response,
                standardise=standardise, block_size=block_size, tol=tol, progress_bar=progress_bar, mesh=mesh)
