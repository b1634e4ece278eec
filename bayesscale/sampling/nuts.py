"""The NUTS transition as a pure JAX function, with every tuning parameter an argument.

One transition from position ``z`` (potential ``U = -log p``, gradient ``g``): draw a
momentum ``r ~ N(0, M)`` with a diagonal mass matrix ``M = diag(1 / m)`` (``m``, the inverse
mass, is what adaptation estimates), build a NUTS tree with the leapfrog integrator

.. math::

    r_{1/2} = r - \\tfrac{\\epsilon}{2} \\nabla U(z), \\quad z' = z + \\epsilon\\, m \\odot r_{1/2},
    \\quad r' = r_{1/2} - \\tfrac{\\epsilon}{2} \\nabla U(z')

(Hoffman and Gelman 2014, multinomial variant, Betancourt 2017) and move to the tree's
proposal. The tree building is NumPyro's (``numpyro.infer.hmc_util.build_tree``); what this
module adds is a loop of ``n`` transitions compiled once, with the step size, inverse mass,
whether to adapt the step size (dual averaging, Nesterov 2009 / Hoffman and Gelman 2014)
and the tree depth all passed as values, so warm-up can change them between calls without
recompiling.

Example
-------
>>> import jax.numpy as jnp
>>> chunk = make_chunk(lambda z: 0.5 * jnp.sum(z**2), capacity=8)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bayesscale.sampling.config import DEFAULT_TARGET_ACCEPT
from bayesscale.sampling.types import MAX_DELTA_ENERGY, ChainState, Transitions, empty_transitions

MAX_TREE_DEPTH = 10


def make_chunk(
    potential: Callable[..., Any], capacity: int, target_accept: float = DEFAULT_TARGET_ACCEPT
) -> Callable[..., tuple[ChainState, Transitions]]:
    """``chunk(state, inv_mass, n, adapt, depth, *data) -> (state, transitions)``: ``n <=
    capacity`` NUTS transitions of one chain on ``potential(z, *data)``.

    With ``n = 0`` the chunk returns ``state`` with the potential and its gradient evaluated
    at ``state.z`` (whatever ``state.potential`` and ``state.grad`` held): the driver checks
    its starting points with the compiled chunk instead of compiling a function of its own
    for them. With ``n > 0`` the state's own values are used as they are, so a run's draws
    do not depend on where it was cut into chunks (an evaluation outside the trajectory can
    differ from the trajectory's in the last bits).

    With ``adapt`` the step size follows the dual-averaging iterate and is updated towards
    ``target_accept`` after each transition; without it, the averaged step size is used.
    ``depth`` caps the tree depth (``<= 10``), e.g. lower early in warm-up.
    """
    import jax
    import jax.numpy as jnp
    from numpyro.infer.hmc_util import (
        IntegratorState,
        build_tree,
        dual_averaging,
        euclidean_kinetic_energy,
        velocity_verlet,
    )

    _, update_step = dual_averaging()

    def chunk(
        state: ChainState, inv_mass: Any, n: Any, adapt: Any, depth: Any, *data: Any
    ) -> tuple[ChainState, Transitions]:
        _, leapfrog = velocity_verlet(lambda z: potential(z, *data), euclidean_kinetic_energy)
        dim = state.z.shape[0]
        pe, grad = jax.value_and_grad(potential)(state.z, *data)  # one gradient per chunk
        fresh = n == 0
        state = state._replace(
            potential=jnp.where(fresh, pe, state.potential), grad=jnp.where(fresh, grad, state.grad)
        )

        def transition(i: Any, carry: tuple[ChainState, Transitions]) -> Any:
            s, out = carry
            key, key_momentum, key_tree = jax.random.split(s.key, 3)
            log_step = jnp.where(adapt, s.step[0], s.step[1])
            step_size = jnp.exp(log_step)
            momentum = jax.random.normal(key_momentum, (dim,)) / jnp.sqrt(inv_mass)
            tree = build_tree(
                leapfrog,
                euclidean_kinetic_energy,
                IntegratorState(s.z, momentum, s.potential, s.grad),
                inv_mass,
                step_size,
                key_tree,
                max_delta_energy=MAX_DELTA_ENERGY,
                max_tree_depth=(depth, MAX_TREE_DEPTH),
            )
            accept = tree.sum_accept_probs / tree.num_proposals
            adapted = update_step(target_accept - accept, s.step)
            step = jax.tree.map(lambda a, b: jnp.where(adapt, a, b), adapted, s.step)
            new = ChainState(tree.z_proposal, tree.z_proposal_pe, tree.z_proposal_grad, key, step)
            row = Transitions(
                tree.z_proposal,
                tree.z_proposal_grad,
                tree.num_proposals,
                tree.diverging,
                accept,
                tree.z_proposal_energy,
                tree.z_proposal_pe,
                step_size,
                tree.depth,
            )
            out = jax.tree.map(lambda buf, v: buf.at[i].set(v), out, row)
            return new, out

        return jax.lax.fori_loop(0, n, transition, (state, empty_transitions(capacity, dim)))

    return chunk
