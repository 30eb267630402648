"""The result of a compression run: the compressed set, how it was obtained, and predictions from it."""

import json
from dataclasses import dataclass, field

import jax.numpy as jnp
import numpy as np

from .._validation import as_points
from ..kernels.base import Kernel
from ..kernels.serialise import kernel_from_state, kernel_state
from .kcme import class_probabilities, conditional_expectation, kcme_weights
from .standardise import Standardiser

__all__ = ["CompressionResult", "load_result"]


@dataclass(frozen=True)
class CompressionResult:
    """A compressed set of m labelled pairs.

    x, y: the set in standardised units (m, d_x), (m, d_y) or (m,) labels — the units of the kernels;
    x_original, y_original: the same set in the user's units; indices: positions in the data for pool
    herding (None when the points were optimised); objective: the trace of the method's objective
    (per step for KIP, per added pair for herding); lam_c: the compressed-set ridge used by the KCME
    (and by ACKH/ACKIP objectives); timings: seconds per phase.
    """

    method: str
    x: np.ndarray
    y: np.ndarray
    kernel_x: Kernel
    kernel_y: Kernel
    standardiser: Standardiser
    lam_c: float
    objective: np.ndarray
    indices: np.ndarray | None = None
    timings: dict = field(default_factory=dict)

    @property
    def m(self) -> int:
        return int(self.x.shape[0])

    @property
    def x_original(self) -> np.ndarray:
        return np.asarray(self.standardiser.inverse(self.x, self.y)[0])

    @property
    def y_original(self) -> np.ndarray:
        return np.asarray(self.standardiser.inverse(self.x, self.y)[1])

    def weights(self, x_query):
        """KCME coefficients alpha(x) = (K_CC + m lam_C I)^{-1} k_C(x) at queries in the user's units: (m, N)."""
        xq = self.standardiser.transform_x(as_points(x_query, "x_query"))
        return kcme_weights(self.x, xq, self.kernel_x, self.lam_c)

    def conditional_expectation(self, h, x_query):
        """E[h(Y) | X = x] from the compressed set, h applied to its responses in the user's units: (N,) or (N, k)."""
        return conditional_expectation(jnp.asarray(h(jnp.asarray(self.y_original))), self.weights(x_query))

    def class_probabilities(self, x_query, n_classes: int):
        """Clip-normalised class probabilities (N, C) (indicator kernel)."""
        return class_probabilities(self.y, self.weights(x_query), n_classes)

    def save(self, path) -> None:
        """Write to ``.npz``; :func:`load_result` restores the result exactly."""
        s = self.standardiser
        meta = {"method": self.method, "lam_c": self.lam_c, "timings": self.timings, "format": 1,
                "kernel_x": kernel_state(self.kernel_x), "kernel_y": kernel_state(self.kernel_y),
                "discrete": s.y_mean is None}
        arrays = {"x": self.x, "y": self.y, "objective": self.objective, "x_mean": s.x_mean, "x_scale": s.x_scale}
        if s.y_mean is not None:
            arrays |= {"y_mean": s.y_mean, "y_scale": s.y_scale}
        if self.indices is not None:
            arrays["indices"] = self.indices
        np.savez(path, meta=json.dumps(meta), **{k: np.asarray(v) for k, v in arrays.items()})


def load_result(path) -> CompressionResult:
    """Read a result written by :meth:`CompressionResult.save`."""
    with np.load(path) as f:
        meta = json.loads(str(f["meta"]))
        y_stats = (None, None) if meta["discrete"] else (jnp.asarray(f["y_mean"]), jnp.asarray(f["y_scale"]))
        standardiser = Standardiser(jnp.asarray(f["x_mean"]), jnp.asarray(f["x_scale"]), *y_stats)
        return CompressionResult(meta["method"], f["x"], f["y"], kernel_from_state(meta["kernel_x"]),
                                 kernel_from_state(meta["kernel_y"]), standardiser, meta["lam_c"], f["objective"],
                                 f["indices"] if "indices" in f.files else None, meta["timings"])
