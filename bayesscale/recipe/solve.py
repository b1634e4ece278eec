"""The budget recipe under uncertainty: the allocator propagated through a law fit's posterior.

For every posterior draw ``d`` and setting, the law in raw counts is

.. math::

    L_d(D) = L_{\\infty,d} + E_d (N/N_\\mathrm{ref})^{-\\alpha_N}
             + \\sum_i K_{d,i} D_i^{-\\alpha_{d,i}} - \\gamma_d (D_a D_b)^{-\\beta_d},
    \\qquad K_{d,i} = A_{d,i} D_{\\mathrm{ref},i}^{\\alpha_{d,i}},

and success is ``p = exp(-L)``. Money buys *purchased* units ``u_i`` at unit price ``c_i``;
the law sees effective units ``D_i = kappa_i u_i`` (``kappa`` the discount of synthetic data,
1 for real data), so the effective price is ``c_i / kappa_i``. :func:`recipe` returns

* the optimal allocation of every draw (:mod:`bayesscale.core.allocate`, exact KKT), hence credible
  intervals on the allocation itself, the success it buys, and the local recipe exponents
  ``e_i = d log D_i / d log B`` at each budget;
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

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike
from scipy import optimize

from bayesscale import names
from bayesscale.core import allocate, laws
from bayesscale.core.prices import Prices
from bayesscale.data.fitfile import fit_spec
from bayesscale.recipe.draws import (
    _MULTIPLIER_RANGE,
    COST_ADDITIVE,
    Array,
    RecipeError,
    add_data_extent,
    recipe_inputs,
    success_of,
)

# --- the recipe ------------------------------------------------------------------------------


def _baseline_purchases(
    kind: str,
    budget: float,
    prices: Array,
    anchor: Array,
    lo: Array,
    hi: Array,
    grow: int,
) -> Array:
    """Purchased units of a baseline at ``budget`` (n,); NaN where the budget cannot fund it.

    ``traj_heavy``: every axis but ``grow`` at its anchor, the rest of the money to ``grow``
    (capped at its upper bound). ``chinchilla``: every axis scaled from its anchor by one
    common factor (as Chinchilla scales N and D together), clipped to the box.
    """
    return _baseline_vec(kind, np.asarray(budget, dtype=float), prices, anchor, lo, hi, grow)[0]


def _decision(
    law: allocate.PowerLaw,
    kappa: Array,
    prices: Array,
    budget: float,
    lo: Array,
    hi: Array,
    start: Array,
) -> tuple[Array, bool]:
    """Money per axis (n,) maximising ``mean_d exp(-max(L_d(kappa_d * x / c), 0))`` s.t.
    ``sum x <= B``, and whether the solver converged.

    SLSQP in budget fractions ``f = x / B`` (the budget constraint is then linear), with the
    objective and its gradient from one pass over the draws, started at ``start`` (the median
    of the per-draw optimal spends). Status 8 (no descent left at machine precision) counts
    as converged; on any other failure the better of SLSQP's point and the start is returned.
    """
    scale = kappa * (budget / prices)

    def fun(f: Array) -> tuple[float, Array]:
        d = scale * f
        loss = law.loss(d)
        p = laws.success_from_loss(loss)
        # p = exp(-max(L, 0)): a draw whose loss is below 0 has p = 1 and no gradient
        dloss = np.where((loss > 0.0)[:, None], law.gradient(d), 0.0)
        g = np.mean(dloss * scale * p[:, None], axis=0)
        return float(1.0 - np.mean(p)), np.asarray(g, dtype=float)

    f_lo = prices * lo / budget
    f_hi = np.minimum(prices * hi / budget, 1.0)
    f0 = _onto_budget(np.clip(start / budget, f_lo, f_hi), f_lo)
    res = optimize.minimize(
        fun,
        f0,
        jac=True,
        method="SLSQP",
        bounds=list(zip(f_lo, f_hi, strict=True)),
        constraints=[
            {"type": "ineq", "fun": lambda f: 1.0 - f.sum(), "jac": lambda f: -np.ones_like(f)}
        ],
        options={"ftol": 1e-15, "maxiter": 500},
    )
    f = _onto_budget(np.clip(res.x, f_lo, f_hi), f_lo)
    if not res.success and fun(f0)[0] < fun(f)[0]:
        f = f0
    return np.asarray(f * budget, dtype=float), bool(res.success or res.status == 8)


def _onto_budget(f: Array, f_lo: Array) -> Array:
    """Pull budget fractions back onto ``sum f <= 1`` (SLSQP may overshoot by ~1e-9),
    shrinking each share's excess over its lower bound in proportion."""
    total = float(f.sum())
    if total <= 1.0:
        return f
    floor = float(f_lo.sum())
    return np.asarray(f_lo + (f - f_lo) * (1.0 - floor) / (total - floor), dtype=float)


def _baseline_vec(
    kind: str,
    money: Array,
    prices: Array,
    anchor: Array,
    lo: Array,
    hi: Array,
    grow: int,
) -> tuple[Array, Array]:
    """Vectorised :func:`_baseline_purchases` over budgets ``money`` (...): purchased units
    (..., n) (NaN where unfundable) and their derivative in ``log money``."""
    if kind == names.CHINCHILLA:
        raw = (money / float(prices @ anchor))[..., None] * anchor
        u = np.clip(raw, lo, hi)
        du = np.where((raw > lo) & (raw < hi), u, 0.0)
        return u, du
    fixed = float(np.delete(prices, grow) @ np.delete(anchor, grow))
    u = np.broadcast_to(anchor, (*money.shape, anchor.size)).copy()
    ug = (money - fixed) / prices[grow]
    u[..., grow] = np.minimum(ug, hi[grow])
    du = np.zeros_like(u)
    du[..., grow] = np.where(ug < hi[grow], money / prices[grow], 0.0)
    bad = ug < lo[grow]
    u[bad] = np.nan
    return u, du


def _multiplier(
    law: allocate.PowerLaw,
    kappa: Array,
    target_loss: Array,
    kind: str,
    budget: float,
    prices: Array,
    anchor: Array,
    lo: Array,
    hi: Array,
    grow: int,
) -> Array:
    """Per draw (S, G): the budget factor ``M`` at which the baseline's loss falls to
    ``target_loss``: bracketed Newton on ``log M`` (the loss falls as ``M`` grows). ``inf``
    where even ``1e6 B`` does not reach it."""
    t_lo = np.full(target_loss.shape, np.log(_MULTIPLIER_RANGE[0]))
    t_hi = np.full(target_loss.shape, np.log(_MULTIPLIER_RANGE[1]))
    kap = kappa[:, None, :]

    def f(t: Array) -> tuple[Array, Array]:
        u, du = _baseline_vec(kind, budget * np.exp(t), prices, anchor, lo, hi, grow)
        d = kap * u
        with np.errstate(invalid="ignore"):
            loss = law.loss(d)
            slope = np.sum(law.gradient(d) * kap * du, axis=-1)
        loss = np.where(np.isnan(u).any(axis=-1), np.inf, loss)
        return loss - target_loss, slope

    never = f(t_hi)[0] > 0
    below = f(t_lo)[0] <= 0  # even 1e-3 B matches: report the range's end
    t = 0.5 * (t_lo + t_hi)
    for _ in range(100):
        val, slope = f(t)
        if np.all((np.abs(val) <= 1e-12 * np.abs(target_loss)) | never | below):
            break
        t_lo = np.where(val > 0, t, t_lo)
        t_hi = np.where(val < 0, t, t_hi)
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = t - val / slope
        inside = np.isfinite(newton) & (newton > t_lo) & (newton < t_hi)
        t = np.where(val == 0, t, np.where(inside, newton, 0.5 * (t_lo + t_hi)))
    m = np.where(below, _MULTIPLIER_RANGE[0], np.exp(t))
    return np.asarray(np.where(never, np.inf, m), dtype=float)


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
    within_data: float | None = None,
    seed: int = 0,
) -> xr.Dataset:
    """Propagate a law fit's posterior through the allocator at each budget.

    ``prices`` default to the paper's; ``pricing`` (a pricing fit) and/or ``kappa`` give
    discounts; ``bounds`` are in purchased units; ``within_data`` caps every axis at that many
    times its largest swept value (:func:`~bayesscale.recipe.draws.bounds_within_data`); ``grow_axis`` is the trajectory-heavy
    baseline's growing axis (default ``traj`` if the fit has it, else its last axis);
    ``switch_axes`` get a regime-switch price (default: the fit's world axis, if any).
    Returns per-draw variables (chain, draw, setting, budget[, axis | baseline]) and the
    decision (setting, budget, axis), and how far it lies beyond the data
    (:func:`~bayesscale.recipe.draws.add_data_extent`); :func:`~bayesscale.recipe.output.summarize` turns it into intervals.
    """
    budgets_arr = np.atleast_1d(np.asarray(budgets, dtype=float))
    if budgets_arr.ndim != 1 or (~np.isfinite(budgets_arr) | (budgets_arr <= 0)).any():
        raise RecipeError(f"budgets must be finite and > 0, got {budgets_arr.tolist()}")
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
    draws, c, kap, lo, hi = inputs.draws, inputs.unit_price, inputs.kappa, inputs.lo, inputs.hi
    axes = draws.axes
    floor_cost = float(c @ lo)
    if (budgets_arr < floor_cost * (1 - 1e-12)).any():
        raise RecipeError(
            f"budget {budgets_arr.min():g} is too small to buy the lower bounds "
            f"({', '.join(f'{a} >= {v:g}' for a, v in zip(axes, lo, strict=True))}), which cost "
            f"{floor_cost:g} {inputs.prices.currency}"
        )
    grow = _grow_index(axes, grow_axis)
    anchor = np.clip(draws.reference, lo, hi)
    law = draws.law()
    S, G, n, B = draws.samples, len(draws.settings), len(axes), budgets_arr.size
    eff_price = (c / kap)[:, None, None, :]  # (S, 1, 1, n)
    eff_lo = (kap * lo)[:, None, None, :]
    eff_hi = (kap * hi)[:, None, None, :]
    batched = allocate.PowerLaw(
        draws.coef[:, :, None, :],
        draws.alpha[:, :, None, :],
        draws.floor[:, :, None],
        None if draws.gamma is None else draws.gamma[:, :, None],
        None if draws.beta is None else draws.beta[:, :, None],
        draws.pair,
    )
    sol = allocate.solve_interaction(batched, eff_price, budgets_arr, eff_lo, eff_hi)
    if draws.pair is None:
        expo = allocate.local_exponents_additive(sol, batched.alpha, eff_price)
    else:
        expo = _fd_exponents(batched, eff_price, budgets_arr, eff_lo, eff_hi, sol)
    success_opt = success_of(batched, sol.sizes)
    spend = eff_price * sol.sizes

    dims_sgb = (names.CHAIN_DIM, names.DRAW_DIM, names.SETTING_DIM, names.BUDGET_DIM)
    chains = np.unique(draws.chain).astype(int)
    n_chain = chains.size
    n_draw = S // n_chain

    def per_draw(arr: Array, extra: tuple[str, ...] = ()) -> tuple[tuple[str, ...], Array]:
        return (*dims_sgb, *extra), arr.reshape(n_chain, n_draw, *arr.shape[1:])

    data: dict[str, tuple[tuple[str, ...], Array]] = {
        names.ALLOCATION: per_draw(sol.sizes, (names.AXIS_DIM,)),
        names.PURCHASED: per_draw(sol.sizes / kap[:, None, None, :], (names.AXIS_DIM,)),
        names.SPEND_SHARE: per_draw(spend / budgets_arr[None, None, :, None], (names.AXIS_DIM,)),
        names.SHADOW_PRICE: per_draw(sol.multiplier),
        names.SUCCESS_OPTIMUM: per_draw(success_opt),
        names.RECIPE_EXPONENT: per_draw(expo, (names.AXIS_DIM,)),
    }
    baselines = (names.TRAJ_HEAVY, names.CHINCHILLA)
    base_success = np.full((S, G, B, len(baselines)), np.nan)
    for j, b in enumerate(budgets_arr):
        for k, kind in enumerate(baselines):
            u = _baseline_purchases(kind, b, c, anchor, lo, hi, grow)
            if not np.isnan(u).any():
                base_success[:, :, j, k] = success_of(law, kap[:, None, :] * u)
    data[names.SUCCESS_BASELINE] = per_draw(base_success, (names.BASELINE_DIM,))

    failures = 0
    if decision:
        dec = np.empty((G, B, n))
        dec_success = np.empty((S, G, B))
        mult = np.full((S, G, B, len(baselines)), np.nan)
        for g in range(G):
            law_g = allocate.PowerLaw(
                draws.coef[:, g],
                draws.alpha[:, g],
                draws.floor[:, g],
                None if draws.gamma is None else draws.gamma[:, g],
                None if draws.beta is None else draws.beta[:, 0],
                draws.pair,
            )
            for j, b in enumerate(budgets_arr):
                start = np.median(spend[:, g, j], axis=0)
                start = start * (b / start.sum())
                x, converged = _decision(law_g, kap, c, b, lo, hi, start)
                failures += not converged
                dec[g, j] = x
                dec_success[:, g, j] = success_of(law_g, kap * (x / c))
        data[names.SUCCESS_DECISION] = per_draw(dec_success)
        data[names.SUCCESS_GAIN] = per_draw(
            dec_success[..., None] - base_success, (names.BASELINE_DIM,)
        )
        if multipliers:
            target = -np.log(dec_success)
            for j, b in enumerate(budgets_arr):
                for k, kind in enumerate(baselines):
                    mult[:, :, j, k] = _multiplier(
                        law, kap, target[:, :, j], kind, b, c, anchor, lo, hi, grow
                    )
            data[names.COMPUTE_MULTIPLIER] = per_draw(mult, (names.BASELINE_DIM,))
    switch = list(switch_axes) if switch_axes is not None else _world_axes(fit, axes)
    coords: dict[str, object] = {
        names.CHAIN_DIM: chains,
        names.DRAW_DIM: draws.draw[:n_draw].astype(int),
        names.SETTING_DIM: list(draws.settings),
        names.BUDGET_DIM: budgets_arr,
        names.AXIS_DIM: list(axes),
        names.BASELINE_DIM: list(baselines),
    }
    ds = xr.Dataset({k: xr.Variable(*v) for k, v in data.items()}, coords=coords)
    if decision:
        ds[names.DECISION_SPEND] = ((names.SETTING_DIM, names.BUDGET_DIM, names.AXIS_DIM), dec)
        ds[names.DECISION] = ds[names.DECISION_SPEND] / xr.DataArray(c, dims=names.AXIS_DIM)
        ds[names.EXPECTED_SUCCESS] = ds[names.SUCCESS_DECISION].mean(
            (names.CHAIN_DIM, names.DRAW_DIM)
        )
    for axis in switch:
        if axis not in axes:
            raise RecipeError(f"switch axis {axis!r} is not an axis of the fit: {list(axes)}")
        price = _switch_price(
            batched, eff_price, budgets_arr, eff_lo, eff_hi, kap, axes.index(axis)
        )
        ds[f"{names.SWITCH_PRICE}_{axis}"] = per_draw(price)
    ds.attrs = {
        names.ATTR_COST_MODEL: COST_ADDITIVE,
        names.ATTR_CURRENCY: inputs.prices.currency,
        names.ATTR_PRICES: json.dumps(dict(zip(axes, c.tolist(), strict=True))),
        names.ATTR_KAPPA_SOURCE: inputs.kappa_source,
        "grow_axis": axes[grow],
        "decision_solver_failures": failures,
        "draws_left_out": draws.left_out,
        "anchors": json.dumps(dict(zip(axes, anchor.tolist(), strict=True))),
        "bounds": json.dumps(
            {a: [lo[i], None if np.isinf(hi[i]) else hi[i]] for i, a in enumerate(axes)}
        ),
        "within_data": "none" if within_data is None else float(within_data),
    }
    return add_data_extent(ds, fit)


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


def _fd_exponents(
    law: allocate.PowerLaw,
    prices: Array,
    budgets: Array,
    lo: Array,
    hi: Array,
    sol: allocate.Allocation,
) -> Array:
    """Local exponents by central differences in log B (laws the closed form does not cover)."""
    h = 1e-4
    up = allocate.solve_interaction(law, prices, budgets * np.exp(h), lo, hi)
    down = allocate.solve_interaction(law, prices, budgets * np.exp(-h), lo, hi)
    return np.asarray((np.log(up.sizes) - np.log(down.sizes)) / (2 * h), dtype=float)


def _switch_price(
    law: allocate.PowerLaw,
    prices: Array,
    budgets: Array,
    lo: Array,
    hi: Array,
    kappa: Array,
    i: int,
) -> Array:
    """Per draw: the unit price of axis ``i`` (purchased units) above which the optimum buys
    only its lower bound. Separable laws: exact (:func:`allocate.switch_price_additive`).
    With an interaction: a damped fixed point ``p <- sqrt(p * m_i / lambda(p))``, where
    ``lambda(p)`` is the shadow price with axis ``i`` held at its floor at price ``p``."""
    k_i = kappa[:, None, None, i]
    if law.pair is None:
        eff = allocate.switch_price_additive(law.coef, law.alpha, prices, budgets, i, lo, hi)
        return np.asarray(k_i * eff, dtype=float)
    n = law.coef.shape[-1]
    shape = np.broadcast_shapes((*law.coef.shape[:-2], budgets.size, n), hi.shape, lo.shape)
    hi_fixed = np.array(np.broadcast_to(hi, shape), copy=True)
    hi_fixed[..., i] = np.broadcast_to(lo, shape)[..., i]
    price = np.array(np.broadcast_to(prices, shape), copy=True)
    p_i = price[..., i].copy()
    for _ in range(60):
        price[..., i] = p_i
        sol = allocate.solve_interaction(law, price, budgets, lo, hi_fixed)
        marginal = -law.gradient(sol.sizes)[..., i]
        target = marginal / sol.multiplier
        new = np.sqrt(p_i * target)
        done = np.max(np.abs(np.log(new / p_i))) < 1e-12
        p_i = new
        if done:
            break
    return np.asarray(k_i * p_i, dtype=float)
