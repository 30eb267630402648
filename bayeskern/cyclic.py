"""Kernel tests with a null from cyclic shifts of a random block layout: the exact kernel in O(N^2 log B) and random
Fourier features in O(N R log B).

The rows are laid out once at random on a grid of q blocks x s offsets (row j of the layout is block j mod q, offset
j // q), and the null uses the q cyclic shifts of the labels (MMD) or of the second variable (HSIC) along the block
axis: shift b gives the row in block c what sits in block c + b (mod q) at the same offset. These shifts form a
group, and under the null the data are exchangeable (MMD) or the two variables' sequences independent and each
exchangeable (HSIC), so the observed layout is exchangeable with its shifts and the rank p-value
(1 + #{T_b >= T_0}) / q has exact level (Hemerik & Goeman 2018, Theorem 1). A random layout scatters the labels, so a
shifted labelling overlaps the observed one as a random permutation does, and the power is that of random
permutations.

The statistics of all q shifts come from one pass. With the exact kernel, the pairs of rows at offsets (t, t') in
blocks (c, c + d) form, for each (t, t', d), a sequence over c of kernel values and one of label weights (MMD) or of
the second kernel's values (HSIC); a shift moves one along c, so every shift's statistic is a sum of circular
cross-correlations, one FFT of the diagonals of each q x q kernel block: O(N^2 log q) per kernel, for any kernel.
With random Fourier features (:mod:`bayeskern.kernels.spectral`) a labelling's statistic is a function of one feature
sum (MMD) or one feature cross-covariance (HSIC), and every shift's sums are again correlations along the blocks:
O(N R log q) per kernel, memory O(q R) plus one chunk of rows.

q is chosen in [L, 2 L], L = max(B + 1, 256), to divide the sample as evenly as possible (at least 256 blocks keep the
number of block pairs s^2 small when B is); the N - q s rows left over are dropped at random before the layout,
which keeps the level exact. A sample of N < B + 1 rows has too few
blocks for B shifts: the exact null then adds the q reflections c -> b - c of the block axis (the dihedral group, 2q
labellings, the observed one among them), each the same correlations with the labels (or the second variable's
blocks) read in reverse order, and so keeps 2N - 1 >= B relabellings where 2N > B; the null of a mean of many kernels
loses power when it has few of them.
"""

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from ._validation import check_key
from .kernels.blockwise import kernel_stack
from .kernels.spectral import fourier_features, has_spectral_measure, kernel_scale, spectral_frequencies
from .sharding import _all_processes

__all__ = ["CyclicLayout", "cyclic_layout", "null_size", "mmd_cyclic_statistics", "hsic_cyclic_statistics", "mmd_feature_statistics",
           "hsic_feature_statistics", "choose_method", "default_num_features", "DEFAULT_NUM_FEATURES",
           "MAX_DEFAULT_FEATURES", "FEATURES_ABOVE", "WIDE_FROM_DIM", "WIDE_FEATURES_ABOVE"]

DEFAULT_NUM_FEATURES = {"mmd": 64, "hsic": 32}   # frequencies per kernel (each gives a cosine and a sine)
MAX_DEFAULT_FEATURES = 1024  # the two-sample default's cap in high dimension
# method="auto": random permutations below MIN_CYCLIC_ROWS rows (unless B + 1 rows suffice), the exact kernel with
# cyclic shifts up to FEATURES_ABOVE pooled points (MMD) or pairs (HSIC), random features above
MIN_CYCLIC_ROWS = 200
# at least this many blocks (when the sample has them): the exact null loops over the s^2 pairs of offsets, so few
# large blocks beat many small ones, and more shifts than B only refine the p-value
MIN_BLOCKS = 256
FEATURES_ABOVE = {"mmd": 2000, "hsic": 4000}
# ... and for two samples from WIDE_FROM_DIM dimensions on, up to WIDE_FEATURES_ABOVE pooled points: there the
# features lose much of the exact kernel's power (changes of scale show at fine kernels, whose features need far
# more frequencies than dimensions), and the exact pass at 10^4 points takes about a minute on two cores
WIDE_FROM_DIM = 32
WIDE_FEATURES_ABOVE = 10_000
_CHUNK_ENTRIES = 1 << 23    # feature values per chunk of rows (64 MiB in float64)
_SPECTRA_ENTRIES = 1 << 23  # complex entries of the HSIC spectra held at once (128 MiB)
_PROGRESS_ROWS = 100_000    # progress_bar=None shows a bar from this many rows on (features)
_PROGRESS_EXACT_ROWS = 5000  # ... and from this many with the exact kernel, whose pass grows as N^2


@dataclass(frozen=True)
class CyclicLayout:
    """The rows used and their places on the block grid.

    Attributes:
        order: (q s,) row indices in layout order: row ``order[j]`` sits in block ``j % q`` at offset ``j // q``.
        blocks: q, the number of blocks (the observed layout and its q - 1 shifts).
        reflected: whether the null also holds the q reflections of the block axis (2q - 1 relabellings).
    """

    order: np.ndarray
    blocks: int
    reflected: bool = False

    @property
    def offsets(self) -> int:
        """s, the rows per block."""
        return len(self.order) // self.blocks


def cyclic_layout(num_rows: int, n_permutations: int, key, reflections: bool = True) -> CyclicLayout:
    """A random layout of ``num_rows`` rows on q blocks leaving the fewest rows over, q in [L, 2 L] for
    L = max(B + 1, ``MIN_BLOCKS``), and at most N.

    Args:
        num_rows: N, the rows (pooled points for MMD, pairs for HSIC).
        n_permutations: B, the least number of relabellings wanted in the null.
        key: PRNG key of the layout.
        reflections: with N < B + 1 (one row per block), add the reflections of the block axis to the null.

    Returns:
        CyclicLayout: q s <= N rows in random order (the rest dropped at random).
    """
    check_key(key)
    wanted = max(n_permutations + 1, MIN_BLOCKS)
    low, high = min(n_permutations + 1, num_rows), min(2 * wanted, num_rows)
    low = max(low, min(wanted, num_rows))
    candidates = np.arange(low, high + 1)
    q = int(candidates[np.argmin(num_rows % candidates)])
    used = q * (num_rows // q)
    return CyclicLayout(np.asarray(_permutation(key, num_rows))[:used], q,
                        reflections and q < n_permutations + 1)


def null_size(layout: CyclicLayout) -> int:
    """The number of relabellings in the layout's null, the observed one excluded."""
    return layout.blocks * (2 if layout.reflected else 1) - 1


def _reflect(blocks, axis=1):
    """The block axis read as c -> -c (mod q): shifts of the result are the reflections c -> b - c."""
    q = blocks.shape[axis]
    return jnp.take(blocks, (-np.arange(q)) % q, axis=axis)


def choose_method(method: str, num_rows: int, kernels, n_permutations: int, test: str = "mmd",
                  dim: int = 1) -> str:
    """The null a test runs: ``method`` itself, or for ``"auto"``: ``"permutation"`` for samples too small for
    min(B, ``MIN_CYCLIC_ROWS`` - 1) relabellings (the cyclic group of N rows has N - 1, with its reflections
    2N - 1), ``"cyclic"`` up to ``FEATURES_ABOVE[test]`` rows, or for two samples of ``WIDE_FROM_DIM`` or more
    dimensions up to ``WIDE_FEATURES_ABOVE`` (and at any size for kernels without a spectral measure),
    ``"features"`` above.

    Args:
        method: ``"auto"``, ``"permutation"``, ``"cyclic"`` or ``"features"``.
        num_rows: N, pooled points (MMD) or pairs (HSIC).
        kernels: every kernel of the test.
        n_permutations: B.
        test: ``"mmd"`` or ``"hsic"``.
        dim: the dimension D of the points (MMD).

    Returns:
        The method to run.

    Raises:
        TypeError: for ``method="features"`` with a kernel that has no spectral measure.
    """
    stationary = all(has_spectral_measure(k) for k in kernels)
    if method == "features" and not stationary:
        other = next(type(k).__name__ for k in kernels if not has_spectral_measure(k))
        raise TypeError(f"method='features' uses random Fourier features, which need a stationary kernel (RBF, "
                        f"Matern12/32/52, RationalQuadratic, RBFFull, or one of them scaled), got {other}")
    if method != "auto":
        return method
    if num_rows < min(n_permutations + 1, MIN_CYCLIC_ROWS) or 2 * num_rows - 1 < n_permutations:
        return "permutation"
    wide = test == "mmd" and dim >= WIDE_FROM_DIM
    return "features" if num_rows > (WIDE_FEATURES_ABOVE if wide else FEATURES_ABOVE[test]) and stationary \
        else "cyclic"


def default_num_features(dim: int) -> int:
    """Frequencies per kernel of the two-sample feature test when the caller gives none: as many as the dimension
    D, from 64 up to ``MAX_DEFAULT_FEATURES`` (a change spread over many of D directions reaches the feature
    statistic a few frequencies at a time, and 64 of them keep little of the exact kernel's power in hundreds of
    dimensions). The independence test keeps ``DEFAULT_NUM_FEATURES["hsic"]`` per kernel and variable: its cost
    grows with the product of both variables' counts.

    Args:
        dim: the dimension D of the points.

    Returns:
        R.
    """
    return int(min(max(DEFAULT_NUM_FEATURES["mmd"], dim), MAX_DEFAULT_FEATURES))


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


def _progress(layout: CyclicLayout, total: int, progress_bar, description: str, from_rows: int = _PROGRESS_ROWS):
    """A tqdm bar over ``total`` chunks; ``progress_bar=None`` shows it for runs of ``from_rows`` rows or more."""
    show = len(layout.order) >= from_rows if progress_bar is None else bool(progress_bar)
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


def _skewed_spectra(blocks):
    """rfft along c of S[..., d, c] = blocks[..., c, (c + d) mod q]: the circular diagonals of q x q blocks."""
    q = blocks.shape[-1]
    c = jnp.arange(q)
    skewed = blocks[..., c[None, :], (c[None, :] + c[:, None]) % q]
    return jnp.fft.rfft(skewed, axis=-1)


def _pair_weights(first_a, first_b, n, m, same, estimator):
    """W[d, c] = g(label of row c of A, label of row c + d of B): the weight of the pair in the MMD^2 estimator
    (biased: w_i w_j with w = 1/n on the first sample and -1/m on the second; unbiased: 1/(n(n-1)), 1/(m(m-1)) or
    -1/(nm) for two, no or one point of the first sample, and 0 for a point with itself)."""
    q = first_a.shape[0]
    c = jnp.arange(q)
    la, lb = first_a[c][None, :], first_b[(c[None, :] + c[:, None]) % q]
    if estimator == "biased":
        wa, wb = la / n - (1 - la) / m, lb / n - (1 - lb) / m
        return wa * wb
    W = la * lb / (n * (n - 1)) + (1 - la) * (1 - lb) / (m * (m - 1)) - (la * (1 - lb) + (1 - la) * lb) / (n * m)
    return jnp.where(same & (c[:, None] == 0), 0.0, W)


@partial(jax.jit, static_argnames=("n", "m", "estimator"))
def _mmd_cyclic_block(kernels, A, B, first_a, first_b, same, n, m, estimator):
    """Spectra (P, K, q // 2 + 1) of the pairs between the rows of offset t (A, q rows) and of offset t' (B), for
    each of the P label patterns ``first_a``, ``first_b`` (P, q): one kernel block serves them all."""
    K = jnp.conj(_skewed_spectra(kernel_stack(kernels, A, B)))
    W = jax.vmap(lambda a, b: _pair_weights(a, b, n, m, same, estimator))(first_a, first_b)
    return jnp.einsum("kdf,pdf->pkf", K, jnp.fft.rfft(W, axis=-1))


def mmd_cyclic_statistics(kernels, Z, n: int, layout: CyclicLayout, estimator: str, progress_bar=None):
    """MMD^2 of every kernel, exactly, for the observed labelling and its q - 1 cyclic shifts: O(N^2 log q).

    For offsets t, t' and a block difference d the pairs ((c, t), (c + d, t')) give a kernel sequence over c and a
    weight sequence over c of the labels; a shift by b moves the labels along c, so the statistic of every shift is
    the sum over (t, t', d) of the circular cross-correlations of the two, one FFT of the q x q kernel block's
    diagonals per (t, t') and kernel. Memory O(K q^2).

    Args:
        kernels: K kernels (any kind).
        Z: (N, D) pooled sample, the first n rows from P.
        n: rows from P.
        layout: the rows used and their places (:func:`cyclic_layout` of N).
        estimator: ``"unbiased"`` or ``"biased"``.
        progress_bar: show a bar; None for runs of at least 5000 rows.

    Returns:
        (q, K) statistics, row 0 the observed labelling; (2q, K) for a reflected layout, rows q to 2q - 1 those of
        the reflections c -> -c - b, b = 0, ..., q - 1.
    """
    q, s = layout.blocks, layout.offsets
    rows = jnp.asarray(Z)[jax.device_put(layout.order)].reshape(s, q, -1)
    first = jax.device_put((layout.order < n).reshape(s, q).astype(np.float64)).astype(rows.dtype)
    n_used = int(np.sum(layout.order < n))
    m_used = len(layout.order) - n_used
    labels = jnp.stack([first, _reflect(first)] if layout.reflected else [first], axis=1)   # (s, P, q)
    spectra = jnp.zeros((labels.shape[1], len(kernels), q // 2 + 1), jnp.result_type(rows.dtype, jnp.complex64))
    with _progress(layout, s * s, progress_bar, "MMD (cyclic shifts)", _PROGRESS_EXACT_ROWS) as bar:
        for t in range(s):
            for u in range(s):
                spectra = spectra + _mmd_cyclic_block(tuple(kernels), rows[t], rows[u], labels[t], labels[u], t == u,
                                                      n_used, m_used, estimator)
                bar.update()
    return np.asarray(jnp.fft.irfft(spectra, n=q, axis=-1)).transpose(0, 2, 1).reshape(labels.shape[1] * q, -1)


@partial(jax.jit, static_argnames="reflected")
def _hsic_cyclic_block(kxs, kys, xa, xb, ya, yb, reflected):
    """Spectra (P, q // 2 + 1, Kx, Ky) of sum K_ij L_ij over the pairs between offsets t (a) and t' (b), and the
    blocks' row sums (Kx, q) and (P, Ky, q); P = 2 with the reflected y blocks, read off the same L block."""
    K, L = kernel_stack(kxs, xa, xb), kernel_stack(kys, ya, yb)
    if reflected:
        r = (-jnp.arange(L.shape[-1])) % L.shape[-1]
        L = jnp.stack([L, L[:, r[:, None], r[None, :]]])
    else:
        L = L[None]
    spectra = jnp.einsum("xdf,pydf->pfxy", jnp.conj(_skewed_spectra(K)), _skewed_spectra(L))
    return spectra, jnp.sum(K, axis=-1), jnp.sum(L, axis=-1)


def hsic_cyclic_statistics(kxs, kys, X, Y, layout: CyclicLayout, progress_bar=None):
    """HSIC_b of every kernel pair, exactly, for the observed pairing and its q - 1 cyclic shifts of Y: O(n^2 log q).

    With row sums r_K, r_L and totals s_K, s_L, n^2 HSIC_b = sum_ij K_ij L_s(i)s(j) - (2 / n) sum_i r_K,i r_L,s(i)
    + s_K s_L / n^2 under the shift s; both sums are circular cross-correlations along the blocks (see
    :func:`mmd_cyclic_statistics`), computed from uncentred kernel blocks in one pass.

    Args:
        kxs: Kx kernels on X.
        kys: Ky kernels on Y.
        X: (n, d_x) array.
        Y: (n, d_y) array, paired row by row with X.
        layout: the pairs used and their places (:func:`cyclic_layout` of n).
        progress_bar: show a bar; None for runs of at least 5000 pairs.

    Returns:
        (q, Kx * Ky) statistics (pairs in the order kxs[0] with every ky, then kxs[1], ...), row 0 observed; (2q,
        Kx * Ky) for a reflected layout, rows q to 2q - 1 those of the reflections (x of block c with y of block
        -c - b).
    """
    q, s = layout.blocks, layout.offsets
    order = jax.device_put(layout.order)
    xs, ys = jnp.asarray(X)[order].reshape(s, q, *X.shape[1:]), jnp.asarray(Y)[order].reshape(s, q, *Y.shape[1:])
    kxs, kys = tuple(kxs), tuple(kys)
    P = 2 if layout.reflected else 1
    spectra = jnp.zeros((P, q // 2 + 1, len(kxs), len(kys)), jnp.result_type(xs.dtype, jnp.complex64))
    row_k, row_l = jnp.zeros((len(kxs), s, q), xs.dtype), jnp.zeros((P, len(kys), s, q), xs.dtype)
    with _progress(layout, s * s, progress_bar, "HSIC (cyclic shifts)", _PROGRESS_EXACT_ROWS) as bar:
        for t in range(s):
            for u in range(s):
                block, rk, rl = _hsic_cyclic_block(kxs, kys, xs[t], xs[u], ys[t], ys[u], layout.reflected)
                spectra, row_k, row_l = spectra + block, row_k.at[:, t].add(rk), row_l.at[:, :, t].add(rl)
                bar.update()
    return np.concatenate([np.asarray(_hsic_from_cyclic(spectra[p], row_k, row_l[p], len(layout.order)))
                           .reshape(q, -1) for p in range(P)])


@partial(jax.jit, static_argnames="n")
def _hsic_from_cyclic(spectra, row_k, row_l, n):
    q = row_k.shape[-1]
    raw = jnp.fft.irfft(spectra, n=q, axis=0)   # (q, Kx, Ky): sum_ij K_ij L_s(i)s(j)
    rows = jnp.fft.irfft(jnp.einsum("xtf,ytf->fxy", jnp.conj(jnp.fft.rfft(row_k, axis=-1)),
                                    jnp.fft.rfft(row_l, axis=-1)), n=q, axis=0)   # sum_i r_K,i r_L,s(i)
    totals = jnp.sum(row_k, axis=(1, 2))[:, None] * jnp.sum(row_l, axis=(1, 2))[None, :]
    return (raw - 2.0 / n * rows + totals[None] / n**2) / n**2


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
