"""Iso-budget curves (:func:`bayesscale.recipe.iso_budget`): success at a fixed budget as one
axis's share of the money varies, with credible bands.

For axis ``i`` and share ``s`` the money is ``s B`` on axis ``i`` and ``(1 - s) B`` split over
the other axes in the proportions of a reference spend, so for every posterior draw ``d``

.. math::

    p_d(s) = \\exp(-L_d(D(s))), \\qquad D_i(s) = \\kappa_i s B / c_i.

One row per setting, one column per axis. Bands and the median are drawn where the split lies
in the recipe's box (its bounds, capped at ``within_data``); outside it the median is dashed:
where the box pins the decision at a corner, every other split leaves it, and the dashed curve
shows what the law says the recipe may not buy. With the recipe result, the decision's share of
each axis (``decision_spend / B``) is marked: with ``reference_spend`` the decision's spend
(as ``bayesscale recipe --iso`` does), every curve passes through the decision there. The
level of success is far less certain than the shape of the curve; ``relative=True`` plots
``p_d(s) / max_s p_d(s)`` per draw instead.

With ``fit=`` (the law fit) and ``recipe=``, the shares at which the axis's own effective
units, ``kappa_i s B / c_i`` (unit prices ``c`` from the recipe, ``kappa_i`` the median over
draws of the recipe's effective over purchased units at this budget), lie beyond the setting's
swept range of the axis are shaded: the curve is extrapolated there. The other axes' sizes
along the curve are not taken into account (the figure does not know the reference spend).
A fit whose diagnostics failed, or a preview, stamps the figure.

Example
-------
>>> iso = iso_budget(fit, 1e5, reference_spend=ds.decision_spend.sel(budget=1e5))  # doctest: +SKIP
>>> fig = plot_iso_budget(iso, provenance=provenance(fit), recipe=ds)  # doctest: +SKIP
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Final

import numpy as np
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from bayesscale import names
from bayesscale.data.extrapolation import SweptRange
from bayesscale.formatting import money
from bayesscale.report.figures.allocation import per_draw, recipe_settings
from bayesscale.report.figures.marks import (
    EXTRAPOLATED_TEXT,
    axis_range,
    beyond_spans,
    extrapolated_handle,
    shade_x,
    stamp,
    swept_range,
    verdict,
)
from bayesscale.report.figures.provenance import Provenance, attach_provenance
from bayesscale.report.figures.style import (
    DEFAULT_KIND,
    DEFAULT_PROBS,
    PALETTE,
    FigureError,
    band_handles,
    check_probs,
    draw_bands,
    interval_label,
    new_figure,
    paper_style,
    require_vars,
    setting_title,
)

MEDIAN_GID: Final = "median"  # the median line of each panel (inside the box)
DECISION_GID: Final = "decision"
OUTSIDE_GID: Final = "outside"  # the median where the split leaves the recipe's box
OUTSIDE_TEXT: Final = "median outside the recipe's box"


def plot_iso_budget(
    iso: xr.Dataset,
    *,
    provenance: Provenance,
    settings: Sequence[str] | None = None,
    recipe: xr.Dataset | None = None,
    relative: bool = False,
    probs: Sequence[float] = DEFAULT_PROBS,
    kind: str = DEFAULT_KIND,
    fit: xr.DataTree | None = None,
) -> Figure:
    """One row per setting, one column per axis: success against the axis's share of the
    budget, median and bands inside the recipe's box, the median outside it dashed (where the
    box pins the decision at a corner, every other split leaves it). ``relative`` plots each
    draw's success over its own best along the curve, ``p_d(s) / max_s p_d(s)``, which removes
    the uncertainty of the level and shows how flat the optimum is. ``recipe`` (the
    :func:`~bayesscale.recipe.solve` result that contains this budget) marks the decision's
    share of each axis. ``provenance`` is the recipe's inputs'
    (``provenance(law_fit[, pricing_fit])``). ``fit``: the law fit, for the shading of the
    extrapolated shares (with ``recipe``) and the diagnostics stamp."""
    if not isinstance(provenance, Provenance):
        raise FigureError("plot_iso_budget needs provenance=provenance(law_fit, ...)")
    probs = check_probs(probs)
    require_vars(
        iso, [names.ISO_SUCCESS, names.SHARE_DIM, names.BUDGET_DIM], "the iso-budget result"
    )
    chosen = recipe_settings(iso, settings)
    if iso[names.BUDGET_DIM].size != 1:
        raise FigureError("the iso-budget result must hold one budget")
    budget = float(np.asarray(iso[names.BUDGET_DIM].to_numpy()).ravel()[0])
    axes = [str(a) for a in iso[names.AXIS_DIM].to_numpy()]
    decision = _decision_shares(recipe, budget, chosen)
    swept = swept_range(fit) if recipe is not None else None
    marks = {"shaded": False, "outside": False}
    with paper_style():
        fig, grid = new_figure(len(chosen), len(axes), panel=(2.0, 1.6), sharex=True)
        for i, setting in enumerate(chosen):
            values, inside = _panel_values(iso, setting, relative)
            for j, axis in enumerate(axes):
                ax = grid[i, j]
                at = None if decision is None else _at(decision, setting, axis)
                _draw_curve(ax, iso, values[:, j], inside[j], probs, kind, j, at, marks)
                if swept is not None and names.ISO_UNITS in iso:
                    marks["shaded"] |= _shade_beyond(ax, iso, swept, setting, axis)
                ax.set_xlim(0, 1)
                if i == 0:
                    ax.set_title(axis, fontsize=8)
                if j == 0:
                    ax.set_ylabel(setting_title(setting), fontsize=7)
        currency = str((recipe.attrs if recipe is not None else {}).get(names.ATTR_CURRENCY, ""))
        spent = money(budget) + (f" {currency}" if currency else "")
        fig.supxlabel(
            f"share of the budget ({spent}) spent on the axis; the rest split as the reference spend"
        )
        fig.supylabel("success / best success of the draw" if relative else "success rate")
        _legend(fig, len(probs), kind, probs, decision is not None, marks)
        if fit is not None:
            stamp(fig, verdict(fit))
    return attach_provenance(fig, provenance)


def _decision_shares(
    recipe: xr.Dataset | None, budget: float, chosen: Sequence[str]
) -> xr.DataArray | None:
    """The decision's share of the budget per (setting, axis), from the recipe at ``budget``."""
    if recipe is None:
        return None
    require_vars(recipe, [names.DECISION_SPEND], "the recipe result")
    budgets = np.asarray(recipe[names.BUDGET_DIM].to_numpy(), dtype=float)
    match = np.flatnonzero(np.isclose(budgets, budget, rtol=1e-9, atol=0))
    if match.size == 0:
        raise FigureError(f"the recipe result has no budget {budget:g} (it has {budgets.tolist()})")
    decision = recipe[names.DECISION_SPEND].isel({names.BUDGET_DIM: int(match[0])}) / budget
    missing = [s for s in chosen if s not in decision[names.SETTING_DIM].to_numpy()]
    if missing:
        raise FigureError(f"setting(s) {missing} are not in the recipe result")
    return decision


def _at(decision: xr.DataArray, setting: str, axis: str) -> float:
    return float(decision.sel({names.SETTING_DIM: setting, names.AXIS_DIM: axis}))


def _panel_values(iso: xr.Dataset, setting: str, relative: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per-draw success (draws, axis, share), relative to each draw's best inside the box with
    ``relative``, and the inside-the-box mask (axis, share; all True without one)."""
    values = per_draw(
        iso[names.ISO_SUCCESS].sel({names.SETTING_DIM: setting}), (names.AXIS_DIM, names.SHARE_DIM)
    )
    if names.ISO_INSIDE in iso:
        inside = iso[names.ISO_INSIDE].sel({names.SETTING_DIM: setting}).to_numpy().astype(bool)
    else:
        inside = ~np.isnan(values).all(axis=0)
    if relative:
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a panel with nothing inside
            best = np.nanmax(np.where(inside, values, np.nan), axis=-1, keepdims=True)
        values = values / best
    return values, inside


def _draw_curve(
    ax: Axes,
    iso: xr.Dataset,
    values: np.ndarray,
    inside: np.ndarray,
    probs: Sequence[float],
    kind: str,
    j: int,
    at: float | None,
    marks: dict[str, bool],
) -> None:
    """Bands and median inside the box; the median dashed outside; the decision's share."""
    share = np.asarray(iso[names.SHARE_DIM].to_numpy(), dtype=float)
    color = PALETTE[j % len(PALETTE)]
    if (~inside).any():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # shares where no draw is finite
            median = np.nanmedian(values, axis=0)
        ax.plot(share, median, ls="--", lw=0.8, color=color, alpha=0.6, gid=OUTSIDE_GID)
        marks["outside"] = True
    draw_bands(ax, share, np.where(inside, values, np.nan), probs, kind, color)
    ax.lines[-1].set_gid(MEDIAN_GID)
    if inside.sum() < 3:  # a point or two inside the box: too short for a line to show
        ax.lines[-1].set(marker="o", markersize=2.5)
    if at is not None:
        ax.axvline(at, color="0.2", lw=0.8, ls=":", gid=DECISION_GID)


def _shade_beyond(ax: Axes, iso: xr.Dataset, swept: SweptRange, setting: str, axis: str) -> bool:
    """Shade the shares at which the axis's own units lie beyond its swept range."""
    fitted = axis_range(swept, setting, axis)
    if fitted is None:
        return False
    share = np.asarray(iso[names.SHARE_DIM].to_numpy(), dtype=float)
    bought = iso[names.ISO_UNITS].sel({names.SETTING_DIM: setting, names.AXIS_DIM: axis})
    spans = [
        (0.0 if a == share[0] else a, 1.0 if b == share[-1] else b)
        for a, b in beyond_spans(share, bought.to_numpy(), *fitted)
    ]  # a span that reaches an end of the share grid reaches the panel's edge
    shade_x(ax, spans)
    return bool(spans)


def _legend(
    fig: Figure,
    n_probs: int,
    kind: str,
    probs: Sequence[float],
    decision: bool,
    marks: dict[str, bool],
) -> None:
    handles = [Line2D([], [], color="0.2"), *band_handles("0.2", n_probs)]
    texts = ["median over posterior draws", *[interval_label(p, kind) for p in probs]]
    if marks["outside"]:
        handles.append(Line2D([], [], color="0.2", ls="--", lw=0.8))
        texts.append(OUTSIDE_TEXT)
    if decision:
        handles.append(Line2D([], [], color="0.2", ls=":"))
        texts.append("decision's share")
    if marks["shaded"]:
        handles.append(extrapolated_handle())
        texts.append(f"axis {EXTRAPOLATED_TEXT}")
    fig.legend(handles, texts, loc="outside upper center", ncols=2, frameon=False)
