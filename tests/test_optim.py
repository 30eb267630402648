"""The shared optax driver: convergence, trace, early stopping, carried state and the per-round update."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from bayeskern.optim import adam, adamw, minimise, optax_scan


def _quadratic(params, carry, data, key):
    return jnp.sum((params - data) ** 2), carry


def _counting(params, carry, data, key):
    return jnp.sum((params - data) ** 2), carry + 1


def _reset(params, carry, data):
    return carry * 0 - 1


def _noisy(params, carry, data, key):
    return jnp.sum((params - data - 0.1 * jax.random.normal(key, params.shape)) ** 2), carry


def test_minimise_converges_and_traces_every_step():
    target = jnp.array([1.0, -2.0, 3.0])
    out = minimise(_quadratic, jnp.zeros(3), optax.sgd(0.1), num_steps=200, data=target)
    np.testing.assert_allclose(out.params, target, atol=1e-10)
    assert out.trace.shape == (200,) and out.trace[0] == pytest.approx(14.0) and np.all(np.diff(out.trace) <= 0)
    # sgd on this quadratic contracts by (1 - 0.2) per step: the trace is the closed form
    np.testing.assert_allclose(out.trace[:5], 14.0 * 0.8 ** (2 * np.arange(5)), rtol=1e-12)


def test_rounds_early_stop_and_carry():
    target = jnp.array([0.5])
    whole = minimise(_quadratic, jnp.zeros(1), optax.sgd(0.1), num_steps=100, data=target)
    rounds = minimise(_quadratic, jnp.zeros(1), optax.sgd(0.1), num_steps=100, data=target, steps_per_round=7)
    np.testing.assert_array_equal(whole.trace, rounds.trace)  # rounds change the schedule of compilation only
    early = minimise(_quadratic, jnp.zeros(1), optax.sgd(0.1), num_steps=1000, data=target, steps_per_round=10,
                     tol=1e-3)
    assert 10 < early.trace.shape[0] < 1000 and early.trace.shape[0] % 10 == 0
    counted = minimise(_counting, jnp.zeros(1), optax.sgd(0.1), num_steps=25, data=target, carry=jnp.asarray(0),
                       steps_per_round=10)
    assert int(counted.carry) == 25
    reset = minimise(_counting, jnp.zeros(1), optax.sgd(0.1), num_steps=25, data=target, carry=jnp.asarray(0),
                     steps_per_round=10, after_round=_reset, tol=1.0)
    assert int(reset.carry) == -1 and reset.trace.shape == (25,)  # tol is ignored while after_round is set


def test_keys_per_step_and_stop_at_non_finite_loss():
    a = minimise(_noisy, jnp.zeros(2), adam(0.05), num_steps=30, data=jnp.ones(2), key=jax.random.key(1))
    b = minimise(_noisy, jnp.zeros(2), adam(0.05), num_steps=30, data=jnp.ones(2), key=jax.random.key(1))
    c = minimise(_noisy, jnp.zeros(2), adam(0.05), num_steps=30, data=jnp.ones(2), key=jax.random.key(2))
    np.testing.assert_array_equal(a.trace, b.trace)
    assert not np.array_equal(a.trace, c.trace)
    blown = minimise(_quadratic, jnp.zeros(1), optax.sgd(1.5), num_steps=5000, data=jnp.ones(1), steps_per_round=100)
    assert not np.isfinite(blown.trace[-1]) and blown.trace.shape[0] < 5000
    with pytest.raises(ValueError, match="num_steps must be >= 1"):
        minimise(_quadratic, jnp.zeros(1), optax.sgd(0.1), num_steps=0, data=jnp.ones(1))
    assert adamw(1e-2, 1e-2) is adamw(1e-2, 1e-2)  # one object per setting: compiled rounds are reused


def test_optax_scan_is_traceable():
    @jax.jit
    def run(target):
        opt = optax.sgd(0.1)
        params = jnp.zeros(2)
        keys = jax.random.split(jax.random.key(0), 50)
        return optax_scan(_quadratic, params, opt, opt.init(params), None, target, keys)

    params, _, _, trace = run(jnp.array([2.0, -1.0]))
    np.testing.assert_allclose(params, np.array([2.0, -1.0]) * (1 - 0.8**50), rtol=1e-12)  # x_k = (1 - 0.8^k) t
    assert trace.shape == (50,)


def test_optax_scan_runs_lbfgs_with_its_line_search_on_the_loss():
    """optax.lbfgs needs the loss itself for its zoom line search: on the Rosenbrock function (minimum at (1, 1),
    where a plain gradient step of any fixed size crawls) 40 steps reach the minimum to 1e-8."""
    def rosenbrock(x, carry, data, key):
        return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2, carry

    solver = optax.lbfgs()
    x0 = jnp.array([-1.2, 1.0])
    x, _, _, trace = jax.jit(lambda x: optax_scan(rosenbrock, x, solver, solver.init(x), None, None, length=40))(x0)
    np.testing.assert_allclose(x, [1.0, 1.0], atol=1e-8)
    assert trace[0] == pytest.approx(24.2) and np.all(np.isfinite(trace))


def test_optax_scan_reuses_the_line_search_values_as_optax_does():
    """With no carry and no keys, optax_scan takes each step's value and gradient from the L-BFGS state (optax's
    own loop with value_and_grad_from_state): the same iterates, and the loss evaluated fewer times."""
    calls = []

    def rosenbrock(x):
        jax.debug.callback(lambda: calls.append(1))
        return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2

    solver, x0 = optax.lbfgs(), jnp.array([-1.2, 1.0])
    value_and_grad = optax.value_and_grad_from_state(rosenbrock)

    def reference(x):
        def step(carry, _):
            x, state = carry
            value, grad = value_and_grad(x, state=state)
            updates, state = solver.update(grad, state, x, value=value, grad=grad, value_fn=rosenbrock)
            return (optax.apply_updates(x, updates), state), value
        return jax.lax.scan(step, (x, solver.init(x)), None, length=15)

    (expected, _), expected_trace = jax.jit(reference)(x0)
    jax.effects_barrier()
    reference_calls, calls[:] = len(calls), []
    x, _, _, trace = jax.jit(lambda x: optax_scan(lambda p, c, d, k: (rosenbrock(p), c), x, solver, solver.init(x),
                                                  None, None, length=15))(x0)
    jax.effects_barrier()
    np.testing.assert_allclose(x, expected, rtol=1e-12)
    np.testing.assert_allclose(trace, expected_trace, rtol=1e-12)
    assert len(calls) == reference_calls
