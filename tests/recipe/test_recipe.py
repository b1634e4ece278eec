"""The recipe end to end on hand-made posteriors with a known truth."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from bayesscale import names
from bayesscale.core import allocate, laws
from bayesscale.core.geometric import (
    Posynomial,
    kkt_residuals_posynomial,
    local_exponents_posynomial,
    solve_posynomial,
)
from bayesscale.core.intervals import quantiles
from bayesscale.core.prices import PricesError, default_prices, parse_prices
from bayesscale.formatting import format_number
from bayesscale.law.posterior import PosteriorError, PosteriorWarning, law_draws
from bayesscale.recipe.draws import RecipeError
from bayesscale.recipe.iso_budget import iso_budget
from bayesscale.recipe.output import summarize, to_json
from bayesscale.recipe.solve import recipe
from bayesscale.recipe.synthetic import synthetic_fit

ALPHA = np.array([[0.41, 0.26, 0.11], [0.38, 0.24, 0.12]])
AMPLITUDE = np.array([[0.35, 0.30, 0.12], [0.30, 0.25, 0.10]])
FLOOR = np.array([0.45, 0.55])
REFERENCE = np.array([45.25, 1810.2, 11.31])
PRICES = np.array([4.10, 0.18, 0.02])
BUDGETS = np.array([2e3, 3e4, 1e6])
AXES = list(names.PAPER_AXES)
# The money cost of (env, task, traj): a trajectory is one rollout of one task, so rollouts per
# task are bought as c_traj u_task u_traj (PAPER.md section 5).
POWERS = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 1.0, 1.0]])

_INTERACTION_SPEC = """
[model]
name = "synthetic-interaction"
[outcome]
kind = "success"
[settings]
keys = ["model", "algorithm", "domain"]
[[axes]]
name = "env"
column = "n_envs"
[[axes]]
name = "task"
column = "n_tasks"
[[axes]]
name = "traj"
column = "rollouts"
[interaction]
axes = ["env", "task"]
units = "raw"
"""

_WORLD_SPEC = """
[model]
name = "synthetic-worlds"
[outcome]
kind = "success"
[settings]
keys = ["model", "algorithm", "domain"]
[[axes]]
name = "world"
column = "n_worlds"
[[axes]]
name = "structure"
column = "n_structures"
[[axes]]
name = "traj"
column = "rollouts"
"""


def _truth_law(setting: int) -> allocate.PowerLaw:
    coef = laws.amplitude_at_one(AMPLITUDE[setting], ALPHA[setting], REFERENCE)
    return allocate.PowerLaw(coef, ALPHA[setting], FLOOR[setting])


def _money(weights: np.ndarray = PRICES) -> Posynomial:
    """``w_E u_E + w_T u_T + w_traj u_T u_traj``: the money a purchase costs."""
    return Posynomial(weights, POWERS)


def _truth_optimum(
    setting: int,
    budget: float,
    weights: np.ndarray = PRICES,
    upper=np.inf,
    lower=1.0,
) -> allocate.Allocation:
    """The truth law's optimum under the money cost (a geometric program), KKT-checked."""
    law = _truth_law(setting)
    cost = _money(weights)
    sol = solve_posynomial(law, cost, budget, lower, upper)
    assert kkt_residuals_posynomial(sol, law, cost, budget, lower, upper).max() < 1e-9
    return sol


@pytest.fixture(scope="module")
def point_fit() -> xr.DataTree:
    return synthetic_fit(draws=40, chains=2, spread=0.0)


@pytest.fixture(scope="module")
def tight_fit() -> xr.DataTree:
    return synthetic_fit(draws=300, chains=2, spread=1e-3, seed=3)


@pytest.fixture(scope="module")
def wide_fit() -> xr.DataTree:
    return synthetic_fit(draws=300, chains=2, spread=0.15, seed=4)


# --- end to end against the truth --------------------------------------------------------


@pytest.mark.parametrize("upper", [np.inf, 384.0])
def test_concentrated_posterior_recovers_the_truth_optimum(
    tight_fit: xr.DataTree, upper: float
) -> None:
    ds = recipe(tight_fit, BUDGETS, bounds={names.ENV: (1, upper)})
    s = summarize(ds)
    for g in range(2):
        for j, b in enumerate(BUDGETS):
            truth = _truth_optimum(g, b, upper=np.array([upper, np.inf, np.inf]))
            median = s[names.PURCHASED].sel(quantile=0.5).isel(setting=g, budget=j).to_numpy()
            np.testing.assert_allclose(median, truth.sizes, rtol=5e-3)
            np.testing.assert_allclose(
                ds[names.DECISION].isel(setting=g, budget=j), truth.sizes, rtol=5e-3
            )
            p_truth = float(np.exp(-_truth_law(g).loss(truth.sizes)))
            np.testing.assert_allclose(
                float(ds[names.EXPECTED_SUCCESS].isel(setting=g, budget=j)), p_truth, rtol=1e-3
            )
            e_truth = local_exponents_posynomial(truth, _truth_law(g), _money(), b)
            e_med = s[names.RECIPE_EXPONENT].sel(quantile=0.5).isel(setting=g, budget=j).to_numpy()
            np.testing.assert_allclose(e_med, e_truth, rtol=5e-3, atol=1e-9)
    if np.isfinite(upper):
        assert (ds[names.PURCHASED].sel(axis=names.ENV).isel(budget=-1) == upper).all()


def test_point_mass_is_exact(point_fit: xr.DataTree) -> None:
    ds = recipe(point_fit, BUDGETS)
    assert json.loads(ds.attrs[names.ATTR_COST_POWERS]) == POWERS.tolist()
    for g in range(2):
        for j, b in enumerate(BUDGETS):
            truth = _truth_optimum(g, b)
            alloc = ds[names.ALLOCATION].isel(setting=g, budget=j).to_numpy()
            np.testing.assert_allclose(alloc, np.broadcast_to(truth.sizes, alloc.shape), rtol=1e-10)
            np.testing.assert_allclose(
                ds[names.DECISION].isel(setting=g, budget=j), truth.sizes, rtol=1e-5
            )
    shares = ds[names.SPEND_SHARE].sum(names.AXIS_DIM)
    np.testing.assert_allclose(shares, 1.0, rtol=1e-12)


def test_uncertainty_gives_intervals_and_a_distinct_decision(wide_fit: xr.DataTree) -> None:
    ds = recipe(wide_fit, [3e4], settings=["S0 | grpo | math"])
    s = summarize(ds, prob=0.9)
    lo, med, hi = s[names.PURCHASED].isel(setting=0, budget=0).to_numpy()
    assert (lo < med).all() and (med < hi).all()
    # The decision maximises expected success: no per-draw optimum, used as one decision,
    # does better on average (it is optimal for its own draw only).
    exp_dec = float(ds[names.EXPECTED_SUCCESS].isel(setting=0, budget=0))
    law = law_draws(wide_fit, ["S0 | grpo | math"]).law()
    per_draw = ds[names.PURCHASED].isel(setting=0, budget=0).stack(s=("chain", "draw")).to_numpy().T
    for k in range(0, per_draw.shape[0], 60):
        p = np.exp(-law.loss(np.broadcast_to(per_draw[k], (law.coef.shape[0], 1, 3))))
        assert float(p.mean()) <= exp_dec + 1e-9
    # Each draw's own optimum beats the single decision in that draw.
    assert (ds[names.SUCCESS_OPTIMUM] >= ds[names.SUCCESS_DECISION] - 1e-12).all()


# --- discounts ------------------------------------------------------------------------------


def test_user_kappa_equals_a_higher_effective_price(point_fit: xr.DataTree) -> None:
    with_kappa = recipe(point_fit, [3e4], kappa={names.ENV: 0.5}, decision=False)
    pricier = recipe(point_fit, [3e4], prices=parse_prices("[prices]\nenv = 8.2"), decision=False)
    np.testing.assert_allclose(with_kappa[names.ALLOCATION], pricier[names.ALLOCATION], rtol=1e-12)
    np.testing.assert_allclose(
        with_kappa[names.PURCHASED].sel(axis=names.ENV),
        2.0 * pricier[names.PURCHASED].sel(axis=names.ENV),
    )
    assert "env: user 0.5" in with_kappa.attrs[names.ATTR_KAPPA_SOURCE]


def _pricing_fit(values: dict[str, float], draws: int = 30) -> xr.DataTree:
    axes = list(values)
    arr = np.broadcast_to(np.array([values[a] for a in axes]), (2, draws, len(axes))).copy()
    post = xr.Dataset(
        {names.KAPPA0_AXIS: (("chain", "draw", names.PRICED_AXIS_DIM), arr)},
        coords={names.PRICED_AXIS_DIM: axes},
    )
    tree = xr.DataTree.from_dict({"posterior": post})
    tree.attrs = {names.ATTR_KIND: names.KIND_PRICING_FIT}
    return tree


def test_pricing_fit_kappa(point_fit: xr.DataTree) -> None:
    pricing = _pricing_fit({names.ENV: 0.71, names.TRAJ: 0.42})
    a = recipe(point_fit, [3e4], pricing=pricing, decision=False)
    b = recipe(point_fit, [3e4], kappa={names.ENV: 0.71, names.TRAJ: 0.42}, decision=False)
    np.testing.assert_allclose(a[names.ALLOCATION], b[names.ALLOCATION], rtol=1e-12)
    # In effective units D = kappa u, monomial m costs w_m prod_i kappa_i^-a_mi: env 4.1 / 0.71,
    # task 0.18, trajectories 0.02 / (kappa_task kappa_traj) = 0.02 / 0.42.
    truth = _truth_optimum(0, 3e4, PRICES / np.array([0.71, 1.0, 1.0 * 0.42]))
    np.testing.assert_allclose(
        a[names.ALLOCATION].isel(setting=0, chain=0, draw=0, budget=0), truth.sizes, rtol=1e-10
    )


# --- richer laws ----------------------------------------------------------------------------


def test_interaction_fit_matches_the_interaction_solver() -> None:
    fit = synthetic_fit(
        draws=10, chains=1, spread=0.0, interaction=(0.15, 0.21), spec_text=_INTERACTION_SPEC
    )
    ds = recipe(fit, [3e4], settings=["S0 | grpo | math"])
    coef = laws.amplitude_at_one(AMPLITUDE[0], ALPHA[0], REFERENCE)
    law = allocate.PowerLaw(coef, ALPHA[0], FLOOR[0], 0.15, 0.21, (0, 1))
    cost = _money()
    truth = solve_posynomial(law, cost, 3e4)
    assert kkt_residuals_posynomial(truth, law, cost, 3e4).max() < 1e-9
    got = ds[names.ALLOCATION].isel(chain=0, draw=0, setting=0, budget=0).to_numpy()
    np.testing.assert_allclose(got, truth.sizes, rtol=1e-8)
    np.testing.assert_allclose(
        float(ds[names.SUCCESS_OPTIMUM][0, 0, 0, 0]),
        float(np.exp(-law.loss(truth.sizes))),
        rtol=1e-12,
    )
    np.testing.assert_allclose(ds[names.DECISION].isel(setting=0, budget=0), truth.sizes, rtol=1e-4)
    # Exponents for a non-separable law, against central differences of the truth's optimum
    # in log B; a 1% larger budget buys 1% more spend: sum_m s_m (a_m . e) = 1.
    e = ds[names.RECIPE_EXPONENT].isel(chain=0, draw=0, setting=0, budget=0).to_numpy()
    h = 1e-4
    up = solve_posynomial(law, cost, 3e4 * np.exp(h)).sizes
    down = solve_posynomial(law, cost, 3e4 * np.exp(-h)).sizes
    np.testing.assert_allclose(e, (np.log(up) - np.log(down)) / (2 * h), rtol=1e-5)
    share = cost.terms(truth.sizes) / 3e4
    np.testing.assert_allclose(float(share @ (POWERS @ e)), 1.0, rtol=1e-5)


def _size_fit() -> xr.DataTree:
    fit = synthetic_fit(draws=5, chains=1, spread=0.0)
    post = fit["posterior"].to_dataset()
    post[names.SIZE_AMPLITUDE] = (("chain", "draw"), np.full((1, 5), 0.08))
    post[names.ALPHA_SIZE] = (("chain", "draw"), np.full((1, 5), 0.3))
    const = fit["constant_data"].to_dataset()
    const[names.PARAMS_B] = ((names.SETTING_DIM,), np.array([4.0, 14.0]))
    const = const.assign_coords({names.SETTING_DIM: post[names.SETTING_DIM].to_numpy()})
    const[names.SIZE_REFERENCE] = ((), 8.0)
    tree = xr.DataTree.from_dict({"posterior": post, "constant_data": const})
    tree.attrs = dict(fit.attrs)
    return tree


def test_size_term_enters_the_floor() -> None:
    ds = recipe(_size_fit(), [3e4], decision=False)
    for g, size in enumerate((4.0, 14.0)):
        truth = _truth_optimum(g, 3e4)  # the size term is constant: same allocation
        got = ds[names.ALLOCATION].isel(chain=0, draw=0, setting=g, budget=0).to_numpy()
        np.testing.assert_allclose(got, truth.sizes, rtol=1e-10)
        loss = float(_truth_law(g).loss(truth.sizes)) + 0.08 * (size / 8.0) ** -0.3
        np.testing.assert_allclose(
            float(ds[names.SUCCESS_OPTIMUM][0, 0, g, 0]), np.exp(-loss), rtol=1e-12
        )


def test_priced_model_size_becomes_an_axis() -> None:
    prices = parse_prices(f"[prices]\n{names.PARAMS_B} = 500.0")
    ds = recipe(_size_fit(), [3e4], prices=prices, bounds={names.PARAMS_B: (1.0, 70.0)})
    assert list(ds[names.AXIS_DIM].to_numpy()) == [*AXES, names.PARAMS_B]
    coef = np.append(laws.amplitude_at_one(AMPLITUDE[0], ALPHA[0], REFERENCE), 0.08 * 8.0**0.3)
    alpha = np.append(ALPHA[0], 0.3)
    p4 = np.append(PRICES, 500.0)
    powers4 = np.eye(4)
    powers4[:3, :3] = POWERS  # the model size is priced per billion parameters
    assert json.loads(ds.attrs[names.ATTR_COST_POWERS]) == powers4.tolist()
    law4, cost4 = allocate.PowerLaw(coef, alpha), Posynomial(p4, powers4)
    upper4 = np.array([np.inf, np.inf, np.inf, 70.0])
    truth = solve_posynomial(law4, cost4, 3e4, 1.0, upper4)
    assert kkt_residuals_posynomial(truth, law4, cost4, 3e4, 1.0, upper4).max() < 1e-9
    got = ds[names.ALLOCATION].isel(chain=0, draw=0, setting=0, budget=0).to_numpy()
    np.testing.assert_allclose(got, truth.sizes, rtol=1e-10)
    np.testing.assert_allclose(ds[names.DECISION].isel(setting=0, budget=0), truth.sizes, rtol=1e-5)
    with pytest.raises(PosteriorError, match="no size term"):
        recipe(synthetic_fit(draws=5, chains=1, spread=0.0), [3e4], prices=prices)


# --- baselines, multipliers, the regime switch, iso-budget curves ---------------------------


def _chinchilla_units(money: float) -> np.ndarray:
    """The anchors scaled by the one factor ``s`` that spends ``money``: the money cost of
    ``s x anchors`` is ``(c_E a_E + c_T a_T) s + c_traj a_T a_traj s^2``, a quadratic in ``s``."""
    linear = PRICES[0] * REFERENCE[0] + PRICES[1] * REFERENCE[1]
    square = PRICES[2] * REFERENCE[1] * REFERENCE[2]
    s = (-linear + np.sqrt(linear**2 + 4 * square * money)) / (2 * square)
    return REFERENCE * s


def _traj_heavy_units(money: float) -> np.ndarray:
    """env and task at the anchors, the rest of the money to rollouts per task (each one a
    rollout of every anchor task: c_traj a_T per unit)."""
    v = REFERENCE.copy()
    v[2] = (money - PRICES[:2] @ REFERENCE[:2]) / (PRICES[2] * REFERENCE[1])
    return v


def test_baselines_and_compute_multiplier(point_fit: xr.DataTree) -> None:
    ds = recipe(point_fit, [3e4, 1e6])
    law = _truth_law(0)
    cost = _money()
    for j, b in enumerate((3e4, 1e6)):
        # Chinchilla-style: anchors scaled by one factor to spend the budget.
        u = _chinchilla_units(b)
        assert float(cost(u)) == pytest.approx(b, rel=1e-12)
        p = float(np.exp(-law.loss(u)))
        got = float(ds[names.SUCCESS_BASELINE].sel(baseline=names.CHINCHILLA)[0, 0, 0, j])
        np.testing.assert_allclose(got, p, rtol=1e-12)
        # Trajectory-heavy: env and task at the anchors, the rest to rollouts.
        v = _traj_heavy_units(b)
        assert float(cost(v)) == pytest.approx(b, rel=1e-12)
        got = float(ds[names.SUCCESS_BASELINE].sel(baseline=names.TRAJ_HEAVY)[0, 0, 0, j])
        np.testing.assert_allclose(got, float(np.exp(-law.loss(v))), rtol=1e-12)
        target = float(ds[names.SUCCESS_DECISION][0, 0, 0, j])
        assert target >= got
        m = float(ds[names.COMPUTE_MULTIPLIER].sel(baseline=names.CHINCHILLA)[0, 0, 0, j])
        assert m > 1.0
        u = _chinchilla_units(m * b)
        np.testing.assert_allclose(float(np.exp(-law.loss(u))), target, rtol=1e-9)
        m_traj = float(ds[names.COMPUTE_MULTIPLIER].sel(baseline=names.TRAJ_HEAVY)[0, 0, 0, j])
        # Rollouts alone cannot reach the recipe: env and task terms stay at the anchors.
        v_inf = REFERENCE.copy()
        v_inf[2] = np.inf
        if float(np.exp(-law.loss(v_inf))) < target:
            assert m_traj == np.inf
        else:
            v = _traj_heavy_units(m_traj * b)
            np.testing.assert_allclose(float(np.exp(-law.loss(v))), target, rtol=1e-9)
    js = to_json(ds)
    row = js["results"][0]
    assert row["baselines"][names.TRAJ_HEAVY]["compute_multiplier"]["median"] == "inf"


def test_world_regime_switch_price() -> None:
    amplitude = ((0.004, 0.30, 0.12),)
    alpha = ((0.44, 0.28, 0.11),)
    fit = synthetic_fit(
        draws=4,
        chains=1,
        spread=0.0,
        spec_text=_WORLD_SPEC,
        alpha=alpha,
        amplitude=amplitude,
        floor=(0.5,),
    )
    fit = _rename_axes(fit, ["world", "structure", "traj"])  # the world spec's axes
    prices = parse_prices("[prices]\nworld = 40.0\nstructure = 4.1\ntraj = 0.02")
    budget = 3e4
    ds = recipe(fit, [budget], prices=prices, decision=False, bounds={"world": (2, None)})
    name = f"{names.SWITCH_PRICE}_world"
    assert name in ds
    switch = float(ds[name][0, 0, 0, 0])
    assert 0 < 2 * switch < budget
    coef = laws.amplitude_at_one(np.array(amplitude[0]), np.array(alpha[0]), REFERENCE)
    lower = np.array([2.0, 1.0, 1.0])
    for factor, at_floor in ((1.001, True), (0.999, False)):
        p = np.array([switch * factor, 4.1, 0.02])
        sol = allocate.solve_additive(coef, np.array(alpha[0]), p, budget, lower)
        assert bool(sol.at_lower[0]) == at_floor


def test_switch_price_with_an_interaction() -> None:
    fit = synthetic_fit(
        draws=3,
        chains=1,
        spread=0.0,
        interaction=(0.15, 0.21),
        spec_text=_INTERACTION_SPEC,
        alpha=((0.41, 0.26, 0.11),),
        amplitude=((0.01, 0.30, 0.12),),
        floor=(0.5,),
    )
    budget = 3e4
    ds = recipe(
        fit, [budget], decision=False, switch_axes=[names.ENV], bounds={names.ENV: (2, None)}
    )
    switch = float(ds[f"{names.SWITCH_PRICE}_env"][0, 0, 0, 0])
    assert 0 < 2 * switch < budget
    coef = laws.amplitude_at_one(
        np.array([0.01, 0.30, 0.12]), ALPHA[0] * 0 + [0.41, 0.26, 0.11], REFERENCE
    )
    law = allocate.PowerLaw(coef, np.array([0.41, 0.26, 0.11]), 0.5, 0.15, 0.21, (0, 1))
    lower = np.array([2.0, 1.0, 1.0])
    for factor, at_floor in ((1.001, True), (0.999, False)):
        cost = _money(np.array([switch * factor, 0.18, 0.02]))
        sol = solve_posynomial(law, cost, budget, lower)
        assert kkt_residuals_posynomial(sol, law, cost, budget, lower).max() < 1e-9
        assert bool(sol.at_lower[0]) == at_floor


def _rename_axes(fit: xr.DataTree, axes: list[str]) -> xr.DataTree:
    post = fit["posterior"].to_dataset().assign_coords({names.AXIS_DIM: axes})
    const = fit["constant_data"].to_dataset().assign_coords({names.AXIS_DIM: axes})
    tree = xr.DataTree.from_dict({"posterior": post, "constant_data": const})
    tree.attrs = dict(fit.attrs)
    return tree


def _iso_units(grid: np.ndarray, i: int, spend: np.ndarray, budget: float) -> np.ndarray:
    """Units (share, axis) along an iso-budget curve, by hand: axis ``i`` gets ``share x B``,
    the others the rest in the proportions of ``spend``; a rollout per task costs
    ``c_traj u_task``."""
    others = [k for k in range(3) if k != i]
    money = np.empty((grid.size, 3))
    money[:, i] = grid * budget
    money[:, others] = np.outer(1 - grid, spend[others] / spend[others].sum()) * budget
    units = money / PRICES
    units[:, 2] = money[:, 2] / (PRICES[2] * units[:, 1])
    return units


def test_iso_budget_curve_peaks_at_the_recipe(point_fit: xr.DataTree) -> None:
    b = 3e4
    truth = _truth_optimum(0, b)
    spend = _money().terms(truth.sizes)  # each axis's own monomial: c_traj u_T u_traj for traj
    share = spend / b
    assert share.sum() == pytest.approx(1.0, rel=1e-12)
    grid = np.sort(np.concatenate([np.linspace(0.02, 0.98, 49), share]))
    iso = iso_budget(
        point_fit,
        b,
        settings=["S0 | grpo | math"],
        shares=grid,
        reference_spend=dict(zip(AXES, spend, strict=True)),
    )
    curve = iso[names.ISO_SUCCESS].isel(chain=0, draw=0, setting=0)
    p_opt = float(np.exp(-_truth_law(0).loss(truth.sizes)))
    for i, axis in enumerate(AXES):
        c = curve.sel(axis=axis)
        # Known answer along the whole curve: the units that money buys, by hand; outside
        # the box where they fall below it (u >= 1), and there evaluated at the bound.
        units = _iso_units(grid, i, spend, b)
        inside = (units >= 1.0).all(axis=1)
        mask = iso[names.ISO_INSIDE].isel(setting=0).sel(axis=axis).to_numpy()
        np.testing.assert_array_equal(mask, inside)
        assert np.isfinite(c.to_numpy()).all()
        expected = np.exp(-_truth_law(0).loss(units[inside]))
        np.testing.assert_allclose(c.to_numpy()[inside], expected, rtol=1e-10)
        np.testing.assert_allclose(
            c.to_numpy()[~inside], np.exp(-_truth_law(0).loss(np.maximum(units[~inside], 1.0)))
        )
        assert float(c.max()) <= p_opt + 1e-12
        np.testing.assert_allclose(float(c.sel(share=share[i])), p_opt, rtol=1e-10)
        assert int(np.nanargmax(c.to_numpy())) == int(np.searchsorted(grid, share[i]))
    bands = summarize(iso)
    assert bands[names.ISO_SUCCESS].sizes[names.QUANTILE_DIM] == 3


# --- summaries ------------------------------------------------------------------------------


def test_quantiles_keep_inf_and_skip_nan() -> None:
    x = np.array([[1.0, np.nan], [3.0, np.nan], [np.inf, np.nan]])
    q = quantiles(x, [0.0, 0.5, 1.0])
    assert q[:, 0].tolist() == [1.0, 3.0, np.inf]
    assert np.isnan(q[:, 1]).all()
    np.testing.assert_allclose(quantiles(np.arange(11.0), [0.1, 0.5]), [1.0, 5.0])


def test_json_is_serialisable(tight_fit: xr.DataTree) -> None:
    out = to_json(recipe(tight_fit, [3e4], bounds={names.ENV: (1, 384)}))
    text = json.dumps(out, allow_nan=False)
    back = json.loads(text)
    assert back["unit_prices"] == {"env": 4.1, "task": 0.18, "traj": 0.02}
    assert back["bounds"]["env"] == [1.0, 384.0]
    row = back["results"][0]
    assert set(row["allocation"]) == set(AXES)
    assert row["allocation"]["env"]["median"] == 384.0


def test_thinning() -> None:
    fit = synthetic_fit(draws=100, chains=2, spread=0.05)
    ds = recipe(fit, [3e4], max_draws=10, decision=False)
    assert ds.sizes[names.DRAW_DIM] == 10


def test_draws_whose_law_overflows_are_left_out_and_counted() -> None:
    """An exponent in the hundreds makes K = A D_ref^alpha overflow (a preview's far tails):
    that draw index is left out in every chain, with a warning, and counted in the output;
    the other draws give what they give without it."""

    fit = synthetic_fit(draws=20, chains=2, spread=0.05)
    alpha = fit["posterior"][names.ALPHA].copy()
    alpha[dict(chain=1, draw=3, setting=0, axis=2)] = 500.0  # 11.31^500 > 1e308
    broken = fit.copy()
    broken["posterior"] = fit["posterior"].to_dataset().assign({names.ALPHA: alpha})
    with pytest.warns(
        PosteriorWarning,
        match=r"2 of 40 posterior draws left out: 1 whose law.*up to 500.*1 at the same draw index",
    ):
        draws = law_draws(broken)
    assert draws.left_out == 2 and draws.samples == 38 and np.isfinite(draws.coef).all()
    assert 3 not in draws.draw and np.array_equal(np.unique(draws.chain), [0, 1])
    with pytest.warns(PosteriorWarning):
        ds = recipe(broken, [3e4], decision=False)
    assert ds.sizes[names.DRAW_DIM] == 19 and ds.attrs["draws_left_out"] == 2
    assert to_json(ds)["draws_left_out"] == 2
    expected = recipe(fit, [3e4], decision=False).drop_sel({names.DRAW_DIM: 3})
    np.testing.assert_allclose(ds[names.ALLOCATION], expected[names.ALLOCATION])
    assert to_json(recipe(fit, [3e4], decision=False))["draws_left_out"] == 0
    from bayesscale.recipe.compute import compute_recipe

    with pytest.warns(PosteriorWarning):
        flops = compute_recipe(broken, [1e8])
    assert flops.sizes[names.DRAW_DIM] == 19 and to_json(flops)["draws_left_out"] == 2
    alpha[:] = 500.0
    nowhere = fit.copy()
    nowhere["posterior"] = fit["posterior"].to_dataset().assign({names.ALPHA: alpha})
    with pytest.raises(PosteriorError, match="no posterior draw has a finite law"):
        law_draws(nowhere)


# --- bad input ------------------------------------------------------------------------------


def test_budget_too_small(point_fit: xr.DataTree) -> None:
    with pytest.raises(RecipeError, match="too small to buy the lower bounds"):
        recipe(point_fit, [100.0], bounds={names.ENV: (30, None)})


def test_negative_price(point_fit: xr.DataTree) -> None:
    with pytest.raises(PricesError, match="must be a finite price > 0"):
        recipe(point_fit, [1e4], prices=parse_prices("[prices]\ntraj = -0.02"))


def test_bounds_lo_above_hi(point_fit: xr.DataTree) -> None:
    with pytest.raises(RecipeError, match="lower 400 > upper 384"):
        recipe(point_fit, [1e4], bounds={names.ENV: (400, 384)})


def test_price_for_an_axis_the_fit_lacks(point_fit: xr.DataTree) -> None:
    with pytest.raises(
        PricesError, match=r"prices name axis/axes \['world'\] that the fit does not have"
    ):
        recipe(point_fit, [1e4], prices=parse_prices("[prices]\nworld = 40"))


def test_other_bad_input(point_fit: xr.DataTree) -> None:
    with pytest.raises(PosteriorError, match="not in the fit"):
        recipe(point_fit, [1e4], settings=["nope"])
    with pytest.raises(RecipeError, match="kappa names axis"):
        recipe(point_fit, [1e4], kappa={"world": 0.5})
    with pytest.raises(RecipeError, match="bounds name axis"):
        recipe(point_fit, [1e4], bounds={"world": (1, 2)})
    with pytest.raises(RecipeError, match="budgets must be finite and > 0"):
        recipe(point_fit, [-1.0])
    with pytest.raises(PricesError, match="no price for axis"):
        recipe(_rename_axes(point_fit, ["N", "D", "traj"]), [1e4], prices=default_prices())
    bare = xr.DataTree.from_dict({"posterior": point_fit["posterior"].to_dataset()})
    with pytest.raises(PosteriorError, match="constant_data has no"):
        recipe(bare, [1e4])


# --- the command line -----------------------------------------------------------------------


def _save(tree: xr.DataTree, path: Path) -> Path:
    tree = tree.copy()
    try:
        from bayesscale.data.fitfile import ATTR_FORMAT, FORMAT_VERSION
    except ImportError:  # the loader falls back to plain xarray without the fitting module
        pass
    else:
        tree.attrs[ATTR_FORMAT] = FORMAT_VERSION
    tree.to_netcdf(path, engine="h5netcdf")
    return path


def test_cli_json_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bayesscale.cli import main

    fit = _save(synthetic_fit(draws=40, chains=2, spread=0.0), tmp_path / "fit.nc")
    prices = tmp_path / "p.toml"
    prices.write_text("[prices]\nenv = 4.1\n")
    rc = main(
        [
            "recipe",
            str(fit),
            "--budget",
            "2e3:1e6:3",
            "--bounds",
            "env=1:384,traj=2:",
            "--prices",
            str(prices),
            "--setting",
            "S1 | grpo | math",
            "--json",
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["budget"] for r in out["results"]] == pytest.approx([2e3, np.sqrt(2e9), 1e6])
    # The headline is what the data vouch for: the larger budgets' optima lie more than 4x
    # beyond the swept tasks, so every row is bounded to 4x the largest swept values (and the
    # user's tighter env <= 384); the unbounded optimum follows where it lies beyond.
    assert out["headline"] == "bounded to the data"
    assert out["bounds"] == {"env": [1.0, 384.0], "task": [1.0, 4 * 10240.0], "traj": [2.0, 256.0]}
    lower = np.array([1.0, 1.0, 2.0])
    for r, b in zip(out["results"], (2e3, np.sqrt(2e9), 1e6), strict=True):
        free = _truth_optimum(1, b, upper=np.array([384.0, np.inf, np.inf]), lower=lower)
        capped = _truth_optimum(1, b, upper=np.array([384.0, 40960.0, 256.0]), lower=lower)
        got = [r["allocation"][a]["median"] for a in AXES]
        np.testing.assert_allclose(got, capped.sizes, rtol=1e-9)
        far = np.maximum(free.sizes / SWEPT_MAX, SWEPT_MIN / free.sizes) > 4.0
        assert r["within_data"] == (not far.any())
        if far.any():
            extra = r["extrapolation_recipe"]
            unbounded = [extra["allocation"][a]["median"] for a in AXES]
            np.testing.assert_allclose(unbounded, free.sizes, rtol=1e-9)
            assert extra["extrapolation"]["beyond"] == [
                a for a, f in zip(AXES, far, strict=True) if f
            ]
        else:
            np.testing.assert_allclose(got, free.sizes, rtol=1e-9)
    assert [r["within_data"] for r in out["results"]] == [True, False, False]


def test_cli_table_and_pricing_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bayesscale.cli import main

    fit = _save(synthetic_fit(draws=20, chains=2, spread=0.05), tmp_path / "fit.nc")
    pricing = _save(_pricing_fit({names.ENV: 0.71}), tmp_path / "price.nc")
    out_nc = tmp_path / "recipe.nc"
    rc = main(
        ["recipe", str(fit), "--budget", "5e4", "--pricing", str(pricing), "--out", str(out_nc)]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "env: pricing fit" in text
    assert "vs chinchilla" in text and "budget x needed" in text
    back = xr.open_dataset(out_nc, engine="h5netcdf")
    assert names.ALLOCATION in back
    back.close()


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--budget", "10"], "too small to buy the lower bounds"),
        (["--budget", "1e5", "--bounds", "env=400:384"], "lower 400 > upper 384"),
        (["--budget", "1e5", "--kappa", "world=0.5"], "kappa names axis"),
        (["--budget", "-5"], "budgets must be finite and > 0"),
        (["--budget", "1e4:1e3:5"], "expected B"),
        (["--budget", "1e5", "--bounds", "env=1-384"], "expected LO:HI"),
    ],
)
def test_cli_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], match: str
) -> None:
    from bayesscale.cli import main

    fit = _save(synthetic_fit(draws=5, chains=1, spread=0.0), tmp_path / "fit.nc")
    args = ["recipe", str(fit), *extra]
    if "10" in extra:
        args += ["--bounds", "env=30:"]
    assert main(args) == 2
    assert match in capsys.readouterr().err


def test_cli_price_axis_not_in_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bayesscale.cli import main

    fit = _save(synthetic_fit(draws=5, chains=1, spread=0.0), tmp_path / "fit.nc")
    prices = tmp_path / "p.toml"
    prices.write_text("[prices]\nworld = 40.0\n")
    assert main(["recipe", str(fit), "--budget", "1e5", "--prices", str(prices)]) == 2
    assert "that the fit does not have" in capsys.readouterr().err


def test_decision_units_pulled_onto_the_budget() -> None:
    """``_onto_budget`` works in log units: a point over the budget (SLSQP's overshoot, or a
    start anywhere) moves geometrically toward the lower bounds until it spends the budget; a
    point within it is left alone."""
    from bayesscale.recipe.solve import _onto_budget

    cost, budget = _money(), 3e4
    y_lo = np.log(np.array([1.0, 1.0, 2.0]))
    for units in (_truth_optimum(0, budget).sizes * (1 + 1e-9), np.array([1e4, 1e5, 50.0])):
        y = np.log(units)
        assert float(cost(units)) > budget
        pulled = _onto_budget(y, cost, budget, y_lo)
        spent = float(cost(np.exp(pulled)))
        assert spent <= budget and spent == pytest.approx(budget, rel=1e-12)
        assert (pulled >= y_lo).all()
        t = (pulled - y_lo) / (y - y_lo)  # one common factor: along the line to the bounds
        np.testing.assert_allclose(t, t[0], rtol=1e-12)
        assert 0 < t[0] < 1
    same = np.log(np.array([200.0, 3000.0, 4.0]))
    assert float(cost(np.exp(same))) < budget
    np.testing.assert_array_equal(_onto_budget(same, cost, budget, y_lo), same)


def test_recipe_on_an_arviz_style_fit_with_extra_variables(point_fit: xr.DataTree) -> None:
    """A real fit carries more variables (non-centred pieces, other dims): they are ignored."""
    post = point_fit["posterior"].to_dataset()
    post["alpha_z"] = post[names.ALPHA] * 0.0
    post["log_floor_group"] = (("chain", "draw", "size_group"), np.zeros((2, 40, 3)))
    tree = xr.DataTree.from_dict(
        {
            "posterior": post,
            "constant_data": point_fit["constant_data"].to_dataset(),
            "sample_stats": xr.Dataset({"diverging": (("chain", "draw"), np.zeros((2, 40), bool))}),
        }
    )
    tree.attrs = dict(point_fit.attrs)
    a = recipe(tree, [3e4], decision=False)
    b = recipe(point_fit, [3e4], decision=False)
    np.testing.assert_array_equal(a[names.ALLOCATION], b[names.ALLOCATION])


def test_cli_iso_budget_curves_pass_through_the_decision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bayesscale.cli import main

    fit = _save(synthetic_fit(draws=20, chains=2, spread=0.0), tmp_path / "fit.nc")
    # --warn-beyond 1000: the unbounded recipe is the headline (it lies within 1000x the data)
    args = ["recipe", str(fit), "--budget", "3e4,1e6", "--json", "--iso"]
    assert main([*args, "--warn-beyond", "1e3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["headline"] == "within the data"
    for row in out["results"]:
        g = int(row["setting"][1])
        truth = _truth_optimum(g, row["budget"])
        p_opt = float(np.exp(-_truth_law(g).loss(truth.sizes)))
        spend = np.array([row["decision_spend"][a] for a in AXES])
        for i, axis in enumerate(AXES):
            curve = row["iso_budget"][axis]
            median = np.array([np.nan if v is None else v for v in curve["median"]])
            units = _iso_units(np.array(curve["share"]), i, spend, row["budget"])
            np.testing.assert_array_equal(np.isnan(median), (units < 1.0).any(axis=1))
            # No split along the curve beats the optimum; the grid point nearest the
            # decision's share comes within the grid's resolution of it.
            assert np.nanmax(median) <= p_opt + 1e-9
            assert np.nanmax(median) >= p_opt - 5e-3
    # The default headline is bounded to 4x the swept range (both budgets' optima lie beyond):
    # the curves pass through the bounded decision, and are NaN wherever the split leaves the
    # box, which every split but the decision's does on an axis at its cap.
    caps = 4.0 * SWEPT_MAX
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["headline"] == "bounded to the data"
    finite = whole = 0
    for row in out["results"]:
        g = int(row["setting"][1])
        truth = _truth_optimum(g, row["budget"], upper=caps)
        decision = np.array([row["decision"][a] for a in AXES])
        np.testing.assert_allclose(decision, truth.sizes, rtol=1e-5)
        p_opt = float(np.exp(-_truth_law(g).loss(truth.sizes)))
        spend = np.array([row["decision_spend"][a] for a in AXES])
        for i, axis in enumerate(AXES):
            curve = row["iso_budget"][axis]
            median = np.array([np.nan if v is None else v for v in curve["median"]])
            units = _iso_units(np.array(curve["share"]), i, spend, row["budget"])
            inside = ((units >= 1.0) & (units <= caps * (1 + 1e-9))).all(axis=1)  # on a face: in
            np.testing.assert_array_equal(np.isnan(median), ~inside)
            expected = np.exp(-_truth_law(g).loss(units[inside]))
            np.testing.assert_allclose(median[inside], expected, rtol=1e-9)
            assert (median[inside] <= p_opt + 1e-9).all()
            # the grid holds the decision's own split: where the decision spends the budget,
            # no curve is empty, even where the box pins the decision at a corner and every
            # other split leaves it
            at = spend[i] / spend.sum()
            k = int(np.argmin(np.abs(np.array(curve["share"]) - at)))
            assert curve["share"][k] == pytest.approx(at, rel=1e-12)
            spends_all = row["budget_spent"] == pytest.approx(row["budget"], rel=1e-9)
            assert inside[k] or not spends_all
            whole += int(spends_all)
            finite += int(inside.sum())
    assert finite > 0  # rollouts per task below their cap at 3e4
    assert whole > 0


# --- how far beyond the data, units, within-data bounds ---------------------------------------

SWEPT_MAX = np.array([256.0, 10240.0, 64.0])  # synthetic_fit's default grids
SWEPT_MIN = np.array([8.0, 320.0, 2.0])


def test_extrapolation_is_the_optimum_over_the_largest_swept_value(wide_fit) -> None:
    ds = recipe(wide_fit, BUDGETS)
    ratio = ds[names.ALLOCATION] / xr.DataArray(SWEPT_MAX, dims=names.AXIS_DIM)
    np.testing.assert_allclose(
        ds[names.EXTRAPOLATION], ratio.transpose(*ds[names.EXTRAPOLATION].dims)
    )
    decision = ds[names.DECISION] / xr.DataArray(SWEPT_MAX, dims=names.AXIS_DIM)  # kappa = 1
    np.testing.assert_allclose(ds[names.DECISION_EXTRAPOLATION], decision)
    out = to_json(ds, warn_factor=4.0)
    for row in out["results"]:
        extent = row["extrapolation"]
        for i, axis in enumerate(AXES):
            entry = extent["axes"][axis]
            assert entry["swept_max"] == SWEPT_MAX[i]
            assert entry["decision_over_max"] == pytest.approx(row["decision"][axis] / SWEPT_MAX[i])
            low = entry["swept_min"] / row["decision"][axis]
            assert entry["outside"] == pytest.approx(max(entry["decision_over_max"], low, 1.0))
            assert (axis in extent["beyond"]) == (entry["outside"] > 4.0)
    # Known answers: the axes on which the truth's optimum lies more than 4x outside the grids.
    # The paper's prices at 1e6 USD buy environments and tasks far beyond them, while rollouts
    # per task stay inside (each one is a rollout of every task); 2e3 USD stays near them.
    for row in out["results"]:
        truth = _truth_optimum(int(row["setting"][1]), row["budget"]).sizes
        far = np.maximum(truth / SWEPT_MAX, SWEPT_MIN / truth) > 4.0
        assert row["extrapolation"]["beyond"] == [a for a, f in zip(AXES, far, strict=True) if f]
    assert out["results"][-1]["extrapolation"]["beyond"] == ["env", "task"]
    assert out["results"][0]["extrapolation"]["beyond"] == []


def test_within_data_equals_explicit_upper_bounds(point_fit) -> None:
    capped = recipe(point_fit, BUDGETS, within_data=4.0, bounds={"traj": (2.0, 100.0)})
    explicit = recipe(
        point_fit,
        BUDGETS,
        bounds={"env": (None, 1024.0), "task": (None, 40960.0), "traj": (2.0, 100.0)},
    )
    for var in (names.PURCHASED, names.DECISION, names.SUCCESS_DECISION):
        np.testing.assert_allclose(capped[var], explicit[var], rtol=1e-12)
    assert float(capped[names.PURCHASED].sel({names.AXIS_DIM: "traj"}).max()) <= 100.0 + 1e-9
    assert (capped[names.EXTRAPOLATION] <= 4.0 + 1e-9).all()
    # what the box leaves unspent is said, not hidden
    row = to_json(capped)["results"][-1]
    # 1024 environments, 40960 tasks and 100 rollouts of each task: 4.096M trajectories
    assert row["budget_spent"] == pytest.approx(4.1 * 1024 + 0.18 * 40960 + 0.02 * 40960 * 100)
    assert row["budget_spent"] < BUDGETS[-1]


def test_units_and_trajectories(point_fit) -> None:
    ds = recipe(point_fit, [3e4])
    bought = ds[names.PURCHASED]
    np.testing.assert_allclose(
        ds[names.TRAJECTORIES],
        bought.sel({names.AXIS_DIM: "task"}) * bought.sel({names.AXIS_DIM: "traj"}),
    )
    out = to_json(ds)
    assert out["units"]["traj"].startswith("rollouts per task")
    assert out["units"]["env"].startswith("distinct environments")
    row = out["results"][0]
    assert row["trajectories"]["decision"] == pytest.approx(
        row["decision"]["task"] * row["decision"]["traj"]
    )


def test_a_fit_without_a_swept_range(point_fit) -> None:
    old = point_fit.copy()
    old["constant_data"] = xr.DataTree(
        old["constant_data"].to_dataset().drop_vars([names.SWEPT_MIN, names.SWEPT_MAX])
    )
    out = to_json(recipe(old, [3e4]))
    assert out["results"][0]["extrapolation"] is None
    with pytest.raises(RecipeError, match="stores no swept range"):
        recipe(old, [3e4], within_data=4.0)
    with pytest.raises(RecipeError, match=">= 1"):
        recipe(point_fit, [3e4], within_data=0.5)


def test_cli_states_units_extrapolation_and_one_number_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bayesscale.cli import main

    fit = _save(synthetic_fit(draws=300, chains=2, spread=0.01), tmp_path / "fit.nc")
    assert main(["recipe", str(fit), "--budget", "1e6", "--prob", "0.8"]) == 0
    captured = capsys.readouterr()
    text = captured.out
    assert "intervals: median [80% equal-tailed]" in text
    assert "traj = rollouts per task" in text and "x swept max" in text
    assert "each task in one environment: trajectories = tasks x rollouts per task" in text
    assert "   trajectories: optimum " in text
    assert " !" in text  # rows beyond 4x are marked
    assert "e+" not in text  # one number format: 3 significant digits, k/M/G/T
    # 1e6 USD buys environments and tasks far beyond the swept range: the headline is the
    # recipe bounded to 4x the data (no warning: it lies within), the unbounded one follows
    # as a labelled extrapolation, with what to sweep first (a quarter of its sizes).
    # (the synthetic fit's own diagnostics verdict is the one warning: it goes to stderr)
    warned = [line for line in captured.err.splitlines() if "warning" in line]
    assert all("DIAGNOSTICS FAILED" in line for line in warned)
    assert text.count("budget 1,000,000 USD  |  bounded to the reach (4x) of the data") == 2
    assert text.count("EXTRAPOLATION, not vouched for by the data") == 2
    assert "within 4x the largest swept values" in text
    for g in range(2):
        env, task, _ = _truth_optimum(g, 1e6).sizes
        assert (
            f"sweep further first: env to >= {format_number(env / 4, None)} (the sweep reaches "
            f"256); task to >= {format_number(task / 4, None)} (the sweep reaches 10.2k)"
        ) in text
    # within the data: no warning, and the bound is stated
    assert main(["recipe", str(fit), "--budget", "1e6", "--within-data", "4"]) == 0
    captured = capsys.readouterr()
    warned = [line for line in captured.err.splitlines() if "warning" in line]
    assert all("DIAGNOSTICS FAILED" in line for line in warned)  # the fit's verdict only
    assert "within 4x the largest swept values" in captured.out
    assert "the bounds leave the rest unspent" in captured.out
    # the old flag name still works; the JSON says which mass it used
    assert main(["recipe", str(fit), "--budget", "1e4", "--credible", "0.5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["prob"] == 0.5


def test_cli_strict_refuses_a_failed_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bayesscale.cli import main

    fit = _save(synthetic_fit(draws=5, chains=2, spread=0.05), tmp_path / "fit.nc")
    out = tmp_path / "r.nc"
    assert main(["recipe", str(fit), "--budget", "1e4", "--json"]) == 0
    captured = capsys.readouterr()
    verdict = json.loads(captured.out)["fit_diagnostics"]["law_fit"]
    assert verdict["ok"] is False and "DIAGNOSTICS FAILED" in verdict["headline"]
    # the verdict on standard error too, so `recipe BAD.nc --json > r.json` is not silent
    assert f"bayesscale recipe: warning: {fit}: DIAGNOSTICS FAILED" in captured.err
    assert main(["recipe", str(fit), "--budget", "1e4"]) == 0
    assert capsys.readouterr().out.startswith("law fit: DIAGNOSTICS FAILED")
    assert main(["recipe", str(fit), "--budget", "1e4", "--strict", "--out", str(out)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(fit) in err[0] and "--strict" in err[0]
    assert not out.exists()


def test_decision_with_draws_below_zero_loss_matches_brute_force() -> None:
    """Draws whose loss falls below 0 have success 1 and no gradient there (``p = exp(-max(L,
    0))``). The decision's optimiser must use that gradient: with the unclipped one it
    stalled at its iteration limit on such posteriors (a preview's far tails). Known answer:
    the best point of a fine grid over the money shares of the three monomials (every way to
    spend the budget, under the money cost), polished without derivatives; the decision is in
    purchased units and spends the budget."""
    from scipy import optimize

    from bayesscale.recipe.solve import _decision

    rng = np.random.default_rng(11)
    S = 200
    alpha = ALPHA[0] * np.exp(0.5 * rng.standard_normal((S, 3)))
    coef = AMPLITUDE[0] * REFERENCE ** ALPHA[0] * np.exp(0.3 * rng.standard_normal((S, 3)))
    floor = np.where(rng.random(S) < 0.3, -0.2, FLOOR[0])  # 30% of draws reach L < 0
    law = allocate.PowerLaw(coef, alpha, floor)
    cost = _money()
    budget, lo, hi = 1e5, np.ones(3), np.full(3, np.inf)

    def units(f: np.ndarray) -> np.ndarray:
        """Units that put money shares ``f`` (..., 3) of the budget on env, task and
        trajectories (a rollout per task costs c_traj u_task), by hand."""
        env = f[..., 0] * budget / PRICES[0]
        task = f[..., 1] * budget / PRICES[1]
        return np.stack([env, task, f[..., 2] * budget / (PRICES[2] * task)], axis=-1)

    def mean_success(u: np.ndarray) -> float:
        return float(laws.success_from_loss(law.loss(u)).mean())

    even = units(np.full(3, 1 / 3))
    assert float(cost(even)) == pytest.approx(budget, rel=1e-12)
    assert (law.loss(even) < 0).any()
    x, converged = _decision(law, np.ones(3), cost, budget, lo, hi, even)
    assert converged
    assert (x >= lo).all() and float(cost(x)) <= budget * (1 + 1e-12)
    assert float(cost(x)) == pytest.approx(budget, rel=1e-9)  # it spends the budget
    grid = np.linspace(1e-4, 1 - 1e-4, 151)
    f1, f2 = np.meshgrid(grid, grid)
    pts = np.stack([f1.ravel(), f2.ravel(), 1 - f1.ravel() - f2.ravel()], axis=-1)
    pts = pts[pts[:, 2] > 1e-4]
    pts = pts[(units(pts) >= 1.0).all(axis=1)]  # inside the box
    p = laws.success_from_loss(law.loss(units(pts)[:, None, :])).mean(axis=1)
    best = pts[np.argmax(p)]

    def minus_success(v: np.ndarray) -> float:
        f = np.array([v[0], v[1], 1 - v[0] - v[1]])
        if (f <= 0).any() or (units(f) < 1.0).any():
            return 1.0  # outside the box: worse than any allocation inside it
        return -mean_success(units(f))

    polished = optimize.minimize(
        minus_success,
        best[:2],
        method="Nelder-Mead",
        options={"xatol": 1e-10, "fatol": 1e-14, "maxiter": 1000},
    )
    brute = max(float(p.max()), -float(polished.fun))
    assert mean_success(x) >= brute - 1e-9


def test_cli_marks_exponents_the_data_barely_identify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A posterior barely narrower than the prior (contraction below 0.5: prior-dominated)
    gets its axes marked in the table, in the JSON and in one note; a tight one gets none."""
    from bayesscale.cli import main
    from bayesscale.law.sensitivity import assess

    wide = synthetic_fit(draws=50, chains=2, spread=0.7)
    flags = {s: {a: e["flag"] for a, e in d.items()} for s, d in assess(wide)["settings"].items()}
    assert set(flags["S0 | grpo | math"].values()) == {"prior-dominated"}
    fit = _save(wide, tmp_path / "wide.nc")
    args = ["recipe", str(fit), "--budget", "1e5", "--setting", "S0 | grpo | math"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "env prior-dominated (‡) in 1 of 1 settings" in captured.err
    assert "‡ / † / ? after an axis" in captured.out
    assert all(f"   {a} ‡ " in captured.out for a in AXES)
    assert main([*args, "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["results"][0]
    assert row["exponent_flags"] == flags["S0 | grpo | math"]

    tight = _save(synthetic_fit(draws=50, chains=2, spread=0.0), tmp_path / "tight.nc")
    assert main(["recipe", str(tight), "--budget", "1e5"]) == 0
    captured = capsys.readouterr()
    assert "barely identify" not in captured.err and "after an axis" not in captured.out
    assert "‡" not in captured.out and "†" not in captured.out


def test_linearised_recipe_exponents_follow_the_fixed_point() -> None:
    """Under the paper's convention the rollout price c_traj D_T* moves with the budget: the
    recipe's exponents are the derivatives of the whole fixed point, not of an additive
    optimum at frozen prices."""
    fit = synthetic_fit(draws=8, chains=1, spread=0.0)
    budgets = np.array([1e3, 1e4])
    ds = recipe(fit, budgets, cost_model="linearised")
    assert names.DECISION not in ds
    h = 1e-3
    up = recipe(fit, budgets * np.exp(h), cost_model="linearised")[names.ALLOCATION]
    down = recipe(fit, budgets * np.exp(-h), cost_model="linearised")[names.ALLOCATION]
    fd = (np.log(up.to_numpy()) - np.log(down.to_numpy())) / (2 * h)
    np.testing.assert_allclose(ds[names.RECIPE_EXPONENT].to_numpy(), fd, atol=1e-5)
    # the money it spends is the budget (the fixed point's prices sum to the exact cost)
    np.testing.assert_allclose(ds[names.SPEND_SHARE].sum(names.AXIS_DIM), 1.0, rtol=1e-9)
