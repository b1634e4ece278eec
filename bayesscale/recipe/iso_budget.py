"""Iso-budget curves: success as one axis's share of the budget moves, the rest split in fixed
proportions.

>>> from bayesscale.recipe.synthetic import synthetic_fit
>>> ds = iso_budget(synthetic_fit(draws=20, spread=0.0), 1e5, ("env", "task"))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from bayesscale import names
from bayesscale.core.prices import Prices
from bayesscale.recipe.draws import RecipeError, recipe_inputs, success_of, units_for_spend

# --- iso-budget curves --------------------------------------------------------------------------


def iso_budget(
    fit: xr.DataTree,
    budget: float,
    *,
    prices: Prices | None = None,
    pricing: xr.DataTree | None = None,
    kappa: Mapping[str, float] | None = None,
    bounds: Mapping[str, tuple[float | None, float | None]] | None = None,
    settings: Sequence[str] | None = None,
    shares: ArrayLike | None = None,
    reference_spend: Mapping[str, float] | ArrayLike | None = None,
    max_draws: int | None = None,
    within_data: float | None = None,
    seed: int = 0,
) -> xr.Dataset:
    """Success along a fixed budget as one axis's share of it varies (an iso-budget curve).

    For axis ``i`` and share ``s``, axis ``i`` gets ``s B`` and the other axes split
    ``(1 - s) B`` in the proportions of ``reference_spend``: a mapping axis -> money (the same
    for every setting), an array (setting, axis) — e.g. the recipe's ``decision_spend`` at
    this budget, so that each curve passes through the decision — or ``None`` (equal money).
    Returns the per-draw success (chain, draw, setting, axis, share); bands come from
    :func:`~bayesscale.recipe.output.summarize`. Points outside the box (``bounds``, capped by ``within_data`` as in
    :func:`~bayesscale.recipe.solve.recipe`) are NaN.
    """
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
    draws, kap, lo, hi = inputs.draws, inputs.kappa, inputs.lo, inputs.hi
    axes = draws.axes
    grid = np.linspace(0.02, 0.98, 25) if shares is None else np.asarray(shares, dtype=float)
    if ((grid <= 0) | (grid >= 1)).any():
        raise RecipeError("shares must lie strictly between 0 and 1")
    n, g = len(axes), len(draws.settings)
    if reference_spend is None:
        ref = np.ones((g, n))
    elif isinstance(reference_spend, Mapping):
        ref = np.broadcast_to(np.array([float(reference_spend[a]) for a in axes]), (g, n))
    else:
        ref = np.broadcast_to(np.asarray(reference_spend, dtype=float), (g, n))
    if (~np.isfinite(ref) | (ref < 0)).any():
        raise RecipeError("reference spends must be finite and >= 0")
    law = draws.law()
    out = np.full((draws.samples, g, n, grid.size), np.nan)
    units = np.full((g, n, grid.size), np.nan)
    for i in range(n):
        others = np.delete(np.arange(n), i)
        w = ref[:, others] / np.maximum(ref[:, others].sum(axis=1, keepdims=True), 1e-300)
        for k, s in enumerate(grid):
            money = np.empty((g, n))
            money[:, i] = s * budget
            money[:, others] = (1 - s) * budget * w
            u = units_for_spend(inputs.cost, money)
            inside = ((u >= lo * (1 - 1e-12)) & (u <= hi * (1 + 1e-12))).all(axis=1)
            p = success_of(law, kap[:, None, :] * np.maximum(u, lo))
            out[:, :, i, k] = np.where(inside, p, np.nan)
            units[:, i, k] = np.median(kap[:, None, i] * u[None, :, i], axis=0)
    n_chain = np.unique(draws.chain).size
    arr = out.reshape(n_chain, -1, *out.shape[1:])
    return xr.Dataset(
        {
            names.ISO_SUCCESS: (
                (
                    names.CHAIN_DIM,
                    names.DRAW_DIM,
                    names.SETTING_DIM,
                    names.AXIS_DIM,
                    names.SHARE_DIM,
                ),
                arr,
            ),
            names.ISO_UNITS: ((names.SETTING_DIM, names.AXIS_DIM, names.SHARE_DIM), units),
        },
        coords={
            names.SETTING_DIM: list(draws.settings),
            names.AXIS_DIM: list(axes),
            names.SHARE_DIM: grid,
            names.BUDGET_DIM: budget,
        },
    )


def add_iso_budget(
    summary: dict[str, Any],
    ds: xr.Dataset,
    fit: xr.DataTree,
    prob: float,
    *,
    prices: Prices | None = None,
    pricing: xr.DataTree | None = None,
    kappa: Mapping[str, float] | None = None,
    bounds: Mapping[str, tuple[float | None, float | None]] | None = None,
    max_draws: int | None = None,
    within_data: float | None = None,
) -> None:
    """Add iso-budget bands (``iso_budget``: per axis, share grid and the median and ``prob``
    interval of success) to every (setting, budget) row of a recipe's JSON
    (:func:`bayesscale.recipe.output.to_json`), through the decision (or, without one, the
    median per-draw spend). ``ds`` is the recipe the JSON summarises; the options are the
    recipe's."""
    from bayesscale.recipe.output import summarize

    rows = {(r["setting"], r["budget"]): r for r in summary["results"]}
    for j, budget in enumerate(ds[names.BUDGET_DIM].to_numpy()):
        if names.DECISION_SPEND in ds:
            ref = ds[names.DECISION_SPEND].isel({names.BUDGET_DIM: j}).to_numpy()
        else:
            share = ds[names.SPEND_SHARE].isel({names.BUDGET_DIM: j})
            ref = share.median((names.CHAIN_DIM, names.DRAW_DIM)).to_numpy() * budget
        iso = iso_budget(
            fit,
            float(budget),
            prices=prices,
            pricing=pricing,
            kappa=kappa,
            bounds=bounds,
            settings=[str(x) for x in ds[names.SETTING_DIM].to_numpy()],
            reference_spend=ref,
            max_draws=max_draws,
            within_data=within_data,
        )
        bands = summarize(iso, prob)[names.ISO_SUCCESS]
        grid = [float(x) for x in bands[names.SHARE_DIM].to_numpy()]
        for setting in bands[names.SETTING_DIM].to_numpy():
            curves = {}
            for axis in bands[names.AXIS_DIM].to_numpy():
                q = bands.sel({names.SETTING_DIM: setting, names.AXIS_DIM: axis}).to_numpy()
                curves[str(axis)] = {
                    "share": grid,
                    **{
                        k: [None if not np.isfinite(v) else float(v) for v in q[i]]
                        for i, k in enumerate(("lower", "median", "upper"))
                    },
                }
            rows[(str(setting), float(budget))]["iso_budget"] = curves
