"""The NumPyro BKE model, NUTS through NumPyro and BlackJAX, arviz output and diagnostics."""

import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from numpyro.infer.util import log_density
from scipy.stats import norm

from bayeskern.bke import SEPseudolikelihood, hold_out_inducing
from bayeskern.datasets import normal_vs_laplace
from bayeskern.inference import MCMCWarning, diagnose, fit_type2, run_nuts
from bayeskern.inference._arviz import az
from bayeskern.models import bke_model


@pytest.fixture(scope="module")
def small_problem():
    xp, xq = normal_vs_laplace(60, seed=5)
    return hold_out_inducing(np.vstack([xp, xq]), jax.random.key(0), m=6)


def test_model_log_density_is_prior_plus_pseudolikelihood(small_problem):
    X, Z = small_problem
    objective = SEPseudolikelihood.build(X, Z)
    for theta in (0.2, 0.7, 2.0):
        value, _ = log_density(bke_model, (X, Z), {}, {"lengthscale": theta})
        expected = float(dist.Gamma(1.0, 1.0).log_prob(theta)) + float(objective(theta, 1.0))
        assert float(value) == pytest.approx(expected, rel=1e-12)
    value, _ = log_density(bke_model, (X, Z), {"tau2": 0.3}, {"lengthscale": 0.7})
    assert float(value) == pytest.approx(float(dist.Gamma(1.0, 1.0).log_prob(0.7)) + float(objective(0.7, 0.3)), rel=1e-12)


def test_model_options_and_bad_inputs(small_problem):
    X, Z = small_problem
    with pytest.warns(UserWarning, match="gamma11"):
        value, trace = log_density(bke_model, (X, Z), {"tau2_prior": "gamma11"}, {"lengthscale": 0.7, "tau2": 0.5})
    assert "tau2" in trace and np.isfinite(float(value))
    _, trace = log_density(bke_model, (X, Z), {"ard": True}, {"lengthscale": np.array([0.7])})
    assert trace["lengthscale"]["value"].shape == (1,)
    with pytest.raises(ValueError, match="tau2 must be positive"):
        log_density(bke_model, (X, Z), {"tau2": 0.0}, {"lengthscale": 0.7})
    with pytest.raises(ValueError, match="tau2_prior"):
        log_density(bke_model, (X, Z), {"tau2_prior": "flat"}, {"lengthscale": 0.7, "tau2": 0.5})
    with pytest.raises(ValueError, match="also points of X"):
        log_density(bke_model, (np.vstack([X, Z[:1]]), Z), {}, {"lengthscale": 0.7})
    with pytest.raises(ValueError, match="backend"):
        run_nuts(bke_model, X, Z, key=jax.random.key(0), backend="stan")
    with pytest.raises(ValueError, match="num_samples"):
        run_nuts(bke_model, X, Z, key=jax.random.key(0), num_samples=0)


def test_both_backends_sample_a_conjugate_posterior():
    """NumPyro and BlackJAX NUTS on mu ~ N(0, 10^2), y_i ~ N(mu, 1): posterior N(sum y / (n + 0.01), 1 / (n + 0.01))."""
    import numpyro

    def model(y):
        mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)

    y = np.random.default_rng(0).normal(2.0, 1.0, 20)
    mean, sd = y.sum() / 20.01, 1 / np.sqrt(20.01)
    for backend in ("numpyro", "blackjax"):
        run = run_nuts(model, y, key=jax.random.key(1), backend=backend, num_chains=2, num_warmup=200,
                       num_samples=250, init_values={"mu": 1.0}, progress_bar=False)
        mu = run.samples["mu"]
        assert mu.shape == (2, 250) and run.diagnostics.divergences == 0 and run.diagnostics.max_rhat < 1.05
        assert isinstance(run.idata, az.InferenceData) and run.idata.sample_stats["diverging"].shape == (2, 250)
        assert abs(mu.mean() - mean) < 4 * sd / np.sqrt(run.diagnostics.min_ess_bulk)
        assert mu.std() == pytest.approx(sd, rel=0.2)
        _check_arviz_output(run, y, backend)


def test_dense_mass_adapts_to_a_correlated_posterior_on_both_backends():
    """x ~ N(0, S), S with correlation 0.99 and scales 1 and 10: a dense metric learns S, so NUTS needs far fewer
    leapfrog steps than with a diagonal one, and both sample the right covariance."""
    import numpyro

    cov = np.array([[1.0, 9.9], [9.9, 100.0]])

    def model():
        numpyro.sample("x", dist.MultivariateNormal(jnp.zeros(2), covariance_matrix=jnp.asarray(cov)))

    for backend in ("numpyro", "blackjax"):
        steps = {}
        for dense in (False, True):
            run = run_nuts(model, key=jax.random.key(2), backend=backend, num_chains=2, num_warmup=200,
                           num_samples=200, progress_bar=False, dense_mass=dense, min_ess=1, rhat_max=np.inf)
            steps[dense] = run.sample_stats["n_steps"].mean()
            if dense:
                x = run.samples["x"].reshape(-1, 2)
                np.testing.assert_allclose(np.cov(x.T), cov, rtol=0.25, atol=0.3)
        assert steps[True] < 0.5 * steps[False], (backend, steps)
    with pytest.raises(TypeError, match="dense_mass"):
        run_nuts(model, key=jax.random.key(2), dense_mass="yes")


def _check_arviz_output(run, y, backend):
    """What arviz users reach for works, and the sample statistics mean what they say."""
    import matplotlib

    matplotlib.use("Agg")
    idata, mu = run.idata, run.samples["mu"]
    assert {"posterior", "sample_stats", "observed_data", "constant_data", "log_likelihood"} <= set(idata.groups())
    stats = idata.sample_stats
    assert {"lp", "energy", "tree_depth", "step_size", "diverging", "n_steps", "acceptance_rate"} <= set(stats)
    log_post = norm.logpdf(mu, 0.0, 10.0) + norm.logpdf(y[None, None, :], mu[..., None], 1.0).sum(-1)
    np.testing.assert_allclose(stats["lp"], log_post, rtol=1e-10)  # lp: the log density at the draw
    assert np.all(stats["energy"].values >= -stats["lp"].values - 1e-10)  # H = potential + kinetic >= -lp
    steps, depth = stats["n_steps"].values, stats["tree_depth"].values
    assert np.all((steps >= 2 ** (depth - 1)) & (steps <= 2**depth - 1)), backend
    step_size = stats["step_size"].values
    assert np.all(step_size > 0) and np.all(step_size == step_size[:, :1])  # adapted in warm-up, then fixed
    np.testing.assert_allclose(idata.log_likelihood["y"], norm.logpdf(y, mu[..., None], 1.0), rtol=1e-10)
    np.testing.assert_array_equal(idata.observed_data["y"], y)
    np.testing.assert_array_equal(idata.constant_data["y"], y)
    assert np.all(np.isfinite(az.bfmi(idata))) and az.bfmi(idata).shape == (2,)
    assert "mu" in az.summary(idata).index
    az.plot_energy(idata)
    assert az.loo(idata).elpd_loo < 0


@pytest.mark.slow  # suite time: test_both_backends_sample_a_conjugate_posterior covers both backends
def test_numpyro_and_blackjax_agree_and_start_from_type2(small_problem):
    X, Z = small_problem
    fit = fit_type2(X, Z)
    runs = {backend: run_nuts(bke_model, X, Z, key=jax.random.key(1), backend=backend, num_chains=2, num_warmup=150,
                              num_samples=250, init_values={"lengthscale": fit.lengthscale}, progress_bar=False)
            for backend in ("numpyro", "blackjax")}
    means, ses = {}, {}
    for backend, run in runs.items():
        log_theta = run.samples["log_lengthscale"]
        assert log_theta.shape == (2, 250)
        assert isinstance(run.idata, az.InferenceData) and "diverging" in run.idata.sample_stats
        assert run.diagnostics.divergences == 0 and run.diagnostics.max_rhat < 1.05
        means[backend] = log_theta.mean()
        ses[backend] = log_theta.std() / np.sqrt(run.diagnostics.min_ess_bulk)
        assert run.draws()["lengthscale"].shape == (500,)
    # posterior means agree within Monte Carlo error, and sit near the type-II optimum
    assert abs(means["numpyro"] - means["blackjax"]) < 4 * np.hypot(ses["numpyro"], ses["blackjax"])
    assert abs(means["numpyro"] - np.log(fit.lengthscale)) < 0.2


def test_diagnostics_warn_on_bad_chains():
    rng = np.random.default_rng(0)
    good = {"x": rng.standard_normal((4, 500))}
    fine = diagnose(az.from_dict(posterior=good, sample_stats={"diverging": np.zeros((4, 500), bool)}))
    assert fine.ok and fine.max_rhat < 1.01 and fine.min_ess_bulk > 1000
    stuck = {"x": rng.standard_normal((4, 500)) + np.arange(4)[:, None]}  # chains disagree
    divergent = np.zeros((4, 500), bool)
    divergent[0, :7] = True
    with pytest.warns(MCMCWarning, match="R-hat") as record:
        bad = diagnose(az.from_dict(posterior=stuck, sample_stats={"diverging": divergent}))
    assert "7 divergent" in str(record[0].message) and bad.divergences == 7 and not bad.ok
    sticky = {"x": np.cumsum(rng.standard_normal((4, 500)), axis=1)}  # random walk: tiny ESS
    with pytest.warns(MCMCWarning, match="effective sample size"):
        diagnose(az.from_dict(posterior=sticky))


def test_run_diagnostics_cover_the_sampled_sites_not_the_deterministic_ones():
    """As NumPyro's summary: a deterministic site is a function of the draws; the max R-hat over 200 of them is
    larger by chance alone and would flag a sampler that mixes well."""
    import numpyro

    def model(y):
        mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
        numpyro.deterministic("ripple", jnp.sin(jnp.arange(1, 201) * mu))
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)

    y = np.random.default_rng(0).normal(2.0, 1.0, 20)
    run = run_nuts(model, y, key=jax.random.key(3), num_chains=2, num_warmup=300, num_samples=300,
                   progress_bar=False, rhat_max=10.0, min_ess=1)
    assert run.samples["ripple"].shape == (2, 300, 200)
    sampled = diagnose(run.idata, var_names=["mu"], warn=False)
    everything = diagnose(run.idata, warn=False)
    assert (run.diagnostics.max_rhat, run.diagnostics.min_ess_bulk) == (sampled.max_rhat, sampled.min_ess_bulk)
    assert everything.max_rhat > sampled.max_rhat and everything.min_ess_bulk < sampled.min_ess_bulk


def test_vector_sites_of_the_models_get_named_dims():
    from bayeskern.inference.nuts import _inference_data

    samples = {"lengthscale": np.ones((2, 5, 3)), "z_val_hat": np.zeros((2, 5, 4, 2)), "other": np.zeros((2, 5, 6))}
    idata = _inference_data(samples, {"lp": np.zeros((2, 5))}, {}, {"X": np.zeros((7, 3))}, {}, "numpyro")
    assert idata.posterior["lengthscale"].dims == ("chain", "draw", "input_dim")  # ARD lengthscales by input dim
    assert idata.posterior["z_val_hat"].dims == ("chain", "draw", "validation_step", "latent_dim")
    assert idata.posterior["other"].dims == ("chain", "draw", "other_dim_0")  # arviz's default elsewhere
    assert "observed_data" not in idata.groups() and idata.constant_data["X"].shape == (7, 3)


def test_pointwise_log_likelihood_skips_factors_and_keeps_the_tempering():
    import numpyro

    from bayeskern.inference.nuts import _observations

    y = np.array([0.3, -1.2, 2.0])

    def model(y):
        mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
        numpyro.factor("penalty", -mu**2)  # a factor term is no observation
        with numpyro.handlers.scale(scale=0.5), numpyro.plate("obs", 3):
            numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)

    mu = np.array([[0.1, -0.4], [0.7, 0.0]])
    observed, loglik = _observations(model, (y,), {}, {"mu": mu}, jax.random.key(0))
    assert set(observed) == set(loglik) == {"y"}
    np.testing.assert_array_equal(observed["y"], y)
    np.testing.assert_allclose(loglik["y"], 0.5 * norm.logpdf(y, mu[..., None], 1.0), rtol=1e-12)
    assert _observations(lambda: numpyro.factor("f", 1.0), (), {}, {"mu": mu}, jax.random.key(0)) == ({}, {})


def _normal_model(y):
    import numpyro

    mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
    numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


def test_chain_methods_run_the_same_chains_and_time_the_phases():
    """Each chain's transitions depend only on its key: one thread per chain, one chain after another and the chains
    in lockstep under vmap give the same draws; the timings split warm-up from sampling."""
    y = np.random.default_rng(3).normal(1.0, 1.0, 30)
    runs = {method: run_nuts(_normal_model, y, key=jax.random.key(4), num_chains=3, num_warmup=100, num_samples=130,
                             chain_method=method, progress_bar=False) for method in ("parallel", "sequential",
                                                                                    "vectorized")}
    np.testing.assert_array_equal(runs["parallel"].samples["mu"], runs["sequential"].samples["mu"])
    # the batched program rounds differently from the unbatched one, and 230 transitions carry that along (up to
    # 4e-9 relative at LLVM level 0, 1e-10 at XLA's default level); another chain's key would differ by O(1)
    np.testing.assert_allclose(runs["vectorized"].samples["mu"], runs["parallel"].samples["mu"], rtol=1e-7)
    for run in runs.values():
        assert run.samples["mu"].shape == (3, 130)   # 130 = a full chunk of 100 and one of 30
        t = run.timings
        assert set(t) == {"warmup", "sampling", "total"} and 0 < t["sampling"] and t["warmup"] + t["sampling"] <= t["total"]
        assert t["total"] == run.wall_time
    with pytest.warns(MCMCWarning):   # no warm-up: step size 1 on a posterior of sd 0.18 diverges
        no_warmup = run_nuts(_normal_model, y, key=jax.random.key(4), num_chains=2, num_warmup=0, num_samples=5,
                             progress_bar=False)
    assert no_warmup.samples["mu"].shape == (2, 5) and no_warmup.timings["warmup"] < no_warmup.timings["total"]


def _failing_model(y):
    raise ValueError("the model refuses these data")


def test_a_process_worker_runs_the_sequential_chains(monkeypatch):
    """chain_method="processes" with one worker (one usable core): both chains in it, the draws of "sequential"."""
    import bayeskern._workers as workers

    core = workers.usable_cores()[0]
    monkeypatch.setattr(workers, "usable_cores", lambda: [core])
    y = np.random.default_rng(3).normal(1.0, 1.0, 30)
    runs = [run_nuts(_normal_model, y, key=jax.random.key(4), num_chains=2, num_warmup=30, num_samples=40,
                     chain_method=method, progress_bar=False, rhat_max=np.inf, min_ess=1)
            for method in ("processes", "sequential")]
    np.testing.assert_array_equal(runs[0].samples["mu"], runs[1].samples["mu"])
    np.testing.assert_array_equal(runs[0].log_likelihood["y"], runs[1].log_likelihood["y"])


def _start_time(job, report, stop):
    return time.time()


def test_worker_processes_boot_at_once():
    """Both workers start before either is sent its job (writing a job larger than a pipe's buffer, as a model's data
    are, waits for the worker's boot): on one core they begin their jobs within a fraction of a boot of each other;
    started one after another, the second would begin a whole boot (importing JAX) after the first."""
    import bayeskern._workers as workers

    core = workers.usable_cores()[0]
    began = time.time()
    starts, interrupted = workers.run_pinned(_start_time, [bytes(2**20)] * 2, [core, core], lambda n: None)
    assert not interrupted and abs(starts[1] - starts[0]) < 0.3 * (min(starts) - began)


@pytest.mark.slow  # suite time: three worker processes start and compile on one core (about 25 s)
def test_processes_run_the_sequential_chains_in_pinned_workers(monkeypatch):
    """chain_method="processes": two worker processes (both on this test's core), three chains shared (0, 2) and
    (1,): the draws and statistics of the sequential run with the same key, in chain order; the float64 setting
    travels to the workers; a worker's error surfaces as it was raised (one worker, on one core)."""
    import bayeskern._workers as workers

    core = workers.usable_cores()[0]
    monkeypatch.setattr(workers, "usable_cores", lambda: [core, core])
    y = np.random.default_rng(3).normal(1.0, 1.0, 30)
    runs = {method: run_nuts(_normal_model, y, key=jax.random.key(4), num_chains=3, num_warmup=60, num_samples=130,
                             chain_method=method, progress_bar=False, rhat_max=np.inf, min_ess=1)
            for method in ("processes", "sequential")}
    assert runs["processes"].samples["mu"].dtype == np.float64 and runs["processes"].samples["mu"].shape == (3, 130)
    np.testing.assert_array_equal(runs["processes"].samples["mu"], runs["sequential"].samples["mu"])
    for name, value in runs["sequential"].sample_stats.items():
        np.testing.assert_array_equal(runs["processes"].sample_stats[name], value)
    np.testing.assert_array_equal(runs["processes"].log_likelihood["y"], runs["sequential"].log_likelihood["y"])
    t = runs["processes"].timings
    assert 0 < t["warmup"] and 0 < t["sampling"] and t["warmup"] + t["sampling"] <= t["total"]
    monkeypatch.setattr(workers, "usable_cores", lambda: [core])
    with pytest.raises(ValueError, match="the model refuses these data"):
        run_nuts(_failing_model, y, key=jax.random.key(4), num_chains=2, chain_method="processes",
                 progress_bar=False)


def test_processes_refuse_what_workers_cannot_run():
    y = np.zeros(5)
    with pytest.raises(ValueError, match="chain_method='processes' runs NumPyro's sampler"):
        run_nuts(_normal_model, y, key=jax.random.key(0), backend="blackjax", chain_method="processes")

    def model(y):
        pass

    model.__module__ = "__main__"   # as a function of a script or a notebook
    with pytest.raises(TypeError, match="define it in an importable module"):
        run_nuts(model, y, key=jax.random.key(0), chain_method="processes", progress_bar=False)
    with pytest.raises(TypeError, match="pickles"):
        run_nuts(_model_with_an_option, y, key=jax.random.key(0), chain_method="processes", progress_bar=False,
                 option=lambda: None)


def _model_with_an_option(y, option=None):
    _normal_model(y)


@pytest.fixture
def no_kept_samplers(monkeypatch):
    """No sampler kept from an earlier test: this test's calls compile as a first call does."""
    import bayeskern.inference.nuts as nuts

    for name in ("_SAMPLERS", "_OBSERVATIONS"):
        monkeypatch.setattr(nuts, name, type(getattr(nuts, name))())


def test_parallel_chains_share_one_compilation_of_each_program(caplog, no_kept_samplers):
    """The chunk program is compiled once before the chain threads start (threads calling a jitted function for the
    first time together would each compile it), and the initial states come from one program, split inside it."""
    y = np.random.default_rng(5).normal(size=20)
    with jax.log_compiles(True), caplog.at_level("WARNING"):
        run = run_nuts(_normal_model, y, key=jax.random.key(6), num_chains=3, num_warmup=50, num_samples=50,
                       chain_method="parallel", progress_bar=False, rhat_max=10.0, min_ess=1)
    compiled = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Compiling jit(")]
    assert sum(m.startswith("Compiling jit(advance)") for m in compiled) == 1, compiled
    assert sum(m.startswith("Compiling jit(initial)") for m in compiled) == 1, compiled
    assert not any(m.startswith(("Compiling jit(dynamic_slice)", "Compiling jit(squeeze)")) for m in compiled)
    assert run.samples["mu"].shape == (3, 50)


def _positive_model(y, scale=1.0):
    """Needs its data concrete while traced (a check in NumPy)."""
    import numpyro

    if np.any(np.asarray(y) <= 0):
        raise ValueError("y must be positive")
    mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
    numpyro.sample("y", dist.LogNormal(mu, scale), obs=y)


def _compiled(caplog, run):
    caplog.clear()
    with jax.log_compiles(True), caplog.at_level("WARNING"):
        result = run()
    return result, [r.getMessage().split(" ")[1] for r in caplog.records if r.getMessage().startswith("Compiling ")]


def test_a_second_call_on_data_of_the_same_shapes_reuses_the_compiled_sampler(caplog, no_kept_samplers):
    """Data and start values are arguments of the kept programs, not constants: a call on other data of the same
    shapes compiles nothing of the sampler and draws what it draws in a fresh process; other shapes or options
    compile anew; a model that needs concrete data is sampled with them closed over, and its checks still run."""
    import bayeskern.inference.nuts as nuts

    options = dict(num_chains=2, num_warmup=60, num_samples=40, progress_bar=False, rhat_max=np.inf, min_ess=1)
    rng = np.random.default_rng(11)
    y1, y2 = rng.normal(1.0, 1.0, 30), rng.normal(-2.0, 1.0, 30)

    def run(y, start, **more):
        return run_nuts(_normal_model, y, key=jax.random.key(3), init_values={"mu": start}, **{**options, **more})

    _, first = _compiled(caplog, lambda: run(y1, 0.5))
    assert {"jit(initial)", "jit(advance)", "jit(constrain)", "jit(<lambda>)"} <= set(first), first
    second, again = _compiled(caplog, lambda: run(y2, -1.0))
    assert not {"jit(initial)", "jit(advance)", "jit(constrain)", "jit(<lambda>)"} & set(again), again
    for name in ("_SAMPLERS", "_OBSERVATIONS"):
        getattr(nuts, name).clear()
    fresh = run(y2, -1.0)
    for group in ("samples", "sample_stats", "log_likelihood"):
        for site, value in getattr(fresh, group).items():
            np.testing.assert_array_equal(getattr(second, group)[site], value, err_msg=f"{group} {site}")
    assert abs(second.samples["mu"].mean() - y2.mean()) < 0.6
    _, longer = _compiled(caplog, lambda: run(np.r_[y2, 0.0], -1.0))
    assert "jit(initial)" in longer and "jit(advance)" in longer
    _, other = _compiled(caplog, lambda: run(y2, -1.0, num_chains=3))
    assert "jit(initial)" in other

    unhashable = {"option": {1, 2}}   # a set: not a pytree and not hashable, so nothing is kept for such calls
    for _ in range(2):
        _, each = _compiled(caplog, lambda: run_nuts(_model_with_an_option, y1, key=jax.random.key(3), **options,
                                                     **unhashable))
        assert "jit(initial)" in each

    positive = np.exp(y1)
    kept = run_nuts(_positive_model, positive, key=jax.random.key(3), **options)
    assert abs(kept.samples["mu"].mean() - y1.mean()) < 0.6 and nuts._SAMPLERS[next(reversed(nuts._SAMPLERS))] is None
    with pytest.raises(ValueError, match="y must be positive"):
        run_nuts(_positive_model, -positive, key=jax.random.key(3), **options)


def test_ctrl_c_while_compiling_raises_interrupted_without_draws(monkeypatch):
    import bayeskern
    import bayeskern.inference.nuts as nuts

    def pressed(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(nuts, "_programs", pressed)
    with pytest.raises(bayeskern.Interrupted, match="during warm-up") as stopped:
        run_nuts(_normal_model, np.zeros(5), key=jax.random.key(0), num_chains=2, progress_bar=False)
    assert stopped.value.partial is None


_INTERRUPTED_RUNS = """
import os, signal, threading, jax, numpy as np, numpyro, numpyro.distributions as dist, bayeskern as bk
from bayeskern.inference import run_nuts
bk.enable_x64()
signal.signal(signal.SIGINT, signal.default_int_handler)   # also when started from a job that ignores SIGINT
calls, fired = [0], threading.Event()

def count(_):   # one model evaluation done; past the limit, press Ctrl-C once
    calls[0] += 1
    if calls[0] > LIMIT[0] and not fired.is_set():
        fired.set()
        os.kill(os.getpid(), signal.SIGINT)

def model(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
    jax.debug.callback(count, mu)
    numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)

y = np.random.default_rng(0).normal(size=20)
for warmup, samples, limit in ((10**6, 10, 300), (20, 10**6, 3000)):
    calls[0], LIMIT = 0, [limit]
    fired.clear()
    try:
        run_nuts(model, y, key=jax.random.key(1), num_chains=2, num_warmup=warmup, num_samples=samples,
                 max_tree_depth=3, progress_bar=False)
        print("finished")
    except bk.Interrupted as e:
        p = e.partial
        print("partial", None if p is None else (p.samples["mu"].shape, p.sample_stats["lp"].shape,
                                                   bool(np.isfinite(p.samples["mu"]).all())), str(e))
"""


def test_ctrl_c_stops_nuts_and_keeps_the_draws_so_far():
    """A SIGINT during warm-up raises Interrupted with nothing; during sampling, with an MCMCResult of the draws every
    chain completed (whole chunks of 100). Run in a subprocess: the signal goes to the whole process."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _INTERRUPTED_RUNS], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, second = proc.stdout.strip().splitlines()
    assert first.startswith("partial None") and "during warm-up" in first
    shape = eval(second.split(" ", 1)[1].rsplit(") NUTS", 1)[0] + ")")[0]
    assert shape[0] == 2 and 100 <= shape[1] < 10**6 and shape[1] % 100 == 0, second
    assert "True" in second and "the draws so far are in .partial" in second


_INTERRUPTED_PROCESSES = """
import os, signal, threading, jax, numpy as np, bayeskern as bk
from bayeskern.inference import run_nuts
bk.enable_x64()
signal.signal(signal.SIGINT, signal.default_int_handler)   # also when started from a job that ignores SIGINT
calls, fired = [0], threading.Event()
y = np.random.default_rng(0).normal(size=20)
# two workers (on this process's first core); Ctrl-C here once 1240 transitions are done
import bayeskern.inference.nuts as nuts, bayeskern._workers as workers
from test_bke_nuts import _normal_model   # importable by the workers (this script's functions are not)
core = workers.usable_cores()[0]
workers.usable_cores = lambda: [core, core]

class Bar(nuts.tqdm):   # the progress the workers report (a disabled bar counts nothing itself)
    def update(self, n=1):
        calls[0] += n
        if calls[0] >= 1240 and not fired.is_set():
            fired.set()
            os.kill(os.getpid(), signal.SIGINT)

nuts.tqdm = Bar
try:
    run_nuts(_normal_model, y, key=jax.random.key(1), num_chains=2, num_warmup=20, num_samples=10**6,
             max_tree_depth=3, chain_method="processes", progress_bar=False)
    print("finished")
except bk.Interrupted as e:
    p = e.partial
    print("processes", *(() if p is None else p.samples["mu"].shape), "|", str(e))
"""


@pytest.mark.slow  # suite time: two worker processes start and compile on one core (about 20 s)
def test_ctrl_c_stops_the_worker_processes_and_keeps_their_draws():
    """chain_method="processes": a SIGINT in the parent stops the workers at their next chunk; they send what they
    have, both chains cut to the whole chunks they share."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _INTERRUPTED_PROCESSES], capture_output=True, text=True,
                          timeout=300, env={**os.environ,
                                            "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), *sys.path])})
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = proc.stdout.strip()
    shape, message = line.removeprefix("processes").split("|")
    chains, draws = (int(n) for n in shape.split())
    assert chains == 2 and 100 <= draws < 10**6 and draws % 100 == 0, line
    assert "the draws so far are in .partial" in line


def test_an_error_in_one_chain_stops_the_others(monkeypatch):
    """The progress bar fails once, after one chain's first chunk: the error surfaces at once, not after the
    other chain's 10^7 warm-up transitions (minutes)."""
    import time

    import bayeskern.inference.nuts as nuts

    class Bar(nuts.tqdm):
        failed = False

        def update(self, n=1):   # fails once, in whichever chain reports first; the other chain goes on
            if not Bar.failed:
                Bar.failed = True
                raise RuntimeError("display failed")
            return super().update(n)

    monkeypatch.setattr(nuts, "tqdm", Bar)
    y = np.random.default_rng(5).normal(size=10)
    start = time.perf_counter()
    with pytest.raises(RuntimeError, match="display failed"):
        run_nuts(_normal_model, y, key=jax.random.key(0), num_chains=2, num_warmup=10**7, num_samples=10)
    assert time.perf_counter() - start < 60
