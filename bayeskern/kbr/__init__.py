"""Kernel Bayes' rule and the kernel Bayes filter (Fukumizu, Song & Gretton 2013; Xu et al. 2022): posterior
weights, KuLSIF density ratios and their leave-one-out score, read-outs, explicit and learned features, the filter
with its tuning, and the Kalman and JDL baselines."""

from . import data
from .baselines import ekf_filter, jdl_regression, kalman_filter
from .cnn import CNN_CHANNELS, ConvFeatures, init_image_cnn, train_image_cnn
from .features import (
    FeatureKernel,
    MLPFeatures,
    NystromFeatures,
    RandomFourierFeatures,
    adaptive_feature_loss,
    fit_feature_network,
    init_mlp,
    nystrom_features,
    random_fourier_features,
    select_landmarks,
    train_features,
)
from .filter import (ETA_GRID, LAMBDA_GRIDS, LOO_MAX_T, RANGE_MARGIN, FilterState, KernelBayesFilter, OutOfRangeWarning,
                     ReadoutWarning, TuneResult, TuningWarning,
                     filter_mse, load_filter, tune_feature_filter, tune_kbf)
from .forecast import (FORECAST_C_GRID, FORECAST_LAMBDA_GRID, FORECAST_MAX_FIT, FORECAST_MAX_MEMBERS, Candidate,
                       ConformalBand, ForecastDesign, ForecastTuning, conformal_band, dickey_fuller_t, lag_design,
                       seasonal_period, tune_forecaster)
from .lowrank import EXACT_MAX_T, MAX_AUTO_RANK, TRACE_ERROR_SHARE, Factored, filter_landmarks, landmark_ridges
from .networks import IMAGE_HIDDEN, ImageFeatures, init_image_mlp, train_image_features
from .loo import kulsif_loo_score, kulsif_loo_score_atoms_are_data, select_eta_loo, successor_priors
from .readout import (clipped_posterior_mean, decode_mode, normalized_posterior_mean, posterior_expectation,
                      posterior_mean, posterior_spread)
from .weights import (
    KBRWeights,
    Prior,
    cme_weights,
    gram_factor,
    kbr_iw_weights,
    kbr_iw_weights_features,
    kbr_original_weights,
    kulsif_gamma,
    kulsif_ratio,
)

__all__ = ["FORECAST_C_GRID", "FORECAST_LAMBDA_GRID", "FORECAST_MAX_FIT", "FORECAST_MAX_MEMBERS", "RANGE_MARGIN",
           "TuningWarning", "Candidate", "ConformalBand", "ForecastDesign", "ForecastTuning", "conformal_band",
           "dickey_fuller_t", "lag_design", "seasonal_period", "tune_forecaster",
           "EXACT_MAX_T", "MAX_AUTO_RANK", "TRACE_ERROR_SHARE", "Factored", "filter_landmarks", "landmark_ridges", "FeatureKernel", "MLPFeatures", "NystromFeatures", "RandomFourierFeatures", "adaptive_feature_loss",
           "fit_feature_network", "init_mlp", "nystrom_features", "random_fourier_features", "select_landmarks", "train_features", "data", "ekf_filter", "kalman_filter", "jdl_regression", "ETA_GRID", "LAMBDA_GRIDS", "LOO_MAX_T", "KernelBayesFilter", "OutOfRangeWarning", "ReadoutWarning", "FilterState", "TuneResult",
           "tune_feature_filter", "IMAGE_HIDDEN", "ImageFeatures", "init_image_mlp", "train_image_features", "CNN_CHANNELS", "ConvFeatures",
           "init_image_cnn", "train_image_cnn",
           "filter_mse", "tune_kbf", "load_filter", "kulsif_loo_score", "kulsif_loo_score_atoms_are_data", "select_eta_loo",
           "successor_priors", "decode_mode", "normalized_posterior_mean", "clipped_posterior_mean", "posterior_expectation", "posterior_mean",
           "posterior_spread", "KBRWeights", "Prior", "cme_weights", "gram_factor",
           "kbr_iw_weights", "kbr_iw_weights_features", "kbr_original_weights", "kulsif_gamma", "kulsif_ratio"]
