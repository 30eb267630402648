"""NUTS for NumPyro models through NumPyro or BlackJAX, returning arviz InferenceData and diagnostics."""

import functools
import inspect
import time

import jax
import jax.numpy as jnp
import numpy as np
from numpyro import handlers
from numpyro.distributions.distribution import Unit
from numpyro.infer import MCMC, NUTS, init_to_uniform, init_to_value
from numpyro.infer.util import initialize_model
from tqdm.auto import tqdm

from bayeskern._validation import check_count, check_key
from bayeskern.fitted import fitted, static

from ._arviz import az
from .diagnostics import Diagnostics, diagnose

__all__ = ["MCMCResult", "run_nuts"]

_BACKENDS = ("numpyro", "blackjax")
_CHAIN_METHODS = ("vectorized", "sequential", "parallel")
_CHUNK = 100
# arviz dimension names of the vector sites of bayeskern's models (other sites get arviz's default names)
_SITE_DIMS = {"lengthscale": ("input_dim",), "log_lengthscale": ("input_dim",),
              "z_val_hat": ("validation_step", "latent_dim"), "z_val": ("validation_step", "latent_dim")}


@fitted
class MCMCResult:
    """Posterior draws of one NUTS run, with everything arviz needs.

    ``draws()`` pools the chains; ``idata`` is the same run as an arviz ``InferenceData`` (posterior with named
    dimensions, sample stats, observed and constant data, pointwise log likelihood); ``.save(path)`` and
    :func:`bayeskern.load` round-trip it.

    Attributes:
        samples: site name -> array (chains, draws, ...) on the constrained scale, deterministic sites included.
        sample_stats: per-transition statistics (chains, draws): ``lp`` (log density on the unconstrained scale),
            ``energy`` (Hamiltonian), ``tree_depth``, ``n_steps`` (leapfrog steps), ``step_size``,
            ``diverging``, ``acceptance_rate``.
        observed_data: the model's observed sites.
        constant_data: the array arguments the model was called with.
        log_likelihood: observed site -> (chains, draws, observations...) pointwise log likelihoods, scaled as they
            enter the posterior (empty when the model has no observed sites).
        diagnostics: :class:`Diagnostics` of the run.
        wall_time: seconds for warm-up and sampling.
        backend: ``"numpyro"`` or ``"blackjax"``.
    """

    samples: dict
    sample_stats: dict
    observed_data: dict
    constant_data: dict
    log_likelihood: dict
    diagnostics: Diagnostics
    wall_time: float
    backend: str = static()

    def draws(self) -> dict:
        """Samples with chains and draws flattened: site -> (chains * draws, ...)."""
        return {k: v.reshape((-1,) + v.shape[2:]) for k, v in self.samples.items()}

    @functools.cached_property
    def idata(self):
        """arviz ``InferenceData`` with groups posterior, sample_stats, observed_data, constant_data and (when
        the model has observed sites) log_likelihood; vector sites of bayeskern's models carry named dims."""
        return _inference_data(self.samples, self.sample_stats, self.observed_data, self.constant_data,
                               self.log_likelihood, self.backend)


def _site_dims(arrays: dict, leading: int) -> dict:
    return {name: list(_SITE_DIMS[name][:np.ndim(a) - leading]) for name, a in arrays.items()
            if name in _SITE_DIMS and 0 < np.ndim(a) - leading <= len(_SITE_DIMS[name])}


def _inference_data(samples, stats, observed, constant, loglik, backend):
    dims = _site_dims(samples, 2) | _site_dims(observed, 0) | _site_dims(loglik, 2)
    groups = dict(posterior=samples, sample_stats=stats, observed_data=observed or None,
                  constant_data=constant or None, log_likelihood=loglik or None)
    return az.from_dict(**{k: v for k, v in groups.items() if v is not None}, dims=dims,
                        attrs={"sampler": f"NUTS ({backend})"})


def run_nuts(model, *model_args, key, backend: str = "numpyro", num_chains: int = 4, num_warmup: int = 1000,
             num_samples: int = 1000, init_values: dict | None = None, target_accept: float = 0.8,
             max_tree_depth: int = 10, progress_bar: bool = True, rhat_max: float = 1.01, min_ess=None,
             chain_method: str = "vectorized", dense_mass: bool = False, **model_kwargs) -> MCMCResult:
    """Sample a NumPyro ``model(*model_args, **model_kwargs)`` with NUTS and diagnose the run.

    ``backend="numpyro"``: ``MCMC(NUTS)`` with Stan-style warm-up (step size and mass matrix).
    ``"blackjax"``: ``blackjax.window_adaptation`` + ``blackjax.nuts`` on the same potential (NumPyro's
    unconstrained log density). Without ``init_values`` each chain starts uniformly in (-2, 2) on the
    unconstrained scale, as Stan does. Models with observed sites also get their pointwise log likelihood (one
    more model evaluation per draw), so ``az.loo`` / ``az.compare`` can rank models.

    Args:
        model: a NumPyro model function, e.g. :func:`bayeskern.models.bke_model`.
        *model_args: positional arguments of the model (data). A :class:`~bayeskern.sharding.RowShards` (rows
            spread over processes) works with the NumPyro backend: every process runs this call with the same key,
            the sampler is compiled with the data as arguments (no progress bar) and all get the same draws.
        key: PRNG key.
        backend: ``"numpyro"`` or ``"blackjax"``.
        num_chains: number of chains (>= 1).
        num_warmup: warm-up iterations per chain (>= 0).
        num_samples: kept draws per chain (>= 1).
        init_values: constrained site values (e.g. a type-II fit) at which every chain starts (``init_to_value``).
        target_accept: target acceptance probability of the step-size adaptation, in (0, 1).
        max_tree_depth: maximum tree depth of NUTS.
        progress_bar: show progress.
        rhat_max: warn when the split R-hat exceeds it.
        min_ess: warn when the bulk or tail ESS is below it (default 100 per chain).
        chain_method: NumPyro backend: ``"vectorized"`` (default) runs the chains in lockstep under ``vmap`` on one
            device, cheap for small models; ``"sequential"`` runs them one after another, faster for costly,
            branchy gradients (such as the kernel Bayes filter's: under ``vmap`` both sides of every ``lax.cond``
            are evaluated and each step waits for the slowest chain); ``"parallel"`` uses one device per chain.
            BlackJAX chains are always vectorised. ``"parallel"`` needs as many devices as chains; on a CPU make
            them before JAX starts with ``numpyro.set_host_device_count(num_chains)`` (one chain per core),
            otherwise NumPyro draws the chains sequentially and says so.
        dense_mass: adapt a dense mass matrix (the posterior covariance) instead of a diagonal one: fewer leapfrog
            steps for correlated parameters, worth it when there are few of them (a few tens at most).
        **model_kwargs: keyword arguments of the model.

    Returns:
        MCMCResult: ``samples`` (site -> (chains, draws, ...)), ``sample_stats``, ``diagnostics``, wall time;
        ``draws()`` pools the chains and ``idata`` is the arviz ``InferenceData``.

    Raises:
        ValueError: for an unknown backend or chain method, counts out of range, or target_accept outside (0, 1).

    Warns:
        MCMCWarning: split R-hat > ``rhat_max``, low ESS or divergent transitions.

    Examples:
        >>> import jax, numpy as np, numpyro, numpyro.distributions as dist
        >>> from bayeskern.inference import run_nuts
        >>> def model(y):
        ...     mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
        ...     numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)
        >>> y = np.random.default_rng(0).normal(2.0, 1.0, 100)
        >>> mcmc = run_nuts(model, y, key=jax.random.key(0), num_chains=2, num_warmup=300, num_samples=500,
        ...                 progress_bar=False)
        >>> mu = mcmc.draws()["mu"]                       # (1000,) pooled draws; posterior N(mean(y), 1/100)
        >>> bool(abs(mu.mean() - y.mean()) < 0.05), mcmc.diagnostics.max_rhat < 1.01
        (True, True)
    """
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")
    check_key(key)
    for name, value in (("num_chains", num_chains), ("num_warmup", num_warmup), ("num_samples", num_samples)):
        check_count(value, name, minimum=0 if name == "num_warmup" else 1)
    if not 0 < target_accept < 1:
        raise ValueError(f"target_accept must lie in (0, 1), got {target_accept}")
    if not isinstance(dense_mass, bool):
        raise TypeError(f"dense_mass must be True or False, got {dense_mass!r}")
    if chain_method not in _CHAIN_METHODS:
        raise ValueError(f"chain_method must be one of {_CHAIN_METHODS}, got {chain_method!r}")
    if init_values is None:
        init = init_to_uniform(radius=2.0)
    else:   # strongly typed arrays: a weakly typed start (a Python float) would make the sampler compile twice
        init = init_to_value(values={k: jnp.asarray(np.asarray(v)) for k, v in init_values.items()})
    start = time.perf_counter()
    if backend == "blackjax" and any(_spans_processes(leaf) for leaf in jax.tree.leaves((model_args, model_kwargs))):
        raise ValueError("backend='blackjax' needs the data on one process; with rows spread over processes "
                         "(RowShards) use backend='numpyro'")
    if backend == "numpyro":
        samples, stats = _run_numpyro(model, model_args, model_kwargs, key, init, num_chains, num_warmup, num_samples,
                                      target_accept, max_tree_depth, progress_bar, chain_method, dense_mass)
    else:
        samples, stats = _run_blackjax(model, model_args, model_kwargs, key, init, num_chains, num_warmup, num_samples,
                                       target_accept, max_tree_depth, progress_bar, dense_mass)
    samples = {k: np.asarray(v) for k, v in samples.items()}  # waits for the device (dispatch is asynchronous)
    stats = {k: np.asarray(v) for k, v in stats.items()}
    wall = time.perf_counter() - start
    observed, loglik = _observations(model, model_args, model_kwargs, samples, key)
    diagnostics = diagnose(az.from_dict(posterior=samples, sample_stats=stats), rhat_max=rhat_max, min_ess=min_ess)
    return MCMCResult(samples, stats, observed, _constant_data(model, model_args, model_kwargs), loglik, diagnostics,
                      wall, backend)


def _constant_data(model, args, kwargs) -> dict:
    """The array arguments of the model call, by parameter name (fields of a NamedTuple argument as name_field)."""
    bound = inspect.signature(model).bind(*args, **kwargs).arguments  # the call NUTS just made, so it binds
    out = {}
    for name, value in bound.items():
        parts = value._asdict().items() if hasattr(value, "_asdict") else [("", value)]
        for field, part in parts:
            if isinstance(part, (np.ndarray, jax.Array)) and np.ndim(part) >= 1 and not _spans_processes(part):
                out[f"{name}_{field}" if field else name] = np.asarray(part)
    return out


def _observations(model, args, kwargs, samples, key):
    """(observed site -> value, observed site -> pointwise log likelihood (chains, draws, ...)).

    Factor terms (``numpyro.factor``, e.g. the BKE pseudolikelihood) are not observations. Each pointwise term is
    scaled as it enters the posterior (``numpyro.handlers.scale``, e.g. the KBF model's tempering tau). The model is
    traced abstractly first (no arithmetic); only models with observed sites are compiled, once, and mapped over
    the draws sequentially.
    """
    def observations(params):
        trace = handlers.trace(handlers.seed(handlers.substitute(model, data=params), key)).get_trace(*args, **kwargs)
        sites = {name: site for name, site in trace.items()
                 if site["type"] == "sample" and site["is_observed"] and not isinstance(site["fn"], Unit)}
        loglik = {name: (1.0 if site["scale"] is None else site["scale"]) * site["fn"].log_prob(site["value"])
                  for name, site in sites.items()}
        return {name: site["value"] for name, site in sites.items()}, loglik

    first = {k: v[0, 0] for k, v in samples.items()}
    if not jax.eval_shape(observations, first)[0]:
        return {}, {}
    chains, draws = next(iter(samples.values())).shape[:2]
    flat = {k: v.reshape((chains * draws,) + v.shape[2:]) for k, v in samples.items()}
    observed, loglik = jax.jit(lambda p, f: (observations(p)[0], jax.lax.map(lambda d: observations(d)[1], f)))(
        first, flat)
    return ({k: np.asarray(v) for k, v in observed.items()},
            {k: np.asarray(v).reshape((chains, draws) + v.shape[1:]) for k, v in loglik.items()})


def _run_numpyro(model, args, kwargs, key, init, chains, warmup, draws, target_accept, depth, progress_bar,
                 chain_method, dense_mass):
    leaves, tree = jax.tree.flatten((args, kwargs))
    spread = [i for i, leaf in enumerate(leaves) if _spans_processes(leaf)]

    def sample(key, spread_leaves):
        full = list(leaves)
        for i, leaf in zip(spread, spread_leaves):
            full[i] = leaf
        args, kwargs = jax.tree.unflatten(tree, full)
        kernel = NUTS(model, init_strategy=init, target_accept_prob=target_accept, max_tree_depth=depth,
                      dense_mass=dense_mass)
        mcmc = MCMC(kernel, num_warmup=warmup, num_samples=draws, num_chains=chains, chain_method=chain_method,
                    progress_bar=progress_bar and not spread)
        mcmc.run(key, *args, extra_fields=("diverging", "num_steps", "accept_prob", "potential_energy", "energy",
                                            "adapt_state.step_size"), **kwargs)
        return mcmc.get_samples(group_by_chain=True), mcmc.get_extra_fields(group_by_chain=True)

    # data spread over processes cannot be closed over by the sampler's compiled loops: pass it in as arguments
    run = jax.jit(sample) if spread else sample
    samples, extra = run(key, [leaves[i] for i in spread])
    stats = {"lp": -extra["potential_energy"], "energy": extra["energy"], "tree_depth": _tree_depth(extra["num_steps"]),
             "n_steps": extra["num_steps"], "step_size": extra["adapt_state.step_size"],
             "diverging": extra["diverging"], "acceptance_rate": extra["accept_prob"]}
    return samples, stats


def _spans_processes(leaf) -> bool:
    """A global array with rows on other processes' devices (e.g. the values of a RowShards)."""
    return isinstance(leaf, jax.Array) and not leaf.is_fully_addressable


def _tree_depth(num_steps):
    """NUTS tree depth from the leapfrog step count (a depth-j trajectory takes 2^(j-1) to 2^j - 1 steps)."""
    return np.floor(np.log2(np.maximum(np.asarray(num_steps), 1))).astype(np.int64) + 1


def _run_blackjax(model, args, kwargs, key, init, chains, warmup, draws, target_accept, depth, progress_bar,
                  dense_mass):
    import blackjax  # here, not at module import: importing blackjax starts JAX's backend, after which
    from blackjax.adaptation.base import get_filter_adapt_info_fn  # the CPU device count can no longer be set
    keys = jax.random.split(key, chains + 1)
    inits = [initialize_model(k, model, model_args=args, model_kwargs=kwargs, init_strategy=init) for k in keys[1:]]
    potential_fn, postprocess_fn = inits[0].potential_fn, inits[0].postprocess_fn
    z0 = jax.tree.map(lambda *z: jnp.stack(z), *[i.param_info.z for i in inits])

    def logdensity(z):
        return -potential_fn(z)

    adaptation = blackjax.window_adaptation(blackjax.nuts, logdensity, is_mass_matrix_diagonal=not dense_mass,
                                            target_acceptance_rate=target_accept,
                                            adaptation_info_fn=get_filter_adapt_info_fn(), max_num_doublings=depth)

    @jax.jit
    @jax.vmap
    def warm_up(key, z):
        adapted, _ = adaptation.run(key, z, num_steps=warmup)
        return adapted.state, adapted.parameters

    @jax.jit
    @jax.vmap
    def sample_chunk(state, parameters, keys):
        step = blackjax.nuts(logdensity, **{**parameters, "max_num_doublings": depth}).step

        def one(state, k):
            state, info = step(k, state)
            return state, (state.position, {"lp": state.logdensity, "energy": info.energy,
                                            "tree_depth": info.num_trajectory_expansions,
                                            "n_steps": info.num_integration_steps,
                                            "step_size": parameters["step_size"],
                                            "diverging": info.is_divergent, "acceptance_rate": info.acceptance_rate})

        return jax.lax.scan(one, state, keys)

    warm_key, sample_key = jax.random.split(keys[0])
    state, parameters = warm_up(jax.random.split(warm_key, chains), z0)
    # sampling in equal compiled chunks of at most _CHUNK transitions (a progress bar, a bounded compiled-loop
    # length and one compilation: the last chunk may run past `draws`, its extra transitions are dropped)
    num_chunks = -(-draws // _CHUNK)
    chunk = -(-draws // num_chunks)
    step_keys = jax.random.split(sample_key, (chains, num_chunks * chunk))
    traces = []
    for start in tqdm(range(0, num_chunks * chunk, chunk), desc="NUTS (blackjax)", disable=not progress_bar,
                      leave=False):
        state, trace = sample_chunk(state, parameters, step_keys[:, start:start + chunk])
        traces.append(trace)
    positions, stats = jax.tree.map(lambda *a: jnp.concatenate(a, axis=1)[:, :draws], *traces)
    flat = jax.tree.map(lambda a: a.reshape((chains * draws,) + a.shape[2:]), positions)
    constrained = jax.jit(lambda f: jax.lax.map(postprocess_fn, f))(flat)  # sequential: re-runs the model per draw
    samples = jax.tree.map(lambda a: a.reshape((chains, draws) + a.shape[1:]), constrained)
    return samples, stats
