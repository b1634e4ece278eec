"""A PyMC model's log density and derived quantities as JAX functions of one flat vector.

The model stays the declaration: this module only compiles what it declares. ``logp(x,
*data)`` is the model's joint log density (Jacobians of the transforms included) at the
unconstrained point ``x`` (every value variable raveled in ``model.value_vars`` order);
``derived(x)`` returns what a fit stores for each draw: the free random variables on their
own scale and every deterministic, as ``pm.sample`` stores them. With
``observed_as_input=True`` the observed values become arguments of ``logp`` instead of
constants, so one compiled sampler serves every dataset of the same layout (calibration
refits hundreds of simulated datasets with one compilation). ``per_draw`` graphs (a fit's
log prior terms, say) become one more function, ``per_draw(x)``, which the sampler evaluates
once on its final draws (not with ``observed_as_input``: they would read the model's own
data). All of them share one pass of PyTensor's rewrites.

Example
-------
>>> density = LogDensity.from_model(model)  # doctest: +SKIP
>>> density.logp(density.x0)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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
    per_draw: Callable[[Any], list[Any]] | None = None
    per_draw_names: tuple[str, ...] = ()

    @property
    def dim(self) -> int:
        return int(self.x0.size)

    @classmethod
    def from_model(
        cls,
        model: Any,
        observed_as_input: bool = False,
        per_draw: Mapping[str, Any] | None = None,
    ) -> LogDensity:
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
        per_draw = dict(per_draw or {})
        if per_draw and observed_as_input:
            # the per-draw graphs would read the model's own data, not a refit's
            raise ValueError("per_draw terms are not supported with observed_as_input=True")
        x0, unravel = flat_point(model)
        groups = [[logp_graph], stored] + ([list(per_draw.values())] if per_draw else [])
        logp_fn, derived, *extra = jax_of_point_groups(model, groups, unravel, inputs)

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
            per_draw=extra[0] if extra else None,
            per_draw_names=tuple(per_draw),
        )


def flat_point(model: Any) -> tuple[np.ndarray, Callable[[Any], list[Any]]]:
    """The model's initial point as one flat vector ``x`` (every value variable raveled, in
    ``model.value_vars`` order: the sampler's coordinates), and the function that splits such
    a vector (NumPy's or JAX's) back into the value variables.

    >>> import pymc as pm
    >>> with pm.Model() as m:
    ...     _ = pm.Normal("a", 0.0, 1.0, shape=(2, 3))
    ...     _ = pm.HalfNormal("b", 1.0)
    >>> x0, unravel = flat_point(m)
    >>> x0.shape, [v.shape for v in unravel(np.arange(7.0))]
    ((7,), [(2, 3), ()])
    """
    point = model.initial_point()
    values = [np.asarray(point[v.name]) for v in model.value_vars]
    layout = []  # (start, end, shape, dtype) of each value variable in x
    start = 0
    for v in values:
        layout.append((start, start + v.size, v.shape, v.dtype))
        start += v.size

    def unravel(x: Any) -> list[Any]:
        parts = [x[a:b].reshape(shape) for a, b, shape, _ in layout]
        return [
            p if p.dtype == dtype else p.astype(dtype)
            for p, (*_, dtype) in zip(parts, layout, strict=True)
        ]

    x0 = np.concatenate([v.ravel() for v in values]).astype(float) if values else np.zeros(0)
    return x0, unravel


def jax_of_point_groups(
    model: Any,
    groups: Sequence[Sequence[Any]],
    unravel: Callable[[Any], list[Any]],
    extra_inputs: Sequence[Any] = (),
) -> list[Callable[..., list[Any]]]:
    """Each group of PyTensor graphs of the model's value variables (and ``extra_inputs``) as
    one JAX function ``f(x, *extra) -> [values]`` of the flat point ``x`` of
    :func:`flat_point`. ``extra`` holds a value for every one of ``extra_inputs``, or none
    where the group's graphs (once rewritten) read none of them.

    PyTensor's JAX rewrites run once over all the groups, where PyMC's ``get_jaxified_graph``
    runs them once per group: the rewrites are most of the cost of turning a graph into
    JAX, and the groups of a fit (its log density, stored quantities and per-draw terms)
    share most of their subgraphs."""
    import pytensor.tensor as pt
    from pytensor.compile import SharedVariable, mode
    from pytensor.graph.fg import FunctionGraph
    from pytensor.graph.replace import clone_replace
    from pytensor.graph.traversal import graph_inputs
    from pytensor.link.jax.dispatch import jax_funcify
    from pytensor.tensor.random.type import RandomType

    inputs = [*model.value_vars, *extra_inputs]
    flat = [graph for group in groups for graph in group]
    # shared variables (pm.Data) become constants, as get_jaxified_graph makes them
    shared = [v for v in graph_inputs(flat) if isinstance(v, SharedVariable)]
    if any(isinstance(v.type, RandomType) for v in shared):
        raise ValueError("the graphs hold a random generator: they are not a log density's")
    constants: dict[Any, Any] = {v: pt.constant(v.get_value(borrow=True)) for v in shared}
    flat = clone_replace(flat, replace=constants)
    joint = FunctionGraph(inputs=inputs, outputs=flat, clone=True)
    mode.JAX.optimizer.rewrite(joint)
    values, extras = joint.inputs[: len(model.value_vars)], joint.inputs[len(model.value_vars) :]
    functions, start = [], 0
    for group in groups:
        outputs = joint.outputs[start : start + len(group)]
        start += len(group)
        reads = set(graph_inputs(outputs))
        used = [v in reads for v in extras]  # a rewrite can drop an input (only its shape read)
        group_inputs = [*values, *(v for v, u in zip(extras, used, strict=True) if u)]
        graph = jax_funcify(FunctionGraph(inputs=group_inputs, outputs=outputs, clone=True))

        def f(
            x: Any, *extra: Any, graph: Callable[..., Any] = graph, used: list[bool] = used
        ) -> list[Any]:
            if extra and len(extra) != len(used):
                raise TypeError(f"expected {len(used)} extra inputs, got {len(extra)}")
            picked = [e for e, u in zip(extra, used, strict=True) if u] if extra else []
            return list(graph(*unravel(x), *picked))

        functions.append(f)
    return functions


DRAW_BATCH = 512  # draws per call of evaluate_over_draws


def evaluate_over_draws(
    vectorised: Callable[[Any], Sequence[Any]], names: Sequence[str], z: np.ndarray
) -> dict[str, np.ndarray]:
    """``vectorised`` (a function of one point, vectorised over a leading axis of points and
    jitted: ``jax.jit(jax.vmap(density.derived))``, say) at draws ``z`` of shape ``(chain,
    draw, dim)``, its outputs by name, each ``(chain, draw, ...)``. ``DRAW_BATCH`` draws a
    call, the last batch padded: memory stays bounded, and every call has one shape,
    compiled once.

    >>> import jax
    >>> f = jax.jit(jax.vmap(lambda x: [x.sum(), 2 * x]))
    >>> out = evaluate_over_draws(f, ["total", "twice"], np.ones((2, 3, 4)))
    >>> out["total"].shape, out["twice"].shape
    ((2, 3), (2, 3, 4))
    """
    chains, draws, dim = z.shape
    flat = z.reshape(chains * draws, dim)
    batch = max(min(DRAW_BATCH, len(flat)), 1)
    padded = np.concatenate([flat, np.repeat(flat[-1:], -len(flat) % batch, axis=0)])
    parts = [vectorised(padded[i : i + batch]) for i in range(0, len(padded), batch)]
    return {
        name: np.concatenate([np.asarray(p[k]) for p in parts])[: len(flat)].reshape(
            chains, draws, *np.shape(parts[0][k])[1:]
        )
        for k, name in enumerate(names)
    }
