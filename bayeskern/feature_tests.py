"""Kernel tests in linear time: random Fourier features, and a null from cyclic shifts of blocks.

For large samples the MMD and HSIC tests replace each kernel by R random Fourier features
(:mod:`bayeskern.kernels.spectral`): the statistic of a labelling is then a function of one feature sum (MMD) or one
feature cross-covariance (HSIC) instead of a double sum over all pairs. Relabellings still need a null, and B random
permutations would cost B passes. Instead the rows are laid out once at random on a grid of q blocks x s offsets
(row j of the layout is block j mod q, offset j // q), and the null uses the q cyclic shifts of the labels (MMD) or of
the second variable (HSIC) along the block axis: shift b moves what sits in block c to block c + b (mod q). These
shifts form a group, and under the null the data are exchangeable (MMD) or the two variables' sequences independent
and each exchangeable (HSIC), so the observed layout is exchangeable with its shifts and the rank p-value
(1 + #{T_b >= T_0}) / q has exact level (Hemerik & Goeman 2018, Theorem 1). Because a random layout scatters the
labels, a shifted labelling overlaps the observed one as a random permutation does, and the power matches that of
random permutations. For each offset the statistics of all q shifts are one circular cross-correlation along the
block axis, so every shift comes from one FFT pass: O(N R log q) time for all q - 1 null statistics, memory O(q R)
plus one chunk of rows.

q is chosen in [B + 1, 2 (B + 1)] to divide the sample as evenly as possible; the N - q s rows left over (fewer than
s) are dropped at random before the layout, which keeps the level exact.
"""

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from ._validation import check_key
from .kernels.spectral import fourier_features, has_spectral_measure, kernel_scale, spectral_frequencies
from .sharding import _all_processes

__all__ = ["CyclicLayout", "cyclic_layout", "mmd_feature_statistics", "hsic_feature_statistics", "uses_features",
           "DEFAULT_NUM_FEATURES", "FEATURES_ABOVE"]

DEFAULT_NUM_FEATURES = {"mmd": 256, "hsic": 32}   # frequencies per kernel (each gives a cosine and a sine)
# method="auto": the permutation test up to this many pooled points (MMD) or pairs (HSIC), the features above
FEATURES_ABOVE = {"mmd": 2500, "hsic": 1000}
_CHUNK_ENTRIES = 1 << 23    # feature values per chunk of rows (64 MiB in float64)
_SPECTRA_ENTRIES = 1 << 23  # complex entries of the HSIC spectra held at once (128 MiB)
_PROGRESS_ROWS = 100_000    # progress_bar=None shows a bar from this many rows on
_FEATURE_STREAM = 0xFEA     # fold_in tag of the frequencies (independent of the layout)


@dataclass(frozen=True)
class CyclicLayout:
    """The rows used and their places on the block grid.

    Attributes:
        order: (q s,) row indices in layout order: row ``order[j]`` sits in block ``j % q`` at offset ``j // q``.
        blocks: q, the number of blocks (the observed layout and its q - 1 shifts).
    """

    order: np.ndarray
    blocks: int

    @property
    def offsets(self) -> int:
        """s, the rows per block."""
        return len(self.order) // self.blocks


def cyclic_layout(num_rows: int, n_permutations: int, key) -> CyclicLayout:
    """A random layout of ``num_rows`` rows on q blocks, q in [B + 1, 2 (B + 1)] leaving the fewest rows over.

    Args:
        num_rows: N, the rows (pooled points for MMD, pairs for HSIC).
        n_permutations: B, the least number of shifts wanted in the null.
        key: PRNG key of the layout.

    Returns:
        CyclicLayout: q s <= N rows in random order (the rest dropped at random).
    """
    check_key(key)
    low, high = min(n_permutations + 1, num_rows), min(2 * (n_permutations + 1), num_rows)
    candidates = np.arange(low, high + 1)
    q = int(candidates[np.argmin(num_rows % candidates)])
    used = q * (num_rows // q)
    return CyclicLayout(np.asarray(_permutation(key, num_rows))[:used], q)


def uses_features(method: str, num_rows: int, kernels, test: str = "mmd") -> bool:
    """Whether a test runs on random features: ``method="features"``, or ``"auto"`` above ``FEATURES_ABOVE[test]``
    rows when every kernel has a spectral measure (others keep the permutation test at any size).

    Raises:
        TypeError: for ``method="features"`` with a kernel that has no spectral measure.
    """
    stationary = all(has_spectral_measure(k) for k in kernels)
    if method == "features" and not stationary:
        other = next(type(k).__name__ for k in kernels if not has_spectral_measure(k))
        raise TypeError(f"method='features' uses random Fourier features, which need a stationary kernel (RBF, "
                        f"Matern12/32/52, RationalQuadratic, RBFFull, or one of them scaled), got {other}")
    return method == "features" or (method == "auto" and num_rows > FEATURES_ABOVE[test] and stationary)


@partial(jax.jit, static_argnums=1)
def _permutation(key, n):
    return jax.random.permutation(key, n)


def _frequencies(kernels, key, dim, num):
    """(K, R, D) frequencies (one independent draw per kernel) and (K,) kernel scales."""
    freqs = jnp.stack([spectral_frequencies(k, jax.random.fold_in(key, i), dim, num) for i, k in enumerate(kernels)])
    return freqs, jnp.asarray([kernel_scale(k) for k in kernels], freqs.dtype)


def _features(x, freqs, scales):
    """(rows, K * 2R) features of every kernel, kernel by kernel."""
    phi = jax.vmap(fourier_features, in_axes=(None, 0, 0), out_axes=1)(x, freqs, scales)   # (rows, K, 2R)
    return phi.reshape(x.shape[0], -1)


def _chunk_plan(layout: CyclicLayout, num_features: int, distributed: bool):
    """(offsets per chunk, the start offsets of the chunks this process computes): chunks of at most
    ``_CHUNK_ENTRIES`` feature values; for a distributed sample the processes take the chunks in turn."""
    q, s = layout.blocks, layout.offsets
    per_chunk = max(1, min(s, _CHUNK_ENTRIES // (q * num_features)))
    first, step = (jax.process_index(), jax.process_count()) if distributed else (0, 1)
    return per_chunk, range(first * per_chunk, s, per_chunk * step)


def _progress(layout: CyclicLayout, total: int, progress_bar, description: str):
    """A tqdm bar over ``total`` chunks; ``progress_bar=None`` shows it for runs of ``_PROGRESS_ROWS`` rows or more."""
    show = len(layout.order) >= _PROGRESS_ROWS if progress_bar is None else bool(progress_bar)
    return tqdm(total=total, desc=description, disable=not show, leave=False)


def _chunk_rows(layout: CyclicLayout, start: int, per_chunk: int):
    """(indices, valid) of a chunk's rows in layout order, padded to a full chunk (padding marked invalid)."""
    q, s = layout.blocks, layout.offsets
    stop = min(start + per_chunk, s)
    index = np.zeros(per_chunk * q, np.int64)
    index[: (stop - start) * q] = layout.order[start * q: stop * q]
    return index, np.arange(per_chunk * q) < (stop - start) * q


def _sum_over_processes(distributed, *arrays):
    """The sums over processes of this process's partial sums (the arrays themselves on one process)."""
    if not distributed or jax.process_count() == 1:
        return arrays
    return tuple(jnp.asarray(_all_processes(np.asarray(a)).sum(0)) for a in arrays)


@partial(jax.jit, static_argnames="q")
def _mmd_chunk(Z, labels, index, valid, freqs, scales, q):
    """Correlation spectra (q // 2 + 1, F) of the chunk's features with its labels along the blocks, and the
    chunk's feature sums (F,)."""
    w = valid.astype(Z.dtype)
    phi = _features(Z[index], freqs, scales) * w[:, None]
    L = labels[index] * w
    phi, L = phi.reshape(-1, q, phi.shape[-1]), L.reshape(-1, q)
    spectra = jnp.einsum("tfa,tf->fa", jnp.conj(jnp.fft.rfft(phi, axis=1)), jnp.fft.rfft(L, axis=1))
    return spectra, jnp.sum(phi, axis=(0, 1))


def mmd_feature_statistics(kernels, Z, n: int, layout: CyclicLayout, key, num_features: int, estimator: str,
                           progress_bar=None, distributed: bool = False):
    """MMD^2 of every kernel's random features for the observed labelling and its q - 1 cyclic shifts.

    Args:
        kernels: K stationary kernels.
        Z: (N, D) pooled sample, the first n rows from P (the same on every process when ``distributed``).
        n: rows from P.
        layout: the rows used and their places (:func:`cyclic_layout` of N).
        key: PRNG key of the frequencies.
        num_features: R, frequencies per kernel.
        estimator: ``"unbiased"`` or ``"biased"`` (of the feature kernel).
        progress_bar: show a bar; None for runs of at least 10^5 rows.
        distributed: the processes compute the chunks in turn and add their sums (a collective: every process
            calls with the same arguments).

    Returns:
        (q, K) statistics, row 0 the observed labelling.
    """
    freqs, scales = _frequencies(kernels, key, Z.shape[1], num_features)
    labels = jax.device_put((np.arange(Z.shape[0]) < n).astype(np.float64)).astype(Z.dtype)
    q = layout.blocks
    width = 2 * num_features * len(kernels)
    per_chunk, starts = _chunk_plan(layout, width, distributed)
    spectra, sums = jnp.zeros((q // 2 + 1, width), jnp.result_type(Z.dtype, jnp.complex64)), jnp.zeros(width, Z.dtype)
    with _progress(layout, len(starts), progress_bar, "MMD (random features)") as bar:
        for start in starts:
            index, valid = _chunk_rows(layout, start, per_chunk)
            s_chunk, t_chunk = _mmd_chunk(Z, labels, jax.device_put(index), jax.device_put(valid), freqs, scales, q)
            spectra, sums = spectra + s_chunk, sums + t_chunk
            bar.update()
    spectra, sums = _sum_over_processes(distributed, spectra, sums)
    n_used = int(np.sum(layout.order < n))
    return np.asarray(_mmd_from_sums(spectra, sums, scales, n_used, len(layout.order) - n_used, q, estimator))


@partial(jax.jit, static_argnames=("n", "m", "q", "estimator"))
def _mmd_from_sums(spectra, sums, scales, n, m, q, estimator):
    """(q, K) MMD^2 from the feature sums a_b of the first sample under every shift b and the total sums."""
    K = scales.shape[0]
    a = jnp.fft.irfft(spectra, n=q, axis=0).reshape(q, K, -1)
    total = sums.reshape(K, -1)
    b = total[None] - a
    if estimator == "biased":
        return jnp.sum((a / n - b / m) ** 2, axis=-1)
    aa, bb, ab = jnp.sum(a**2, -1), jnp.sum(b**2, -1), jnp.sum(a * b, -1)
    return (aa - scales * n) / (n * (n - 1)) + (bb - scales * m) / (m * (m - 1)) - 2 * ab / (n * m)


@partial(jax.jit, static_argnames="q")
def _hsic_chunk(X, Y, index, valid, fx, sx, fy, sy, q):
    """Cross-correlation spectra (q // 2 + 1, Fx, Fy) of the chunk's x- and y-features along the blocks, and the
    chunk's feature sums."""
    w = valid.astype(X.dtype)[:, None]
    phx, phy = _features(X[index], fx, sx) * w, _features(Y[index], fy, sy) * w
    phx, phy = phx.reshape(-1, q, phx.shape[-1]), phy.reshape(-1, q, phy.shape[-1])
    spectra = jnp.einsum("tfa,tfb->fab", jnp.conj(jnp.fft.rfft(phx, axis=1)), jnp.fft.rfft(phy, axis=1))
    return spectra, jnp.sum(phx, axis=(0, 1)), jnp.sum(phy, axis=(0, 1))


def hsic_feature_statistics(kxs, kys, X, Y, layout: CyclicLayout, key, num_features: int, progress_bar=None,
                            distributed: bool = False):
    """HSIC_b of every pair of kernels' random features for the observed pairing and its q - 1 cyclic shifts of Y.

    Args:
        kxs: Kx stationary kernels on X.
        kys: Ky stationary kernels on Y.
        X: (n, d_x) array.
        Y: (n, d_y) array, paired row by row with X.
        layout: the pairs used and their places (:func:`cyclic_layout` of n).
        key: PRNG key of the frequencies.
        num_features: R, frequencies per kernel.
        progress_bar: show a bar; None for runs of at least 10^5 pairs.
        distributed: as for :func:`mmd_feature_statistics`.

    Returns:
        (q, Kx * Ky) statistics (pairs in the order kxs[0] with every ky, then kxs[1], ...), row 0 observed.
    """
    fx, sx = _frequencies(kxs, key, X.shape[1], num_features)
    fy, sy = _frequencies(kys, jax.random.fold_in(key, 1), Y.shape[1], num_features)
    q, width = layout.blocks, 2 * num_features
    Fy = width * len(kys)
    group = max(1, _SPECTRA_ENTRIES // ((q // 2 + 1) * width * Fy))   # x-kernels per pass: bounded spectra
    passes = [slice(i, i + group) for i in range(0, len(kxs), group)]
    per_chunk, starts = _chunk_plan(layout, width * min(group, len(kxs)) + Fy, distributed)
    complex_dtype = jnp.result_type(X.dtype, jnp.complex64)
    stats = []
    with _progress(layout, len(starts) * len(passes), progress_bar, "HSIC (random features)") as bar:
        for part in passes:
            Fx = width * len(kxs[part])
            spectra = jnp.zeros((q // 2 + 1, Fx, Fy), complex_dtype)
            sum_x, sum_y = jnp.zeros(Fx, X.dtype), jnp.zeros(Fy, X.dtype)
            for start in starts:
                index, valid = _chunk_rows(layout, start, per_chunk)
                s_chunk, tx, ty = _hsic_chunk(X, Y, jax.device_put(index), jax.device_put(valid), fx[part], sx[part],
                                              fy, sy, q)
                spectra, sum_x, sum_y = spectra + s_chunk, sum_x + tx, sum_y + ty
                bar.update()
            spectra, sum_x, sum_y = _sum_over_processes(distributed, spectra, sum_x, sum_y)
            stats.append(_hsic_from_sums(spectra, sum_x, sum_y, len(layout.order), q, len(kxs[part]), len(kys)))
    return np.asarray(jnp.concatenate(stats, axis=1)).reshape(q, -1)


@partial(jax.jit, static_argnames=("n", "q", "kx", "ky"))
def _hsic_from_sums(spectra, sum_x, sum_y, n, q, kx, ky):
    """(q, Kx, Ky) HSIC_b = ||C_b||_F^2 / n^2 per kernel pair, C_b the centred cross-covariance sum under shift b."""
    raw = jnp.fft.irfft(spectra, n=q, axis=0)   # (q, Fx, Fy)
    C = raw - jnp.outer(sum_x, sum_y)[None] / n
    return jnp.sum(C.reshape(q, kx, -1, ky, C.shape[-1] // ky) ** 2, axis=(2, 4)) / n**2
