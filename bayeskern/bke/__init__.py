"""Bayesian kernel embeddings (Flaxman et al.; spec bke.md): prior, pseudolikelihood, posteriors."""

from .convolved import ConvolvedSE
from .posterior import EmbeddingPosterior, WitnessPosterior, embedding_posterior, witness_posterior
from .likelihood import check_inducing_points, kron_loglik, log_pseudolikelihood, log_volume

__all__ = ["ConvolvedSE", "kron_loglik", "log_volume", "log_pseudolikelihood", "check_inducing_points",
           "EmbeddingPosterior", "embedding_posterior", "WitnessPosterior", "witness_posterior"]
