"""The recipe under a compute budget: the product cost propagated through a law fit's posterior.

Users who budget GPU time pay for FLOPs, which grow with the model size and the tokens trained
on, not with a sum of unit prices. With cost powers ``m_i`` (how the FLOPs grow with axis ``i``)

.. math::

    \\min_D \\; \\sum_i K_{d,i} D_i^{-\\alpha_{d,i}}
    \\quad\\text{s.t.}\\quad c \\prod_i D_i^{m_i} \\le C, \\qquad lo_i \\le D_i \\le hi_i,

solved exactly per posterior draw by :func:`bayesscale.core.allocate.solve_product` (convex in
``log D``), with local exponents ``e_i = d log D_i / d log C`` from
:func:`bayesscale.core.allocate.local_exponents_product`. An axis with ``m_i = 0`` costs no
compute (e.g. environments, if their synthesis is paid in money, not GPU time) and goes to its
upper bound, which must then be finite. A power for ``params_b`` makes the model size an axis
(the fit's size term, coefficient ``E N_ref^alpha_N``).

Synthetic-data discounts do not enter: a synthetic token costs the same FLOPs as a real one.
Laws with an interaction term are not product-separable: use
:func:`bayesscale.core.allocate.solve_general` for them.

Example
-------
>>> from bayesscale.recipe.synthetic import synthetic_fit
>>> ds = compute_recipe(synthetic_fit(draws=20, spread=0.0), [1e9])
>>> float(ds["recipe_exponent"].sum("axis").max().round(9))
1.0
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike, NDArray

from bayesscale import names
from bayesscale.core import allocate, laws
from bayesscale.core.form_allocation import solve_forms
from bayesscale.core.form_law import FormLaw
from bayesscale.core.geometric import Posynomial
from bayesscale.data.extrapolation import Reach, reach_attr
from bayesscale.law.mixed_draws import mixture_weights, recipe_draws
from bayesscale.recipe.draws import (
    RecipeError,
    add_data_extent,
    bounds_arrays,
    bounds_within_data,
)

COST_COMPUTE = "compute (product): c prod_i D_i^m_i"

Array = NDArray[np.float64]


def cost_powers(axes: Sequence[str], powers: Mapping[str, float] | None) -> np.ndarray:
    """Cost powers per axis, default 1 (FLOPs proportional to the product of every axis).

    >>> cost_powers(["env", "task", "traj"], {"env": 0}).tolist()
    [0.0, 1.0, 1.0]
    """
    out = np.ones(len(axes))
    for axis, value in (powers or {}).items():
        if axis not in axes:
            raise RecipeError(
                f"cost power for {axis!r}, which is not an axis of the fit: {list(axes)}"
            )
        if not (np.isfinite(value) and value >= 0):
            raise RecipeError(f"cost power for {axis!r} must be finite and >= 0, got {value}")
        out[list(axes).index(axis)] = value
    return out


def compute_recipe(
    fit: xr.DataTree,
    budgets: ArrayLike,
    *,
    powers: Mapping[str, float] | None = None,
    unit_cost: float = 1.0,
    bounds: Mapping[str, tuple[float | None, float | None]] | None = None,
    settings: Sequence[str] | None = None,
    max_draws: int | None = None,
    within_data: Reach | None = None,
) -> xr.Dataset:
    """Per-draw optimal allocation under the compute budget ``c prod_i D_i^m_i <= C``.

    ``budgets`` are in the units of ``unit_cost`` (e.g. FLOPs with ``unit_cost`` the FLOPs of
    one unit of every axis). Returns per-draw ``allocation`` (= ``purchased``),
    ``success_at_optimum``, ``recipe_exponent`` and ``shadow_price`` with dims
    ``(chain, draw, setting, budget[, axis])``, which :func:`bayesscale.recipe.output` and
    :func:`bayesscale.recipe.output` read like the additive recipe's.
    """
    budgets_arr = np.atleast_1d(np.asarray(budgets, dtype=float))
    if budgets_arr.ndim != 1 or (~np.isfinite(budgets_arr) | (budgets_arr <= 0)).any():
        raise RecipeError(f"budgets must be finite and > 0, got {budgets_arr.tolist()}")
    if not (np.isfinite(unit_cost) and unit_cost > 0):
        raise RecipeError(f"unit_cost must be finite and > 0, got {unit_cost}")
    if within_data is not None:
        bounds = bounds_within_data(
            fit, within_data, bounds, settings, names.PARAMS_B in (powers or {})
        )
    draws = recipe_draws(fit, settings, max_draws, size_axis=names.PARAMS_B in (powers or {}))
    if draws.pair is not None:
        raise RecipeError(
            "the fit has an interaction term, which a product cost cannot separate; solve it "
            "per draw with bayesscale.core.allocate.solve_general"
        )
    axes = draws.axes
    m = cost_powers(axes, powers)
    lo, hi = bounds_arrays(axes, bounds)
    free_unbounded = [a for a, mi, h in zip(axes, m, hi, strict=True) if mi == 0 and np.isinf(h)]
    if free_unbounded:
        raise RecipeError(
            f"axis/axes {free_unbounded} cost no compute (power 0) and need a finite upper bound"
        )
    need = unit_cost * float(np.prod(lo**m))
    if (budgets_arr < need * (1 - 1e-12)).any():
        raise RecipeError(
            f"compute budget {budgets_arr.min():g} is too small to buy the lower bounds "
            f"({', '.join(f'{a} >= {v:g}' for a, v in zip(axes, lo, strict=True))}), which "
            f"need {need:g}"
        )
    law = draws.law(extra=1)  # (S, G, 1[, n]): broadcast over the budgets
    if isinstance(law, FormLaw):
        sol, expo = solve_forms_product(law, m, unit_cost, budgets_arr, lo, hi)
    else:
        sol = allocate.solve_product(law.coef, law.alpha, budgets_arr, m, unit_cost, lo, hi)
        expo = allocate.local_exponents_product(sol, law.alpha, m)
    success = laws.success_from_loss(law.loss(sol.sizes))
    chains = np.unique(draws.chain).astype(int)
    n_draw = draws.samples // chains.size

    def per_draw(arr: np.ndarray, extra: tuple[str, ...] = ()) -> xr.Variable:
        dims = (names.CHAIN_DIM, names.DRAW_DIM, names.SETTING_DIM, names.BUDGET_DIM, *extra)
        return xr.Variable(dims, arr.reshape(chains.size, n_draw, *arr.shape[1:]))

    ds = xr.Dataset(
        {
            names.ALLOCATION: per_draw(sol.sizes, (names.AXIS_DIM,)),
            names.PURCHASED: per_draw(sol.sizes, (names.AXIS_DIM,)),
            names.SHADOW_PRICE: per_draw(sol.multiplier),
            names.SUCCESS_OPTIMUM: per_draw(success),
            names.RECIPE_EXPONENT: per_draw(expo, (names.AXIS_DIM,)),
        },
        coords={
            names.CHAIN_DIM: chains,
            names.DRAW_DIM: draws.draw[:n_draw].astype(int),
            names.SETTING_DIM: list(draws.settings),
            names.BUDGET_DIM: budgets_arr,
            names.AXIS_DIM: list(axes),
        },
    )
    ds.attrs = {
        names.ATTR_COST_MODEL: COST_COMPUTE,
        names.ATTR_CURRENCY: "compute units",
        names.ATTR_PRICES: json.dumps({"unit_cost": unit_cost}),
        "cost_powers": json.dumps(dict(zip(axes, m.tolist(), strict=True))),
        "draws_left_out": draws.left_out,
        names.ATTR_KAPPA_SOURCE: "not applicable (a synthetic token costs the same compute)",
        "bounds": json.dumps(
            {a: [lo[i], None if np.isinf(hi[i]) else hi[i]] for i, a in enumerate(axes)}
        ),
        "within_data": reach_attr(within_data),
        names.ATTR_LAW_FORMS: json.dumps(mixture_weights(fit)),
    }
    return add_data_extent(ds, fit)


def solve_forms_product(
    law: FormLaw, powers: Array, unit_cost: float, budgets: Array, lo: Array, hi: Array
) -> tuple[allocate.Allocation, Array]:
    """The compute recipe of laws of any form (a stack's mixture, or a fit whose axes have other
    forms): the product cost ``c prod_i D_i^m_i`` is a one-term posynomial, solved by
    :func:`~bayesscale.core.form_allocation.solve_forms` over the axes that cost compute; an
    axis with ``m_i = 0`` costs nothing and every form's loss falls with its size, so it sits
    at its (finite) upper bound, its term joining the floor. The multiplier is per unit of
    ``log C``, as :func:`~bayesscale.core.allocate.solve_product`'s; the local exponents
    ``d log D / d log C`` are central differences
    (:func:`~bayesscale.core.allocate.local_exponents_central`)."""
    paid = powers > 0
    fields = (law.amplitude, law.alpha, law.reference, law.knee, law.midpoint, law.saturating)
    full = np.broadcast_shapes(*(np.shape(x) for x in fields))
    at_top = np.where(paid, law.reference, np.where(np.isfinite(hi), hi, 1.0))
    unpaid = np.where(~paid, law.terms(np.broadcast_to(at_top, full))[0], 0.0).sum(axis=-1)
    reduced = law.map_axes(lambda x: np.broadcast_to(x, full)[..., paid], floor=law.floor + unpaid)
    cost = Posynomial(np.array([unit_cost]), powers[paid][None, :])

    def solve(b: Array) -> allocate.Allocation:
        return solve_forms(reduced, cost, b, lo[paid], hi[paid])

    part = solve(budgets)
    part_expo = allocate.local_exponents_central(solve, budgets)
    lead = part.sizes.shape[:-1]
    sizes = np.broadcast_to(np.where(paid, 1.0, hi), (*lead, paid.size)).copy()
    sizes[..., paid] = part.sizes
    expo = np.zeros((*lead, paid.size))
    expo[..., paid] = part_expo
    at_lower = np.zeros((*lead, paid.size), dtype=bool)
    at_lower[..., paid] = part.at_lower
    at_lower[..., ~paid] = hi[~paid] <= lo[~paid]
    at_upper = np.ones((*lead, paid.size), dtype=bool)
    at_upper[..., paid] = part.at_upper
    sol = allocate.Allocation(
        sizes, part.multiplier * budgets, part.spent, at_lower, at_upper, part.fallbacks
    )
    return sol, expo
