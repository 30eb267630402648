"""Bayesian kernel embeddings (Flaxman et al.; spec bke.md): prior, pseudolikelihood, posteriors."""

from .convolved import ConvolvedSE
from .likelihood import check_inducing_points, kron_loglik, log_pseudolikelihood, log_volume

__all__ = ["ConvolvedSE", "kron_loglik", "log_volume", "log_pseudolikelihood", "check_inducing_points"]
