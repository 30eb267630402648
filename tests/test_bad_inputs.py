"""Bad input gets a clear error at the entry point, naming the argument; numerical failure is raised or flagged.

Each row feeds one public entry point one class of bad input (wrong type, complex or ragged data, non-finite
values, wrong shape or dimension, counts that are not integers, non-positive scales, empty grids, foreign files,
inputs far outside the training data) and states the error class and a message fragment that names the argument.
"""

import re
import warnings

import jax
import numpy as np
import pytest

import bayeskern as bk
import bayeskern.cli
import bayeskern.inference as inf
import bayeskern.models as mdl
from bayeskern import bke, compression, datasets, jdl, kbr, optim, plotting, sharding
from bayeskern import compression as cp
from bayeskern import conditional as cond
from bayeskern import kernels as kn
from bayeskern import linalg as la
from bayeskern.compression import data as cdata
from bayeskern.compression import exact_gaussian as eg
from bayeskern.kbr import data as kdata
from bayeskern.kernels import kernel_matvec, kernel_sum

RNG = np.random.default_rng(0)
X = RNG.standard_normal((40, 2))
Y = RNG.standard_normal((30, 2)) + 0.5
KEY = jax.random.key(0)


@pytest.fixture(scope="module")
def fits():
    bk.enable_x64()
    return {"jdl": jdl.fit_jdl(X, X[:, :1] ** 2, bk.RBF(1.0), bk.RBF(1.0), 1e-3, constraint="normalised"),
            "kbf": kbr.KernelBayesFilter.build(X, X, 1.0, 1.0, 1e-3, 1e-3)}


# (public name, id, call, error, message fragment naming the argument)
CASES = [
    ("datasets.perturbed_uniform", "scale above 1", lambda f: bk.datasets.perturbed_uniform(10, 1, 2, 1.5), ValueError, "scale must"),
    ("KernelCollection", "zero weight", lambda f: bk.KernelCollection((bk.RBF(1.0),), [0.0], ("a",)), ValueError, "weights must"),
    ("KernelCollection", "not a kernel", lambda f: bk.KernelCollection((1.0,), [1.0], ("a",)), TypeError, "entry of kernels"),
    ("KernelCollection", "lengths differ", lambda f: bk.KernelCollection((bk.RBF(1.0),), [0.5, 0.5], ("a",)), ValueError,
     "kernels, weights and labels"),
    ("AggregatedTestResult", "unknown family", lambda f: bk.AggregatedTestResult(
        1.0, 0.5, "permutation", None, (bk.RBF(1.0),), np.ones(1), np.ones(1), np.ones(1), ("a",)).dominant("cauchy"),
     ValueError, "family must"),
    ("bke.BayesAggregate", "unknown family", lambda f: bke.BayesAggregate(families=("cauchy",)), ValueError, "families must"),
    ("bke.BayesAggregate", "share above 1", lambda f: bke.BayesAggregate(posterior_share=1.5), ValueError, "posterior_share"),
    ("bke.BayesAggregate", "no floor with a share below 1",
     lambda f: bke.BayesAggregate(num_bandwidths=0, posterior_share=0.5), ValueError, "posterior_share must be 1"),
    ("bke.BayesAggregate", "negative tau2", lambda f: bke.BayesAggregate(tau2=-1.0), ValueError, "tau2 must be positive"),
    ("bke.BayesAggregate", "infinite tau2", lambda f: bke.BayesAggregate(tau2=np.inf), ValueError, "tau2"),
    ("bke.BayesAggregate", "text tau2", lambda f: bke.BayesAggregate(tau2="1"), TypeError, "tau2 must be a real number"),
    ("mean_embedding", "kernel by name", lambda f: bk.mean_embedding(X, "rbf"), TypeError, "kernel must be a bayeskern kernel"),
    ("bke.span_coordinates", "one repeated point", lambda f: bke.span_coordinates(np.ones((5, 3))), ValueError,
     "every row of X is the same point"),
    ("bke.aggregated_witness", "not an aggregated result", lambda f: bke.aggregated_witness(
        bk.HypothesisTestResult(1.0, 0.5, "gamma"), X, Y, grid=X[:5]), TypeError, "result must"),
    ("mmd_test", "bayes without a key", lambda f: bk.mmd_test(X, Y, "bayes"), ValueError, "needs a PRNG key"),
    ("mmd_test", "bayes with the linear estimator", lambda f: bk.mmd_test(X, Y, "bayes", key=KEY, estimator="linear"),
     ValueError, "estimator must be"),
    ("hsic_test", "bayes with the gamma null", lambda f: bk.hsic_test(X, X**2, "bayes", key=KEY,
     method="gamma"), ValueError, "not method='gamma'"),
    ("mmd_test", "unknown method", lambda f: bk.mmd_test(X, Y, key=KEY, method="fast"), ValueError, "method must be"),
    ("mmd_test", "features of a linear kernel", lambda f: bk.mmd_test(X, Y, bk.kernels.Linear(), key=KEY,
     method="features"), TypeError, "which need a stationary kernel"),
    ("hsic_test", "features of an indicator kernel", lambda f: bk.hsic_test(X[:, :1], np.arange(len(X)) % 2,
     bk.RBF(1.0), bk.kernels.Indicator(), key=KEY, method="features"), TypeError, "which need a stationary kernel"),
    ("mmd2_unbiased", "string data", lambda f: bk.mmd2_unbiased([["a", "b"]] * 3, Y, bk.RBF(1.0)), TypeError, "X must hold real"),
    ("mmd2_biased", "object data", lambda f: bk.mmd2_biased(X, np.array([object()] * 3), bk.RBF(1.0)), TypeError, "Y must hold"),
    ("mmd2_unbiased", "kernel not a kernel", lambda f: bk.mmd2_unbiased(X, Y, 1.0), TypeError, "kernel must be"),
    ("hsic_unbiased", "kernel not a kernel", lambda f: bk.hsic_unbiased(X, Y, bk.RBF(1.0), "rbf"), TypeError, "ky must"),
    ("inference.run_nuts", "model not a function", lambda f: inf.run_nuts(3, X, key=KEY), TypeError, "model must"),
    ("inference.forecast_ahead", "no steps", lambda f: inf.forecast_ahead(np.sin(np.arange(80.0)), 0), ValueError,
     "steps must be >= 1"),
    ("inference.forecast_ahead", "a 5-step series", lambda f: inf.forecast_ahead(X[:5, 0], 2), ValueError,
     "y of 5 steps is too short"),
    ("inference.backtest", "no origin", lambda f: inf.backtest(np.sin(np.arange(80.0)), 3, start=78), ValueError,
     "start must be at most"),
    ("inference.backtest", "an option forecast_ahead lacks", lambda f: inf.backtest(np.sin(np.arange(80.0)), 3, start=60,
     steps_ahead=3), TypeError, "unknown options"),
    ("inference.forecast_series", "level 1", lambda f: inf.forecast_series(X[:, 0], X[:5, 0], level=1.0), ValueError, "level"),
    ("inference.forecast_series", "no key for NUTS", lambda f: inf.forecast_series(X[:, 0], X[:5, 0], bayesian=True), TypeError,
     "key must"),
    ("inference.forecast_series", "test of another dimension", lambda f: inf.forecast_series(X[:, 0], X[:5]), ValueError,
     "y_test must have the dimension"),
    ("kbr.tune_forecaster", "descending lags", lambda f: kbr.tune_forecaster(X[:, 0], lags=(2, 1)), ValueError, "lags must"),
    ("kbr.tune_forecaster", "too short", lambda f: kbr.tune_forecaster(X[:12, 0], lags=(1,), n_val=5), ValueError, "too short"),
    ("kbr.dickey_fuller_t", "too short", lambda f: kbr.dickey_fuller_t(X[:4, 0]), ValueError, "too short"),
    ("kbr.tune_forecaster", "validation over half the series",
     lambda f: kbr.tune_forecaster(np.sin(np.arange(60.0)), n_val=100), ValueError, "n_val must be at most half"),
    ("inference.sample_kbf_posterior", "a landmark count of 0",
     lambda f: inf.sample_kbf_posterior(X, X, key=KEY, tuned=f["tuned"], num_landmarks=(0, 5)), ValueError,
     "num_landmarks must hold positive integers"),
    ("inference.forecast_series", "a 5-step series", lambda f: inf.forecast_series(X[:5, 0], X[:3, 0]), ValueError,
     "y_train of 5 steps is too short"),
    ("kbr.tune_forecaster", "empty grid", lambda f: kbr.tune_forecaster(X[:, 0], c_grid=()), ValueError, "c_grid"),
    ("kbr.lag_design", "lag too long", lambda f: kbr.lag_design(X, (1, 40)), ValueError, "largest lag"),
    ("kbr.conformal_band", "zero scale", lambda f: kbr.conformal_band(np.zeros((3, 1)), np.zeros((3, 1)), np.ones((5, 1)),
     np.zeros((3, 1)), 0.9), ValueError, "scale must"),
    ("mmd2_unbiased", "complex data", lambda f: bk.mmd2_unbiased(X + 1j, Y, bk.RBF(1.0)), TypeError, "X must be real"),
    ("hsic_unbiased", "ragged data", lambda f: bk.hsic_unbiased([[1.0, 2.0], [1.0]], Y, bk.RBF(1.0), bk.RBF(1.0)), ValueError,
     "X is not a rectangular"),
    ("mmd2_unbiased", "NaN data", lambda f: bk.mmd2_unbiased(np.where(X > 2, np.nan, X), Y, bk.RBF(1.0)), ValueError, "X contains"),
    ("kernels.kernel_sum", "3-d points", lambda f: kernel_sum(bk.RBF(1.0), np.ones((4, 2, 2))), ValueError, "X must have shape"),
    ("mmd2_unbiased", "dimension mismatch", lambda f: bk.mmd2_unbiased(X, Y[:, :1], bk.RBF(1.0)), ValueError, "same dimension"),
    ("hsic_biased", "unpaired HSIC", lambda f: bk.hsic_biased(X, Y, bk.RBF(1.0), bk.RBF(1.0)), ValueError, "X and Y"),
    ("mmd2_unbiased", "block_size 0", lambda f: bk.mmd2_unbiased(X, Y, bk.RBF(1.0), block_size=0), ValueError, "block_size"),
    ("kernels.kernel_matvec", "block_size float", lambda f: kernel_matvec(bk.RBF(1.0), X, X, np.ones(40), block_size=2.5), TypeError,
     "block_size must be an integer"),
    ("mmd_test", "n_permutations 2.5", lambda f: bk.mmd_test(X, Y, bk.RBF(1.0), key=KEY, n_permutations=2.5), TypeError,
     "n_permutations must be an integer"),
    ("hsic_test", "n_permutations 0", lambda f: bk.hsic_test(X, X, key=KEY, n_permutations=0), ValueError, "n_permutations"),
    ("mmd_test", "key not a key", lambda f: bk.mmd_test(X, Y, bk.RBF(1.0), key=3), TypeError, "key must be a JAX PRNG key"),
    ("hsic_test", "key an array", lambda f: bk.hsic_test(X, X, key=np.zeros(2)), TypeError, "key must be a JAX PRNG key"),
    ("RBF", "tiny lengthscale", lambda f: bk.RBF(1e-200), ValueError, "lengthscale"),
    ("Matern32", "NaN lengthscale", lambda f: bk.Matern32(np.nan), ValueError, "lengthscale"),
    ("mmd2_gaussians", "non-PSD covariance", lambda f: bk.mmd2_gaussians(np.zeros(2), -np.eye(2), np.ones(2), np.eye(2), 1.0),
     ValueError, "cov_p is not positive semidefinite"),
    ("mmd2_gaussians", "asymmetric covariance", lambda f: bk.mmd2_gaussians(np.zeros(2), np.eye(2), np.ones(2), [[1, 0.5], [0, 1]],
                                                          1.0), ValueError, "cov_q must be symmetric"),
    ("mmd2_gaussians", "mean lengths", lambda f: bk.mmd2_gaussians(np.zeros(2), np.eye(2), np.ones(3), np.eye(2), 1.0), ValueError,
     "mean_p and mean_q"),
    ("kbr.cme_weights", "NaN Gram", lambda f: kbr.cme_weights(np.full((5, 5), np.nan), np.eye(5), 0.1), ValueError, "G_X contains"),
    ("kbr.cme_weights", "non-square Gram", lambda f: kbr.cme_weights(np.ones((5, 4)), np.eye(5), 0.1), ValueError, "G_X must be a square matrix"),
    ("kbr.kbr_iw_weights", "Gram rows", lambda f: kbr.kbr_iw_weights(np.eye(5), np.ones(5), np.ones((4, 2)), 0.1), ValueError, "G_Xq"),
    ("kbr.kalman_filter", "non-PD Kalman noise", lambda f: kbr.kalman_filter(X[:, :1], np.eye(1), -np.eye(1), np.eye(1), np.zeros(1),
                                                        np.eye(1)), ValueError, "Q is not positive semidefinite"),
    ("kbr.kalman_filter", "Kalman m0 shape", lambda f: kbr.kalman_filter(X, np.eye(2), np.eye(2), np.eye(2), np.zeros(3), np.eye(2)),
     ValueError, "m0 must have shape"),
    ("kbr.KernelBayesFilter", "KBF NaN observations", lambda f: kbr.KernelBayesFilter.build(np.where(X > 2, np.nan, X), X, 1.0, 1.0, 1e-3,
                                                                   1e-3), ValueError, "X contains"),
    ("kbr.KernelBayesFilter", "KBF unpaired", lambda f: kbr.KernelBayesFilter.build(X, X[:-1], 1.0, 1.0, 1e-3, 1e-3), ValueError, "X and Z"),
    ("kbr.KernelBayesFilter", "KBF test dimension", lambda f: f["kbf"].filter(X[:5, :1]), ValueError, "X_test must hold observations"),
    ("kbr.filter_mse", "filter_mse shapes", lambda f: kbr.filter_mse(np.zeros((10, 2)), np.zeros((10, 1))), ValueError,
     "means and Z_true"),
    ("kbr.tune_kbf", "empty grid", lambda f: kbr.tune_kbf(X, X, c_grid=()), ValueError, "c_grid"),
    ("jdl.fit_jdl", "JDL lam inf", lambda f: jdl.fit_jdl(X, X, bk.RBF(1.0), bk.RBF(1.0), np.inf), ValueError, "lam must be positive"),
    ("jdl.fit_cme", "JDL lam 0", lambda f: jdl.fit_cme(X, X, bk.RBF(1.0), bk.RBF(1.0), 0.0), ValueError, "lam must be positive"),
    ("jdl.JointDistributionModel", "JDL query dimension", lambda f: f["jdl"].conditional_expectation(np.zeros((3, 5))), ValueError, "x_query"),
    ("compression.jmmd2", "jmmd2 dimensions", lambda f: compression.jmmd2((X, X[:, :1]), (X[:5, :1], X[:5, :1]), bk.RBF(1.0),
                                                     bk.RBF(1.0)), ValueError, r"data\[0\] and cset\[0\]"),
    ("compression.ackip", "compression num_steps", lambda f: compression.ackip(X, X[:, 0], 5, key=KEY, lam_c=1e-2, num_steps=0,
                                                          progress_bar=False), ValueError, "num_steps"),
    ("compression.jkh", "compression m", lambda f: compression.jkh(X, X[:, 0], 40, key=KEY, progress_bar=False), ValueError, "m must"),
    ("bke.hold_out_inducing", "inducing count float", lambda f: bk.bke.hold_out_inducing(X, KEY, m=5.5), TypeError, "m must be an integer"),
    ("compression.ackip", "compression key", lambda f: compression.ackip(X, X[:, 0], 5, key=0, lam_c=1e-2, progress_bar=False), TypeError,
     "key must be a JAX PRNG key"),
    ("inference.bkl_fit", "BKL key missing", lambda f: bk.inference.bkl_fit(X, Y, key=None), TypeError, "key must be a JAX PRNG key"),
    ("datasets.normal_vs_laplace", "dataset size float", lambda f: bk.datasets.normal_vs_laplace(2.5), TypeError, "n must be an integer"),
    ("kbr.FilterState", "filter state", lambda f: f["kbf"].update(None, X[0]), TypeError, "state must be a FilterState"),
    ("linalg.spd_solve", "spd_solve not PD", lambda f: bk.linalg.spd_solve(-np.eye(3), np.ones(3)), bk.CholeskyError, "not positive"),
    ("kbr.gram_factor", "gram_factor NaN", lambda f: kbr.gram_factor(np.full((3, 3), np.nan)), ValueError, "G contains"),
    ("witness", "witness dimensions", lambda f: bk.witness(X, Y[:, :1], bk.RBF(1.0)), ValueError, "same dimension"),
    ("kbr.posterior_mean", "posterior_mean atoms", lambda f: kbr.posterior_mean(np.ones((5, 2)), np.ones((4, 2))), ValueError,
     "W must have shape"),
    ("compression.select_lambda", "select_lambda empty", lambda f: compression.select_lambda(X, X[:, 0], X[:0], X[:0, 0], bk.RBF(1.0), bk.RBF(1.0),
                                                                size=5, key=KEY), ValueError, "x_val is empty"),
    ("compression.select_lambda", "select_lambda subsets", lambda f: compression.select_lambda(X, X[:, 0], X, X[:, 0], bk.RBF(1.0), bk.RBF(1.0),
                                                                  size=5, key=KEY, n_subsets=0), ValueError, "n_subsets must be >= 1"),
    ("kbr.data.circle_dynamics", "generator key", lambda f: kbr.data.circle_dynamics(10, 0), TypeError, "key must be a JAX PRNG key"),
    ("compression.data.heteroscedastic", "generator size", lambda f: compression.data.heteroscedastic(-1, KEY), ValueError, "n must be >= 1"),
    ("kbr.NystromFeatures", "Nystrom dimension", lambda f: kbr.nystrom_features(bk.RBF(1.0), X[:5])(Y[:, :1]), ValueError,
     "X and the landmarks"),
    ("inference.diagnose", "diagnose input", lambda f: bk.inference.diagnose("junk"), TypeError, "idata must be an arviz InferenceData"),
    ("fitted.save", "save to a missing folder", lambda f: f["jdl"].save("/nonexistent-folder/m.npz"), FileNotFoundError,
     "does not exist"),
    ("kernels.kernel_matvec", "complex V", lambda f: kernel_matvec(bk.RBF(1.0), X, X, np.ones(40) + 1j), TypeError, "V must be real"),
    ("cli.load_sample", "CLI sample not a file", lambda f: bk.cli.load_sample("/nonexistent.npy", "X"), bk.cli.CLIError,
     "/nonexistent.npy"),
    ("compression.data.heteroscedastic_truth_standardised", "standardiser missing",
     lambda f: cdata.heteroscedastic_truth_standardised(X[:, 0], None), TypeError, "standardiser"),
    ("compression.exact_gaussian.conditional_self_term", "setting not a setting",
     lambda f: eg.conditional_self_term({"a": 1}), TypeError, "setting"),
    ("compression.exact_gaussian.joint_constant", "setting missing", lambda f: eg.joint_constant(None), TypeError,
     "setting"),
    ("compression.load_result", "foreign file", lambda f: cp.load_result(f["npy"]), bk.FileFormatError, "x.npy"),
    ("jdl.load_model", "missing file", lambda f: jdl.load_model("/nonexistent.npz"), FileNotFoundError, "nonexistent"),
    ("kbr.load_filter", "foreign file", lambda f: kbr.load_filter(f["npy"]), bk.FileFormatError, "x.npy"),
    ("load", "foreign npy", lambda f: bk.load(f["npy"]), bk.FileFormatError, "x.npy"),
    ("fitted.load_as", "foreign file", lambda f: bk.fitted.load_as(f["npy"], jdl.JointDistributionModel),
     bk.FileFormatError, "x.npy"),
    ("fitted.load", "missing file", lambda f: bk.fitted.load("/nonexistent.npz"), FileNotFoundError, "nonexistent"),
    ("fitted.read_tag", "path not a path", lambda f: bk.fitted.read_tag(3.5), TypeError, "path"),
    ("fitted.write_atomic", "writer not callable", lambda f: bk.fitted.write_atomic(f["png"], b"bytes"), TypeError,
     "write"),
    ("enable_compilation_cache", "a file, not a folder", lambda f: bk.enable_compilation_cache(f["npy"]), ValueError,
     "path"),
    ("enable_compilation_cache", "path not a path", lambda f: bk.enable_compilation_cache(3.5), TypeError, "path"),
    ("fitted.fitted", "not a class", lambda f: bk.fitted.fitted(3), TypeError, "cls"),
    ("fitted.saveable", "not a class", lambda f: bk.fitted.saveable("x"), TypeError, "cls"),
    ("fitted.is_registered", "tag not a string", lambda f: bk.fitted.is_registered(3), TypeError, "tag"),
    ("datasets.rotation", "NaN angle", lambda f: datasets.rotation(np.nan), ValueError, "angle"),
    ("jdl.box_bounds", "basis not a basis", lambda f: jdl.box_bounds(None, f["jdl"].basis_y), TypeError, "basis_x"),
    ("jdl.jdl_problem", "basis not a basis", lambda f: jdl.jdl_problem(f["jdl"].basis_x, X, 1e-3), TypeError,
     "basis_y"),
    ("jdl.objective", "H shape", lambda f: jdl.objective(f["problem"], np.ones((2, 2))), ValueError, "H must have"),
    ("jdl.rotate", "factor not a factor", lambda f: jdl.rotate(X, X), TypeError, "factor"),
    ("jdl.row_mesh", "devices not devices", lambda f: jdl.row_mesh(devices=[]), ValueError, "devices"),
    ("jdl.solve_normalised", "problem not a problem", lambda f: jdl.solve_normalised(X), TypeError, "problem"),
    ("jdl.solve_positive", "problem not a problem", lambda f: jdl.solve_positive(None, X, X), TypeError, "problem"),
    ("jdl.solve_unconstrained", "problem not a problem", lambda f: jdl.solve_unconstrained({}), TypeError, "problem"),
    ("jdl.sos_certificate", "basis not a basis", lambda f: jdl.sos_certificate(np.eye(2), np.eye(2), None, None, 2),
     TypeError, "bx"),
    ("kernels.Product", "factor not a kernel", lambda f: kn.Product(bk.RBF(1.0), 3.0), TypeError, "k2"),
    ("kernels.Sum", "term not a kernel", lambda f: kn.Sum("rbf", bk.RBF(1.0)), TypeError, "k1"),
    ("kernels.kernel_class", "name not a string", lambda f: kn.kernel_class(3), TypeError, "name"),
    ("plotting.plot_likelihood_curve", "fit not a fit", lambda f: plotting.plot_likelihood_curve(None, "fit"), TypeError,
     "fit"),
    ("plotting.plot_kernel_evidence", "not an aggregated result",
     lambda f: plotting.plot_kernel_evidence(None, bk.HypothesisTestResult(1.0, 0.5, "gamma")), TypeError, "result must"),
    ("plotting.plot_null_distribution", "result without null samples",
     lambda f: plotting.plot_null_distribution(None, bk.HypothesisTestResult(1.0, 0.5, "gamma")), ValueError,
     "null_samples"),
    ("sharding.local_rows", "rows not RowShards", lambda f: sharding.local_rows(X), TypeError, "rows"),
    ("sharding.gather_rows", "not row shards", lambda f: bk.sharding.gather_rows(X), TypeError, "rows must be a RowShards"),
    ("sharding.shard_rows", "row shards to a test", lambda f: bk.mmd_test(bk.sharding.shard_rows(X), Y, bk.RBF(1.0), key=KEY,
     method="permutation"), TypeError, "pass method='features'"),
    ("optim.static_partial", "function not callable", lambda f: optim.static_partial(3.0, 1), TypeError, "function must be callable"),
    ("optim.static_partial", "unhashable setting", lambda f: optim.static_partial(np.sum, np.ones(2)), TypeError, "unhashable"),
    ("sharding.RowShards", "row index of row shards", lambda f: bk.sharding.shard_rows(X)[:5], TypeError,
     r"indexed on its columns only, as rows\[:, columns\]"),
    ("compression.ackip", "no random start", lambda f: cp.ackip(X, y1, 5, key=KEY, n_init=0, progress_bar=False), ValueError,
     "n_init must be >= 1"),
    ("compression.jkip", "no random start", lambda f: cp.jkip(X, y1, 5, key=KEY, n_init=0, progress_bar=False), ValueError,
     "n_init must be >= 1"),
    ("bke.witness_posterior", "no hyperparameter draws", lambda f: bke.witness_posterior(
        X, Y, grid=X[:5], key=KEY, hyper_draws={"lengthscale": np.array([])}), ValueError, r"hyper_draws\['lengthscale'\] must hold S >= 1"),
    ("bke.witness_posterior", "negative lengthscale draw", lambda f: bke.witness_posterior(
        X, Y, grid=X[:5], key=KEY, hyper_draws={"lengthscale": np.array([1.0, -1.0])}), ValueError,
     r"hyper_draws\['lengthscale'\] holds 1 non-finite or non-positive draw\(s\) \(at draws \[1\]\)"),
    ("bke.witness_posterior", "NaN lengthscale draw", lambda f: bke.witness_posterior(
        X, Y, grid=X[:5], key=KEY, hyper_draws={"lengthscale": np.array([np.nan, 1.0])}), ValueError, r"at draws \[0\]"),
    ("bke.witness_posterior", "draws of unequal length", lambda f: bke.witness_posterior(
        X, Y, grid=X[:5], key=KEY, hyper_draws={"lengthscale": np.ones(3), "tau2": np.ones(2)}), ValueError,
     "share their number of draws"),
    ("bke.witness_posterior", "kernel and draws", lambda f: bke.witness_posterior(
        X, Y, 1.3, grid=X[:5], key=KEY, hyper_draws={"lengthscale": np.ones(2)}), ValueError, "kernel applies to fixed"),
    ("bke.witness_posterior", "draws not a dict", lambda f: bke.witness_posterior(X, Y, grid=X[:5], key=KEY, hyper_draws=[1.0]),
     TypeError, "hyper_draws must be a non-empty dict"),
]


@pytest.mark.parametrize("call, error, fragment", [c[2:] for c in CASES], ids=[c[1] for c in CASES])
def test_bad_input_gets_a_clear_error_naming_the_argument(objects, call, error, fragment):
    with pytest.raises(error, match=fragment):
        call(objects)


# --- every public name: one table row per entry point and argument ---------------------------------------------------
# Each row gives a call that takes one bad value, the argument it goes to and, for arrays, a good value of that
# argument; the tests derive the bad values (strings, complex numbers and NaN for arrays; NaN and -1 for scales;
# 2.5 and -1 for counts; an int for a key; an unknown name for a choice) and require an error naming the argument.
G = np.asarray(bk.RBF(1.0).gram(X))
Gs = G[:10, :10]
y1, lab = X[:, 0], (X[:, 0] > 0).astype(int)
k = bk.RBF(1.0)
F = {}  # fitted objects and files the rows use, filled once by the fixture below


@pytest.fixture(scope="module")
def objects(fits, tmp_path_factory):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = tmp_path_factory.mktemp("battery")
    np.save(folder / "x.npy", X)
    F.update(fits, npy=str(folder / "x.npy"), png=str(folder / "x.png"), ax=plt.subplots()[1],
             cme=jdl.fit_cme(X, X[:, :1], k, k, 1e-3), klr=jdl.fit_klr(X, lab, k, 1e-3),
             split=mdl.split_for_validation(RNG.standard_normal((60, 1)), RNG.standard_normal((60, 1)), n_val=20),
             std=cp.fit_standardiser(X, y1, discrete=False))
    F["tuned"] = kbr.TuneResult(F["kbf"], 1.0, 1e-3, 1e-3, {})
    F["problem"] = jdl.jdl_problem(F["jdl"].basis_x, F["jdl"].basis_y, 1e-3)
    yield F
    plt.close("all")


# (target, call taking the bad value, argument name, a good value of that argument)
ARRAYS = [
    ("mean_embedding", lambda A: bk.mean_embedding(A, k), "X", X),
    ("mean_embedding", lambda A: bk.mean_embedding(X, k, weights=A), "weights", np.ones(40) / 40),
    ("median_heuristic", lambda A: bk.median_heuristic(A), "X", X),
    ("mmd2_linear", lambda A: bk.mmd2_linear(X, A, k), "Y", X),
    ("skmse", lambda A: bk.skmse(A, k, 0.1), "X", X),
    ("Linear", lambda A: bk.Linear().cross(A, X), "X", X),
    ("Indicator", lambda A: bk.Indicator().cross(A, lab[:, None]), "X", lab[:, None]),
    ("Polynomial", lambda A: bk.Polynomial().cross(X, A), "Y", X),
    ("TensorProduct", lambda A: bk.TensorProduct(k, k).cross((A, X), (X, X)), "X", X),
    ("KernelEmbedding", lambda A: bk.mean_embedding(X, k)(A), "X", X),
    ("KernelEmbedding", lambda A: bk.mean_embedding(X, k).inner(bk.mean_embedding(A, k)), "X", X),
    ("kernels.RBFFull", lambda A: kn.RBFFull(A), "scale_tril", np.eye(2)),
    ("bke.check_inducing_points", lambda A: bke.check_inducing_points(A, Y[:5]), "X", X),
    ("bke.embedding_posterior", lambda A: bke.embedding_posterior(A, k), "X", X),
    ("bke.herding_inducing", lambda A: bke.herding_inducing(A, 5, kernel=k), "X", X),
    ("bke.kron_loglik", lambda A: bke.kron_loglik(A, Gs, 1.0), "Kzx", G[:10]),
    ("bke.kron_loglik_as_printed", lambda A: bke.kron_loglik_as_printed(G[:10], A, 1.0), "Rzz", Gs),
    ("bke.log_pseudolikelihood", lambda A: bke.log_pseudolikelihood(X, A, k), "Z", Y[:5]),
    ("bke.log_volume", lambda A: bke.log_volume(A, Y[:5], k), "X", X),
    ("bke.witness_posterior", lambda A: bke.witness_posterior(X, Y, k, grid=A), "grid", X[:5]),
    ("bke.lengthscale_posterior", lambda A: bke.lengthscale_posterior(A, key=KEY), "X", X),
    ("bke.lengthscale_posterior", lambda A: bke.lengthscale_posterior(X, key=KEY, grid=A), "grid", np.geomspace(0.1, 3, 5)),
    ("bke.BayesAggregate", lambda A: bke.BayesAggregate()(A, key=KEY), "X", X),
    ("bke.span_coordinates", lambda A: bke.span_coordinates(A), "X", X),
    ("bke.SEPseudolikelihood", lambda A: bke.SEPseudolikelihood.build(A, Y[:5]), "X", X),
    ("bke.ConvolvedSE", lambda A: bke.ConvolvedSE(k, nu="gaussian", eta=A), "eta", np.ones(2)),
    ("compression.ackh", lambda A: cp.ackh(A, y1, 5, key=KEY, lam_c=1e-2, progress_bar=False), "x", X),
    ("compression.ackip_objective", lambda A: cp.ackip_objective(A, y1[:5, None], cp.data_blocks(X, y1[:, None]), k, k, 1e-2), "cx", X[:5]),
    ("compression.amcmd", lambda A: cp.amcmd((X, y1), (A, y1), X, k, k, 1e-2, 1e-2), "q_sample", X),
    ("compression.amcmd2", lambda A: cp.amcmd2((A, y1), (X, y1), X, k, k, 1e-2, 1e-2), "p_sample", X),
    ("compression.amcmd2_gaussian_truth", lambda A: cp.amcmd2_gaussian_truth((X[:5], y1[:5]), k, k, 1e-2, A, np.ones(10) / 10, np.zeros(10), np.ones(10)), "nodes", X[:10]),
    ("compression.class_probabilities", lambda A: cp.class_probabilities(A, np.ones((3, 40)) / 40, 2), "y_train", lab),
    ("compression.compression_problem", lambda A: cp.compression_problem(X, A), "y", y1),
    ("compression.conditional_expectation", lambda A: cp.conditional_expectation(A, np.ones((3, 40)) / 40), "h_values", y1),
    ("compression.data_blocks", lambda A: cp.data_blocks(A, y1), "x", X),
    ("compression.fit_standardiser", lambda A: cp.fit_standardiser(A, y1, discrete=False), "x", X),
    ("compression.jkip", lambda A: cp.jkip(X, A, 5, key=KEY, num_steps=2, progress_bar=False), "y", y1),
    ("compression.jkip_objective", lambda A: cp.jkip_objective(X[:5], A, cp.data_blocks(X, y1[:, None]), k, k), "cy", y1[:5, None]),
    ("compression.kcd2_tower", lambda A: cp.kcd2_tower((X, y1), (A, y1[:5]), k, k, 1e-2), "cset[0]", X[:5]),
    ("compression.kcme_weights", lambda A: cp.kcme_weights(X, A, k, 1e-2), "x_query", X[:5]),
    ("compression.validation_loss", lambda A: cp.validation_loss(X, y1, A, y1[:5], k, k, 1e-2), "x_val", X[:5]),
    ("compression.data.heteroscedastic_truth", lambda A: cdata.heteroscedastic_truth(A), "x", y1),
    ("compression.data.train_val_test_split", lambda A: cdata.train_val_test_split(A, y1, KEY), "x", X),
    ("compression.data.gaussian_expectation", lambda A: cdata.gaussian_expectation("sin y", A, 1.0), "mu", y1),
    ("compression.exact_gaussian.exact_ackip_objective", lambda A: eg.exact_ackip_objective(A, y1[:5], eg.GaussianSetting(), 1e-2), "cx", X[:5, :1]),
    ("compression.exact_gaussian.exact_amcmd2", lambda A: eg.exact_amcmd2(X[:5, :1], A, eg.GaussianSetting(), 1e-2), "cy", y1[:5]),
    ("compression.exact_gaussian.exact_jkip_objective", lambda A: eg.exact_jkip_objective(A, y1[:5], eg.GaussianSetting()), "cx", X[:5, :1]),
    ("compression.exact_gaussian.exact_herding_score", lambda A: eg.exact_herding_score(A, 0.5, X[:5, :1], y1[:5], np.ones(5), eg.GaussianSetting()), "x", X[0, :1]),
    ("compression.exact_gaussian.feature_expectation", lambda A: eg.feature_expectation(eg.GaussianSetting(), A, X[:5, :1]), "cx", X[:5, :1]),
    ("compression.exact_gaussian.joint_expectation", lambda A: eg.joint_expectation(eg.GaussianSetting(), A, y1), "x", X[:, :1]),
    ("compression.exact_gaussian.GaussianSetting", lambda A: eg.GaussianSetting(a=A), "a", np.ones(1)),
    ("conditional.weighted_expectation", lambda A: cond.weighted_expectation(A, y1), "W", np.ones((3, 40))),
    ("conditional.self_normalised_expectation", lambda A: cond.self_normalised_expectation(A, np.ones(3)), "numerator", np.ones(3)),
    ("inference.band_coverage", lambda A: inf.band_coverage(A, y1), "band", np.stack([y1 - 1, y1 + 1])),
    ("inference.bkl_kernel", lambda A: inf.bkl_kernel(A, key=KEY), "X", X),
    ("inference.fit_type2", lambda A: inf.fit_type2(A, Y[:5]), "X", X),
    ("inference.log_grid", lambda A: inf.log_grid(A), "X", X),
    ("inference.tau2_profile", lambda A: inf.tau2_profile(X, Y[:5], A), "lengthscales", np.ones(3)),
    ("inference.posterior_predictive_filter", lambda A: inf.posterior_predictive_filter({}, X, X, A, key=KEY), "X_test", X[:5]),
    ("inference.sample_kbf_posterior", lambda A: inf.sample_kbf_posterior(A, X, key=KEY, tuned=F["tuned"]), "X", X),
    ("jdl.fit_jpdl", lambda A: jdl.fit_jpdl(A, X, 2, 1e-3), "X", X),
    ("jdl.fit_klr", lambda A: jdl.fit_klr(X, A, k, 1e-3), "labels", lab),
    ("jdl.jdl_bases", lambda A: jdl.jdl_bases(X, A, k, k), "Y", X),
    ("jdl.polynomial_basis", lambda A: jdl.polynomial_basis(A, 2), "X", X),
    ("jdl.positivity_margin", lambda A: jdl.positivity_margin(A, -np.ones((3, 3)), np.ones((3, 3))), "H", np.ones((3, 3))),
    ("jdl.simplex_qp", lambda A: jdl.simplex_qp(A, np.ones(3), 1.0), "K", np.eye(3)),
    ("jdl.select_hyperparameters", lambda A: jdl.select_hyperparameters(A, X, lambda m: 0.0), "X", X),
    ("jdl.held_out_ratio_loss", lambda A: jdl.held_out_ratio_loss(F["jdl"], A, X[:5, :1]), "X", X[:5]),
    ("jdl.shard_rows", lambda A: jdl.shard_rows(A), "local_rows", X),
    ("jdl.JointDistributionModel", lambda A: F["jdl"].density_ratio(A, X[:5, :1]), "Xq", X[:5]),
    ("jdl.LowRankCME", lambda A: F["cme"].conditional_expectation(A), "x_query", X[:5]),
    ("jdl.LowRankKLR", lambda A: F["klr"].predict_proba(A), "Xq", X[:5]),
    ("kbr.adaptive_feature_loss", lambda A: kbr.adaptive_feature_loss(A, X, 1e-2), "Psi", X),
    ("kbr.decode_mode", lambda A: kbr.decode_mode(A, X, 1.0), "W", np.ones((40, 3)) / 40),
    ("kbr.ekf_filter", lambda A: kbr.ekf_filter(A, lambda z: z, lambda z: np.eye(1), np.eye(1), np.eye(1), np.zeros(1), np.eye(1)), "X", X[:, :1]),
    ("kbr.filter_landmarks", lambda A: kbr.filter_landmarks(k, k, A, X, 5, 1e-3, 1e-3), "X", X),
    ("kbr.fit_feature_network", lambda A: kbr.fit_feature_network(KEY, kbr.init_mlp(KEY, (2, 4)), A, X, lam=1e-2, sigma_z=1.0, steps=1), "X", X),
    ("kbr.kbr_iw_weights_features", lambda A: kbr.kbr_iw_weights_features(A, np.ones(40), X[:5], 1e-2), "Psi", X),
    ("kbr.kbr_original_weights", lambda A: kbr.kbr_original_weights(G, A, G[:, :5], 1e-2), "gamma", np.ones(40)),
    ("kbr.kulsif_gamma", lambda A: kbr.kulsif_gamma(A, np.ones(40) / 40, 1e-2), "G_Z", G),
    ("kbr.kulsif_loo_score", lambda A: kbr.kulsif_loo_score(A, G[:, :5], G[:5, :5], np.ones(5) / 5, 1e-2), "G_Z", G),
    ("kbr.kulsif_loo_score_atoms_are_data", lambda A: kbr.kulsif_loo_score_atoms_are_data(np.linalg.eigh(G), A, 1e-2), "alphas", np.ones((3, 40)) / 40),
    ("kbr.kulsif_ratio", lambda A: kbr.kulsif_ratio(A, G[:5, :5], np.ones(5) / 5, np.ones(40), 1e-2), "K_zZ", G[:5]),
    ("kbr.normalized_posterior_mean", lambda A: kbr.normalized_posterior_mean(np.ones((40, 3)), A), "Z", X),
    ("kbr.clipped_posterior_mean", lambda A: kbr.clipped_posterior_mean(np.ones((40, 3)), A), "Z", X),
    ("kbr.posterior_expectation", lambda A: kbr.posterior_expectation(np.ones((40, 3)), G[:, :5], A), "c", np.ones(5)),
    ("kbr.posterior_spread", lambda A: kbr.posterior_spread(np.ones((40, 3)), A), "Z", X),
    ("kbr.select_eta_loo", lambda A: kbr.select_eta_loo(A, np.ones((3, 40)) / 40, (1e-3,)), "G_Z", G),
    ("kbr.select_landmarks", lambda A: kbr.select_landmarks(k, A, 5), "X", X),
    ("kbr.successor_priors", lambda A: kbr.successor_priors(A), "Z", X),
    ("kbr.train_features", lambda A: kbr.train_features(KEY, X, A, lam=1e-2, sigma_z=1.0, steps=1), "Z", X),
    ("kbr.train_image_features", lambda A: kbr.train_image_features(KEY, A, X, lam=1e-2, sigma_z=1.0, steps=1), "X", X),
    ("kbr.train_image_cnn", lambda A: kbr.train_image_cnn(KEY, A, X, image_shape=(8, 8, 1), lam=1e-2, sigma_z=1.0, steps=1), "X", np.ones((40, 64))),
    ("kbr.tune_feature_filter", lambda A: kbr.tune_feature_filter(A, X, lambda X, Z: None), "X", X),
    ("kbr.jdl_regression", lambda A: kbr.jdl_regression(X, A), "Z", X),
    ("kbr.Prior", lambda A: kbr.Prior.from_samples(A), "U", X),
    ("kbr.FeatureKernel", lambda A: kbr.FeatureKernel(kbr.nystrom_features(k, X[:5])).cross(A, X), "X", X),
    ("kbr.RandomFourierFeatures", lambda A: kbr.random_fourier_features(KEY, 2, 1.0)(A), "Z", X),
    ("kbr.ConvFeatures", lambda A: kbr.init_image_cnn(KEY, (8, 8, 1))(A), "X", np.ones((3, 64))),
    ("kbr.MLPFeatures", lambda A: kbr.init_mlp(KEY, (2, 4))(A), "X", X),
    ("kernels.Stationary", lambda A: bk.Matern52(1.0).cross(X, A), "Y", X),
    ("kernels.block_row_reduce", lambda A: kn.block_row_reduce(lambda a, b: a.sum(0), A, X), "A", X),
    ("kernels.kernel_row_sums", lambda A: kn.kernel_row_sums(k, A), "X", X),
    ("kernels.squared_distances", lambda A: kn.squared_distances(A, X), "Xs", X),
    ("linalg.cho_solve_psd", lambda A: la.cho_solve_psd(np.eye(3), A), "B", np.ones(3)),
    ("linalg.cholesky", lambda A: la.cholesky(A), "A", np.eye(3)),
    ("linalg.jittered_cholesky", lambda A: la.jittered_cholesky(A), "A", np.eye(3)),
    ("linalg.logdet_from_cholesky", lambda A: la.logdet_from_cholesky(A), "L", np.eye(3)),
    ("linalg.pivoted_cholesky", lambda A: la.pivoted_cholesky(k, A), "X", X),
    ("linalg.whiten", lambda A: la.whiten(np.eye(3), A), "B", np.ones(3)),
    ("models.bke_model", lambda A: inf.run_nuts(mdl.bke_model, A, Y[:5], key=KEY, num_warmup=1, num_samples=1, num_chains=1), "X", X),
    ("models.split_for_validation", lambda A: mdl.split_for_validation(A, X, n_val=10), "X", X),
    ("plotting.plot_witness_1d", lambda A: plotting.plot_witness_1d(F["ax"], A, y1), "grid", y1),
    ("plotting.plot_witness_2d", lambda A: plotting.plot_witness_2d(F["ax"], A, np.ones((4, 4)), np.ones((4, 4))), "xx", np.ones((4, 4))),
    ("plotting.plot_ranges", lambda A: plotting.plot_ranges(F["ax"], {"a": A}, ["p"]), "groups", np.ones((3, 1))),
    ("sharding.RowShards", lambda A: sharding.shard_rows(A), "local_rows", X),
    ("kbr.lag_design", lambda A: kbr.lag_design(A, (1, 2)), "u", X),
    ("kbr.seasonal_period", lambda A: kbr.seasonal_period(A, 12), "y", X),
    ("kbr.dickey_fuller_t", lambda A: kbr.dickey_fuller_t(A), "y", X),
    ("kbr.conformal_band", lambda A: kbr.conformal_band(A, np.ones((3, 1)), np.ones((5, 1)), np.zeros((3, 1)), 0.9),
     "mean", np.zeros((3, 1))),
    ("kbr.conformal_band", lambda A: kbr.conformal_band(np.zeros((3, 1)), np.ones((3, 1)), A, np.zeros((3, 1)), 0.9),
     "calibration", np.ones((5, 1))),
    ("kbr.tune_forecaster", lambda A: kbr.tune_forecaster(A), "y", X[:, 0]),
    ("inference.forecast_series", lambda A: inf.forecast_series(A, X[:5, 0]), "y_train", X[:, 0]),
    ("inference.forecast_series", lambda A: inf.forecast_series(X[:, 0], A), "y_test", X[:5, 0]),
]
SCALES = [
    ("RBF", lambda s: bk.RBF(s), "lengthscale"),
    ("Matern12", lambda s: bk.Matern12(s), "lengthscale"),
    ("Matern32", lambda s: bk.Matern32(s), "lengthscale"),
    ("Matern52", lambda s: bk.Matern52(s), "lengthscale"),
    ("RationalQuadratic", lambda s: bk.RationalQuadratic(1.0, s), "alpha"),
    ("Polynomial", lambda s: bk.Polynomial(2, s), "offset"),
    ("kernels.Scaled", lambda s: kn.Scaled(k, s), "scale"),
    ("skmse", lambda s: bk.skmse(X, k, s), "lam"),
    ("bke.embedding_posterior", lambda s: bke.embedding_posterior(X, k, s), "tau2"),
    ("bke.log_pseudolikelihood", lambda s: bke.log_pseudolikelihood(X, Y[:5], k, s), "tau2"),
    ("bke.kron_loglik", lambda s: bke.kron_loglik(G[:10], Gs, s), "tau2"),
    ("bke.witness_posterior", lambda s: bke.witness_posterior(X, Y, k, grid=X[:5], band=s), "band"),
    ("compression.amcmd2", lambda s: cp.amcmd2((X, y1), (X, y1), X, k, k, s, 1e-2), "lam_p"),
    ("compression.kcme_weights", lambda s: cp.kcme_weights(X, X[:5], k, s), "lam"),
    ("compression.validation_loss", lambda s: cp.validation_loss(X, y1, X[:5], y1[:5], k, k, s), "lam"),
    ("compression.ackip_objective", lambda s: cp.ackip_objective(X[:5], y1[:5, None], cp.data_blocks(X, y1[:, None]), k, k, s), "lam_c"),
    ("compression.exact_gaussian.exact_kip", lambda s: eg.exact_kip(eg.GaussianSetting(), 3, method="ackip", key=KEY, lam_c=s, num_steps=2), "lam_c"),
    ("compression.exact_gaussian.GaussianSetting", lambda s: eg.GaussianSetting(sigma=s), "sigma"),
    ("compression.data.train_val_test_split", lambda s: cdata.train_val_test_split(X, y1, KEY, val=s), "val"),
    ("datasets.blobs", lambda s: datasets.blobs(s), "eps"),
    ("inference.bkl_fit", lambda s: inf.bkl_fit(X, key=KEY, tau2=s), "tau2"),
    ("inference.log_grid", lambda s: inf.log_grid(X, low=s), "low"),
    ("inference.fit_type2", lambda s: inf.fit_type2(X, Y[:5], s), "tau2"),
    ("inference.run_nuts", lambda s: inf.run_nuts(mdl.bke_model, X, Y[:5], key=KEY, target_accept=s), "target_accept"),
    ("jdl.fit_jpdl", lambda s: jdl.fit_jpdl(X, X, 2, s), "lam"),
    ("jdl.fit_klr", lambda s: jdl.fit_klr(X, lab, k, s), "lam"),
    ("jdl.jdl_bases", lambda s: jdl.jdl_bases(X, X, k, k, tol=s), "tol"),
    ("jdl.kernel_bounds", lambda s: jdl.kernel_bounds(F["jdl"].basis_x, F["jdl"].basis_y, kappa_x=s), "kappa_x"),
    ("jdl.simplex_qp", lambda s: jdl.simplex_qp(np.eye(3), np.ones(3), s), "total"),
    ("kbr.nystrom_features", lambda s: kbr.nystrom_features(k, X[:5], jitter=s), "jitter"),
    ("kbr.random_fourier_features", lambda s: kbr.random_fourier_features(KEY, 2, s), "sigma"),
    ("kbr.landmark_ridges", lambda s: kbr.landmark_ridges("iw", s, 1e-3, 1e-3), "lam"),
    ("kbr.decode_mode", lambda s: kbr.decode_mode(np.ones((40, 3)), X, s), "sigma_z"),
    ("kbr.KernelBayesFilter", lambda s: kbr.KernelBayesFilter.build(X, X, s, 1.0, 1e-3, 1e-3), "sigma_x"),
    ("kbr.tune_feature_filter", lambda s: kbr.tune_feature_filter(X, X, lambda X, Z: None, c=s), "c"),
    ("kbr.kbr_original_weights", lambda s: kbr.kbr_original_weights(G, np.ones(40), G[:, :5], s), "lam"),
    ("kbr.kulsif_gamma", lambda s: kbr.kulsif_gamma(G, np.ones(40) / 40, s), "eta"),
    ("kbr.data.linear_gaussian_sequence", lambda s: kdata.linear_gaussian_sequence(10, KEY, q=s), "q"),
    ("kbr.data.panorama_sequence", lambda s: kdata.panorama_sequence(10, KEY, sigma_x=s), "sigma_x"),
    ("kbr.data.sprite_sequence", lambda s: kdata.sprite_sequence(10, KEY, pixel_noise=s), "pixel_noise"),
    ("kbr.data.circle_dynamics", lambda s: kdata.circle_dynamics(10, KEY, sigma_x=s), "sigma_x"),
    ("linalg.cholesky", lambda s: la.cholesky(np.eye(3), jitter=s), "jitter"),
    ("models.kbf_hyper_model", lambda s: mdl.kbf_hyper_model(F["split"], tau=s), "tau"),
    ("optim.adam", lambda s: optim.adam(s), "learning_rate"),
    ("optim.adamw", lambda s: optim.adamw(1e-2, s), "weight_decay"),
    ("optim.minimise", lambda s: optim.minimise(lambda p, c_, d, key: (p ** 2, c_), 1.0, optim.adam(0.1), num_steps=3, tol=s), "tol"),
]
COUNTS = [
    ("datasets.perturbed_uniform", lambda c: bk.datasets.perturbed_uniform(c, 1), "n"),
    ("datasets.perturbed_uniform", lambda c: bk.datasets.perturbed_uniform(10, 1, c), "perturbations"),
    ("bke.BayesAggregate", lambda c: bke.BayesAggregate(inducing=(10, c)), "inducing"),
    ("mmd_test", lambda c: bk.mmd_test(X, Y, bk.RBF(1.0), key=KEY, method="features", num_features=c), "num_features"),
    ("hsic_test", lambda c: bk.hsic_test(X, X, key=KEY, method="features", num_features=c), "num_features"),
    ("bke.lengthscale_posterior", lambda c: bke.lengthscale_posterior(X, key=KEY, size=c), "size"),
    ("bke.BayesAggregate", lambda c: bke.BayesAggregate(max_modes=c), "max_modes"),
    ("bke.BayesAggregate", lambda c: bke.BayesAggregate(max_points=c), "max_points"),
    ("kbr.seasonal_period", lambda c: kbr.seasonal_period(X, c), "max_period"),
    ("kbr.dickey_fuller_t", lambda c: kbr.dickey_fuller_t(X, lagged_differences=c), "lagged_differences"),
    ("kbr.tune_forecaster", lambda c: kbr.tune_forecaster(X[:, 0], n_val=c), "n_val"),
    ("kbr.tune_forecaster", lambda c: kbr.tune_forecaster(X[:, 0], workers=c), "workers"),
    ("inference.forecast_series", lambda c: inf.forecast_series(X[:, 0], X[:5, 0], workers=c), "workers"),
    ("plotting.save_figure", lambda c: plotting.save_figure(F["ax"].figure, F["png"], dpi=c), "dpi"),
    ("Polynomial", lambda c: bk.Polynomial(c), "degree"),
    ("median_heuristic", lambda c: bk.median_heuristic(X, max_points=c), "max_points"),
    ("bke.default_num_inducing", lambda c: bke.default_num_inducing(c, 2), "N"),
    ("bke.herding_inducing", lambda c: bke.herding_inducing(X, c, kernel=k), "m"),
    ("compression.ackh", lambda c: cp.ackh(X, y1, c, key=KEY, lam_c=1e-2, progress_bar=False), "m"),
    ("compression.jkip", lambda c: cp.jkip(X, y1, c, key=KEY, progress_bar=False), "m"),
    ("compression.class_probabilities", lambda c: cp.class_probabilities(lab, np.ones((3, 40)) / 40, c), "n_classes"),
    ("compression.data_blocks", lambda c: cp.data_blocks(X, y1, c), "block_size"),
    ("compression.compression_problem", lambda c: cp.compression_problem(X, y1, block_size=c), "block_size"),
    ("compression.data.imbalanced", lambda c: cdata.imbalanced(c), "n"),
    ("compression.data.heteroscedastic_quadrature", lambda c: cdata.heteroscedastic_quadrature(F["std"], c), "n_nodes"),
    ("compression.exact_gaussian.sample", lambda c: eg.sample(eg.GaussianSetting(), c, KEY), "n"),
    ("compression.exact_gaussian.exact_kip", lambda c: eg.exact_kip(eg.GaussianSetting(), c, method="ackip", key=KEY), "m"),
    ("datasets.blobs", lambda c: datasets.blobs(1.0, per=c), "per"),
    ("inference.posterior_predictive_filter", lambda c: inf.posterior_predictive_filter({}, X, X, X[:5], key=KEY, num_draws=c), "num_draws"),
    ("inference.sample_kbf_posterior", lambda c: inf.sample_kbf_posterior(X, X, key=KEY, tuned=F["tuned"], n_val=c), "n_val"),
    ("models.split_for_validation", lambda c: mdl.split_for_validation(X, X, n_val=20, max_fit=c), "max_fit"),
    ("inference.log_grid", lambda c: inf.log_grid(X, size=c), "size"),
    ("inference.run_nuts", lambda c: inf.run_nuts(mdl.bke_model, X, Y[:5], key=KEY, num_samples=c), "num_samples"),
    ("inference.kbf_init_values", lambda c: inf.kbf_init_values(F["tuned"], c), "dim_z"),
    ("inference.fit_type2", lambda c: inf.fit_type2(X, Y[:5], n_starts=c), "n_starts"),
    ("jdl.fit_jpdl", lambda c: jdl.fit_jpdl(X, X, c, 1e-3), "degree"),
    ("jdl.monomial_exponents", lambda c: jdl.monomial_exponents(c, 2), "dim"),
    ("jdl.polynomial_basis", lambda c: jdl.polynomial_basis(X, c), "degree"),
    ("jdl.jdl_bases", lambda c: jdl.jdl_bases(X, X, k, k, max_rank=c), "max_rank"),
    ("jdl.grid_row_minima", lambda c: jdl.grid_row_minima(F["jdl"].H, F["jdl"].basis_x, F["jdl"].basis_y, c), "block_size"),
    ("jdl.solve_grid_positive", lambda c: jdl.solve_grid_positive(F["problem"], F["jdl"].basis_x, F["jdl"].basis_y, cuts_per_round=c), "cuts_per_round"),
    ("kbr.init_mlp", lambda c: kbr.init_mlp(KEY, (2, c)), "sizes"),
    ("kbr.init_image_mlp", lambda c: kbr.init_image_mlp(KEY, c), "d_x"),
    ("kbr.init_image_cnn", lambda c: kbr.init_image_cnn(KEY, (8, 8, 1), c), "num_features"),
    ("kbr.random_fourier_features", lambda c: kbr.random_fourier_features(KEY, c, 1.0), "dim"),
    ("kbr.select_landmarks", lambda c: kbr.select_landmarks(k, X, c), "num"),
    ("kbr.successor_priors", lambda c: kbr.successor_priors(X, c), "num_priors"),
    ("kbr.train_features", lambda c: kbr.train_features(KEY, X, X, lam=1e-2, sigma_z=1.0, steps=c), "steps"),
    ("kbr.tune_kbf", lambda c: kbr.tune_kbf(X, X, n_val=c), "n_val"),
    ("kbr.jdl_regression", lambda c: kbr.jdl_regression(X, X, n_val=c), "n_val"),
    ("kbr.data.gaussian_posterior_task", lambda c: kdata.gaussian_posterior_task(c, KEY), "d"),
    ("kbr.data.linear_gaussian_sequence", lambda c: kdata.linear_gaussian_sequence(c, KEY), "T"),
    ("kbr.data.panorama_scene", lambda c: kdata.panorama_scene(KEY, c), "num_pillars"),
    ("kbr.data.panorama_sequence", lambda c: kdata.panorama_sequence(c, KEY), "T"),
    ("kernels.se_scale_tril", lambda c: kn.se_scale_tril(k, c), "dim"),
    ("kernels.kernel_row_sums", lambda c: kn.kernel_row_sums(k, X, block_size=c), "block_size"),
    ("kernels.block_row_reduce", lambda c: kn.block_row_reduce(lambda a, b: a.sum(0), X, X, block_size=c), "block_size"),
    ("linalg.cholesky", lambda c: la.cholesky(np.eye(3), max_tries=c), "max_tries"),
    ("linalg.pivoted_cholesky", lambda c: la.pivoted_cholesky(k, X, max_rank=c), "max_rank"),
    ("models.compress_split", lambda c: mdl.compress_split(F["split"], c, key=KEY, lam_c=1e-2), "m"),
    ("models.kbf_hyper_model", lambda c: mdl.kbf_hyper_model(F["split"], burn_in=c), "burn_in"),
    ("models.split_for_validation", lambda c: mdl.split_for_validation(X, X, n_val=c), "n_val"),
    ("optim.minimise", lambda c: optim.minimise(lambda p, d: p ** 2, 1.0, optim.adam(0.1), num_steps=c), "num_steps"),
    ("optim.optax_scan", lambda c: optim.optax_scan(lambda p, c_, d, key: (p ** 2, c_), 1.0, optim.adam(0.1), optim.adam(0.1).init(1.0), None, None, length=c), "length"),
    ("sharding.load_rows", lambda c: sharding.load_rows(F["npy"], start=c), "start"),
]
KEYS = [
    ("bke.lengthscale_posterior", lambda key: bke.lengthscale_posterior(X, key=key), "key"),
    ("bke.BayesAggregate", lambda key: bke.BayesAggregate()(X, key=key), "key"),
    ("median_heuristic", lambda key: bk.median_heuristic(X, max_points=10, key=key), "key"),
    ("bke.witness_posterior", lambda key: bke.witness_posterior(X, Y, grid=X[:5], key=key, hyper_draws={"lengthscale": np.ones(3)}, make_kernel=lambda d: bk.RBF(d["lengthscale"])), "key"),
    ("compression.ackh", lambda key: cp.ackh(X, y1, 5, key=key, lam_c=1e-2), "key"),
    ("compression.jkip", lambda key: cp.jkip(X, y1, 5, key=key), "key"),
    ("compression.data.train_val_test_split", lambda key: cdata.train_val_test_split(X, y1, key), "key"),
    ("compression.exact_gaussian.sample", lambda key: eg.sample(eg.GaussianSetting(), 5, key), "key"),
    ("compression.exact_gaussian.exact_kip", lambda key: eg.exact_kip(eg.GaussianSetting(), 3, method="ackip", key=key), "key"),
    ("inference.bkl_kernel", lambda key: inf.bkl_kernel(X, key=key), "key"),
    ("inference.run_nuts", lambda key: inf.run_nuts(mdl.bke_model, X, Y[:5], key=key), "key"),
    ("inference.posterior_predictive_filter", lambda key: inf.posterior_predictive_filter({}, X, X, X[:5], key=key), "key"),
    ("inference.sample_kbf_posterior", lambda key: inf.sample_kbf_posterior(X, X, key=key, tuned=F["tuned"]), "key"),
    ("inference.fit_type2", lambda key: inf.fit_type2(X, Y[:5], key=key), "key"),
    ("kbr.fit_feature_network", lambda key: kbr.fit_feature_network(key, kbr.init_mlp(KEY, (2, 4)), X, X, lam=1e-2, sigma_z=1.0), "key"),
    ("kbr.init_image_cnn", lambda key: kbr.init_image_cnn(key, (8, 8, 1)), "key"),
    ("kbr.init_image_mlp", lambda key: kbr.init_image_mlp(key, 4), "key"),
    ("kbr.init_mlp", lambda key: kbr.init_mlp(key, (2, 4)), "key"),
    ("kbr.random_fourier_features", lambda key: kbr.random_fourier_features(key, 2, 1.0), "key"),
    ("kbr.train_features", lambda key: kbr.train_features(key, X, X, lam=1e-2, sigma_z=1.0), "key"),
    ("kbr.train_image_features", lambda key: kbr.train_image_features(key, X, X, lam=1e-2, sigma_z=1.0), "key"),
    ("kbr.train_image_cnn", lambda key: kbr.train_image_cnn(key, np.ones((40, 64)), X, image_shape=(8, 8, 1), lam=1e-2, sigma_z=1.0), "key"),
    ("kbr.data.gaussian_posterior_task", lambda key: kdata.gaussian_posterior_task(2, key), "key"),
    ("kbr.data.linear_gaussian_sequence", lambda key: kdata.linear_gaussian_sequence(10, key), "key"),
    ("kbr.data.panorama_scene", lambda key: kdata.panorama_scene(key), "key"),
    ("kbr.data.panorama_sequence", lambda key: kdata.panorama_sequence(10, key), "key"),
    ("kbr.data.sprite_sequence", lambda key: kdata.sprite_sequence(10, key), "key"),
    ("models.compress_split", lambda key: mdl.compress_split(F["split"], 5, key=key, lam_c=1e-2), "key"),
    ("optim.minimise", lambda key: optim.minimise(lambda p, c_, d, key: (p ** 2, c_), 1.0, optim.adam(0.1), num_steps=3, key=key), "key"),
]
CHOICES = [
    ("kbr.data.sprite_sequence", lambda s: kdata.sprite_sequence(10, KEY, size=s), "size"),
    ("median_heuristic", lambda s: bk.median_heuristic(X, convention=s), "convention"),
        ("bke.log_volume", lambda s: bke.log_volume(X, Y[:5], k, method=s), "method"),
    ("bke.kron_loglik", lambda s: bke.kron_loglik(G[:10], Gs, 1.0, method=s), "method"),
    ("bke.ConvolvedSE", lambda s: bke.ConvolvedSE(k, nu=s), "nu"),
    ("bke.SEPseudolikelihood", lambda s: bke.SEPseudolikelihood.build(X, Y[:5], convention=s), "convention"),
    ("compression.data.gaussian_expectation", lambda s: cdata.gaussian_expectation(s, 0.0, 1.0), "name"),
    ("compression.data.sklearn_dataset", lambda s: cdata.sklearn_dataset(s), "name"),
    ("compression.exact_gaussian.exact_kip", lambda s: eg.exact_kip(eg.GaussianSetting(), 3, method=s, key=KEY), "method"),
    ("inference.posterior_predictive_filter", lambda s: inf.posterior_predictive_filter({}, X, X, X[:5], key=KEY, method=s), "method"),
    ("inference.sample_kbf_posterior", lambda s: inf.sample_kbf_posterior(X, X, key=KEY, tuned=F["tuned"], method=s), "method"),
    ("kbr.KernelBayesFilter", lambda s: kbr.KernelBayesFilter.build(X, X, 1.0, 1.0, 1e-3, 1e-3).filter(X[:5], readout=s), "readout"),
    ("inference.run_nuts", lambda s: inf.run_nuts(mdl.bke_model, X, Y[:5], key=KEY, backend=s), "backend"),
    ("inference.tau2_profile", lambda s: inf.tau2_profile(X, Y[:5], np.ones(3), convention=s), "convention"),
    ("jdl.fit_cme", lambda s: jdl.fit_cme(X, X, k, k, 1e-3, constraint=s), "constraint"),
    ("jdl.fit_jpdl", lambda s: jdl.fit_jpdl(X, X, 2, 1e-3, constraint=s), "constraint"),
    ("kbr.cme_weights", lambda s: kbr.cme_weights(G, G[:, :5], 1e-2, reg_scale=s), "reg_scale"),
    ("kbr.kbr_iw_weights", lambda s: kbr.kbr_iw_weights(G, np.ones(40), G[:, :5], 1e-2, zero_weight_policy=s), "zero_weight_policy"),
    ("kbr.kbr_original_weights", lambda s: kbr.kbr_original_weights(G, np.ones(40), G[:, :5], 1e-2, solver=s), "solver"),
    ("kbr.landmark_ridges", lambda s: kbr.landmark_ridges(s, 1e-3, 1e-3, 1e-3), "method"),
    ("kbr.tune_kbf", lambda s: kbr.tune_kbf(X, X, method=s), "method"),
    ("kbr.data.circle_dynamics", lambda s: kdata.circle_dynamics(10, KEY, setting=s), "setting"),
    ("kbr.data.circle_transition", lambda s: kdata.circle_transition(amp_phase=s), "amp_phase"),
    ("models.bke_model", lambda s: inf.run_nuts(mdl.bke_model, X, Y[:5], key=KEY, convention=s), "convention"),
    ("models.kbf_hyper_model", lambda s: mdl.kbf_hyper_model(F["split"], method=s), "method"),
    ("distributed.initialize", lambda s: __import__("bayeskern.distributed").distributed.initialize("localhost:1", 2, 0, cpu_collectives=s), "cpu_collectives"),
]


def _bad_arrays(good):
    good = np.asarray(good)
    nan = good.astype(float).copy()
    nan.flat[0] = np.nan
    return [("strings", np.full(good.shape, "a"), TypeError), ("complex", good + 1j, TypeError), ("NaN", nan, ValueError)]


FLAGGED = {"linalg.jittered_cholesky"}  # traced code: a NaN matrix sets the ok flag (test below), it cannot raise
GENERIC = ([(t, f"{t} {a} {kind}", call, bad, err, a) for t, call, a, good in ARRAYS for kind, bad, err in _bad_arrays(good)
            if not (t in FLAGGED and kind == "NaN")]
           + [(t, f"{t} {a}={bad}", call, bad, ValueError, a) for t, call, a in SCALES for bad in (np.nan, -1.0)]
           + [(t, f"{t} {a}={bad}", call, bad, err, a) for t, call, a in COUNTS
              for bad, err in ((2.5, TypeError), (-1, ValueError))]
           + [(t, f"{t} {a}=0", call, 0, TypeError, a) for t, call, a in KEYS]
           + [(t, f"{t} {a}='bogus'", call, "bogus", ValueError, a) for t, call, a in CHOICES])


@pytest.mark.parametrize("call, bad, error, argument", [g[2:] for g in GENERIC], ids=[g[1] for g in GENERIC])
def test_every_entry_point_names_the_bad_argument(objects, call, bad, error, argument):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(error) as caught:
            call(bad)
    assert re.search(r"(?<![\w\[])" + re.escape(argument) + r"(?![\w])", str(caught.value)), str(caught.value)


def test_value_checks_run_on_concrete_data_inside_traced_code():
    """Data a traced function closes over stay concrete through the conversions, so their value checks still run:
    the NaN in X and an inducing point inside X are reported while jit (or NUTS) traces the likelihood or the model."""
    rng = np.random.default_rng(0)
    X, Z = rng.standard_normal((30, 1)), np.linspace(-1.0, 1.0, 4)[:, None]
    bad = X.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="X contains 1 non-finite"):
        jax.jit(lambda ell: bke.log_pseudolikelihood(bad, Z, bk.RBF(ell), 1.0))(0.5)
    with pytest.raises(ValueError, match="also points of X"):
        jax.jit(lambda ell: bke.log_pseudolikelihood(X, X[:4], bk.RBF(ell), 1.0))(0.5)
    with pytest.raises(ValueError, match="X contains 1 non-finite"):
        inf.run_nuts(mdl.bke_model, bad, Z, key=jax.random.key(0), num_chains=1, num_warmup=5, num_samples=5,
                     progress_bar=False)
    assert np.isfinite(float(jax.jit(lambda ell: bke.log_pseudolikelihood(X, Z, bk.RBF(ell), 1.0))(0.5)))


def test_a_failed_traced_factorisation_is_flagged_not_returned():
    L, _, ok = bk.linalg.jittered_cholesky(np.full((3, 3), np.nan))
    assert not bool(ok)  # the flag of traced code; the eager wrapper turns it into an error
    with pytest.raises(bk.CholeskyError):
        bk.linalg.cholesky(-np.eye(3))


def test_foreign_and_truncated_files_are_refused(tmp_path):
    np.savez(tmp_path / "foreign.npz", a=np.ones(3))
    with pytest.raises(bk.FileFormatError, match="not a bayeskern save"):
        bk.load(tmp_path / "foreign.npz")
    model = jdl.fit_jdl(X, X[:, :1], bk.RBF(1.0), bk.RBF(1.0), 1e-3, constraint="normalised")
    model.save(tmp_path / "model.npz")
    data = (tmp_path / "model.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(bk.FileFormatError):
        bk.load(tmp_path / "cut.npz")


def test_a_filter_flags_observations_outside_the_training_range(fits):
    with pytest.warns(kbr.OutOfRangeWarning, match="3 of 5 observations lie outside the training range"):
        fits["kbf"].filter(np.vstack([X[:2], X[:3] + 100.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", kbr.OutOfRangeWarning)
        fits["kbf"].filter(X[:5])  # in range: no warning


def test_float32_grams_are_solved_in_float64(fits):
    W = kbr.cme_weights(np.eye(5, dtype=np.float32), np.eye(5, dtype=np.float32), 0.1)
    assert W.dtype == np.float64


@pytest.mark.parametrize("method", ["iw", "original"])
def test_a_filter_of_float32_data_runs_in_float64(method):
    """float32 data are upcast like every Gram solve: the filter equals the one of the same data in float64 (the
    scan carried float32 weights into float64 steps and raised a TypeError before)."""
    X32, Z32 = X.astype(np.float32), np.roll(X, 1, axis=1).astype(np.float32)
    f32 = kbr.KernelBayesFilter.fit(X32, Z32, method=method)
    f64 = kbr.KernelBayesFilter.fit(X32.astype(np.float64), Z32.astype(np.float64), method=method)
    means = f32.filter(X32[:8])
    assert means.dtype == np.float64
    np.testing.assert_allclose(means, f64.filter(X32[:8].astype(np.float64)), atol=1e-6)
    _, first = f32.update(f32.initial_state(), X32[0])
    np.testing.assert_allclose(first, means[0], atol=1e-6)


def test_data_frames_are_read_by_their_numbers_and_their_other_columns_named():
    """A frame's text, date and category columns are named in the error; nullable integers read as numbers (the same
    test as the NumPy array), and a missing one is refused as non-finite."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"x": rng.standard_normal(60), "count": pd.array(rng.integers(0, 5, 60), dtype="Int64")})
    other = frame.assign(x=frame["x"] + 1.0)
    key = jax.random.key(0)
    want = bk.mmd_test(frame.to_numpy(float), other.to_numpy(float), key=key, n_permutations=99).p_value
    assert bk.mmd_test(frame, other, key=key, n_permutations=99).p_value == want
    labelled = frame.assign(group=["a", "b"] * 30, day=pd.date_range("2024-01-01", periods=60),
                            kind=pd.Categorical(["u", "v"] * 30))
    with pytest.raises(TypeError, match=r"Y has columns that do not hold real numbers: \['group', 'day', 'kind'\]"):
        bk.mmd_test(frame, labelled, key=key)
    with pytest.raises(TypeError, match="X must hold real numbers"):
        bk.hsic_test(labelled["group"], frame["x"], key=key)
    frame.loc[3, "count"] = pd.NA
    with pytest.raises(ValueError, match="X contains 1 non-finite"):
        bk.mmd_test(frame, other, key=key)


def test_original_kbr_weights_of_an_all_zero_gamma_are_flagged():
    out = kbr.kbr_original_weights(G, np.zeros(40), G[:, :5], 1e-3, zero_weight_policy="zeros")
    assert bool(out.degenerate)  # the all-zero weights come with the flag, not as a posterior mean of 0
    assert bool(kbr.kbr_original_weights(G, np.zeros(40), G[:, :5], 1e-3).degenerate)


KILLED_WRITER = """
import sys, time
from bayeskern.fitted import write_atomic

def slow(f):
    f.write(b"new contents, first half ")
    f.flush()
    print("writing", flush=True)
    time.sleep(60)  # killed here
    f.write(b"second half")

write_atomic(sys.argv[1], slow)
"""


@pytest.mark.parametrize("existing", [True, False], ids=["old file", "no file"])
def test_a_writer_killed_mid_way_leaves_the_old_file_or_none(tmp_path, existing):
    import signal
    import subprocess
    import sys

    path = tmp_path / "result.npz"
    if existing:
        path.write_bytes(b"old contents")
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"  # the temporary file holds half of the new contents
    proc.send_signal(signal.SIGKILL)  # no cleanup runs
    proc.wait(timeout=30)
    assert (path.read_bytes() == b"old contents") if existing else not path.exists()


def _cli_files(tmp_path):
    rng = np.random.default_rng(3)
    files = {"x": rng.standard_normal((60, 2)), "y": rng.standard_normal((60, 1)), "short": rng.standard_normal((50, 1)),
             "x1": rng.standard_normal((20, 1)), "nan": np.where(rng.random((60, 1)) < 0.1, np.nan, 0.0)}
    paths = {}
    for name, value in files.items():
        paths[name] = str(tmp_path / f"{name}.npy")
        np.save(paths[name], value)
    paths["text"] = str(tmp_path / "text.csv")
    (tmp_path / "text.csv").write_text("a,b\nc,d\n")
    paths["file"] = str(tmp_path / "a_file")
    (tmp_path / "a_file").write_text("")
    return paths


# (id, argv with {placeholders} for the files above, message fragment naming what is wrong)
CLI_CASES = [
    ("demo --out is a file", ["demo", "--out", "{file}"], "--out"),
    ("demo bad permutations", ["demo", "--permutations", "0"], "--permutations"),
    ("two-sample text file", ["two-sample", "{x}", "{text}"], "text.csv"),
    ("two-sample dimensions", ["two-sample", "{x}", "{y}"], "columns"),
    ("independence unpaired", ["independence", "{x}", "{short}"], "rows"),
    ("filter test dimension", ["filter", "{x}", "{x}", "{x1}"], "X_TEST has 1 columns"),
    ("compress m", ["compress", "{x}", "{y}", "--m", "0"], "--m"),
    ("jdl non-finite", ["jdl", "{x}", "{nan}"], "nan.npy contains NaN or inf"),
    ("jdl lam", ["jdl", "{x}", "{y}", "--lam", "-1"], "--lam"),
]


@pytest.mark.parametrize("argv, fragment", [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_every_cli_subcommand_gives_a_one_line_error(tmp_path, capsys, argv, fragment):
    from bayeskern.cli import main

    paths = _cli_files(tmp_path)
    argv = [a.format(**paths) for a in argv]
    if "--out" not in argv:
        argv += ["--out", str(tmp_path / "out")]
    assert main(argv) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("bayeskern: error")]
    assert len(err) == 1 and fragment in err[0], err


# Public names that take no input to check, with the reason; every other public name must have a row above.
NO_INPUT = {
    "enable_x64": "a switch (use_x64 is truthy or not)", "x64_enabled": "takes no argument",
    "Kernel": "abstract base class", "kernels.Stationary": "abstract base class",
    "cli.build_parser": "takes no argument (the parser is exercised by every CLI row)",
    "fitted.static": "a dataclass field marker; its keywords go to dataclasses.field",
    "Interrupted": "an exception the library raises on Ctrl-C; its partial result may be anything",
}
# result records the library builds and returns (their producers have rows above)
RECORD_NAMES = ("ConditionalExpectation", "HypothesisTestResult", "bke.LengthscalePosterior", "bke.EmbeddingPosterior", "bke.WitnessPosterior",
                "compression.CompressionProblem", "compression.CompressionResult", "compression.Standardiser",
                "inference.Diagnostics", "inference.MCMCResult", "inference.PredictiveFiltering", "inference.Type2Result",
                "jdl.JDLBases", "jdl.JDLProblem", "jdl.JDLSolution", "jdl.PolynomialBasis", "jdl.RotatedBasis",
                "kbr.Factored", "kbr.ImageFeatures", "kbr.Candidate", "kbr.ForecastDesign", "kbr.ForecastTuning",
                "kbr.ConformalBand", "inference.Forecast", "inference.ForecastAhead", "inference.Backtest", "kbr.KBRWeights", "kbr.TuneResult", "kbr.data.PosteriorTask",
                "kbr.data.Sequence", "linalg.PivotedCholesky", "models.FilterSplit", "optim.Minimised")


def _public_names():
    import importlib
    import inspect
    import types

    modules = ["bayeskern", "bayeskern.kernels", "bayeskern.bke", "bayeskern.kbr", "bayeskern.jdl",
               "bayeskern.compression", "bayeskern.models", "bayeskern.inference", "bayeskern.linalg",
               "bayeskern.fitted", "bayeskern.conditional", "bayeskern.optim", "bayeskern.sharding",
               "bayeskern.plotting", "bayeskern.datasets", "bayeskern.kbr.data", "bayeskern.compression.data",
               "bayeskern.compression.exact_gaussian", "bayeskern.distributed", "bayeskern.cli"]
    names = {}
    for module in modules:
        mod = importlib.import_module(module)
        short = module.removeprefix("bayeskern").removeprefix(".")
        for name in mod.__all__:
            obj = getattr(mod, name)
            if isinstance(obj, (types.ModuleType, int, float, str, tuple, dict)):
                continue  # subpackages (their names are listed) and constants
            if inspect.isclass(obj) and issubclass(obj, (Exception, Warning)):
                continue  # exception classes
            names.setdefault(id(obj), f"{short}.{name}" if short else name)
    return set(names.values())


def test_the_battery_covers_every_public_name():
    covered = {row[0] for table in (CASES, ARRAYS, SCALES, COUNTS, KEYS, CHOICES) for row in table}
    covered |= {"cli.main"} | set(NO_INPUT) | set(RECORD_NAMES)
    missing = sorted(_public_names() - covered)
    assert not missing, f"public names without a bad-input row: {missing}"
