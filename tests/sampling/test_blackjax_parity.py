"""Deterministic parity of MAMS's isokinetic integrator with BlackJAX's (a test-only reference).

bayesscale's MAMS (:mod:`bayesscale.sampling.mams`) and BlackJAX's adjusted MCLMC
(``blackjax.mcmc.adjusted_mclmc`` with ``blackjax.mcmc.integrators.isokinetic_velocity_verlet``)
integrate the same ESH dynamics with the same velocity Verlet splitting. From the same state,
step size and number of steps the two must give the same trajectory to rounding.

Mapping of the conventions
--------------------------
* **density.** bayesscale integrates a potential ``U = -log p``; BlackJAX a log density, here
  ``logdensity_fn = -U``, and its state holds ``logdensity = -U`` and
  ``logdensity_grad = -grad U``.
* **preconditioning.** bayesscale's diagonal inverse mass ``m`` whitens ``y = z / sqrt(m)``:
  the velocity ``u`` is a unit vector in ``y``, the half velocity update turns it with the
  whitened gradient ``g = -sqrt(m) * grad U`` and the position moves by
  ``eps * sqrt(m) * u``. BlackJAX's ``inverse_mass_matrix`` (1-D: diagonal) enters the same
  places through ``sqrt(inverse_mass_matrix)`` (``adjoint_L(grad log p)`` turns the momentum,
  ``forward_L(u)`` moves the position), so ``inverse_mass_matrix = m`` exactly (it is not a
  ``sqrt_diag_cov``: that is ``sqrt(m)``), and BlackJAX's ``momentum`` is bayesscale's ``u``.
* **steps.** BlackJAX's velocity Verlet coefficients ``(1/2, 1, 1/2)`` give half updates with
  ``delta = eps * (1/2) * |g| / (d - 1)``: bayesscale's ``half_velocity(u, g, eps / 2)``.
  ``L_proposal_factor = inf`` turns BlackJAX's partial refreshment off (MAMS draws ``u``
  afresh each transition and never refreshes it within one).
* **energy.** Both accumulate the kinetic energy change ``(d - 1) (delta - log 2 +
  log((1 + u.e)(1 - zeta^2) + 2 zeta^2))`` per half update (BlackJAX writes ``1 + u.e`` as
  ``|u + e|^2 / 2``); bayesscale accepts with ``min(1, exp(U0 - U1 - dK))`` and BlackJAX with
  ``min(1, exp(log p1 - log p0 - dK))``: the same number.

What is observable of bayesscale
--------------------------------
The integrator lives inside ``make_chunk``'s closure (``half_velocity`` and ``integrate``), so
it is driven through compiled chunks of one transition each, without editing package code:

* the random key fixes the initial velocity ``u0`` (drawn here exactly as the chunk draws it)
  and the uniform that jitters the number of steps; the trajectory length passed in is chosen
  so that the transition takes exactly ``k`` steps (checked against ``transitions.steps``);
* with ``n > 0`` the chunk uses the state's stored potential as it is: raised by 1e4 it
  forces acceptance, so the draw is the trajectory's end point ``z_k`` with its potential and
  gradient; lowered so that ``log_ratio = U0' - U_k - dK`` lands near -300 (no clipping at 1,
  no underflow) the accumulated kinetic energy change is recovered from the reported
  acceptance probability, ``dK = U0' - U_k - log(accept)`` (to about 1e-13);
* the chunk discards the velocity, so velocities are compared at half steps,
  ``u_{k-1/2} = (z_k - z_{k-1}) / (eps sqrt(m))``, against BlackJAX's half update of its own
  full-step velocity ``u_{k-1}`` at ``grad U(z_{k-1})``: this checks each of BlackJAX's
  velocities ``u_0 .. u_{n-1}`` (the update is a bijection for a given gradient);
* the unforced transition of ``n`` steps gives the acceptance probability, compared with
  BlackJAX's ``adjusted_mclmc_proposal`` (the kernel of ``blackjax.adjusted_mclmc`` given the
  initial momentum; the kernel itself draws it from its own key).

Standalone ``isokinetic_half_step(u, g, eps, dim) -> (u, dK)`` and ``isokinetic_trajectory(
value_and_grad, sqrt_m, eps, steps, z, pe, grad, u, *data) -> (z, pe, grad, u, dK)`` at module
level in ``mams.py`` (``make_chunk`` calling them) would let this compare the final velocity
and the kinetic energy change directly.

Tolerances: float64; everything compared agrees to ``rtol = atol = 1e-9``. The two differ only
in the rounding of algebraically equal expressions (e.g. ``1 + u.e`` against
``|u + e|^2 / 2``, ``sqrt(sum(x^2))`` against ``jnp.linalg.norm``); the largest difference
measured over these cases is 2e-11. A wrong sign or a missing factor moves them by O(1).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayesscale.sampling import configure, mams
from bayesscale.sampling.types import ChainState, step_size_state

STEPS = 6
STEP_SIZES = (0.3, 2.5)  # in whitened units: a typical step and one far too large
RTOL = 1e-9  # measured: at most 2e-11 (relative; absolute near zero), most below 1e-13
ATOL = 1e-9
FORCE = 1e4  # raising the stored start potential by this accepts any end point
LOG_RATIO = -300.0  # exp of it is far from both 1 and float64's underflow


@pytest.fixture(scope="module", autouse=True)
def _jax() -> None:
    """float64 (as every fit), then BlackJAX: importing it starts JAX's backend (a default
    argument ``jnp.log(2.0)`` in ``blackjax.adaptation.step_size``), so imported at module
    level, at collection, it would start JAX in every pytest-xdist worker before
    :func:`configure` could set the device count, and every later ``configure(2)`` warns."""
    configure(2)
    pytest.importorskip("blackjax")


# ---------------------------------------------------------------------------- targets


def correlated_gaussian(dim: int) -> tuple[Callable[[Any], Any], np.ndarray, np.ndarray]:
    """An AR(1)-correlated Gaussian (rho = 0.9) with scales from 0.5 to 3; returns the
    potential, a start and the inverse mass (the marginal variances, off by up to 2x)."""
    scales = np.geomspace(0.5, 3.0, dim)
    lags = np.abs(np.subtract.outer(np.arange(dim), np.arange(dim)))
    cov = scales[:, None] * 0.9**lags * scales[None, :]
    precision = jnp.asarray(np.linalg.inv(cov))
    mean = np.linspace(-1.0, 1.0, dim)
    rng = np.random.default_rng(dim)

    def potential(z: Any) -> Any:
        r = z - mean
        return 0.5 * r @ precision @ r

    z0 = mean + scales * rng.normal(size=dim)
    inv_mass = scales**2 * np.linspace(0.5, 2.0, dim)
    return potential, z0, inv_mass


def banana(dim: int) -> tuple[Callable[[Any], Any], np.ndarray, np.ndarray]:
    """Haario's twisted Gaussian: ``z0 ~ N(0, 3^2)``, ``z_i ~ N(b_i (z0^2 - 9), 1)``."""
    b = np.linspace(0.05, 0.15, dim - 1)
    rng = np.random.default_rng(100 + dim)

    def potential(z: Any) -> Any:
        twist = z[1:] - b * (z[0] ** 2 - 9.0)
        return 0.5 * (z[0] / 3.0) ** 2 + 0.5 * jnp.sum(twist**2)

    x0 = 3.0 * rng.normal()
    z0 = np.concatenate([[x0], b * (x0**2 - 9.0) + rng.normal(size=dim - 1)])
    inv_mass = np.concatenate([[9.0], np.full(dim - 1, 2.0)])
    return potential, z0, inv_mass


def hierarchical(dim: int) -> tuple[Callable[[Any], Any], np.ndarray, np.ndarray]:
    """The centred eight-schools model with ``dim - 2`` groups: ``z = (mu, log tau,
    theta)``, ``mu ~ N(0, 5)``, ``log tau ~ N(0, 1)``, ``theta_j ~ N(mu, tau)``,
    ``y_j ~ N(theta_j, sigma_j)`` (a funnel in ``log tau``)."""
    groups = dim - 2
    rng = np.random.default_rng(200 + dim)
    sigma = np.linspace(5.0, 15.0, groups)
    y = 4.0 + sigma * rng.normal(size=groups)

    def potential(z: Any) -> Any:
        mu, log_tau, theta = z[0], z[1], z[2:]
        tau = jnp.exp(log_tau)
        data = 0.5 * jnp.sum(((y - theta) / sigma) ** 2)
        prior = 0.5 * jnp.sum(((theta - mu) / tau) ** 2) + groups * log_tau
        return data + prior + 0.5 * (mu / 5.0) ** 2 + 0.5 * log_tau**2

    z0 = np.concatenate([[3.0, 0.5], 3.0 + 1.5 * rng.normal(size=groups)])
    inv_mass = np.concatenate([[9.0, 0.5], np.full(groups, 4.0)])
    return potential, z0, inv_mass


TARGETS = {"gaussian": correlated_gaussian, "banana": banana, "hierarchical": hierarchical}
CASES = [("gaussian", 2), ("gaussian", 5), ("gaussian", 20), ("banana", 2), ("hierarchical", 20)]


# ---------------------------------------------------------------------------- bayesscale


def trajectory_for(key: Any, step_size: float, steps: int) -> np.ndarray:
    """``(L, most)`` that make a MAMS transition from ``key`` take exactly ``steps`` steps:
    the chunk takes ``ceil(U * scale)`` with ``U`` from its key and ``scale =
    mean_to_scale(L / eps)``; aim ``U * scale`` at ``steps - 1/2`` and invert
    ``mean_to_scale`` (on ``[k, k + 1]``, ``k = floor(scale)``, it is ``k + k t`` with
    ``t = (mean - (k + 1) / 2) / (k + 1 - mean)``)."""
    _, _, key_n, _ = jax.random.split(key, 4)
    uniform = float(jax.random.uniform(key_n))
    scale = max(1.0, (steps - 0.5) / uniform)
    k = math.floor(scale)
    t = (scale - k) / k
    mean = (k + 1) * (0.5 + t) / (1 + t)
    assert math.isclose(mams.mean_to_scale(mean), scale, rel_tol=1e-12)
    return np.array([mean * step_size, float(mams.MAX_STEPS)])


def initial_velocity(key: Any, dim: int) -> Any:
    """The unit velocity a MAMS transition from ``key`` starts with (as the chunk draws it)."""
    _, key_u, _, _ = jax.random.split(key, 4)
    u = jax.random.normal(key_u, (dim,))
    return u / jnp.sqrt(jnp.sum(u * u))


class Chunk:
    """One compiled MAMS transition of ``potential``, run from one state with a batch of
    stored start potentials and step counts (one compilation for all of a target's runs)."""

    def __init__(self, potential: Callable[[Any], Any]) -> None:
        chunk = mams.make_chunk(potential, capacity=1)

        def batch(state: Any, inv_mass: Any, stored: Any, trajectory: Any) -> Any:
            def one(pe: Any, traj: Any) -> Any:
                return chunk(state._replace(potential=pe), inv_mass, 1, False, traj)[1]

            return jax.vmap(one)(stored, trajectory)

        self.batch = jax.jit(batch)
        self.value_and_grad = jax.jit(jax.value_and_grad(potential))

    def start(self, z0: np.ndarray, step_size: float, key: Any) -> Any:
        """The chain state at ``z0`` (potential, gradient, key and step size)."""
        pe, grad = self.value_and_grad(jnp.asarray(z0))
        return ChainState(jnp.asarray(z0), pe, grad, key, step_size_state(step_size))

    def run(self, state: Any, inv_mass: np.ndarray, stored: list[float], steps: list[int]) -> Any:
        """The transitions' rows (``z``, ``potential``, ``grad``, ``accept``, ``steps``, ...)
        from ``state`` with stored start potentials ``stored`` and ``steps`` steps."""
        eps = float(np.exp(state.step[1]))
        traj = np.array([trajectory_for(state.key, eps, k) for k in steps])
        out = self.batch(state, inv_mass, np.asarray(stored, dtype=float), traj)
        rows = jax.tree.map(np.asarray, out)
        np.testing.assert_array_equal(rows.steps[:, 0], steps)
        return jax.tree.map(lambda a: a[:, 0], rows)


def bayesscale_trajectory(chunk: Chunk, start: Any, inv_mass: np.ndarray) -> dict[str, Any]:
    """Positions, potentials and gradients after 0 .. STEPS steps, the half-step velocities,
    and the unforced transition of STEPS steps (its acceptance probability)."""
    u0 = float(start.potential)
    steps = [*range(1, STEPS + 1), STEPS]
    rows = chunk.run(start, inv_mass, [u0 + FORCE] * STEPS + [u0], steps)
    assert np.all(rows.accept[:STEPS] == 1.0)
    eps = float(rows.step_size[0])  # the chunk's exp(log eps), to the last bit
    z = np.concatenate([np.asarray(start.z)[None], rows.z[:STEPS]])
    sqrt_m = np.sqrt(inv_mass)
    return {
        "z": z,
        "potential": np.concatenate([[u0], rows.potential[:STEPS]]),
        "grad": np.concatenate([np.asarray(start.grad)[None], rows.grad[:STEPS]]),
        "mid_velocity": np.diff(z, axis=0) / (eps * sqrt_m),
        "accept": float(rows.accept[STEPS]),
        "diverging": bool(rows.diverging[STEPS]),
        "step_size": eps,
    }


def bayesscale_kinetic(
    chunk: Chunk, start: Any, inv_mass: np.ndarray, potential: np.ndarray, hint: np.ndarray
) -> np.ndarray:
    """The accumulated kinetic energy change after 0 .. STEPS steps, from the acceptance
    probability with the stored start potential lowered to put ``log_ratio = U0' - U_k - dK``
    near LOG_RATIO. ``hint`` (the reference's change) only places that potential: were
    bayesscale's change off by hundreds, the probability would clip at 1 or underflow and the
    check here fail."""
    stored = potential[1:] + hint[1:] + LOG_RATIO
    steps = [*range(1, STEPS + 1), STEPS]
    rows = chunk.run(start, inv_mass, [*stored, stored[-1]], steps)
    accept = rows.accept[:STEPS]
    assert np.all((accept > 0) & (accept < 1)), accept
    return np.concatenate([[0.0], stored - potential[1:] - np.log(accept)])


# ---------------------------------------------------------------------------- BlackJAX


def blackjax_integrator(potential: Callable[[Any], Any], inv_mass: np.ndarray) -> Any:
    """``run(start_state, eps)``: BlackJAX's trajectory of STEPS steps (states, kinetic
    energy changes, half-step velocities) and its adjusted transition, compiled once."""
    from blackjax.mcmc import integrators
    from blackjax.mcmc.adjusted_mclmc import adjusted_mclmc_proposal

    def logdensity_fn(z: Any) -> Any:
        return -potential(z)

    one_step = integrators.isokinetic_velocity_verlet(logdensity_fn, inverse_mass_matrix=inv_mass)
    half = integrators.esh_dynamics_momentum_update_one_step(inv_mass)

    def run(first: Any, eps: Any) -> Any:
        def step(state: Any, _: Any) -> Any:
            mid = half(state.momentum, state.logdensity_grad, eps, 0.5)[0]
            state, change = one_step(state, eps)
            return state, (state, change, mid)

        _, (states, changes, mids) = jax.lax.scan(step, first, length=STEPS)
        proposal = adjusted_mclmc_proposal(
            integrators.with_isokinetic_maruyama(one_step),
            step_size=eps,
            L_proposal_factor=jnp.inf,
            num_integration_steps=STEPS,
        )
        _, info, _ = proposal(jax.random.PRNGKey(0), first)
        return states, changes, mids, info

    return jax.jit(run)


def blackjax_trajectory(run: Any, start: Any, eps: float) -> dict[str, Any]:
    """The same quantities from BlackJAX, from bayesscale's start state (its potential and
    gradient, so both begin from the same bits) and initial velocity."""
    from blackjax.mcmc import integrators

    first = integrators.IntegratorState(
        start.z, initial_velocity(start.key, start.z.shape[0]), -start.potential, -start.grad
    )
    states, changes, mids, info = jax.tree.map(np.asarray, run(first, eps))
    # BlackJAX's proposal is its last state, computed by a separately compiled path: equal to
    # the last bits on one CPU, 6.5e-15 apart on another (XLA's fusion differs)
    np.testing.assert_allclose(info.proposal.position, states.position[-1], rtol=1e-12, atol=0)
    return {
        "z": np.concatenate([np.asarray(start.z)[None], states.position]),
        "potential": np.concatenate([[float(start.potential)], -states.logdensity]),
        "grad": np.concatenate([np.asarray(start.grad)[None], -states.logdensity_grad]),
        "kinetic": np.concatenate([[0.0], np.cumsum(changes)]),
        "mid_velocity": mids,
        "accept": float(info.acceptance_rate),
        "diverging": bool(info.is_divergent),
        "end_energy": float(info.energy),
    }


# ---------------------------------------------------------------------------- the test


@pytest.mark.parametrize(("target", "dim"), CASES, ids=[f"{t}-{d}" for t, d in CASES])
def test_mams_integrator_matches_blackjax(target: str, dim: int) -> None:
    potential, z0, inv_mass = TARGETS[target](dim)
    chunk = Chunk(potential)
    reference = blackjax_integrator(potential, inv_mass)
    for step_size in STEP_SIZES:
        start = chunk.start(z0, step_size, jax.random.PRNGKey(dim + int(100 * step_size)))
        ours = bayesscale_trajectory(chunk, start, inv_mass)
        theirs = blackjax_trajectory(reference, start, ours["step_size"])
        ours["kinetic"] = bayesscale_kinetic(
            chunk, start, inv_mass, ours["potential"], theirs["kinetic"]
        )
        where = f"{target}, d={dim}, eps={step_size}"
        for name in ("z", "potential", "grad", "mid_velocity", "kinetic"):
            np.testing.assert_allclose(
                ours[name], theirs[name], rtol=RTOL, atol=ATOL, err_msg=f"{name}: {where}"
            )
        # one adjusted transition: energy error and acceptance probability
        assert theirs["end_energy"] == pytest.approx(ours["potential"][-1], rel=RTOL, abs=ATOL)
        error_ours = ours["potential"][-1] - ours["potential"][0] + ours["kinetic"][-1]
        error_theirs = theirs["potential"][-1] - theirs["potential"][0] + theirs["kinetic"][-1]
        assert error_ours == pytest.approx(error_theirs, rel=RTOL, abs=ATOL), where
        assert ours["accept"] == pytest.approx(theirs["accept"], rel=RTOL, abs=1e-300), where
        assert ours["accept"] == pytest.approx(min(1.0, math.exp(-error_ours)), rel=RTOL)
        assert ours["diverging"] == theirs["diverging"], where
