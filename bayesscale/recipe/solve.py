"""The budget recipe under uncertainty: the allocator propagated through a law fit's posterior.

For every posterior draw ``d`` and setting, the law in raw counts is

.. math::

    L_d(D) = L_{\\infty,d} + E_d (N/N_\\mathrm{ref})^{-\\alpha_N}
             + \\sum_i K_{d,i} D_i^{-\\alpha_{d,i}} - \\gamma_d (D_a D_b)^{-\\beta_d},
    \\qquad K_{d,i} = A_{d,i} D_{\\mathrm{ref},i}^{\\alpha_{d,i}},

and success is ``p = exp(-L)``. Money buys *purchased* units ``u_i``; the law sees effective
units ``D_i = kappa_i u_i`` (``kappa`` the discount of synthetic data, 1 for real data). What
money buys is the exact cost (:func:`~bayesscale.core.prices.money_cost`):
``Phi(u) = c_E u_E + c_T u_T + c_traj u_T u_tau``, a trajectory being one rollout of one task,
so the problem is a geometric program, solved exactly per draw
(:func:`~bayesscale.core.geometric.solve_posynomial`). ``cost_model="linearised"`` is the
paper's convention instead: an additive cost whose rollout price is ``c_traj D_T*`` at the
optimum, a fixed point solved per draw (:func:`linearised_allocation`). :func:`recipe` returns

* the optimal allocation of every draw (exact KKT), hence credible intervals on the
  allocation itself, the trajectories and money per axis it buys, the success it buys, and
  the local recipe exponents ``e_i = d log D_i / d log B`` at each budget;
* the single decision that maximises posterior expected success ``E_d[p_d(D)]``, and the
  distribution of success it yields;
* comparisons at equal budget against a trajectory-heavy and a Chinchilla-style allocation,
  and the budget multiplier each would need to match the decision;
* the regime switch of an axis (for a world axis: the price per world above which buying
  more than the minimum number of worlds is no longer worth it).

Example
-------
>>> from bayesscale.recipe.synthetic import synthetic_fit
>>> fit = synthetic_fit(draws=50, spread=0.0)
>>> ds = recipe(fit, [1e5])
>>> sorted(ds.sizes)
['axis', 'baseline', 'budget', 'chain', 'draw', 'setting']
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from bayesscale import names
from bayesscale.core import allocate, laws
from bayesscale.core.form_allocation import solve_forms
from bayesscale.core.form_law import FormLaw, Law
from bayesscale.core.geometric import (
    Posynomial,
    local_exponents_posynomial,
    solve_posynomial,
)
from bayesscale.core.prices import Prices
from bayesscale.data.extrapolation import Reach, reach_attr
from bayesscale.data.fitfile import fit_spec
from bayesscale.law.mixed_draws import mixture_weights
from bayesscale.law.posterior import LawDraws
from bayesscale.recipe.baselines import baseline_units, budget_multiplier
from bayesscale.recipe.decision import decide
from bayesscale.recipe.draws import (
    COST_EXACT,
    COST_LINEARISED,
    COST_MODELS,
    COST_TEXT,
    Array,
    RecipeError,
    RecipeInputs,
    add_data_extent,
    effective_cost,
    recipe_inputs,
    success_of,
)

# --- the recipe ------------------------------------------------------------------------------


def _decision(
    law: Law,
    kappa: Array,
    cost: Posynomial,
    budget: float,
    lo: Array,
    hi: Array,
    start: Array,
) -> tuple[Array, bool]:
    """Purchased units (n,) maximising ``mean_d exp(-max(L_d(kappa_d u), 0))`` s.t.
    ``Phi(u) <= B``, and whether the solver converged.

    SLSQP in ``y = log u`` (the budget constraint ``log Phi <= log B`` is then convex), with
    the objective and its gradient from one pass over the draws, started at ``start`` (the
    median of the per-draw optimal purchases, pulled back onto the budget where it costs
    more). Status 8 (no descent
    left at machine precision) counts as converged; on any other failure the better of
    SLSQP's point and the start is returned.
    """
    log_b = np.log(budget)

    def fun(y: Array) -> tuple[float, Array]:
        u = np.exp(y)
        d = kappa * u
        loss = law.loss(d)
        p = laws.success_from_loss(loss)
        # p = exp(-max(L, 0)): a draw whose loss is below 0 has p = 1 and no gradient
        dloss = np.where((loss > 0.0)[:, None], law.gradient(d), 0.0)
        g = np.mean(dloss * d * p[:, None], axis=0)
        return float(1.0 - np.mean(p)), np.asarray(g, dtype=float)

    def spend_left(y: Array) -> float:
        return float(log_b - np.log(cost(np.exp(y))))

    def spend_jac(y: Array) -> Array:
        terms = cost.terms(np.exp(y))
        return np.asarray(-(terms @ cost.powers) / terms.sum(), dtype=float)

    y_lo, y_hi = np.log(lo), np.log(hi)
    y0 = _onto_budget(np.clip(np.log(start), y_lo, y_hi), cost, budget, y_lo)
    from scipy import optimize  # only here: a fallback solver; SciPy's import is 0.5 s

    res = optimize.minimize(
        fun,
        y0,
        jac=True,
        method="SLSQP",
        bounds=[(a, b if np.isfinite(b) else None) for a, b in zip(y_lo, y_hi, strict=True)],
        constraints=[{"type": "ineq", "fun": spend_left, "jac": spend_jac}],
        options={"ftol": 1e-15, "maxiter": 500},
    )
    y = _onto_budget(np.clip(res.x, y_lo, y_hi), cost, budget, y_lo)
    if not res.success and fun(y0)[0] < fun(y)[0]:
        y = y0
    # exp(log u) can overshoot a bound by an ulp: the decision stays in the box it was asked in
    return np.clip(np.exp(y), lo, hi), bool(res.success or res.status == 8)


def _onto_budget(y: Array, cost: Posynomial, budget: float, y_lo: Array) -> Array:
    """Pull ``log u`` back onto ``Phi(u) <= B`` (SLSQP may overshoot by ~1e-9; the start may
    lie anywhere), moving geometrically toward the lower bounds (bisection)."""
    if float(cost(np.exp(y))) <= budget:
        return y
    a, b = 0.0, 1.0
    for _ in range(80):
        t = 0.5 * (a + b)
        if float(cost(np.exp(y_lo + t * (y - y_lo)))) <= budget:
            a = t
        else:
            b = t
    return np.asarray(y_lo + a * (y - y_lo), dtype=float)


def linearised_allocation(
    law: allocate.PowerLaw,
    cost: Posynomial,
    budgets: Array,
    lo: Array,
    hi: Array,
    start: Array,
) -> tuple[allocate.Allocation, Array]:
    """The paper's linearised convention: an additive cost whose price of axis ``i`` is the
    marginal price of its own monomial at the optimum, ``p_i = w_i prod_(j != i) D*_j^(a_ij)``
    (for rollouts per task, ``c_traj D_T*``), solved per problem as a fixed point of
    ``p -> p(D*(p))`` (damped in ``log p``). Every monomial is linear in its own axis, so at the
    fixed point ``sum_i p_i D*_i = Phi(D*)``: the linearised recipe spends the same money.
    Returns the allocation and the linear prices (..., n). ``start``: sizes to linearise at
    first (the anchors, or a neighbouring budget's solution), broadcast with the bounds."""
    a = cost.powers
    off = a - np.eye(a.shape[0])

    def prices_at(d: Array) -> Array:
        return np.asarray(cost.weights * np.exp(np.log(d) @ off.T), dtype=float)

    start = np.asarray(start, dtype=float)
    log_p = np.log(prices_at(np.broadcast_to(start, np.broadcast_shapes(start.shape, lo.shape))))
    sol = None
    for _ in range(200):
        sol = allocate.solve_interaction(law, np.exp(log_p), budgets, lo, hi)
        new = np.log(prices_at(sol.sizes))
        step = np.max(np.abs(new - log_p))
        log_p = 0.5 * (log_p + new)
        if step < 1e-11:
            break
    else:
        raise RecipeError("the linearised convention's prices did not settle in 200 rounds")
    assert sol is not None
    prices = np.exp(log_p)
    return allocate.solve_interaction(law, prices, budgets, lo, hi), prices


def recipe(
    fit: xr.DataTree,
    budgets: ArrayLike,
    *,
    prices: Prices | None = None,
    pricing: xr.DataTree | None = None,
    kappa: Mapping[str, float] | None = None,
    bounds: Mapping[str, tuple[float | None, float | None]] | None = None,
    settings: Sequence[str] | None = None,
    grow_axis: str | None = None,
    switch_axes: Sequence[str] | None = None,
    max_draws: int | None = None,
    decision: bool = True,
    multipliers: bool = True,
    within_data: Reach | None = None,
    cost_model: str = COST_EXACT,
    seed: int = 0,
) -> xr.Dataset:
    """Propagate a law fit's posterior through the allocator at each budget.

    ``prices`` default to the paper's; ``pricing`` (a pricing fit) and/or ``kappa`` give
    discounts; ``bounds`` are in purchased units; ``within_data`` caps every axis at that many
    times its largest swept value (one factor, or one per axis) (:func:`~bayesscale.recipe.draws.bounds_within_data`);
    ``cost_model`` is ``"exact"`` (money is what is bought, the default) or ``"linearised"``
    (the paper's convention, for reproduction: the per-draw allocation only, no decision);
    ``grow_axis`` is the trajectory-heavy baseline's growing axis (default ``traj`` if the fit
    has it, else its last axis); ``switch_axes`` get a regime-switch price (default: the
    fit's world axis, if any). Returns per-draw variables (chain, draw, setting, budget[,
    axis | baseline]) and the decision (setting, budget, axis), and how far it lies beyond
    the data (:func:`~bayesscale.recipe.draws.add_data_extent`);
    :func:`~bayesscale.recipe.output.summarize` turns it into intervals.
    """
    budgets_arr = _checked_budgets(budgets, cost_model)
    inputs = recipe_inputs(
        fit,
        prices=prices,
        pricing=pricing,
        kappa=kappa,
        bounds=bounds,
        settings=settings,
        max_draws=max_draws,
        within_data=within_data,
        seed=seed,
    )
    _check_fundable(budgets_arr, inputs)
    draws, cost, kap, lo, hi = inputs.draws, inputs.cost, inputs.kappa, inputs.lo, inputs.hi
    grow = _grow_index(draws.axes, grow_axis)
    anchor = np.clip(draws.reference, lo, hi)
    law = draws.law()
    solved = _allocate_per_draw(draws, cost, kap, lo, hi, anchor, budgets_arr, cost_model)
    purchased = solved.sol.sizes / kap[:, None, None, :]
    base_success, base_units = _baselines(law, kap, cost, anchor, lo, hi, grow, budgets_arr)
    decided = None
    if decision and cost_model == COST_EXACT:
        decided = _decide_all(
            draws, solved.batched, law, inputs, budgets_arr, purchased, anchor, grow, multipliers
        )
    switch = list(switch_axes) if switch_axes is not None else _world_axes(fit, draws.axes)
    if isinstance(law, FormLaw):
        switch = []  # the switch price's fixed point solves power laws
    ds = _recipe_dataset(
        draws, inputs, budgets_arr, solved, purchased, base_success, base_units, decided, switch
    )
    ds.attrs = _recipe_attrs(
        inputs,
        cost_model,
        grow,
        0 if decided is None else decided.failures,
        solved.sol.fallbacks,
        anchor,
        within_data,
    )
    ds.attrs[names.ATTR_LAW_FORMS] = json.dumps(mixture_weights(fit))
    return add_data_extent(ds, fit)


_BASELINES = (names.TRAJ_HEAVY, names.CHINCHILLA)
_DIMS_SGB = (names.CHAIN_DIM, names.DRAW_DIM, names.SETTING_DIM, names.BUDGET_DIM)


def _checked_budgets(budgets: ArrayLike, cost_model: str) -> Array:
    """The budgets as a 1-d array, after checking them and the cost model's name."""
    budgets_arr = np.atleast_1d(np.asarray(budgets, dtype=float))
    if budgets_arr.ndim != 1 or (~np.isfinite(budgets_arr) | (budgets_arr <= 0)).any():
        raise RecipeError(f"budgets must be finite and > 0, got {budgets_arr.tolist()}")
    if cost_model not in COST_MODELS:
        raise RecipeError(f"cost_model must be one of {list(COST_MODELS)}, got {cost_model!r}")
    return budgets_arr


def _check_fundable(budgets_arr: Array, inputs: RecipeInputs) -> None:
    """Every budget must buy the lower bounds."""
    axes, lo = inputs.draws.axes, inputs.lo
    floor_cost = float(inputs.cost(lo))
    if (budgets_arr < floor_cost * (1 - 1e-12)).any():
        raise RecipeError(
            f"budget {budgets_arr.min():g} is too small to buy the lower bounds "
            f"({', '.join(f'{a} >= {v:g}' for a, v in zip(axes, lo, strict=True))}), which cost "
            f"{floor_cost:g} {inputs.prices.currency}"
        )


class _PerDraw(NamedTuple):
    """The per-draw problem in effective units, batched (S, G, B, ...), and its solution."""

    batched: Law
    eff_cost: Posynomial
    eff_lo: Array
    eff_hi: Array
    sol: allocate.Allocation
    expo: Array


def _allocate_per_draw(
    draws: LawDraws,
    cost: Posynomial,
    kap: Array,
    lo: Array,
    hi: Array,
    anchor: Array,
    budgets_arr: Array,
    cost_model: str,
) -> _PerDraw:
    """The optimal allocation of every draw, setting and budget, and its recipe exponents, by
    the cost model: linearised (a fixed point), a linear cost (the additive solver) or the
    exact posynomial (a geometric program)."""
    n = len(draws.axes)
    eff = effective_cost(cost, kap)
    eff_cost = Posynomial(eff.weights[:, None, None, :], cost.powers)  # (S, 1, 1, M)
    eff_lo = (kap * lo)[:, None, None, :]
    eff_hi = (kap * hi)[:, None, None, :]
    batched = draws.law(extra=1)
    linear = bool(np.array_equal(cost.powers, np.eye(n)))
    if isinstance(batched, FormLaw):
        if cost_model == COST_LINEARISED:
            raise RecipeError(
                "the linearised convention is the paper's, for power laws; the fit's laws have "
                "other forms (a knee or a plateau): use the exact cost"
            )
        sol = solve_forms(batched, eff_cost, budgets_arr, eff_lo, eff_hi)
        expo = allocate.local_exponents_central(
            lambda b: solve_forms(batched, eff_cost, b, eff_lo, eff_hi, starts=[sol.sizes]),
            budgets_arr,
        )
    elif cost_model == COST_LINEARISED:
        start = (kap * anchor)[:, None, None, :]
        sol, _ = linearised_allocation(batched, eff_cost, budgets_arr, eff_lo, eff_hi, start)
        expo = allocate.local_exponents_central(
            lambda b: linearised_allocation(batched, eff_cost, b, eff_lo, eff_hi, sol.sizes)[0],
            budgets_arr,
        )
    elif linear:
        eff_price = eff_cost.weights
        sol = allocate.solve_interaction(batched, eff_price, budgets_arr, eff_lo, eff_hi)
        expo = _linear_exponents(batched, eff_price, budgets_arr, eff_lo, eff_hi, sol)
    else:
        sol = solve_posynomial(batched, eff_cost, budgets_arr, eff_lo, eff_hi)
        expo = local_exponents_posynomial(sol, batched, eff_cost, budgets_arr)
    return _PerDraw(batched, eff_cost, eff_lo, eff_hi, sol, expo)


def _baselines(
    law: Law,
    kap: Array,
    cost: Posynomial,
    anchor: Array,
    lo: Array,
    hi: Array,
    grow: int,
    budgets_arr: Array,
) -> tuple[Array, Array]:
    """Per draw, the success (S, G, B, baseline) of the trajectory-heavy and Chinchilla-style
    allocations, and their purchased units (B, baseline, n); NaN where unfundable."""
    S, G, n = kap.shape[0], np.shape(law.floor)[1], anchor.size
    B = budgets_arr.size
    base_success = np.full((S, G, B, len(_BASELINES)), np.nan)
    base_units = np.full((B, len(_BASELINES), n), np.nan)
    for k, kind in enumerate(_BASELINES):
        units, _ = baseline_units(kind, budgets_arr, cost, anchor, lo, hi, grow)
        base_units[:, k] = units
        for j in range(B):
            if not np.isnan(units[j]).any():
                base_success[:, :, j, k] = success_of(law, kap[:, None, :] * units[j])
    return base_success, base_units


class _Decided(NamedTuple):
    """The decision (G, B, n), its success per draw (S, G, B), the budget multipliers the
    baselines need to match it (S, G, B, baseline; None when not asked), and how many SLSQP
    fallbacks did not converge."""

    dec: Array
    success: Array
    mult: Array | None
    failures: int


def _decide_all(
    draws: LawDraws,
    batched: Law,
    law: Law,
    inputs: RecipeInputs,
    budgets_arr: Array,
    purchased: Array,
    anchor: Array,
    grow: int,
    multipliers: bool,
) -> _Decided:
    """The decision per setting and budget (Newton from the per-draw optima's median, SLSQP
    where it does not settle), its success per draw and, if asked, the budget multipliers."""
    cost, kap, lo, hi = inputs.cost, inputs.kappa, inputs.lo, inputs.hi
    S, G, n, B = draws.samples, len(draws.settings), len(draws.axes), budgets_arr.size
    failures = 0
    dec = np.empty((G, B, n))
    dec_success = np.empty((S, G, B))
    starts = np.median(purchased, axis=0)  # (G, B, n): the per-draw optima's median
    dec[:], settled = decide(batched, kap, cost, budgets_arr, lo, hi, starts)
    for g, j in zip(*np.nonzero(~settled), strict=True):  # Newton did not settle: SLSQP
        law_g = draws.law(setting=g)
        dec[g, j], converged = _decision(law_g, kap, cost, budgets_arr[j], lo, hi, starts[g, j])
        failures += not converged
    dec_success[:] = success_of(batched, kap[:, None, None, :] * dec[None])
    if not multipliers:
        return _Decided(dec, dec_success, None, failures)
    mult = np.full((S, G, B, len(_BASELINES)), np.nan)
    target = -np.log(dec_success)
    for j, b in enumerate(budgets_arr):
        for k, kind in enumerate(_BASELINES):
            mult[:, :, j, k] = budget_multiplier(
                law, kap, target[:, :, j], kind, b, cost, anchor, lo, hi, grow
            )
    return _Decided(dec, dec_success, mult, failures)


def _recipe_dataset(
    draws: LawDraws,
    inputs: RecipeInputs,
    budgets_arr: Array,
    solved: _PerDraw,
    purchased: Array,
    base_success: Array,
    base_units: Array,
    decided: _Decided | None,
    switch: Sequence[str],
) -> xr.Dataset:
    """The per-draw variables (chain, draw, setting, budget[, axis | baseline]), the
    baselines' units, the decision and the switch prices, as one Dataset (no attrs yet)."""
    axes, cost, kap = draws.axes, inputs.cost, inputs.kappa
    sol, S = solved.sol, draws.samples
    success_opt = success_of(solved.batched, sol.sizes)
    spend = solved.eff_cost.terms(sol.sizes)  # money per axis (its own monomial)
    chains = np.unique(draws.chain).astype(int)
    n_chain = chains.size
    n_draw = S // n_chain

    def per_draw(arr: Array, extra: tuple[str, ...] = ()) -> tuple[tuple[str, ...], Array]:
        return (*_DIMS_SGB, *extra), arr.reshape(n_chain, n_draw, *arr.shape[1:])

    data: dict[str, tuple[tuple[str, ...], Array]] = {
        names.ALLOCATION: per_draw(sol.sizes, (names.AXIS_DIM,)),
        names.PURCHASED: per_draw(purchased, (names.AXIS_DIM,)),
        names.SPEND_SHARE: per_draw(spend / budgets_arr[None, None, :, None], (names.AXIS_DIM,)),
        names.SHADOW_PRICE: per_draw(sol.multiplier),
        names.SUCCESS_OPTIMUM: per_draw(success_opt),
        names.RECIPE_EXPONENT: per_draw(solved.expo, (names.AXIS_DIM,)),
        names.SUCCESS_BASELINE: per_draw(base_success, (names.BASELINE_DIM,)),
    }
    if decided is not None:
        data[names.SUCCESS_DECISION] = per_draw(decided.success)
        data[names.SUCCESS_GAIN] = per_draw(
            decided.success[..., None] - base_success, (names.BASELINE_DIM,)
        )
        if decided.mult is not None:
            data[names.COMPUTE_MULTIPLIER] = per_draw(decided.mult, (names.BASELINE_DIM,))
    coords: dict[str, object] = {
        names.CHAIN_DIM: chains,
        names.DRAW_DIM: draws.draw[:n_draw].astype(int),
        names.SETTING_DIM: list(draws.settings),
        names.BUDGET_DIM: budgets_arr,
        names.AXIS_DIM: list(axes),
        names.BASELINE_DIM: list(_BASELINES),
    }
    ds = xr.Dataset({k: xr.Variable(*v) for k, v in data.items()}, coords=coords)
    ds[names.BASELINE_UNITS] = ((names.BUDGET_DIM, names.BASELINE_DIM, names.AXIS_DIM), base_units)
    if decided is not None:
        dims = (names.SETTING_DIM, names.BUDGET_DIM, names.AXIS_DIM)
        ds[names.DECISION] = (dims, decided.dec)
        ds[names.DECISION_SPEND] = (dims, cost.terms(decided.dec))
        ds[names.EXPECTED_SUCCESS] = ds[names.SUCCESS_DECISION].mean(
            (names.CHAIN_DIM, names.DRAW_DIM)
        )
    for axis in switch:
        if axis not in axes:
            raise RecipeError(f"switch axis {axis!r} is not an axis of the fit: {list(axes)}")
        assert isinstance(solved.batched, allocate.PowerLaw)  # recipe() asks none of a form law
        price = _switch_price(
            solved.batched,
            solved.eff_cost,
            budgets_arr,
            solved.eff_lo,
            solved.eff_hi,
            kap,
            axes.index(axis),
        )
        ds[f"{names.SWITCH_PRICE}_{axis}"] = per_draw(price)
    return ds


def _recipe_attrs(
    inputs: RecipeInputs,
    cost_model: str,
    grow: int,
    failures: int,
    fallbacks: int,
    anchor: Array,
    within_data: Reach | None,
) -> dict[str, object]:
    """The recipe's attrs: the cost model and prices, the discounts' source, the baselines'
    growing axis, the solvers' failures, the anchors, bounds and data cap."""
    axes, cost, lo, hi = inputs.draws.axes, inputs.cost, inputs.lo, inputs.hi
    return {
        names.ATTR_COST_MODEL: f"{COST_TEXT[cost_model]}; {inputs.prices.trajectory_rule()}",
        names.ATTR_COST_KIND: cost_model,
        names.ATTR_CURRENCY: inputs.prices.currency,
        names.ATTR_PRICES: json.dumps(dict(zip(axes, inputs.unit_price.tolist(), strict=True))),
        names.ATTR_COST_POWERS: json.dumps(cost.powers.tolist()),
        names.ATTR_COST_WEIGHTS: json.dumps(cost.weights.tolist()),
        names.ATTR_FIXED_CELLS: "none" if inputs.prices.cells is None else inputs.prices.cells,
        names.ATTR_KAPPA_SOURCE: inputs.kappa_source,
        "grow_axis": axes[grow],
        "decision_solver_failures": failures,
        "allocation_solver_fallbacks": fallbacks,
        "draws_left_out": inputs.draws.left_out,
        "anchors": json.dumps(dict(zip(axes, anchor.tolist(), strict=True))),
        "bounds": json.dumps(
            {a: [lo[i], None if np.isinf(hi[i]) else hi[i]] for i, a in enumerate(axes)}
        ),
        "within_data": reach_attr(within_data),
    }


def _grow_index(axes: Sequence[str], grow_axis: str | None) -> int:
    if grow_axis is None:
        return list(axes).index(names.TRAJ) if names.TRAJ in axes else len(axes) - 1
    if grow_axis not in axes:
        raise RecipeError(f"grow axis {grow_axis!r} is not an axis of the fit: {list(axes)}")
    return list(axes).index(grow_axis)


def _world_axes(fit: xr.DataTree, axes: Sequence[str]) -> list[str]:
    if not fit.attrs.get(names.ATTR_SPEC):
        return []
    spec = fit_spec(fit)
    return [a.name for a in spec.axes if a.column == names.N_WORLDS and a.name in axes]


def _linear_exponents(
    law: allocate.PowerLaw,
    prices: Array,
    budgets: Array,
    lo: Array,
    hi: Array,
    sol: allocate.Allocation,
) -> Array:
    """Local exponents under a linear cost: closed form for separable laws, central
    differences in log B with the interaction."""
    if law.pair is None:
        return allocate.local_exponents_additive(sol, law.alpha, prices)
    return allocate.local_exponents_central(
        lambda b: allocate.solve_interaction(law, prices, b, lo, hi), budgets
    )


def _switch_price(
    law: allocate.PowerLaw,
    cost: Posynomial,
    budgets: Array,
    lo: Array,
    hi: Array,
    kappa: Array,
    i: int,
) -> Array:
    """Per draw: the unit price of axis ``i`` (purchased units) above which the optimum buys
    only its lower bound. A linear cost and a separable law: exact
    (:func:`allocate.switch_price_additive`). Otherwise a damped fixed point
    ``p <- sqrt(p * m_i / (lambda(p) q_i))``, where ``lambda(p)`` is the shadow price with axis
    ``i`` held at its floor at price ``p``, ``m_i`` its marginal loss there and ``q_i`` its
    monomial's derivative per unit of weight (1 for an axis priced per unit)."""
    k_i = kappa[:, None, None, i]
    n = cost.powers.shape[1]
    linear = bool(np.array_equal(cost.powers, np.eye(n)))
    if law.pair is None and linear:
        eff = allocate.switch_price_additive(law.coef, law.alpha, cost.weights, budgets, i, lo, hi)
        return np.asarray(k_i * eff, dtype=float)
    if (cost.powers[:, i] > 0).sum() != 1:
        raise RecipeError("a switch price needs an axis that only its own monomial buys")
    shape = np.broadcast_shapes((*law.coef.shape[:-2], budgets.size, n), hi.shape, lo.shape)
    hi_fixed = np.array(np.broadcast_to(hi, shape), copy=True)
    hi_fixed[..., i] = np.broadcast_to(lo, shape)[..., i]
    m = cost.powers.shape[0]
    weights = np.array(np.broadcast_to(cost.weights, (*shape[:-1], m)), copy=True)
    p_i = weights[..., i].copy()
    for _ in range(60):
        weights[..., i] = p_i
        trial = Posynomial(weights, cost.powers)
        sol = (
            allocate.solve_interaction(law, weights, budgets, lo, hi_fixed)
            if linear
            else solve_posynomial(law, trial, budgets, lo, hi_fixed)
        )
        marginal = -law.gradient(sol.sizes)[..., i]
        per_weight = trial.gradient(sol.sizes)[..., i] / p_i
        new = np.sqrt(p_i * marginal / (sol.multiplier * per_weight))
        done = np.max(np.abs(np.log(new / p_i))) < 1e-12
        p_i = new
        if done:
            break
    return np.asarray(k_i * p_i, dtype=float)
