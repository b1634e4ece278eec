"""The recipe the data vouch for: bounded to the swept range where the optimum lies beyond it.

A law fitted over a 32x sweep says little about sizes far outside it. Where the recipe at a
budget asks for more than its *reach* times the largest swept value of some axis,
:func:`vouched_recipe` leads with the recipe bounded to that reach (``within_data``) and keeps
the unbounded one as a labelled extrapolation; :func:`headline_json` merges the two JSON
summaries row by row, and says for each row beyond the data what to sweep next ("sweep
further first"). The reach is one factor for every axis (``warn_beyond``, an assumption) or one
per axis: how far the fit's out-of-scale check found the law's coverage to hold
(:mod:`bayesscale.checks.out_of_scale`, :meth:`bayesscale.fits.law.LawFit.reach`).

>>> from bayesscale.recipe.synthetic import synthetic_fit
>>> head, unbounded = vouched_recipe(synthetic_fit(draws=20, spread=0.0), [1e3], warn_beyond=4)
>>> unbounded is None  # a small budget stays within the data
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import xarray as xr

from bayesscale import names
from bayesscale.data.extrapolation import WARN_FACTOR, Reach, beyond, reach_factor, reach_text
from bayesscale.formatting import format_number, times
from bayesscale.recipe.solve import recipe

HEADLINE_WITHIN = "within the data"
HEADLINE_EXTRAPOLATION = "extrapolation"


def rows_beyond(ds: xr.Dataset, factor: Reach) -> xr.DataArray:
    """(setting, budget): whether the decision (else the per-draw optimum's median) asks for
    more than ``factor`` (one, or one per axis) times the largest swept value of some axis:
    what a cap at ``factor`` times the data changes. (A recipe below the swept minimum is no
    cap's business; the extrapolation notes flag it.) All False when the fit stores no swept
    range."""
    if names.SWEPT_MAX not in ds:
        first = {names.CHAIN_DIM: 0, names.DRAW_DIM: 0}
        return xr.zeros_like(ds[names.SHADOW_PRICE].isel(first, drop=True), dtype=bool)
    over = _over_max(ds)
    axes = over[names.AXIS_DIM]
    limit = xr.DataArray(
        [reach_factor(factor, str(a)) for a in axes.to_numpy()],
        dims=names.AXIS_DIM,
        coords={names.AXIS_DIM: axes},
    )
    return xr.apply_ufunc(beyond, over, limit).any(names.AXIS_DIM)


def _over_max(ds: xr.Dataset) -> xr.DataArray:
    """(setting, budget, axis): the decision (else the per-draw optimum's median) over the
    largest swept value."""
    if names.DECISION_EXTRAPOLATION in ds:
        return ds[names.DECISION_EXTRAPOLATION]
    return ds[names.EXTRAPOLATION].median((names.CHAIN_DIM, names.DRAW_DIM))


def _row_over_max(entry: dict[str, Any]) -> float | None:
    """The same for one axis of a row of a recipe's JSON (``extrapolation.axes[axis]``)."""
    factor = entry.get("decision_over_max", (entry.get("optimum_over_max") or {}).get("median"))
    return None if factor is None else float(factor)


def vouched_recipe(
    fit: xr.DataTree,
    budgets: Sequence[float] | np.ndarray,
    *,
    warn_beyond: float = WARN_FACTOR,
    reach: Reach | None = None,
    **options: Any,
) -> tuple[xr.Dataset, xr.Dataset | None]:
    """The headline recipe and, where it differs, the unbounded one.

    Runs :func:`~bayesscale.recipe.solve.recipe` unbounded; if the decision of some (setting,
    budget) row asks for more than ``reach`` (default ``warn_beyond``; one factor, or one per
    axis) times the largest swept value of an axis, runs it again with every axis capped at its
    reach and returns ``(headline, unbounded)``: the headline holds the bounded recipe in those
    rows and the unbounded one (its draws untouched by any cap) in the others; else
    ``(unbounded, None)``. A ``within_data`` in ``options`` is the user's own cap: then the
    recipe runs once, as asked. The headline's attrs say which (``headline``), and its variable
    ``beyond_data`` (setting, budget) marks the bounded rows.
    """
    if options.get("within_data") is not None:
        ds = recipe(fit, budgets, **options)
        ds.attrs["headline"] = f"within {reach_text(options['within_data'])} the data (as asked)"
        return ds, None
    options.pop("within_data", None)
    reach = warn_beyond if reach is None else reach
    unbounded = recipe(fit, budgets, **options)
    far = rows_beyond(unbounded, reach)
    unbounded[names.BEYOND_DATA] = far
    if not bool(far.any()):
        unbounded.attrs["headline"] = HEADLINE_WITHIN
        return unbounded, None
    bounded = recipe(fit, budgets, within_data=reach, **options)
    head = bounded.copy()
    for name, var in bounded.data_vars.items():
        dims = set(var.dims)
        if {names.SETTING_DIM, names.BUDGET_DIM} <= dims and name in unbounded:
            head[name] = unbounded[name].where(~far, var)
    head[names.BEYOND_DATA] = far
    head.attrs["headline"] = (
        f"{HEADLINE_WITHIN}: in {int(far.sum())} of {far.size} (setting, budget) rows the "
        f"unbounded decision asks for more than the reach ({reach_text(reach)}) times the "
        "largest swept value of an axis, and those rows are the recipe with every axis within "
        "its reach; the others are the unbounded recipe"
    )
    unbounded.attrs["headline"] = HEADLINE_EXTRAPOLATION
    return head, unbounded


def sweep_targets(
    rows: Sequence[dict[str, Any]], reach: Reach
) -> dict[str, tuple[float, float, float]]:
    """Over rows of a recipe's JSON, per axis beyond the reach (one factor, or one per axis)
    or the warning threshold: how far a sweep must reach for every row to lie within its
    reach of it, ``(needed, swept_min, swept_max)``; a needed value below the swept minimum
    means sweeping down.

    >>> sweep_targets([{"extrapolation": {"beyond": ["env"], "axes": {"env": {
    ...     "swept_max": 256.0, "decision_over_max": 17.0, "swept_min": 8.0}}}}], 4.0)
    {'env': (1088.0, 8.0, 256.0)}
    >>> sweep_targets([{"extrapolation": {"beyond": [], "axes": {"traj": {
    ...     "swept_max": 64.0, "decision_over_max": 3.0, "swept_min": 2.0}}}}], {"traj": 1.0})
    {'traj': (192.0, 2.0, 64.0)}
    """
    out: dict[str, tuple[float, float, float]] = {}
    for row in rows:
        extent = row.get("extrapolation") or {}
        for axis, e in extent.get("axes", {}).items():
            factor = _row_over_max(e)
            f = reach_factor(reach, axis)
            if factor is None or not np.isfinite(f):
                continue
            if axis not in extent.get("beyond", []) and not bool(beyond(factor, f)):
                continue
            wanted = factor * float(e["swept_max"])
            lo, hi = float(e["swept_min"]), float(e["swept_max"])
            needed = wanted / f if wanted > hi else wanted * f
            if axis in out:
                old = out[axis][0]
                needed = max(old, needed) if needed > hi else min(old, needed)
            out[axis] = (needed, lo, hi)
    return out


def sweep_further_text(targets: dict[str, tuple[float, float, float]]) -> str:
    """``env to >= 1.09k (the sweep reaches 256)``: one clause per axis, joined by semicolons.

    >>> sweep_further_text({"env": (1088.0, 8.0, 256.0)})
    'env to >= 1.09k (the sweep reaches 256)'
    """
    parts = []
    for axis, (needed, lo, hi) in targets.items():
        if needed > hi:
            parts.append(
                f"{axis} to >= {format_number(needed, None)} "
                f"(the sweep reaches {format_number(hi, None)})"
            )
        else:
            parts.append(
                f"{axis} down to <= {format_number(needed, None)} "
                f"(the sweep starts at {format_number(lo, None)})"
            )
    return "; ".join(parts)


def headline_json(
    head: dict[str, Any],
    unbounded: dict[str, Any] | None,
    reach: Reach,
    bounded_rows: xr.DataArray | None = None,
) -> dict[str, Any]:
    """The JSON summary of the headline recipe, each row marked ``within_data`` (whether it
    stays within the warning threshold of the swept range on every axis). The rows that
    ``bounded_rows`` (the headline's ``beyond_data``) marks carry the unbounded row as
    ``extrapolation_recipe`` and ``sweep_further``: what to sweep first. Modifies and returns
    ``head``."""
    others = {}
    if unbounded is not None:
        others = {(r["setting"], r["budget"]): r for r in unbounded["results"]}
    head["headline"] = HEADLINE_WITHIN if unbounded is None else "bounded to the data"
    for row in head["results"]:
        capped = bounded_rows is not None and bool(
            bounded_rows.sel({names.SETTING_DIM: row["setting"], names.BUDGET_DIM: row["budget"]})
        )
        far = others.get((row["setting"], row["budget"]))
        if capped and far is not None:
            row["within_data"] = False
            row["extrapolation_recipe"] = far
            row["sweep_further"] = sweep_further_text(sweep_targets([far], reach))
        else:
            extent = row.get("extrapolation") or {}
            row["within_data"] = not extent.get("beyond")
    return head


def rows_worst(ds: xr.Dataset) -> dict[str, float]:
    """Per axis, the largest factor over the swept maximum that the decision (else the
    per-draw optimum's median) reaches over every row."""
    top = _over_max(ds).max((names.SETTING_DIM, names.BUDGET_DIM))
    return {str(a): float(top.sel({names.AXIS_DIM: a})) for a in top[names.AXIS_DIM].to_numpy()}


def mark_heldout_reach(rows: Sequence[dict[str, Any]], reach: dict[str, float]) -> list[str]:
    """Mark each row of a recipe's JSON ``within_heldout_reach``: whether, on every axis the
    held-out runs reach (``reach``: axis -> their largest size over the largest swept value),
    the decision (else the per-draw optimum's median) stays within that reach. Returns, for
    the rows that do not, ``setting at budget (axis factor x > reach x, ...)``.

    >>> rows = [{"setting": "s", "budget": 1e3, "extrapolation": {"beyond": [], "axes": {
    ...     "traj": {"swept_max": 64.0, "swept_min": 2.0, "decision_over_max": 3.0}}}}]
    >>> mark_heldout_reach(rows, {"traj": 2.0}), rows[0]["within_heldout_reach"]
    (['s at 1,000 (traj 3x > 2x)'], False)
    """
    outside: list[str] = []
    for row in rows:
        extent = row.get("extrapolation") or {}
        over = []
        for axis, e in extent.get("axes", {}).items():
            factor = _row_over_max(e)
            if axis in reach and factor is not None and beyond(factor, reach[axis]):
                over.append(f"{axis} {times(factor)} > {times(reach[axis])}")
        row["within_heldout_reach"] = not over
        if over:
            outside.append(f"{row['setting']} at {row['budget']:,.0f} ({', '.join(over)})")
    return outside
