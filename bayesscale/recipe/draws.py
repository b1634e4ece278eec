"""What a recipe starts from, beside the law's draws (read by
:mod:`bayesscale.law.posterior`): the discount kappa per draw, the bounds of each axis, the
money a purchase costs, and how far a recipe lies beyond the swept data.

>>> bounds_arrays(["env", "task"], {"env": (1, 384)})[0].tolist()
[1.0, 1.0]
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import xarray as xr
from numpy.typing import NDArray

from bayesscale import names
from bayesscale.core import laws
from bayesscale.core.form_law import Law
from bayesscale.core.geometric import Posynomial
from bayesscale.core.prices import Prices, check_kappa, default_prices, money_cost
from bayesscale.data.extrapolation import Reach, SweptRange, check_reach, reach_factor, reach_text
from bayesscale.law.mixed_draws import recipe_draws
from bayesscale.law.posterior import LawDraws, axis_columns

Array = NDArray[np.float64]
KAPPA_FROM_PRICING_FIT = "pricing fit"  # the discount source an axis names (kappa_source)
COST_EXACT = "exact"  # money is what is bought: trajectories priced per trajectory
COST_LINEARISED = "linearised"  # the paper's additive convention, linearised at the optimum
COST_MODELS = (COST_EXACT, COST_LINEARISED)
COST_TEXT = {
    COST_EXACT: "exact: money = sum of what is bought, trajectories priced per trajectory",
    COST_LINEARISED: "linearised (the paper's convention): additive, the traj price per unit of "
    "rollouts per task taken as c_traj x the optimum's tasks (a fixed point per draw)",
}
_MULTIPLIER_RANGE = (1e-3, 1e6)


class RecipeError(ValueError):
    """Inputs that the recipe cannot use (missing variables, unknown axes, bad bounds)."""


def success_of(law: Law, sizes: Array) -> Array:
    """Success ``exp(-L)`` of a batch of laws at effective sizes ``sizes``."""
    return np.asarray(laws.success_from_loss(law.loss(sizes)), dtype=float)


@dataclass(frozen=True)
class RecipeInputs:
    """What the recipe and the iso-budget curves start from: the law's draws, the unit price
    of each axis (n,), the money a purchase costs (in purchased units,
    :func:`~bayesscale.core.prices.money_cost`), the discounts per draw (S, n) and where they
    came from, and the box ``[lo, hi]`` (n,) in purchased units."""

    prices: Prices
    draws: LawDraws
    unit_price: Array
    cost: Posynomial
    kappa: Array
    kappa_source: str
    lo: Array
    hi: Array


def recipe_inputs(
    fit: xr.DataTree,
    *,
    prices: Prices | None,
    pricing: xr.DataTree | None,
    kappa: Mapping[str, float] | None,
    bounds: Mapping[str, tuple[float | None, float | None]] | None,
    settings: Sequence[str] | None,
    max_draws: int | None,
    within_data: Reach | None,
    seed: int,
) -> RecipeInputs:
    """Read the fit once for a recipe: ``prices`` default to the paper's; an explicit price
    for the model size makes it an axis; ``within_data`` caps ``bounds`` at that many times
    the swept range (:func:`bounds_within_data`)."""
    prices = prices or default_prices()
    size_axis = names.PARAMS_B in prices.explicit
    if within_data is not None:
        bounds = bounds_within_data(fit, within_data, bounds, settings, size_axis)
    draws = recipe_draws(fit, settings, max_draws, size_axis=size_axis)
    kap, source = kappa_draws(draws.axes, draws.samples, pricing, kappa, seed)
    lo, hi = bounds_arrays(draws.axes, bounds)
    columns = axis_columns(fit, draws.axes)
    cost = money_cost(draws.axes, [columns[a] for a in draws.axes], prices)
    return RecipeInputs(prices, draws, prices.for_axes(draws.axes), cost, kap, source, lo, hi)


def effective_cost(cost: Posynomial, kappa: Array) -> Posynomial:
    """The money cost in effective units ``D = kappa u`` (weights per draw, (S, M)):
    ``w_m prod_i kappa_i^(-a_mi)``."""
    return Posynomial(np.exp(np.log(cost.weights) - np.log(kappa) @ cost.powers.T), cost.powers)


def units_for_spend(cost: Posynomial, spend: Array) -> Array:
    """Purchased units (..., n) that put ``spend`` (..., n) on each axis's own monomial (the
    money cost has one monomial per axis, :func:`~bayesscale.core.prices.money_cost`):
    ``A log u = log(spend / w)``.

    >>> from bayesscale.core.prices import default_prices, money_cost
    >>> cost = money_cost(["task", "traj"], ["n_tasks", "rollouts"], default_prices())
    >>> units_for_spend(cost, np.array([18.0, 16.0])).round(9).tolist()
    [100.0, 8.0]
    """
    with np.errstate(divide="ignore"):
        rhs = np.log(spend) - np.log(cost.weights)
    return np.asarray(np.exp(np.linalg.solve(cost.powers, rhs[..., None])[..., 0]), dtype=float)


def kappa_draws(
    axes: Sequence[str],
    samples: int,
    pricing: xr.DataTree | None = None,
    kappa: Mapping[str, float] | None = None,
    seed: int = 0,
) -> tuple[Array, str]:
    """Discounts per sample and axis (S, n), and a description of where they came from.

    User values win over a pricing fit's ``kappa0_axis`` posterior; axes neither names get 1
    (real data). Pricing-fit draws are paired with law-fit draws by a seeded random
    permutation (independent posteriors), cycled when there are fewer of them.
    """
    out = np.ones((samples, len(axes)))
    sources = []
    if pricing is not None:
        if "posterior" not in pricing.children or names.KAPPA0_AXIS not in pricing["posterior"]:
            raise RecipeError(f"the pricing fit's posterior has no {names.KAPPA0_AXIS!r}")
        da = pricing["posterior"][names.KAPPA0_AXIS]
        da = da.stack(_s=(names.CHAIN_DIM, names.DRAW_DIM)).transpose("_s", names.PRICED_AXIS_DIM)
        priced = [str(a) for a in da[names.PRICED_AXIS_DIM].to_numpy()]
        vals = da.to_numpy().astype(float)
        rng = np.random.default_rng(seed)
        pick = rng.permutation(np.resize(np.arange(vals.shape[0]), samples))
        for j, axis in enumerate(priced):
            if axis in axes:
                col = vals[pick, j]
                if (~np.isfinite(col) | (col <= 0)).any():
                    raise RecipeError(
                        f"pricing fit: {names.KAPPA0_AXIS}[{axis}] has values <= 0 or NaN"
                    )
                out[:, list(axes).index(axis)] = col
                sources.append(f"{axis}: {KAPPA_FROM_PRICING_FIT}")
    if kappa:
        checked = check_kappa(kappa)
        unknown = sorted(set(checked) - set(axes))
        if unknown:
            raise RecipeError(
                f"kappa names axis/axes {unknown} that the fit does not have: {list(axes)}"
            )
        for axis, value in checked.items():
            out[:, list(axes).index(axis)] = value
            sources.append(f"{axis}: user {value:g}")
    return out, "; ".join(sources) or "none (real data, kappa = 1)"


def bounds_arrays(
    axes: Sequence[str], bounds: Mapping[str, tuple[float | None, float | None]] | None
) -> tuple[Array, Array]:
    """Box bounds (purchased units) per axis: default ``[1, inf)``; validated.

    >>> bounds_arrays(["env", "task"], {"env": (1, 384)})[1].tolist()
    [384.0, inf]
    """
    lo = np.ones(len(axes))
    hi = np.full(len(axes), np.inf)
    for axis, (a, b) in (bounds or {}).items():
        if axis not in axes:
            raise RecipeError(f"bounds name axis {axis!r} that the fit does not have: {list(axes)}")
        i = list(axes).index(axis)
        if a is not None:
            lo[i] = float(a)
        if b is not None:
            hi[i] = float(b)
        if not lo[i] > 0:
            raise RecipeError(f"bounds {axis}: lower bound must be > 0, got {lo[i]:g}")
        if lo[i] > hi[i]:
            raise RecipeError(f"bounds {axis}: lower {lo[i]:g} > upper {hi[i]:g}")
    return lo, hi


def bounds_within_data(
    fit: xr.DataTree,
    factor: Reach,
    bounds: Mapping[str, tuple[float | None, float | None]] | None = None,
    settings: Sequence[str] | None = None,
    size_axis: bool = False,
) -> dict[str, tuple[float | None, float | None]]:
    """``bounds`` with every axis capped at ``factor`` times its largest swept value (the
    model size too, with ``size_axis``: when the recipe chooses it). ``factor``: one for every
    axis, or one per axis (an axis it does not name is not capped;
    ``bayesscale.data.extrapolation.Reach``).

    The cap is in purchased units, at the largest value of the axis in the rows of the chosen
    settings (the widest of them, where their swept ranges differ: run one setting at a time for
    each one's own). A user's tighter upper bound is kept. With a discount ``kappa < 1`` the law
    sees ``kappa`` times the purchase, which stays inside the cap.

    >>> from bayesscale.recipe.synthetic import synthetic_fit
    >>> fit = synthetic_fit(draws=5, spread=0.0)
    >>> bounds_within_data(fit, 4.0, {"env": (2, None)})["env"]
    (2, 1024.0)
    >>> bounds_within_data(fit, {"env": 2.0})["env"]
    (None, 512.0)
    """
    try:
        check_reach(factor)
    except ValueError as exc:
        raise RecipeError(
            f"within_data must be a number >= 1 (or one per axis), got {reach_text(factor)}"
        ) from exc
    swept = SweptRange.from_fit(fit)
    if swept is None:
        raise RecipeError(
            "the fit stores no swept range (it was written by an older version): refit it to "
            "keep the recipe within the data"
        )
    chosen = list(settings) if settings else list(swept.settings)
    unknown = [s for s in chosen if s not in swept.settings]
    if unknown:
        raise RecipeError(f"setting(s) {unknown} not in the fit")
    if isinstance(factor, Mapping):
        strange = sorted(set(factor) - set(swept.axes))
        if strange:
            raise RecipeError(f"within_data names axes {strange}; the fit's are {list(swept.axes)}")
    rows = [swept.settings.index(s) for s in chosen]
    out = dict(bounds or {})
    for i, axis in enumerate(swept.axes):
        if axis == names.PARAMS_B and not size_axis:
            continue
        cap = reach_factor(factor, axis) * float(np.nanmax(swept.hi[rows, i]))
        if not np.isfinite(cap):
            continue
        lo, hi = out.get(axis, (None, None))
        out[axis] = (lo, cap if hi is None else min(float(hi), cap))
    return out


def _trajectories_per_unit(
    ds: xr.Dataset, axes: Sequence[str], traj: str | None
) -> tuple[xr.DataArray, float] | None:
    """The money cost's rollout monomial as a count of trajectories: its powers (over the
    axes) and its weight over the trajectory price; ``None`` without a money cost."""
    if traj is None or names.ATTR_COST_WEIGHTS not in ds.attrs:
        return None
    powers = np.asarray(json.loads(ds.attrs[names.ATTR_COST_POWERS]), dtype=float)
    weights = json.loads(ds.attrs[names.ATTR_COST_WEIGHTS])
    price = json.loads(ds.attrs[names.ATTR_PRICES])[traj]
    r = list(axes).index(traj)
    return xr.DataArray(powers[r], dims=names.AXIS_DIM), float(weights[r]) / float(price)


def add_data_extent(ds: xr.Dataset, fit: xr.DataTree) -> xr.Dataset:
    """Add to a recipe result how far it lies beyond the data, and what its units buy.

    * ``swept_min`` / ``swept_max`` (setting, axis): the fit's swept range (absent for fits
      written before it was stored);
    * ``extrapolation`` per draw: the optimum in units bought over the largest swept value,
      ``u*_i / D_max,i``; ``decision_extrapolation`` (setting, budget, axis): the decision's
      ``x_i / D_max,i``. Both count what is bought, as the bounds do (a synthetic unit counts
      as one, not as the ``kappa_i`` real units the law sees it as): a recipe of synthetic
      data is "within the data" only where it buys no more than the data swept;
    * ``trajectories`` per draw (and ``decision_trajectories``): the trajectories the money
      cost charges for (its rollout monomial over the trajectory price: tasks x rollouts per
      task by default, :func:`~bayesscale.core.prices.money_cost`), or, without a money cost
      (a compute recipe), tasks times rollouts per task, where the fit has both axes;
    * ``units_json``: what one unit of each axis is.
    """
    axes = [str(a) for a in ds[names.AXIS_DIM].to_numpy()]
    settings = [str(s) for s in ds[names.SETTING_DIM].to_numpy()]
    columns = axis_columns(fit, axes)
    ds.attrs["units_json"] = json.dumps(
        {a: names.UNIT_LONG.get(c, f"units of {c}") for a, c in columns.items()}
    )
    ds.attrs["units_short_json"] = json.dumps(
        {a: names.UNIT_SHORT.get(c, c) for a, c in columns.items()}
    )
    by_column = {c: a for a, c in columns.items()}
    task, traj = by_column.get(names.N_TASKS), by_column.get(names.ROLLOUTS)
    per_rollout = _trajectories_per_unit(ds, axes, traj)
    if per_rollout is None and task is not None and traj is not None:
        per_rollout = (
            xr.DataArray(np.isin(axes, [task, traj]).astype(float), dims=names.AXIS_DIM),
            1.0,
        )
    if per_rollout is not None:
        powers, factor = per_rollout

        def count(units: xr.DataArray) -> xr.DataArray:
            return factor * (units**powers).prod(names.AXIS_DIM)

        ds[names.TRAJECTORIES] = count(ds[names.PURCHASED])
        if names.DECISION in ds:
            ds[names.DECISION_TRAJECTORIES] = count(ds[names.DECISION])
    swept = SweptRange.from_fit(fit)
    if swept is None:
        return ds
    missing = [a for a in axes if a not in swept.axes]
    if missing:
        raise RecipeError(f"the fit's swept range has no axis {missing}")
    swept = swept.select(settings, axes)
    dims = (names.SETTING_DIM, names.AXIS_DIM)
    ds[names.SWEPT_MIN] = (dims, swept.lo)
    ds[names.SWEPT_MAX] = (dims, swept.hi)
    ds[names.EXTRAPOLATION] = ds[names.PURCHASED] / ds[names.SWEPT_MAX]
    if names.DECISION in ds:
        ds[names.DECISION_EXTRAPOLATION] = ds[names.DECISION] / ds[names.SWEPT_MAX]
    return ds
