"""The refit fallback of ``next``: the batch's effect on the target estimated by refitting on
simulated outcomes instead of reweighting the draws (:func:`refit_check`), for when the
importance weights collapse; the target of a fit from scratch (:func:`fit_target`) and the
batch's simulated observation rows (:func:`simulated_rows`).

>>> from bayesscale.recipe.synthetic import synthetic_fit
>>> fit = synthetic_fit(draws=40, spread=0.1)
>>> bool(fit_target(fit, "exponents", 2e4, []) > 0)
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from bayesscale import names
from bayesscale.core.prices import Prices
from bayesscale.design.candidates import posterior_variable
from bayesscale.design.defaults import DEFAULT_MAX_DRAWS, TARGET_EXPONENTS
from bayesscale.design.results import DesignError, NextRuns, RefitCheck
from bayesscale.law.posterior import at_draws, axis_columns, law_draws, setting_keys
from bayesscale.recipe.solve import recipe


def fit_target(
    fit: xr.DataTree,
    target: str,
    budget: float,
    settings: Sequence[str],
    prices: Prices | None = None,
    bounds: Mapping[str, tuple[float | None, float | None]] | None = None,
    max_draws: int | None = DEFAULT_MAX_DRAWS,
) -> float:
    """The target of a fit, computed from scratch: the recipe's
    ``mean(success_at_optimum - success_at_decision)`` at ``budget`` averaged over ``settings``
    (decision), or the summed posterior variance of ``alpha_pop`` (exponents)."""
    if target == TARGET_EXPONENTS:
        # the draws next values runs on: law_draws' thinning, less any draw it leaves out
        draws = law_draws(fit, None, max_draws)
        alpha = at_draws(
            posterior_variable(fit, names.ALPHA_POP).transpose(..., names.AXIS_DIM), draws
        )
        return float(np.var(alpha, axis=0).sum())
    ds = recipe(
        fit,
        [budget],
        prices=prices,
        bounds=bounds,
        settings=list(settings),
        max_draws=max_draws,
        multipliers=False,
    )
    gap = ds[names.SUCCESS_OPTIMUM] - ds[names.SUCCESS_DECISION]
    return float(gap.mean())


def simulated_rows(
    result: NextRuns, fit: xr.DataTree, outer: int, first_seed: int = 1000
) -> list[dict[str, Any]]:
    """Observation rows of the batch with the outcomes simulated from outer draw ``outer``:
    setting keys (and ``params_b``), axis columns, seed ``first_seed + repeat``, ``trials``,
    ``successes``."""
    keys = setting_keys(fit, list(dict.fromkeys(r.candidate.setting for r in result.chosen)))
    columns = axis_columns(fit, result.axes)
    rows = []
    for r in result.chosen:
        row: dict[str, Any] = {k: v for k, v in keys[r.candidate.setting].items() if v is not None}
        row.update(
            {columns[a]: int(v) for a, v in zip(result.axes, r.candidate.sizes, strict=True)}
        )
        row[names.SEED] = first_seed + r.repeat
        row[names.TRIALS] = result.trials
        row[names.SUCCESSES] = int(r.outcomes[outer])
        rows.append(row)
    return rows


def refit_check(
    result: NextRuns,
    fit: xr.DataTree,
    refit: Callable[[list[dict[str, Any]]], xr.DataTree],
    outcomes: int = 4,
    prices: Prices | None = None,
    bounds: Mapping[str, tuple[float | None, float | None]] | None = None,
    max_draws: int | None = DEFAULT_MAX_DRAWS,
    reason: str = "",
) -> RefitCheck:
    """Re-estimate the batch's effect on the target by refitting: for the first ``outcomes``
    outer draws, ``refit(rows)`` fits the law to the fit's observations plus the batch's rows
    simulated from that draw (:func:`simulated_rows`), and the target is recomputed from the
    refit (:func:`fit_target`). The fallback when the importance weights collapse; it costs
    ``outcomes`` fits. Stored in ``result.refit`` and returned."""
    if outcomes < 1:
        raise DesignError(f"outcomes must be >= 1, got {outcomes}")
    args = (result.target, result.budget, result.target_settings, prices, bounds, max_draws)
    now = fit_target(fit, *args)
    after = []
    for m in range(min(outcomes, result.simulations)):
        after.append(fit_target(refit(simulated_rows(result, fit, m)), *args))
    result.refit = RefitCheck(now, tuple(after), reason)
    return result.refit
