"""Iso-budget curves (:func:`bayesscale.recipe.iso_budget`): success at a fixed budget as one
axis's share of the money varies, with credible bands.

For axis ``i`` and share ``s`` the money is ``s B`` on axis ``i`` and ``(1 - s) B`` split over
the other axes in the proportions of a reference spend, so for every posterior draw ``d``

.. math::

    p_d(s) = \\exp(-L_d(D(s))), \\qquad D_i(s) = \\kappa_i s B / c_i.

One row per setting, one column per axis. With the recipe result, the decision's share of
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

from collections.abc import Sequence
from typing import Final

import numpy as np
import xarray as xr
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from bayesscale import names
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

MEDIAN_GID: Final = "median"  # the median line of each panel
DECISION_GID: Final = "decision"


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
    budget, median and bands. ``relative`` plots each draw's success over its own best along
    the curve, ``p_d(s) / max_s p_d(s)``, which removes the uncertainty of the level and shows
    how flat the optimum is. ``recipe`` (the :func:`~bayesscale.recipe.solve` result that
    contains this budget) marks the decision's share of each axis. ``provenance`` is the
    recipe's inputs' (``provenance(law_fit[, pricing_fit])``). ``fit``: the law fit, for the
    shading of the extrapolated shares (with ``recipe``) and the diagnostics stamp."""
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
    share = np.asarray(iso[names.SHARE_DIM].to_numpy(), dtype=float)
    decision = None
    if recipe is not None:
        require_vars(recipe, [names.DECISION_SPEND], "the recipe result")
        budgets = np.asarray(recipe[names.BUDGET_DIM].to_numpy(), dtype=float)
        match = np.flatnonzero(np.isclose(budgets, budget, rtol=1e-9, atol=0))
        if match.size == 0:
            raise FigureError(
                f"the recipe result has no budget {budget:g} (it has {budgets.tolist()})"
            )
        decision = recipe[names.DECISION_SPEND].isel({names.BUDGET_DIM: int(match[0])}) / budget
        missing = [s for s in chosen if s not in decision[names.SETTING_DIM].to_numpy()]
        if missing:
            raise FigureError(f"setting(s) {missing} are not in the recipe result")
    swept = swept_range(fit) if recipe is not None else None
    shaded = False
    currency = str((recipe.attrs if recipe is not None else {}).get(names.ATTR_CURRENCY, ""))
    with paper_style():
        fig, grid = new_figure(len(chosen), len(axes), panel=(2.0, 1.6), sharex=True)
        for i, setting in enumerate(chosen):
            values = per_draw(
                iso[names.ISO_SUCCESS].sel({names.SETTING_DIM: setting}),
                (names.AXIS_DIM, names.SHARE_DIM),
            )
            if relative:
                with np.errstate(invalid="ignore"):
                    best = np.nanmax(values, axis=-1, keepdims=True)
                values = values / best
            for j, axis in enumerate(axes):
                ax = grid[i, j]
                color = PALETTE[j % len(PALETTE)]
                draw_bands(ax, share, values[:, j, :], probs, kind, color)
                ax.lines[-1].set_gid(MEDIAN_GID)
                if decision is not None:
                    s = float(decision.sel({names.SETTING_DIM: setting, names.AXIS_DIM: axis}))
                    ax.axvline(s, color="0.2", lw=0.8, ls=":", gid=DECISION_GID)
                fitted = axis_range(swept, setting, axis)
                if fitted is not None and swept is not None and names.ISO_UNITS in iso:
                    # the axis's units along the curve (money per axis as the cost buys it)
                    bought = iso[names.ISO_UNITS].sel(
                        {names.SETTING_DIM: setting, names.AXIS_DIM: axis}
                    )
                    spans = [
                        (0.0 if a == share[0] else a, 1.0 if b == share[-1] else b)
                        for a, b in beyond_spans(share, bought.to_numpy(), *fitted)
                    ]  # a span that reaches an end of the share grid reaches the panel's edge
                    shade_x(ax, spans)
                    shaded = shaded or bool(spans)
                ax.set_xlim(0, 1)
                if i == 0:
                    ax.set_title(axis, fontsize=8)
                if j == 0:
                    ax.set_ylabel(setting_title(setting), fontsize=7)
        money = f"{budget:,.0f}" + (f" {currency}" if currency else "")
        fig.supxlabel(
            f"share of the budget ({money}) spent on the axis; the rest split as the reference spend"
        )
        fig.supylabel("success / best success of the draw" if relative else "success rate")
        handles = [Line2D([], [], color="0.2"), *band_handles("0.2", len(probs))]
        texts = [
            "median over posterior draws",
            *[interval_label(p, kind) for p in probs],
        ]
        if decision is not None:
            handles.append(Line2D([], [], color="0.2", ls=":"))
            texts.append("decision's share")
        if shaded:
            handles.append(extrapolated_handle())
            texts.append(f"axis {EXTRAPOLATED_TEXT}")
        fig.legend(
            handles, texts, loc="outside upper center", ncols=min(len(handles), 3), frameon=False
        )
        if fit is not None:
            stamp(fig, verdict(fit))
    return attach_provenance(fig, provenance)
