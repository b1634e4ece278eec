"""What the sampler's kernels (:mod:`~bayesscale.sampling.nuts`, :mod:`~bayesscale.sampling.mams`)
and their driver (:mod:`~bayesscale.sampling.engine`) share: a chain's state, the per-transition
output of a compiled chunk, the dual-averaging state of the step size and the energy error
that counts as a divergence.

NumPy only at import (JAX where the output buffers are made), so a reader of fit files can
take ``MAX_DELTA_ENERGY`` without loading JAX.

Example
-------
>>> state = step_size_state(0.5)
>>> round(float(state[0]), 4), round(float(state[4]), 4)
(-0.6931, 1.6094)
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

MAX_DELTA_ENERGY = 1000.0  # a trajectory whose energy error exceeds this diverged


class ChainState(NamedTuple):
    """Where one chain is: position, potential, its gradient, the random key and the
    dual-averaging state of the log step size ``(x_t, x_avg, g_avg, t, prox_center)``."""

    z: Any
    potential: Any
    grad: Any
    key: Any
    step: tuple[Any, Any, Any, Any, Any]


class Transitions(NamedTuple):
    """Per-transition output of a chunk, each with a leading ``capacity`` axis (only the
    first ``n`` rows are filled)."""

    z: Any
    grad: Any
    steps: Any
    diverging: Any
    accept: Any
    energy: Any
    potential: Any
    step_size: Any
    depth: Any


def empty_transitions(capacity: int, dim: int) -> Transitions:
    """Zeroed output buffers of a chunk of ``capacity`` transitions in ``dim`` dimensions."""
    import jax.numpy as jnp

    return Transitions(
        z=jnp.zeros((capacity, dim)),
        grad=jnp.zeros((capacity, dim)),
        steps=jnp.zeros(capacity, dtype=int),
        diverging=jnp.zeros(capacity, dtype=bool),
        accept=jnp.zeros(capacity),
        energy=jnp.zeros(capacity),
        potential=jnp.zeros(capacity),
        step_size=jnp.zeros(capacity),
        depth=jnp.zeros(capacity, dtype=int),
    )


def step_size_state(step_size: Any) -> tuple[Any, Any, Any, Any, Any]:
    """A fresh dual-averaging state around ``step_size`` (the iterate starts there; the
    proximal centre is ``log(10 eps)`` as in Hoffman and Gelman 2014). In NumPy: the driver
    makes one between chunks, and each JAX operation on the host compiles a small program
    in a fresh process (9 states, 0.1 s, in a law fit).

    >>> [float(v) for v in step_size_state(1.0)]
    [0.0, 0.0, 0.0, 0.0, 2.302585092994046]
    """
    log_step = np.log(np.asarray(step_size, dtype=float))
    zero = np.zeros_like(log_step)
    return (
        log_step,
        log_step,
        zero,
        np.zeros(np.shape(log_step), dtype=np.int64),
        log_step + np.log(10.0),
    )
