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
from numpy.typing import ArrayLike

from bayesscale import names
from bayesscale.core import allocate, laws
from bayesscale.data.extrapolation import Reach, reach_attr
from bayesscale.law.posterior import law_draws
from bayesscale.recipe.draws import (
    RecipeError,
    add_data_extent,
    bounds_arrays,
    bounds_within_data,
)

COST_COMPUTE = "compute (product): c prod_i D_i^m_i"


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
    draws = law_draws(fit, settings, max_draws, size_axis=names.PARAMS_B in (powers or {}))
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
    sol = allocate.solve_product(
        draws.coef[:, :, None, :],
        draws.alpha[:, :, None, :],
        budgets_arr[None, None, :],
        m,
        unit_cost,
        lo,
        hi,
    )
    law = allocate.PowerLaw(
        draws.coef[:, :, None, :], draws.alpha[:, :, None, :], draws.floor[:, :, None]
    )
    success = laws.success_from_loss(law.loss(sol.sizes))
    expo = allocate.local_exponents_product(sol, draws.alpha[:, :, None, :], m)
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
    }
    return add_data_extent(ds, fit)
