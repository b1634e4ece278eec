"""A PyMC model's log density and derived quantities as JAX functions of one flat vector.

The model stays the declaration: this module only compiles what it declares. ``logp(x,
*data)`` is the model's joint log density (Jacobians of the transforms included) at the
unconstrained point ``x`` (every value variable raveled in ``model.value_vars`` order);
``derived(x)`` returns what a fit stores for each draw: the free random variables on their
own scale and every deterministic, as ``pm.sample`` stores them. With
``observed_as_input=True`` the observed values become arguments of ``logp`` instead of
constants, so one compiled sampler serves every dataset of the same layout (calibration
refits hundreds of simulated datasets with one compilation).

Example
-------
>>> density = LogDensity.from_model(model)  # doctest: +SKIP
>>> density.logp(density.x0)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class LogDensity:
    """Compiled-ready log density of a PyMC model (see the module docstring)."""

    logp: Callable[..., Any]
    derived: Callable[[Any], list[Any]]
    x0: np.ndarray
    var_names: list[str]
    dims: dict[str, tuple[str, ...]]
    coords: dict[str, list[Any]]
    data_names: tuple[str, ...] = ()
    data_values: tuple[np.ndarray, ...] = ()
    data_dtypes: tuple[np.dtype, ...] = ()
    value_names: list[str] = field(default_factory=list)

    @property
    def dim(self) -> int:
        return int(self.x0.size)

    @classmethod
    def from_model(cls, model: Any, observed_as_input: bool = False) -> LogDensity:
        from pymc.util import get_default_varnames
        from pytensor.graph.replace import clone_replace

        observed = (
            [model.rvs_to_values[rv] for rv in model.observed_RVs] if observed_as_input else []
        )
        inputs = [var.type() for var in observed]
        [logp_graph] = clone_replace(
            [model.logp()], replace=dict(zip(observed, inputs, strict=True))
        )
        stored = list(get_default_varnames(model.unobserved_value_vars, include_transformed=False))
        x0, unravel = flat_point(model)
        logp_fn = jax_of_point(model, [logp_graph], unravel, inputs)
        derived = jax_of_point(model, stored, unravel)

        def logp(x: Any, *values: Any) -> Any:
            return logp_fn(x, *values)[0]

        names = [v.name for v in stored]
        dims = {n: tuple(model.named_vars_to_dims.get(n, ()) or ()) for n in names}
        coords = {d: list(v) for d, v in model.coords.items() if v is not None}
        return cls(
            logp=logp,
            derived=derived,
            x0=x0,
            var_names=names,
            dims=dims,
            coords=coords,
            data_names=tuple(rv.name for rv in model.observed_RVs) if observed_as_input else (),
            data_values=tuple(np.asarray(v.data) for v in observed),
            data_dtypes=tuple(np.dtype(v.dtype) for v in observed),
            value_names=[v.name for v in model.value_vars],
        )


def flat_point(model: Any) -> tuple[np.ndarray, Callable[[Any], list[Any]]]:
    """The model's initial point as one flat vector ``x`` (every value variable raveled, in
    ``model.value_vars`` order: the sampler's coordinates), and the function that splits such
    a vector back into the value variables."""
    import jax.numpy as jnp
    from jax.flatten_util import ravel_pytree

    point = model.initial_point()
    x0, unravel = ravel_pytree([jnp.asarray(point[v.name]) for v in model.value_vars])
    return np.asarray(x0, dtype=float), unravel


def jax_of_point(
    model: Any,
    outputs: Sequence[Any],
    unravel: Callable[[Any], list[Any]],
    extra_inputs: Sequence[Any] = (),
) -> Callable[..., list[Any]]:
    """PyTensor graphs ``outputs`` of the model's value variables (and ``extra_inputs``) as one
    JAX function ``f(x, *extra) -> [values]`` of the flat point ``x`` of :func:`flat_point`."""
    from pymc.sampling.jax import get_jaxified_graph

    graph = get_jaxified_graph(inputs=[*model.value_vars, *extra_inputs], outputs=list(outputs))

    def f(x: Any, *extra: Any) -> list[Any]:
        return list(graph(*unravel(x), *extra))

    return f
