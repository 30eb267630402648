"""Inference for bayeskern's models (installed as ``bayeskern.inference``): type-II maximum likelihood, the NUTS
driver with its diagnostics and arviz output, and Bayesian-averaged filtering from posterior draws."""

from .ahead import Backtest, ForecastAhead, backtest, forecast_ahead
from .bkl import bkl_fit, bkl_kernel
from .diagnostics import Diagnostics, MCMCWarning, diagnose
from .forecast import CalibrationWarning, Forecast, forecast_series
from .kbf import (PredictiveFiltering, band_coverage, kbf_init_values, posterior_predictive_filter,
                  sample_kbf_posterior)
from .nuts import MCMCResult, run_nuts
from .type2 import Type2Result, fit_type2, log_grid, tau2_profile

__all__ = ["Type2Result", "fit_type2", "log_grid", "tau2_profile", "bkl_fit", "bkl_kernel", "run_nuts", "MCMCResult",
           "diagnose", "Diagnostics", "MCMCWarning", "kbf_init_values", "sample_kbf_posterior",
           "posterior_predictive_filter",
           "PredictiveFiltering", "band_coverage", "Forecast", "CalibrationWarning", "forecast_series",
           "ForecastAhead", "forecast_ahead", "Backtest", "backtest"]
