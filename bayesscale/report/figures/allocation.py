"""Allocation against budget as a fan chart, from a recipe result (:func:`bayesscale.recipe.solve`).

For each posterior draw ``d`` the recipe solves the exact allocation problem at every budget

.. math::

    D^*_d(B) = \\arg\\min_D L_d(D) \\quad \\text{s.t.} \\quad \\sum_i (c_i / \\kappa_i) D_i \\le B,

and this figure shows, per axis, the median over draws of the units bought (``purchased``,
``D* / kappa``) or of the effective units (``allocation``) against the budget, log-log, with
nested credible bands (equal-tailed by default; intervals of ``log D*``, as the axis is
logarithmic). The single decision that maximises expected success, when the recipe computed
it, is drawn as open markers.

With ``fit=`` (the law fit the recipe was computed from) the budgets at which the median
effective allocation of an axis lies beyond that setting's swept range of the axis are shaded
(edges where the median crosses the range's end, interpolated log-log): the law is
extrapolated there; and a fit whose diagnostics failed, or a preview, stamps the figure.

Example
-------
>>> ds = recipe(fit, np.geomspace(1e4, 1e7, 25))  # doctest: +SKIP
>>> fig = plot_allocation(ds, provenance=provenance(fit))  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

import numpy as np
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from numpy.typing import NDArray

from bayesscale import names
from bayesscale.core.intervals import quantiles
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
    Array,
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

MAX_ROWS: Final = 6
MEDIAN_GID: Final = "median"
DECISION_GID: Final = "decision"
VARIABLES: Final = {
    names.PURCHASED: "units bought",
    names.ALLOCATION: "effective units",
    names.SPEND_SHARE: "share of budget",
}


def recipe_settings(ds: xr.Dataset, settings: Sequence[str] | None) -> list[str]:
    """The settings to plot: ``settings`` checked against the recipe's, or all of them."""
    if names.SETTING_DIM not in ds.dims:
        raise FigureError(f"the recipe result has no {names.SETTING_DIM!r} dimension")
    have = [str(s) for s in ds[names.SETTING_DIM].to_numpy()]
    chosen = list(settings) if settings is not None else have
    missing = [s for s in chosen if s not in have]
    if missing:
        raise FigureError(f"setting(s) {missing} not in the recipe result: {have}")
    if len(chosen) > MAX_ROWS:
        raise FigureError(
            f"{len(chosen)} settings make an unreadable figure; pick at most {MAX_ROWS} "
            "with settings=[...]"
        )
    return chosen


def per_draw(da: xr.DataArray, order: Sequence[str]) -> Array:
    """``da`` as ``(chain * draw, *order)`` (dims in ``order`` after the sample dims)."""
    arr = da.transpose(names.CHAIN_DIM, names.DRAW_DIM, *order).to_numpy().astype(float)
    return arr.reshape(-1, *arr.shape[2:])


def _draw_panel(
    ax: Axes,
    ds: xr.Dataset,
    variable: str,
    values: NDArray[np.float64],
    budgets: NDArray[np.float64],
    order: NDArray[np.intp],
    probs: Sequence[float],
    kind: str,
    j: int,
    fitted: tuple[float, float] | None,
    setting: str,
    axis: str,
    show_decision: bool,
) -> bool:
    """One setting's and axis's fan (``values``: draws x budgets) with the budgets where the
    allocation is extrapolated shaded (``fitted``: the swept range) and the decision's
    points; whether anything was shaded."""
    shaded = False
    color = PALETTE[j % len(PALETTE)]
    draw_bands(
        ax,
        budgets[order],
        values[:, order],
        probs,
        kind,
        color,
        log=variable != names.SPEND_SHARE,
    )
    ax.lines[-1].set_gid(MEDIAN_GID)
    if fitted is not None:
        effective = ds[names.ALLOCATION].sel({names.SETTING_DIM: setting, names.AXIS_DIM: axis})
        median = quantiles(per_draw(effective, (names.BUDGET_DIM,)), [0.5], axis=0)[0]
        spans = beyond_spans(budgets[order], median[order], *fitted)
        shade_x(ax, spans)
        shaded = bool(spans)
    if show_decision:
        dec = ds[names.DECISION].sel({names.SETTING_DIM: setting, names.AXIS_DIM: axis})
        ax.plot(
            budgets[order],
            dec.transpose(names.BUDGET_DIM).to_numpy()[order],
            "o",
            mfc="none",
            mec="0.15",
            ms=3,
            mew=0.7,
            gid=DECISION_GID,
        )
    return shaded


def _legend(
    fig: Figure, probs: Sequence[float], kind: str, show_decision: bool, shaded: bool
) -> None:
    """The median, the bands, the decision's points and the shading, above the panels."""
    handles = [Line2D([], [], color="0.2"), *band_handles("0.2", len(probs))]
    texts = [
        "median over posterior draws",
        *[interval_label(p, kind) for p in probs],
    ]
    if show_decision:
        handles.append(Line2D([], [], ls="", marker="o", mfc="none", mec="0.15", ms=3))
        texts.append("decision (max expected success)")
    if shaded:
        handles.append(extrapolated_handle())
        texts.append(f"median of kappa x units (the law's input) {EXTRAPOLATED_TEXT}")
    # two columns: three, with the shading's long entry, ran past the figure's edges
    fig.legend(
        handles, texts, loc="outside upper center", ncols=min(len(handles), 2), frameon=False
    )


def plot_allocation(
    ds: xr.Dataset,
    *,
    provenance: Provenance,
    settings: Sequence[str] | None = None,
    variable: str = names.PURCHASED,
    probs: Sequence[float] = DEFAULT_PROBS,
    kind: str = DEFAULT_KIND,
    decision: bool = True,
    fit: xr.DataTree | None = None,
) -> Figure:
    """Fan chart: one row per setting, one column per axis; ``variable`` (``purchased``,
    ``allocation`` or ``spend_share``) against the budget, log-log (share: log x only).
    ``provenance`` is the recipe's inputs' (``provenance(law_fit[, pricing_fit])``): a recipe
    result does not record them itself. ``fit``: the law fit of the recipe, for the shading
    of the budgets where the allocation is extrapolated and for the diagnostics stamp."""
    if not isinstance(provenance, Provenance):
        raise FigureError("plot_allocation needs provenance=provenance(law_fit, ...)")
    if variable not in VARIABLES:
        raise FigureError(f"variable must be one of {list(VARIABLES)}, got {variable!r}")
    probs = check_probs(probs)
    require_vars(ds, [variable, names.BUDGET_DIM, names.AXIS_DIM], "the recipe result")
    budgets = np.asarray(ds[names.BUDGET_DIM].to_numpy(), dtype=float).ravel()
    if budgets.size < 2:
        raise FigureError(
            f"a fan chart needs at least 2 budgets; the recipe result has {budgets.size}"
        )
    chosen = recipe_settings(ds, settings)
    axes = [str(a) for a in ds[names.AXIS_DIM].to_numpy()]
    show_decision = decision and variable == names.PURCHASED and names.DECISION in ds
    currency = str(ds.attrs.get(names.ATTR_CURRENCY, ""))
    units = json.loads(str(ds.attrs.get("units_short_json", "{}")))  # what one unit of each axis is
    order = np.argsort(budgets)
    swept = swept_range(fit)
    if swept is not None:
        require_vars(ds, [names.ALLOCATION], "the recipe result")
    shaded = False
    with paper_style():
        fig, grid = new_figure(len(chosen), len(axes), panel=(2.1, 1.7), sharex=True)
        for i, setting in enumerate(chosen):
            values = per_draw(
                ds[variable].sel({names.SETTING_DIM: setting}), (names.BUDGET_DIM, names.AXIS_DIM)
            )
            for j, axis in enumerate(axes):
                ax = grid[i, j]
                spans = _draw_panel(
                    ax, ds, variable, values[:, :, j], budgets, order, probs, kind, j,
                    axis_range(swept, setting, axis), setting, axis, show_decision,
                )  # fmt: skip
                shaded = shaded or spans
                ax.set_xscale("log")
                if variable != names.SPEND_SHARE:
                    ax.set_yscale("log")
                if i == 0:
                    what = units.get(str(axis))
                    ax.set_title(f"{axis} ({what})" if what else str(axis), fontsize=8)
                if j == 0:
                    ax.set_ylabel(setting_title(setting), fontsize=7)
        unit = f" ({currency})" if currency else ""
        fig.supxlabel(f"budget{unit}, log scale")
        fig.supylabel(f"optimal {VARIABLES[variable]} per axis")
        _legend(fig, probs, kind, show_decision, shaded)
        if fit is not None:
            stamp(fig, verdict(fit))
    return attach_provenance(fig, provenance)
