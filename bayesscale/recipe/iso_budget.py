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
from numpy.typing import ArrayLike, NDArray

from bayesscale import names
from bayesscale.core.prices import Prices
from bayesscale.data.extrapolation import Reach
from bayesscale.recipe.draws import RecipeError, recipe_inputs, success_of, units_for_spend

BOX_RTOL = 1e-9  # a split on the box's face is inside it (the solver's decision lies there)

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
    within_data: Reach | None = None,
    seed: int = 0,
) -> xr.Dataset:
    """Success along a fixed budget as one axis's share of it varies (an iso-budget curve).

    For axis ``i`` and share ``s``, axis ``i`` gets ``s B`` and the other axes split
    ``(1 - s) B`` in the proportions of ``reference_spend``: a mapping axis -> money (the same
    for every setting), an array (setting, axis) — e.g. the recipe's ``decision_spend`` at
    this budget, so that each curve passes through the decision — or ``None`` (equal money).
    The default share grid is 25 shares from 0.02 to 0.98 plus each setting's reference share
    of each axis, so a curve always holds the reference split itself.

    Returns the per-draw success (chain, draw, setting, axis, share) at every share, and
    ``iso_budget_inside`` (setting, axis, share): whether the split lies in the box
    (``bounds``, capped by ``within_data`` as in :func:`~bayesscale.recipe.solve.recipe`).
    Where the box pins the reference split at a corner, moving one axis's share leaves it at
    once; the success there is the law's, beyond what the recipe would buy: a caller that
    wants only the box masks with ``inside`` (:func:`add_iso_budget` does). Bands come from
    :func:`~bayesscale.recipe.output.summarize`.
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
    n, g = len(axes), len(draws.settings)
    ref = _reference(reference_spend, axes, g)
    grid = _share_grid(shares, ref)
    law = draws.law()
    out = np.full((draws.samples, g, n, grid.size), np.nan)
    units = np.full((g, n, grid.size), np.nan)
    inside = np.zeros((g, n, grid.size), dtype=bool)
    for i in range(n):
        others = np.delete(np.arange(n), i)
        w = ref[:, others] / np.maximum(ref[:, others].sum(axis=1, keepdims=True), 1e-300)
        for k, s in enumerate(grid):
            money = np.empty((g, n))
            money[:, i] = s * budget
            money[:, others] = (1 - s) * budget * w
            u = units_for_spend(inputs.cost, money)
            inside[:, i, k] = ((u >= lo * (1 - BOX_RTOL)) & (u <= hi * (1 + BOX_RTOL))).all(axis=1)
            out[:, :, i, k] = success_of(law, kap[:, None, :] * np.maximum(u, lo))
            units[:, i, k] = np.median(kap[:, None, i] * u[None, :, i], axis=0)
    n_chain = np.unique(draws.chain).size
    arr = out.reshape(n_chain, -1, *out.shape[1:])
    per_point = (names.SETTING_DIM, names.AXIS_DIM, names.SHARE_DIM)
    sample = (names.CHAIN_DIM, names.DRAW_DIM)
    return xr.Dataset(
        {
            names.ISO_SUCCESS: ((*sample, *per_point), arr),
            names.ISO_UNITS: (per_point, units),
            names.ISO_INSIDE: (per_point, inside),
        },
        coords={
            names.SETTING_DIM: list(draws.settings),
            names.AXIS_DIM: list(axes),
            names.SHARE_DIM: grid,
            names.BUDGET_DIM: budget,
        },
    )


def _reference(
    reference_spend: Mapping[str, float] | ArrayLike | None, axes: Sequence[str], g: int
) -> NDArray[np.float64]:
    """The reference spend as (setting, axis); equal money without one."""
    n = len(axes)
    if reference_spend is None:
        ref = np.ones((g, n))
    elif isinstance(reference_spend, Mapping):
        ref = np.broadcast_to(np.array([float(reference_spend[a]) for a in axes]), (g, n))
    else:
        ref = np.broadcast_to(np.asarray(reference_spend, dtype=float), (g, n))
    if (~np.isfinite(ref) | (ref < 0)).any():
        raise RecipeError("reference spends must be finite and >= 0")
    return np.asarray(ref, dtype=float)


def _share_grid(shares: ArrayLike | None, ref: NDArray[np.float64]) -> NDArray[np.float64]:
    """The given shares, or 25 from 0.02 to 0.98 plus every reference share in (0, 1).

    >>> _share_grid(None, np.array([[1.0, 3.0]])).size  # 0.25 and 0.75 join the 25
    27
    """
    if shares is not None:
        grid = np.asarray(shares, dtype=float)
        if ((grid <= 0) | (grid >= 1)).any():
            raise RecipeError("shares must lie strictly between 0 and 1")
        return grid
    own = ref / np.maximum(ref.sum(axis=1, keepdims=True), 1e-300)
    own = own[(own > 0) & (own < 1)]
    return np.unique(np.concatenate([np.linspace(0.02, 0.98, 25), own.ravel()]))


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
    within_data: Reach | None = None,
) -> None:
    """Add iso-budget bands (``iso_budget``: per axis, share grid and the median and ``prob``
    interval of success) to every (setting, budget) row of a recipe's JSON
    (:func:`bayesscale.recipe.output.to_json`), through the decision (or, without one, the
    median per-draw spend). ``ds`` is the recipe the JSON summarises; the options are the
    recipe's. A share whose split leaves the box is ``None`` (the recipe cannot buy it)."""
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
        bands = summarize(iso, prob)[names.ISO_SUCCESS].where(iso[names.ISO_INSIDE])
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
