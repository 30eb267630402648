"""One gradient-descent driver for every optax loop of the library: compression, herding and feature learning.

A loss has the signature ``loss(params, carry, data, key) -> (value, carry)``: ``params`` are differentiated,
``carry`` is state that the loss updates without gradients (batch-norm power-iteration vectors, discrete labels),
``data`` is any pytree of arrays the loss reads, and ``key`` is a fresh PRNG key per step (minibatches, dropout).

:func:`optax_scan` runs a fixed number of steps under ``lax.scan`` and is traceable (use it inside other compiled
code); :func:`minimise` drives compiled rounds of it from the host with a loss trace, an optional progress bar, an
optional per-round update of the carry and early stopping.
"""

from functools import lru_cache, partial

import jax
import numpy as np
import optax
from jax import lax
from tqdm.auto import tqdm

from ._interrupt import Interrupted
from ._validation import check_count, check_key, check_positive
from .fitted import fitted

__all__ = ["optax_scan", "minimise", "Minimised", "adam", "adamw", "static_partial"]


@lru_cache(maxsize=None)
def static_partial(function, *args, **kwargs):
    """``functools.partial(function, *args, **kwargs)``, one object per setting, for static arguments of compiled
    loops (:func:`minimise`'s ``loss`` and ``after_round``).

    A compiled program is looked up by its static arguments, and two partials are equal only when they are the same
    object: a new partial per call would compile the loop anew each time (and keep every program). This returns
    the same object for the same function and settings, so later calls reuse the program.

    Args:
        function: a module-level function.
        *args: leading positional settings (hashable: numbers, strings, tuples).
        **kwargs: keyword settings (hashable).

    Returns:
        The partial, shared by every call with these arguments.

    Raises:
        TypeError: for a function that is not callable or settings that are not hashable.

    Examples:
        >>> from bayeskern.optim import static_partial
        >>> def loss(scale, params, carry, data, key):
        ...     return scale * params ** 2, carry
        >>> static_partial(loss, 2.0) is static_partial(loss, 2.0)
        True
    """
    if not callable(function):
        raise TypeError(f"function must be callable, got {function!r}")
    return partial(function, *args, **kwargs)


@lru_cache(maxsize=None)
def adam(learning_rate: float) -> optax.GradientTransformation:
    """``optax.adam``, one object per learning rate (compiled loops taking it as a static argument are reused).

    Args:
        learning_rate: the step size, > 0.

    Returns:
        optax.GradientTransformation: the shared Adam transformation.

    Raises:
        ValueError: for a learning rate that is not positive and finite.
    """
    check_positive(learning_rate, "learning_rate")
    return optax.adam(learning_rate)


@lru_cache(maxsize=None)
def adamw(learning_rate: float, weight_decay: float) -> optax.GradientTransformation:
    """``optax.adamw``, one object per setting (so compiled loops that take it as a static argument are reused).

    Args:
        learning_rate: the step size, > 0.
        weight_decay: the decoupled weight decay, >= 0.

    Returns:
        optax.GradientTransformation: the shared AdamW transformation.

    Raises:
        ValueError: for a learning rate that is not positive or a weight decay that is negative or not finite.
    """
    check_positive(learning_rate, "learning_rate")
    if not (isinstance(weight_decay, (int, float)) and 0 <= weight_decay < float("inf")):
        raise ValueError(f"weight_decay must be non-negative and finite, got {weight_decay!r}")
    return optax.adamw(learning_rate, weight_decay=weight_decay)


def optax_scan(loss, params, optimizer, opt_state, carry, data, keys=None, *, length: int | None = None):
    """One optax step of ``loss`` per key in ``keys``, under ``lax.scan`` (traceable: the body of a compiled loop).

    Args:
        loss: ``loss(params, carry, data, key) -> (value, carry)``, differentiable in params.
        params: the parameter pytree.
        optimizer: an ``optax.GradientTransformation``; one that takes extra arguments (``optax.lbfgs``, whose line
            search evaluates the loss) gets the step's value, gradient and the loss at the step's carry and key;
            with no carry and no keys, the value and gradient its line search stored are reused, not recomputed.
        opt_state: its state for params.
        carry: a pytree the loss may update each step (not differentiated), or None.
        data: fixed arguments of the loss (a pytree).
        keys: (steps,) PRNG keys, one per step; None for a loss that draws nothing (it then gets ``key=None``).
        length: the number of steps when keys is None.

    Returns:
        (params, opt_state, carry, trace): the final state and the (steps,) loss before each step.

    Raises:
        TypeError: for a loss that is not callable or a length that is not an integer.
        ValueError: when neither keys nor length is given, or length is below 1.
    """
    if not callable(loss):
        raise TypeError(f"loss must be a function loss(params, carry, data, key), got {loss!r}")
    if keys is None and length is None:
        raise ValueError("pass keys (one per step) or length (the number of steps)")
    if length is not None:
        length = check_count(length, "length")

    optimizer = optax.with_extra_args_support(optimizer)
    # a loss that neither carries nor draws is one function throughout, so an optimizer that stores the value and
    # gradient of its last line search (L-BFGS) hands them to the next step instead of their being computed again
    reuse = carry is None and keys is None and optax.tree.get(opt_state, "value") is not None

    def step(state, key):
        p, s, c = state
        value_fn = lambda q: loss(q, c, data, key)[0]
        if reuse:
            (value, grad), after = optax.value_and_grad_from_state(value_fn)(p, state=s), c
        else:
            (value, after), grad = jax.value_and_grad(loss, has_aux=True)(p, c, data, key)
        updates, s = optimizer.update(grad, s, p, value=value, grad=grad, value_fn=value_fn)
        return (optax.apply_updates(p, updates), s, after), value

    (params, opt_state, carry), trace = lax.scan(step, (params, opt_state, carry), keys, length=length)
    return params, opt_state, carry, trace


@partial(jax.jit, static_argnames=("loss", "optimizer", "after_round"))
def _round(params, opt_state, carry, data, keys, loss, optimizer, after_round):
    params, opt_state, carry, trace = optax_scan(loss, params, optimizer, opt_state, carry, data, keys)
    if after_round is not None:
        carry = after_round(params, carry, data)
    return params, opt_state, carry, trace


@fitted
class Minimised:
    """The outcome of :func:`minimise`.

    Attributes:
        params: the final parameter pytree.
        carry: the final carry.
        trace: (steps,) the loss before each step taken.
    """

    params: object
    carry: object
    trace: np.ndarray


def minimise(loss, params, optimizer, *, num_steps: int, data=None, carry=None, key=None,
             steps_per_round: int | None = None, tol: float | None = None, after_round=None,
             progress_bar: bool = False, description: str = "optimising") -> Minimised:
    """Minimise ``loss(params, carry, data, key) -> (value, carry)`` with ``optimizer`` for at most ``num_steps``.

    Steps run in compiled rounds of ``steps_per_round`` (default: all in one round); after each round
    ``after_round(params, carry, data) -> carry`` (compiled with it) may update the carry. With ``tol`` the loop
    stops once the loss changed by at most ``tol`` relative over a round (never while ``after_round`` is set, as
    the carry changes the objective). Stops at the first non-finite loss (the trace then ends with it). ``loss``,
    ``optimizer`` and ``after_round`` are static: pass module-level functions, settings bound by
    :func:`static_partial` and optimisers from :func:`adam` / :func:`adamw`, so repeated calls reuse the compiled
    rounds (a new ``functools.partial`` or lambda per call compiles them anew).

    Args:
        loss: ``loss(params, carry, data, key) -> (value, carry)``.
        params: the starting parameter pytree.
        optimizer: an ``optax.GradientTransformation``.
        num_steps: the most steps to take, >= 1.
        data: fixed arguments of the loss.
        carry: the starting carry (None if the loss keeps none).
        key: PRNG key for the losses' draws (default ``jax.random.key(0)``).
        steps_per_round: steps per compiled round (default all).
        tol: stop when the loss changed by at most this, relative, over a round.
        after_round: ``after_round(params, carry, data) -> carry``, run after each round.
        progress_bar: show a tqdm bar.
        description: the bar's label and the interruption message's.

    Returns:
        Minimised: the final params and carry and the loss trace.

    Raises:
        TypeError: for counts that are not integers or a key that is not a PRNG key.
        ValueError: for counts below 1 or tol not positive.
        Interrupted: on Ctrl-C, after the running round, with the ``Minimised`` so far in ``partial``.
    """
    num_steps = check_count(num_steps, "num_steps")
    steps_per_round = num_steps if steps_per_round is None else check_count(steps_per_round, "steps_per_round")
    if tol is not None:
        check_positive(tol, "tol")
    key = jax.random.key(0) if key is None else check_key(key)
    opt_state = optimizer.init(params)
    rounds = -(-int(num_steps) // steps_per_round)
    trace, previous = [], None
    with tqdm(total=int(num_steps), desc=description, disable=not progress_bar, leave=False) as progress:
        try:
            for r, round_key in enumerate(jax.random.split(key, rounds)):
                steps = min(steps_per_round, int(num_steps) - r * steps_per_round)
                params, opt_state, carry, values = _round(params, opt_state, carry, data,
                                                          jax.random.split(round_key, steps), loss, optimizer,
                                                          after_round)
                values = np.asarray(values)
                trace.append(values)
                progress.update(steps)
                if not np.all(np.isfinite(values)):
                    break
                if (tol is not None and after_round is None and previous is not None
                        and abs(previous - values[-1]) <= tol * abs(values[-1])):
                    break
                previous = values[-1]
        except KeyboardInterrupt:
            done = sum(len(t) for t in trace)
            raise Interrupted(Minimised(params, carry, np.concatenate(trace) if trace else np.zeros(0)),
                              f"{description}: interrupted after {done} of {num_steps} steps") from None
    return Minimised(params, carry, np.concatenate(trace))
