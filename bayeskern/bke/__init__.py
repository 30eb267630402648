"""Bayesian kernel embeddings (Flaxman et al. 2016): the convolved prior covariance, the marginal pseudolikelihood
of the kernel hyperparameters, inducing points, and the closed-form embedding and witness posteriors."""

from .convolved import ConvolvedSE
from .inducing import default_num_inducing, herding_inducing, hold_out_inducing, span_coordinates
from .posterior import EmbeddingPosterior, WitnessPosterior, embedding_posterior, witness_posterior
from .objective import SEPseudolikelihood
from .hyper import LengthscalePosterior, lengthscale_posterior
from .aggregate import WIDE_POSTERIOR_SHARE, BayesAggregate, aggregated_witness
from .kron import kron_loglik, kron_loglik_as_printed
from .volume import log_volume
from .likelihood import check_inducing_points, log_pseudolikelihood

__all__ = ["ConvolvedSE", "SEPseudolikelihood", "default_num_inducing", "hold_out_inducing", "herding_inducing", "span_coordinates", "kron_loglik", "kron_loglik_as_printed", "log_volume", "log_pseudolikelihood", "check_inducing_points",
           "EmbeddingPosterior", "embedding_posterior", "WitnessPosterior", "witness_posterior",
           "LengthscalePosterior", "lengthscale_posterior", "BayesAggregate", "WIDE_POSTERIOR_SHARE",
           "aggregated_witness"]
