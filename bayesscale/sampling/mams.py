"""The MAMS transition as a pure JAX function, with every tuning parameter an argument.

MAMS (Metropolis-adjusted microcanonical sampler; Robnik, Cohn-Gordon and Seljak 2025,
"Metropolis Adjusted Microcanonical Hamiltonian Monte Carlo") moves like HMC, but at a fixed
speed: in whitened coordinates ``y = z / sqrt(m)`` (``m`` the diagonal inverse mass that
warm-up estimates) the velocity ``u`` stays a unit vector, and the potential's gradient
turns it instead of accelerating it (the ESH dynamics of Ver Steeg and Galstyan 2021). One
transition from ``z``:

1. draw ``u`` uniformly on the unit sphere and a number of steps ``n`` uniformly in
   ``1 .. 2 L / eps`` (mean ``L / eps``: the trajectory length ``L`` jittered);
2. take ``n`` steps of the isokinetic velocity Verlet integrator: half a velocity update
   with the whitened gradient ``g = -sqrt(m) * grad U(z)``,

   .. math::

       u \\leftarrow \\frac{e (1 - \\zeta)(1 + \\zeta + u \\cdot e (1 - \\zeta)) + 2 \\zeta u}
       {\\lVert \\cdot \\rVert}, \\quad e = g / \\lVert g \\rVert, \\quad
       \\zeta = e^{-\\delta}, \\quad \\delta = \\frac{\\epsilon \\lVert g \\rVert}{2 (d - 1)},

   a position update ``z <- z + eps sqrt(m) u``, and the other half velocity update; each
   half update changes the kinetic energy by
   ``(d - 1) (delta - log 2 + log((1 + u.e)(1 - zeta^2) + 2 zeta^2))``;
3. accept the end point with probability ``min(1, exp(-dU - dK))`` (Metropolis-Hastings on
   the energy error), else stay.

No tree is built: a transition is a plain loop of gradient steps, so a step costs little
more than its gradient, and on the hierarchical law model it reaches an effective draw in
fewer gradients than NUTS (docs/speed.md). The step size follows dual averaging towards
``target_accept`` during warm-up, as in :mod:`bayesscale.sampling.nuts` but with a larger
shrinkage (``STEP_GAMMA``); the driver then corrects it by probes at fixed step sizes and
adapts ``L`` from the warm-up draws (:mod:`bayesscale.sampling.engine`,
:func:`bayesscale.sampling.adapt.trajectory_length`).

Example
-------
>>> import jax.numpy as jnp
>>> chunk = make_chunk(lambda z: 0.5 * jnp.sum(z**2), capacity=8)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bayesscale.sampling.config import MAMS_TARGET_ACCEPT
from bayesscale.sampling.types import (
    MAX_DELTA_ENERGY,
    ChainState,
    Transitions,
    empty_transitions,
)

MAX_STEPS = 1024  # integration steps per transition at most (as NUTS's tree depth 10)
# Dual averaging's shrinkage (NumPyro's and Stan's default is 0.05). One MAMS transition's
# acceptance probability is a far noisier signal than NUTS's average over its tree: on the
# reference law fit, against a target of 0.85, the averaged step size accepted 0.95-0.97 at
# 0.05 (the iterate swung 0.3-1.7 within a window), 0.87-0.90 at 0.15 and 0.75-0.80 at 0.4.
STEP_GAMMA = 0.15


def mean_to_scale(mean: Any) -> Any:
    """``s`` such that ``ceil(U(0, 1) s)`` (at least 1) has mean ``mean`` (for ``mean >= 1``):
    the upper end of the jittered number of steps.

    >>> mean_to_scale(8.0)  # ceil(U(0, 1) 15) is uniform on 1 .. 15
    15.0
    """
    k = (2 * mean - 1) // 1  # floor, for a number as for a traced JAX array
    return k + k * (mean - 0.5 * (k + 1)) / (k + 1 - mean)


def isokinetic_half_step(u: Any, g: Any, eps: Any, dim: int) -> tuple[Any, Any]:
    """Half a step of the isokinetic velocity update: the unit velocity ``u`` turned towards
    the (preconditioned) force ``g`` for time ``eps``, and the kinetic-energy change it
    brings (JAX; traced into the chunk).

    The kinetic energy's weight is ``d - 1``: in one dimension the velocity cannot turn (it
    stays +-1), no kinetic energy changes, and MAMS is a random-walk Metropolis.
    """
    import jax.numpy as jnp

    kinetic_weight = dim - 1
    dims = max(dim - 1, 1)
    norm = jnp.sqrt(jnp.sum(g * g))
    e = g / jnp.where(norm > 0, norm, 1.0)  # a zero gradient turns nothing
    ue = jnp.dot(u, e)
    delta = eps * norm / dims
    zeta = jnp.exp(-delta)
    turned = e * (1 - zeta) * (1 + zeta + ue * (1 - zeta)) + 2 * zeta * u
    turned = turned / jnp.sqrt(jnp.sum(turned * turned))
    kinetic = kinetic_weight * (
        delta - jnp.log(2.0) + jnp.log((1 + ue) * (1 - zeta**2) + 2 * zeta**2)
    )
    return turned, kinetic


def make_chunk(
    potential: Callable[..., Any],
    capacity: int,
    target_accept: float = MAMS_TARGET_ACCEPT,
    *,
    _kinetic_scale: float = 1.0,
    _metropolis: bool = True,
) -> Callable[..., tuple[ChainState, Transitions]]:
    """``chunk(state, inv_mass, n, adapt, trajectory, *data) -> (state, transitions)``:
    ``n <= capacity`` MAMS transitions of one chain on ``potential(z, *data)``;
    ``trajectory = (L, most)``: each transition takes ``L / eps`` integration steps on
    average (at the transition's own step size ``eps``, so the run does not depend on where
    it is cut into chunks), at most ``most`` and ``MAX_STEPS / 2`` on average.

    The same contract as :func:`bayesscale.sampling.nuts.make_chunk`: with ``n = 0`` the
    potential and its gradient are evaluated at ``state.z``; with ``adapt`` the step size
    follows the dual-averaging iterate towards ``target_accept``, without it the averaged
    step size is used. ``transitions.depth`` is 0 (no tree) and ``transitions.energy`` the
    proposal's energy error ``dU + dK`` (``-log`` of its Metropolis ratio; ``inf`` where it
    is not finite).

    ``_kinetic_scale`` and ``_metropolis`` are for tests only (negative controls of
    ``tests/sampling/test_mams_stress.py``): the kinetic-energy change enters the acceptance
    multiplied by ``_kinetic_scale``, and with ``_metropolis=False`` every proposal is taken
    (``accept`` still reports the probability). The defaults, 1 and ``True``, are the exact
    transition and trace the same program as without them; any other value samples the
    wrong distribution.
    """
    import jax
    import jax.numpy as jnp
    from numpyro.infer.hmc_util import dual_averaging

    _, update_step = dual_averaging(gamma=STEP_GAMMA)
    # the potential's gradient traced once for both of its calls in the chunk (the start and
    # every step): a shorter program to trace and lower, about 0.5 s less on a cold compile
    value_and_grad = jax.jit(jax.value_and_grad(potential))

    def chunk(
        state: ChainState, inv_mass: Any, n: Any, adapt: Any, trajectory: Any, *data: Any
    ) -> tuple[ChainState, Transitions]:
        dim = state.z.shape[0]
        sqrt_m = jnp.sqrt(inv_mass)
        pe, grad = value_and_grad(state.z, *data)
        fresh = n == 0
        state = state._replace(
            potential=jnp.where(fresh, pe, state.potential), grad=jnp.where(fresh, grad, state.grad)
        )

        def transition(i: Any, carry: tuple[ChainState, Transitions]) -> Any:
            s, out = carry
            key, key_u, key_n, key_accept = jax.random.split(s.key, 4)
            step_size = jnp.exp(jnp.where(adapt, s.step[0], s.step[1]))
            u0 = jax.random.normal(key_u, (dim,))
            u0 = u0 / jnp.sqrt(jnp.sum(u0 * u0))
            most = jnp.minimum(trajectory[1], MAX_STEPS / 2)  # so no draw exceeds MAX_STEPS
            mean_steps = jnp.clip(trajectory[0] / step_size, 1.0, most)
            scale = mean_to_scale(mean_steps)
            steps = jnp.ceil(jax.random.uniform(key_n) * scale).astype(int)
            steps = jnp.clip(steps, 1, MAX_STEPS)

            def integrate(_: Any, c: tuple[Any, Any, Any, Any, Any]) -> Any:
                z, pe, grad, u, kinetic = c
                u, k1 = isokinetic_half_step(u, -sqrt_m * grad, 0.5 * step_size, dim)
                z = z + step_size * sqrt_m * u
                pe, grad = value_and_grad(z, *data)
                u, k2 = isokinetic_half_step(u, -sqrt_m * grad, 0.5 * step_size, dim)
                return z, pe, grad, u, kinetic + k1 + k2

            z, pe, grad, _, kinetic = jax.lax.fori_loop(
                0, steps, integrate, (s.z, s.potential, s.grad, u0, jnp.zeros(()))
            )
            if _kinetic_scale != 1.0:  # a negative control: the kinetic term mis-weighted
                kinetic = _kinetic_scale * kinetic
            log_ratio = s.potential - pe - kinetic
            log_ratio = jnp.where(jnp.isfinite(log_ratio), log_ratio, -jnp.inf)
            accept = jnp.minimum(1.0, jnp.exp(log_ratio))
            take = jax.random.uniform(key_accept) < accept
            if not _metropolis:  # a negative control: the Metropolis step dropped
                take = jnp.ones_like(take)
            diverging = -log_ratio > MAX_DELTA_ENERGY
            z = jnp.where(take, z, s.z)
            pe = jnp.where(take, pe, s.potential)
            grad = jnp.where(take, grad, s.grad)
            adapted = update_step(target_accept - accept, s.step)
            step = jax.tree.map(lambda a, b: jnp.where(adapt, a, b), adapted, s.step)
            new = ChainState(z, pe, grad, key, step)
            # the energy slot: the transition's energy error dU + dK (MAMS has no Hamiltonian
            # energy to report), stored as sample_stats.energy_error
            row = Transitions(z, grad, steps, diverging, accept, -log_ratio, pe, step_size, 0)
            out = jax.tree.map(lambda buf, v: buf.at[i].set(v), out, row)
            return new, out

        return jax.lax.fori_loop(0, n, transition, (state, empty_transitions(capacity, dim)))

    return chunk
