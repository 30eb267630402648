"""NUTS for NumPyro models through NumPyro or BlackJAX, returning arviz InferenceData and diagnostics."""

import collections
import functools
import inspect
import os
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

import jax
import jax.numpy as jnp
import numpy as np
from numpyro import handlers
from numpyro.distributions.distribution import Unit
from numpyro.infer import init_to_uniform, init_to_value
from numpyro.infer.hmc import hmc
from numpyro.infer.util import initialize_model
from tqdm.auto import tqdm

from bayeskern._compile import top_level_jit
from bayeskern._interrupt import Interrupted
from bayeskern._validation import check_count, check_key
from bayeskern.fitted import fitted, static

from bayeskern import _workers
from ._arviz import az
from .diagnostics import Diagnostics, diagnose

__all__ = ["MCMCResult", "run_nuts"]

_BACKENDS = ("numpyro", "blackjax")
_CHAIN_METHODS = ("vectorized", "sequential", "parallel", "processes")
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
        diagnostics: :class:`Diagnostics` of the run's sampled sites (deterministic sites, functions of them, are left
            out as in NumPyro's summary: ``diagnose(result.idata, var_names=[...])`` checks any of them).
        wall_time: seconds for the whole run (compilation, warm-up, sampling, postprocessing).
        timings: seconds by phase: ``warmup`` and ``sampling``, the transitions of each phase alone (the sampler is
            compiled before them; divide an ESS by ``sampling`` for ESS per second of sampling), and ``total``
            (= ``wall_time``).
        backend: ``"numpyro"`` or ``"blackjax"``.
    """

    samples: dict
    sample_stats: dict
    observed_data: dict
    constant_data: dict
    log_likelihood: dict
    diagnostics: Diagnostics
    wall_time: float
    timings: dict
    backend: str = static()

    def draws(self) -> dict:
        """Samples with chains and draws flattened, e.g. for ``bke.witness_posterior(hyper_draws=...)``.

        Returns:
            dict: site name -> (chains * draws, ...) array.
        """
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
             chain_method: str | None = None, dense_mass: bool = False, **model_kwargs) -> MCMCResult:
    """Sample a NumPyro ``model(*model_args, **model_kwargs)`` with NUTS and diagnose the run.

    ``backend="numpyro"``: NumPyro's NUTS kernel with Stan-style warm-up (step size and mass matrix), run in
    compiled chunks of 100 transitions (one dispatch per chunk, not per transition; the progress bar moves per
    chunk).
    ``"blackjax"``: ``blackjax.window_adaptation`` + ``blackjax.nuts`` on the same potential (NumPyro's
    unconstrained log density). Without ``init_values`` each chain starts uniformly in (-2, 2) on the
    unconstrained scale, as Stan does. Models with observed sites also get their pointwise log likelihood (one
    more model evaluation per draw), so ``az.loo`` / ``az.compare`` can rank models.

    With the NumPyro backend the data and ``init_values`` are arguments of the compiled programs: a later call with
    the same model, non-array arguments, options and array shapes reuses them and compiles nothing (the last 8
    such samplers are kept). A model that needs concrete data while traced (NumPy on its arguments) is compiled with
    them as constants, per call; ``chain_method="processes"`` compiles in its new worker processes, every call.

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
        rhat_max: warn when the split R-hat of a sampled site exceeds it.
        min_ess: warn when the bulk or tail ESS of a sampled site is below it (default 100 per chain).
        chain_method: how the chains share the machine. ``None`` (default): ``"parallel"`` on a CPU,
            ``"vectorized"`` on an accelerator. ``"parallel"``: every chain runs alone (no lockstep), as many at once as
            there are CPU cores, each on its own thread (on several devices, chain c on device c mod count).
            ``"vectorized"``: the chains advance in lockstep under ``vmap`` in one program: each transition waits for
            the longest trajectory of any chain, but one kernel launch serves all chains (best on a GPU).
            ``"sequential"``: one chain after another. ``"processes"`` (NumPyro backend, CPU): the chains run in
            worker processes, one per CPU core this process may use (more chains than cores: several chains per
            worker, one after another), each worker pinned to its core. On small models, whose gradient is many
            small operations, one JAX process does not run two chains faster than one (its threads contend), while
            pinned processes each run at full speed; the draws are those of ``"sequential"`` with the same key.
            The model and its arguments are pickled to the workers (a model defined in an importable module) and
            a worker takes a few seconds to start (importing JAX, compiling). Data spread over processes always
            run vectorised.
        dense_mass: adapt a dense mass matrix (the posterior covariance) instead of a diagonal one: fewer leapfrog
            steps for correlated parameters, worth it when there are few of them (a few tens at most).
        **model_kwargs: keyword arguments of the model.

    Returns:
        MCMCResult: ``samples`` (site -> (chains, draws, ...)), ``sample_stats``, ``diagnostics``, wall time;
        ``draws()`` pools the chains and ``idata`` is the arviz ``InferenceData``.

    Raises:
        TypeError: model is not a function.
        ValueError: for an unknown backend or chain method, counts out of range, or target_accept outside (0, 1).
        bayeskern.Interrupted: on Ctrl-C; every chain stops at its next chunk of 100 transitions and ``.partial`` is
            an ``MCMCResult`` of the draws all chains completed (None during warm-up).

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
    if not callable(model):
        raise TypeError(f"model must be a NumPyro model function, got {type(model).__name__}")
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")
    check_key(key)
    for name, value in (("num_chains", num_chains), ("num_warmup", num_warmup), ("num_samples", num_samples)):
        check_count(value, name, minimum=0 if name == "num_warmup" else 1)
    if not 0 < target_accept < 1:
        raise ValueError(f"target_accept must lie in (0, 1), got {target_accept}")
    if not isinstance(dense_mass, bool):
        raise TypeError(f"dense_mass must be True or False, got {dense_mass!r}")
    if chain_method is not None and chain_method not in _CHAIN_METHODS:
        raise ValueError(f"chain_method must be one of {_CHAIN_METHODS}, got {chain_method!r}")
    spread = _any_spread((model_args, model_kwargs))
    if backend == "blackjax" and spread:
        raise ValueError("backend='blackjax' needs the data on one process; with rows spread over processes "
                         "(RowShards) use backend='numpyro'")
    if chain_method == "processes":
        _check_processes(backend, spread)
    if chain_method is None:
        chain_method = "parallel" if jax.default_backend() == "cpu" else "vectorized"
    start = time.perf_counter()
    # traced with the data as they are (the model's own checks see concrete values) before any compiled program
    # takes them as arguments
    deterministic = _deterministic_sites(model, model_args, model_kwargs, key)
    options = (num_chains, num_warmup, num_samples, target_accept, max_tree_depth)
    if chain_method == "processes":   # the workers also evaluate the pointwise log likelihood of their draws
        samples, stats, timings, finished, observations = _run_in_processes(
            model, model_args, model_kwargs, key, init_values, options, dense_mass, progress_bar)
    else:
        run, init = (_run_numpyro, init_values) if backend == "numpyro" else (_run_blackjax,
                                                                               _init_strategy(init_values))
        samples, stats, timings, finished = run(model, model_args, model_kwargs, key, init, *options, progress_bar,
                                                "vectorized" if spread else chain_method, dense_mass)
        observations = None
    if samples is None:
        raise Interrupted(None, "NUTS was interrupted during warm-up: no draws yet")
    sampled = [name for name in samples if name not in deterministic]
    samples = {k: np.asarray(v) for k, v in samples.items()}  # waits for the device (dispatch is asynchronous)
    stats = {k: np.asarray(v) for k, v in stats.items()}
    observed, loglik = observations or _observations(model, model_args, model_kwargs, samples, key)
    timings["total"] = time.perf_counter() - start
    diagnostics = diagnose(az.from_dict(posterior={k: samples[k] for k in sampled}, sample_stats=stats),
                           rhat_max=rhat_max, min_ess=min_ess)
    result = MCMCResult(samples, stats, observed, _constant_data(model, model_args, model_kwargs), loglik,
                        diagnostics, timings["total"], timings, backend)
    if not finished:
        raise Interrupted(result, f"NUTS was interrupted after {stats['lp'].shape[1]} of {num_samples} draws per "
                                  "chain; the draws so far are in .partial")
    return result


def _init_strategy(init_values):
    """Every chain at ``init_values`` (constrained site values), or uniform in (-2, 2) on the unconstrained scale."""
    if init_values is None:
        return init_to_uniform(radius=2.0)
    # strongly typed arrays: a weakly typed start (a Python float) would make the sampler compile twice
    return init_to_value(values={k: jnp.asarray(np.asarray(v)) for k, v in init_values.items()})


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


def _deterministic_sites(model, args, kwargs, key) -> set:
    """Names of the model's ``numpyro.deterministic`` sites (the model traced abstractly: no arithmetic)."""
    names = set()

    def trace_sites():
        trace = handlers.trace(handlers.seed(model, key)).get_trace(*args, **kwargs)
        names.update(name for name, site in trace.items() if site["type"] == "deterministic")
        return 0.0

    jax.eval_shape(trace_sites)
    return names


def _observations(model, args, kwargs, samples, key):
    """(observed site -> value, observed site -> pointwise log likelihood (chains, draws, ...)).

    Factor terms (``numpyro.factor``, e.g. the BKE pseudolikelihood) are not observations. Each pointwise term is
    scaled as it enters the posterior (``numpyro.handlers.scale``, e.g. the KBF model's tempering tau). The model is
    traced abstractly first (no arithmetic); only models with observed sites are compiled, once for every call with
    the same model, static arguments and shapes (as the sampler is), and mapped over the draws sequentially.
    """
    data, signature, rebuild = _data_arguments(args, kwargs, None, traced=not _any_spread((args, kwargs)))
    first = {k: v[0, 0] for k, v in samples.items()}
    try:
        observed = jax.eval_shape(_pointwise(model, rebuild), first, data, key)[0]
    except _TRACER_ERRORS:   # the model needs concrete data: closed over
        data, signature, rebuild = _data_arguments(args, kwargs, None, traced=False)
        observed = jax.eval_shape(_pointwise(model, rebuild), first, data, key)[0]
    if not observed:
        return {}, {}
    cache_key = None if signature is None else (model, signature)
    program = _OBSERVATIONS.get(cache_key)
    if program is None:
        pointwise = _pointwise(model, rebuild)
        program = top_level_jit(lambda p, f, data, key: (pointwise(p, data, key)[0],
                                                         jax.lax.map(lambda d: pointwise(d, data, key)[1], f)))
        if cache_key is not None:
            _keep(_OBSERVATIONS, cache_key, program)
    chains, draws = next(iter(samples.values())).shape[:2]
    flat = {k: v.reshape((chains * draws,) + v.shape[2:]) for k, v in samples.items()}
    observed, loglik = program(first, flat, data, key)
    return ({k: np.asarray(v) for k, v in observed.items()},
            {k: np.asarray(v).reshape((chains, draws) + v.shape[1:]) for k, v in loglik.items()})


def _pointwise(model, rebuild):
    """params, data, key -> (observed site -> value, observed site -> scaled pointwise log likelihood)."""
    def pointwise(params, data, key):
        model_args, model_kwargs, _ = rebuild(data)
        trace = handlers.trace(handlers.seed(handlers.substitute(model, data=params), key)).get_trace(
            *model_args, **model_kwargs)
        sites = {name: site for name, site in trace.items()
                 if site["type"] == "sample" and site["is_observed"] and not isinstance(site["fn"], Unit)}
        loglik = {name: (1.0 if site["scale"] is None else site["scale"]) * site["fn"].log_prob(site["value"])
                  for name, site in sites.items()}
        return {name: site["value"] for name, site in sites.items()}, loglik

    return pointwise


def _keep(cache, key, value):
    """cache[key] = value, the least recently used entries of the OrderedDict cache dropped beyond _KEPT."""
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > _KEPT:
        cache.popitem(last=False)


# The NumPyro sampler's compiled programs, kept across calls: a study that samples one model on many data sets of
# one shape (coverage or power studies, rolling forecasts) compiles once, and a short run spends most of its time
# compiling (BKE lengthscales on 200 points: 5.9 s a first call on one core, 0.45 s a next one). Keyed by the
# model, what is static in its arguments (everything but arrays) and the sampler's options; the compiled programs
# by the shapes.
_SAMPLERS = collections.OrderedDict()
_OBSERVATIONS = collections.OrderedDict()   # the same for the pointwise log likelihood of the draws
_KEPT = 8
_TRACER_ERRORS = (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError,
                  jax.errors.TracerBoolConversionError, jax.errors.TracerIntegerConversionError)


def _data_arguments(args, kwargs, init_values, traced: bool):
    """(data passed to compiled code, what of the call is static (hashable, or None), rebuild(data) -> (args,
    kwargs, init strategy)).

    ``traced``: every array of the call and the start values are arguments of the compiled programs, so that they
    serve every call whose static part and shapes are the same (rows spread over processes cannot be closed over
    at all). Otherwise they are closed over: constants, for models that need concrete values while traced."""
    if not traced:
        init = _init_strategy(init_values)
        return ((), None), None, lambda data: (args, kwargs, init)
    leaves, tree = jax.tree.flatten((args, kwargs))
    dynamic = [i for i, leaf in enumerate(leaves) if isinstance(leaf, (jax.Array, np.ndarray))]
    static = list(leaves)
    for i in dynamic:
        static[i] = None
    start = None if init_values is None else {k: np.asarray(v) for k, v in init_values.items()}
    signature = (tree, tuple((type(leaf), leaf) for leaf in static), None if start is None else tuple(sorted(start)))
    try:   # an unhashable object among the static arguments, or one whose == is not a bool: nothing to share
        hash(signature)
        bool(signature == signature)
    except (TypeError, ValueError):
        signature = None

    def rebuild(data):
        arrays, start = data
        full = list(static)
        for i, leaf in zip(dynamic, arrays):
            full[i] = leaf
        init = init_to_uniform(radius=2.0) if start is None else init_to_value(values=start)
        return *jax.tree.unflatten(tree, full), init

    return ([leaves[i] for i in dynamic], start), signature, rebuild


class _NumPyroSampler:
    """The jitted programs of NumPyro's NUTS for one model, static arguments and options: ``initial(key, data)``
    makes the chain states (as :func:`_drive` groups them), ``advance`` is a chunk of transitions, ``constrain``
    maps draws to the constrained sites; ``compiled`` holds their executables by the shapes of (key, data), the
    last _KEPT shapes."""

    def __init__(self, model, rebuild, chains, warmup, target_accept, depth, chain_method, dense_mass):
        made, self.compiled = {}, collections.OrderedDict()

        def initial(key, data):   # records the kernel and postprocessing that advance and constrain need
            keys = jax.random.split(key, chains)
            model_args, model_kwargs, init = rebuild(data)
            info = initialize_model(keys, model, model_args=model_args, model_kwargs=model_kwargs,
                                    init_strategy=init, dynamic_args=True)
            init_kernel, made["sample"] = hmc(potential_fn_gen=info.potential_fn, algo="NUTS")
            made["postprocess"] = info.postprocess_fn
            structure = [tuple(sorted(info.param_info.z))] if dense_mass else []   # NumPyro's form of dense_mass
            states = jax.vmap(lambda p, k: init_kernel(p, warmup, dense_mass=structure, max_tree_depth=depth,
                                                       target_accept_prob=target_accept, model_args=model_args,
                                                       model_kwargs=model_kwargs, rng_key=k))(info.param_info, keys)
            return _groups(states, chains, chain_method)

        def advance(state, data, steps):
            model_args, model_kwargs, _ = rebuild(data)

            def transition(state):
                return made["sample"](state, model_args, model_kwargs)

            def one(state, j):
                state = jax.lax.cond(j < steps, transition, lambda s: s, state)
                return state, (state.z, {"lp": -state.potential_energy, "energy": state.energy,
                                         "n_steps": state.num_steps, "step_size": state.adapt_state.step_size,
                                         "diverging": state.diverging, "acceptance_rate": state.accept_prob})

            return jax.lax.scan(one, state, jnp.arange(_CHUNK))

        def constrain(z, data):   # sequential over draws: one model evaluation each (deterministic sites)
            model_args, model_kwargs, _ = rebuild(data)
            return jax.lax.map(made["postprocess"](*model_args, **model_kwargs), z)

        self.initial, self.advance, self.constrain = top_level_jit(initial), advance, top_level_jit(constrain)


def _numpyro_sampler(model, args, kwargs, init_values, options, spread: bool):
    """(sampler, data, key in _SAMPLERS or None): a kept sampler for this model, static arguments and options where
    there is one, else a new one (kept when the call has a hashable static part; _SAMPLERS holds None for a model
    found to need its data closed over)."""
    data, signature, rebuild = _data_arguments(args, kwargs, init_values, traced=True)
    key = None if spread or signature is None else (model, signature, options)
    if key is not None and key in _SAMPLERS:
        _SAMPLERS.move_to_end(key)
        if _SAMPLERS[key] is None:
            return *_closed_over(model, args, kwargs, init_values, options), None
        return _SAMPLERS[key], data, key
    sampler = _NumPyroSampler(model, rebuild, *options)
    if key is not None:
        _keep(_SAMPLERS, key, sampler)
    return sampler, data, key


def _closed_over(model, args, kwargs, init_values, options):
    """A sampler with the data closed over (for a model that needs concrete data while it is traced)."""
    data, _, rebuild = _data_arguments(args, kwargs, init_values, traced=False)
    return _NumPyroSampler(model, rebuild, *options), data


def _run_numpyro(model, args, kwargs, key, init_values, chains, warmup, draws, target_accept, depth, progress,
                 chain_method, dense_mass, only=None, stop=None):
    """NumPyro's NUTS kernel (``numpyro.infer.hmc``: Stan-style warm-up of step size and mass matrix), driven in
    compiled chunks of transitions by :func:`_drive` (``only``, ``stop``: see there). The programs are those of a
    kept sampler where the model, static arguments, options and shapes are those of an earlier call."""
    spread = _any_spread((args, kwargs))
    options = (chains, warmup, target_accept, depth, chain_method, dense_mass)
    sampler, data, cache_key = _numpyro_sampler(model, args, kwargs, init_values, options, spread)
    shapes = (jax.typeof(key), *(jax.typeof(leaf) for leaf in jax.tree.leaves(data)))
    kept = sampler.compiled.get(shapes, {})
    _keep(sampler.compiled, shapes, kept)
    if "initial" not in kept:
        try:
            kept["initial"] = sampler.initial.lower(key, data)
        except _TRACER_ERRORS:   # the model needs concrete data: closed over, for this call and the next ones
            if spread:
                raise
            if cache_key is not None:
                _SAMPLERS[cache_key] = None
            sampler, data = _closed_over(model, args, kwargs, init_values, options)
            kept = {"initial": sampler.initial.lower(key, data)}
    z, stats, timings, finished = _drive(sampler.advance, (kept, (key, data)), data, chains, warmup, draws, progress,
                                         chain_method, "NUTS", only, stop)
    if z is None:
        return None, None, timings, finished
    stats["tree_depth"] = _tree_depth(stats["n_steps"])
    return _constrained(sampler.constrain, z, data), stats, timings, finished


def _constrained(constrain, z, data):
    """Constrained sites of the draws z (site -> (chains, draws, ...))."""
    chains, draws = jax.tree.leaves(z)[0].shape[:2]
    flat = jax.tree.map(lambda a: a.reshape((chains * draws,) + a.shape[2:]), z)
    return jax.tree.map(lambda a: np.asarray(a).reshape((chains, draws) + a.shape[1:]), constrain(flat, data))


def _groups(states, chains: int, chain_method: str) -> list:
    """The chain states stacked on axis 0 as :func:`_drive` advances them: [all chains] when vectorised, else one
    state per chain (split inside the compiled program that makes them: no separate slicing programs)."""
    if chain_method == "vectorized":
        return [states]
    return [jax.tree.map(lambda a, c=c: a[c], states) for c in range(chains)]


def _drive(advance, start, data, chains, warmup, draws, progress, chain_method, name, only=None, stop=None):
    """``warmup`` then ``draws`` transitions of every chain, in chunks of ``advance(state, data, steps) -> (state,
    trace)`` (a compiled scan of ``_CHUNK`` transitions of which the first ``steps`` are taken: one compilation).

    ``start = (kept, args)``: ``kept["initial"]`` is the program that makes the chain states (:func:`_groups`) from
    ``args`` (see :func:`_programs`); its run counts as warm-up. ``"vectorized"``: the chains advance in lockstep
    under ``vmap`` (one program; each step waits for the longest trajectory of any chain). Otherwise each chain runs
    alone: ``"parallel"`` on one thread per CPU core (JAX releases the GIL while a chunk runs; with several devices
    chain c runs on device c mod count), ``"sequential"`` one after another. Every chunk is waited for where it is
    dispatched (a thread that instead blocks later, converting the trace, keeps the next chunk waiting: measured 2x
    slower per transition). The phases are timed separately (all chains finish warm-up before sampling starts). A
    Ctrl-C, also while compiling, stops every chain at its next chunk boundary.

    ``progress``: show a progress bar (bool), or a function called with the transitions of each chunk. ``only``:
    run only these chains (a worker process's share of ``"processes"``); ``stop``: an event that stops every chain
    at its next chunk when set (a worker's, set by the parent process; default: one of this call's own).

    Returns (z, stats) of the kept draws with axes (chains, draws, ...), cut to the number of draws every chain
    completed (None when interrupted before any), the timings {"warmup", "sampling"} and whether it finished.
    """
    kept, timings, pool, finished = [], {}, None, False
    stop = threading.Event() if stop is None else stop
    try:
        step, groups, width, made_seconds = _programs(advance, start, data, chains, chain_method)
        if only is not None:
            groups = [groups[c] for c in only]
        kept.extend([] for _ in groups)

        def run(g, total, keep, bar):
            done = 0
            while done < total and not stop.is_set():
                steps = min(_CHUNK, total - done)
                groups[g], trace = jax.block_until_ready(step(g, groups[g], steps))
                if keep:
                    kept[g].append(jax.tree.map(lambda a: np.asarray(a)[:, :steps] if chain_method == "vectorized"
                                                else np.asarray(a)[None, :steps], trace))
                done += steps
                bar.update(steps * width)

        pool = ThreadPoolExecutor(max(1, min(len(groups), os.cpu_count() or 1)) if chain_method == "parallel" else 1)
        bar = _Report(progress) if callable(progress) else tqdm(total=len(groups) * width * (warmup + draws),
                                                                 desc=name, disable=not progress, leave=False)
        with bar:
            for phase, total in (("warmup", warmup), ("sampling", draws)):
                bar.set_description(f"{name} {phase}")
                began = time.perf_counter()
                futures = [pool.submit(run, g, total, phase == "sampling", bar) for g in range(len(groups))]
                for future in wait(futures, return_when=FIRST_EXCEPTION).done:   # the first error, whichever chain
                    future.result()
                for future in futures:
                    future.result()
                timings[phase] = time.perf_counter() - began + (made_seconds if phase == "warmup" else 0.0)
        finished = True
    except KeyboardInterrupt:
        stop.set()
    except BaseException:   # an error in one chain stops the others at their next chunk, then surfaces
        stop.set()
        raise
    finally:
        if pool is not None:
            pool.shutdown(wait=True)   # a running chunk completes (at most _CHUNK transitions per chain)
    return *_cut(kept), timings, finished


class _Report:
    """A stand-in for a progress bar that hands each update to ``report(transitions)``."""

    def __init__(self, report):
        self.update = report

    def set_description(self, description):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _check_processes(backend: str, spread: bool):
    """``chain_method="processes"`` runs NumPyro's sampler on CPU cores, with the data on this process."""
    if backend != "numpyro":
        raise ValueError("chain_method='processes' runs NumPyro's sampler; with backend='blackjax' (whose warm-up "
                         "runs every chain in one program) use another chain_method")
    if spread:
        raise ValueError("chain_method='processes' needs the data on this process; with rows spread over "
                         "processes (RowShards) leave chain_method at its default")
    if jax.default_backend() != "cpu":
        raise ValueError(f"chain_method='processes' runs the chains on CPU cores; on {jax.default_backend()!r} use "
                         "'vectorized' (the default there)")


def _run_in_processes(model, args, kwargs, key, init_values, options, dense_mass, progress_bar):
    """NumPyro NUTS with the chains spread over worker processes (:mod:`bayeskern._workers`), worker w on the w-th
    usable core running chains w, w + W, ... one after another (W workers), each chain with the key and start it has
    under ``"sequential"``. A Ctrl-C here stops every worker at its next chunk; the draws so far come back. Returns
    what :func:`_run_numpyro` returns (the chains in order, the phase timings of the slowest worker) and what
    :func:`_observations` returns for the draws (None without draws)."""
    chains = options[0]
    cores = _workers.usable_cores()
    shares = [tuple(range(w, chains, min(chains, len(cores)))) for w in range(min(chains, len(cores)))]
    if getattr(model, "__module__", None) == "__main__":
        raise TypeError("chain_method='processes' imports the model in its worker processes: define it in an "
                        "importable module, not in the script or notebook that runs")
    with tqdm(total=chains * (options[1] + options[2]), desc="NUTS", disable=not progress_bar, leave=False) as bar:
        parts, interrupted = _workers.run_pinned(
            _chain_worker, [(model, args, kwargs, key, init_values, options, dense_mass, share) for share in shares],
            cores, bar.update)
    timings = {phase: max(part[2].get(phase, 0.0) for part in parts) for phase in ("warmup", "sampling")}
    finished = not interrupted and all(part[3] for part in parts)
    if any(part[0] is None for part in parts):
        return None, None, timings, finished, None
    order = np.argsort([c for share in shares for c in share])   # the chains back in order 0..chains-1
    count = min(part[1]["lp"].shape[1] for part in parts)

    def joined(i):
        return {k: np.concatenate([part[i][k][:, :count] for part in parts])[order] for k in parts[0][i]}

    return joined(0), joined(1), timings, finished, (parts[0][4], joined(5))


def _chain_worker(job, report, stop):
    """A worker's share of ``"processes"``: its chains of the NumPyro sampler, one after another, and the pointwise
    log likelihood of their draws. Returns (samples, stats, timings, finished, observed, loglik)."""
    model, args, kwargs, key, init_values, options, dense_mass, share = job
    samples, stats, timings, finished = _run_numpyro(model, args, kwargs, key, init_values, *options, report,
                                                     "sequential", dense_mass, share, stop)
    if samples is None:
        return samples, stats, timings, finished, None, None
    return samples, stats, timings, finished, *_observations(model, args, kwargs, samples, key)


def _programs(advance, start, data, chains, chain_method):
    """Compile the chunk program and the initial-state program and make the chain states. ``start = (kept,
    args)``: ``kept["initial"]`` is the initial-state program (lowered, or compiled by an earlier call), to be called
    on ``args``; the compiled programs are left in ``kept`` for the next call with the same shapes.

    The two compile at once (the initial-state program on another thread: XLA releases the GIL; together they take
    about two thirds of their sum on two cores). The chunk is compiled once, before any chain thread calls it
    (threads that call a jitted function for the first time together each compile it). Returns (step(g, state,
    steps) -> (state, trace), the chain groups, chains per group, seconds to make the states)."""
    kept, args = start
    spread = _any_spread(data)

    def make_states(initial):
        began = time.perf_counter()
        return list(jax.block_until_ready(initial(*args))), time.perf_counter() - began

    with ThreadPoolExecutor(1) as compiling:
        initial = kept["initial"]
        pending = compiling.submit(initial.compile) if isinstance(initial, jax.stages.Lowered) else None
        made = make_states(pending.result() if pending else initial) if spread else None   # rows over processes:
        like = made[0] if spread else initial.out_info                                      # lower on the states
        devices = jax.local_devices()
        if "step" not in kept:
            if chain_method == "vectorized":
                vectorised = top_level_jit(jax.vmap(advance, in_axes=(0, None, None)))
                kept["step"] = vectorised.lower(like[0], data, _CHUNK).compile()
            elif len(devices) == 1:
                kept["step"] = top_level_jit(advance).lower(like[0], data, _CHUNK).compile()
            else:   # several devices: one compilation per device, on first use
                kept["step"] = top_level_jit(advance)
        if chain_method == "vectorized":
            def step(g, state, steps):
                return kept["step"](state, data, steps)
        else:
            def step(g, state, steps):
                return kept["step"](jax.device_put(state, devices[g % len(devices)]), data, steps)
        if pending is not None:
            kept["initial"] = pending.result()
        groups, seconds = made or make_states(kept["initial"])
    return step, groups, chains if chain_method == "vectorized" else 1, seconds


def _cut(kept):
    """Concatenate the kept chunk traces ((chains of group, steps, ...) each) of every chain group: the draws of every
    chain up to the fewest any chain completed, chains on axis 0; (None, None) when there are none."""
    if not kept or not all(kept):
        return None, None
    per_group = [jax.tree.map(lambda *a: np.concatenate(a, axis=1), *traces) for traces in kept]
    count = min(jax.tree.leaves(g)[0].shape[1] for g in per_group)
    return jax.tree.map(lambda *a: np.concatenate([x[:, :count] for x in a], axis=0), *per_group)


def _any_spread(tree) -> bool:
    return any(_spans_processes(leaf) for leaf in jax.tree.leaves(tree))


def _spans_processes(leaf) -> bool:
    """A global array with rows on other processes' devices (e.g. the values of a RowShards)."""
    return isinstance(leaf, jax.Array) and not leaf.is_fully_addressable


def _tree_depth(num_steps):
    """NUTS tree depth from the leapfrog step count (a depth-j trajectory takes 2^(j-1) to 2^j - 1 steps)."""
    return np.floor(np.log2(np.maximum(np.asarray(num_steps), 1))).astype(np.int64) + 1


def _run_blackjax(model, args, kwargs, key, init, chains, warmup, draws, target_accept, depth, progress,
                  chain_method, dense_mass):
    """``blackjax.window_adaptation`` (one compiled warm-up per chain, vectorised) and ``blackjax.nuts`` on NumPyro's
    unconstrained log density, sampled in chunks by :func:`_drive`."""
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

    @top_level_jit
    def warm_up(key, z0):   # -> the chains' (state, parameters, key) as _drive groups them
        warm_key, sample_key = jax.random.split(key)
        warm_keys, sample_keys = jax.random.split(warm_key, chains), jax.random.split(sample_key, chains)

        def one(key, z):
            adapted, _ = adaptation.run(key, z, num_steps=warmup)
            return adapted.state, adapted.parameters

        return _groups((*jax.vmap(one)(warm_keys, z0), sample_keys), chains, chain_method)

    def advance(carry, data, steps):
        state, parameters, key = carry
        kernel = blackjax.nuts(logdensity, **{**parameters, "max_num_doublings": depth})

        def one(carry, j):
            state, key = carry
            key, k = jax.random.split(key)
            idle = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), jax.eval_shape(kernel.step, k, state)[1])
            state, info = jax.lax.cond(j < steps, lambda s: kernel.step(k, s), lambda s: (s, idle), state)
            return (state, key), (state.position, {
                "lp": state.logdensity, "energy": info.energy, "tree_depth": info.num_trajectory_expansions,
                "n_steps": info.num_integration_steps, "step_size": parameters["step_size"],
                "diverging": info.is_divergent, "acceptance_rate": info.acceptance_rate})

        (state, key), trace = jax.lax.scan(one, (state, key), jnp.arange(_CHUNK))
        return (state, parameters, key), trace

    z, stats, timings, finished = _drive(advance, ({"initial": warm_up.lower(keys[0], z0)}, (keys[0], z0)), None,
                                         chains, 0, draws, progress, chain_method, "NUTS (blackjax)")
    if z is None:
        return None, None, timings, finished
    return _constrained(top_level_jit(lambda f, _: jax.lax.map(postprocess_fn, f)), z, None), stats, timings, finished
