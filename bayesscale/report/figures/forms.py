"""The law's forms beyond the sweep: each form's curve and the stack's, setting by setting.

For a stacked fit (``bayesscale fit --forms``, :mod:`bayesscale.law.stack`) and one axis ``a``,
each panel is one setting: the axis varies from the smallest swept value to ``beyond`` times the
largest, every other axis held at its largest swept value in that setting (where a sweep that
varies one axis at a time holds it), and for every form ``k`` and the stack the panel shows the
median over draws of the success rate ``p = e^{-L}`` (the loss, for a loss outcome) with its
central ``prob`` band:

.. math::

    p_{\\text{stack}}(D) \\sim \\sum_k w_k\\, p_k(D)

(the stack's draws are each form's in proportion to its weight,
:func:`bayesscale.law.predict.mixture`). The sizes beyond the swept range are shaded: there the
forms part, and the stack's band carries the uncertainty about which holds. A fit of one form
draws its own curve alone.

Example
-------
>>> fig = plot_forms(bs.load("stack.nc").tree, "traj")  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.figure import Figure

from bayesscale import names
from bayesscale.core.intervals import DEFAULT_PROB
from bayesscale.data.extrapolation import SweptRange
from bayesscale.data.fitfile import fit_spec
from bayesscale.law.posterior import fit_layout, setting_keys
from bayesscale.law.predict import predict
from bayesscale.law.stack import members
from bayesscale.report.figures.marks import outside_spans, shade_x, stamp, verdict
from bayesscale.report.figures.provenance import attach_provenance, provenance
from bayesscale.report.figures.style import (
    PALETTE,
    grid_shape,
    new_figure,
    paper_style,
    remove_unused,
)

BEYOND: Final = 8.0  # the grid reaches this many times the largest swept value
GRID_POINTS: Final = 48
MAX_SETTINGS: Final = 6
STACK_COLOR: Final = "black"


class FormsFigureError(ValueError):
    """A forms figure that cannot be drawn (an unknown axis or setting, no swept range)."""


def grid_rows(fit: xr.DataTree, setting: str, axis: str, sizes: np.ndarray) -> pd.DataFrame:
    """Rows for ``predict``: ``setting``'s keys, ``axis`` at ``sizes``, every other axis at its
    largest swept value in that setting, the model size where the law has one."""
    spec = fit_spec(fit)
    swept = SweptRange.from_fit(fit)
    if swept is None or setting not in swept.settings:
        raise FormsFigureError(f"the fit stores no swept range for setting {setting!r}")
    layout = fit_layout(fit)
    g = swept.settings.index(setting)
    index = layout.settings.index(setting)
    frame = pd.DataFrame(
        {key: values[index] for key, values in layout.key_values.items()}, index=range(len(sizes))
    )
    for a in spec.axes:
        frame[a.column] = sizes if a.name == axis else swept.hi[g, swept.axes.index(a.name)]
    if spec.size is not None:
        frame[spec.size.column] = setting_keys(fit, [setting])[setting][names.PARAMS_B]
    if spec.outcome == "success":
        frame[names.TRIALS] = 1  # a count the law's rate does not depend on
    return frame


def _bands(loss: np.ndarray, success: bool, prob: float) -> tuple[np.ndarray, ...]:
    """Median and central ``prob`` band over draws (axis 0) of ``e^-L`` (or ``L``)."""
    y = np.exp(-loss) if success else loss
    tail = (1.0 - prob) / 2.0
    lo, mid, hi = np.quantile(y, [tail, 0.5, 1.0 - tail], axis=0)
    return mid, lo, hi


def plot_forms(
    fit: xr.DataTree,
    axis: str,
    *,
    settings: Sequence[str] | None = None,
    prob: float = DEFAULT_PROB,
    beyond: float = BEYOND,
) -> Figure:
    """One panel per setting (at most ``MAX_SETTINGS``; ``settings`` to choose): each form's
    law along ``axis`` and the stack's, beyond the sweep (module docstring)."""
    spec = fit_spec(fit)
    if axis not in spec.axis_names:
        raise FormsFigureError(f"axis {axis!r} is not an axis of the fit: {list(spec.axis_names)}")
    swept = SweptRange.from_fit(fit)
    if swept is None:
        raise FormsFigureError("the fit stores no swept range (written by an older version)")
    chosen = list(settings) if settings else list(swept.settings)[:MAX_SETTINGS]
    unknown = [s for s in chosen if s not in swept.settings]
    if unknown:
        raise FormsFigureError(f"setting(s) {unknown} not in the fit")
    stacked = members(fit) or []
    success = spec.outcome == "success"
    j = swept.axes.index(axis)
    with paper_style():
        nrows, ncol = grid_shape(len(chosen), min(3, len(chosen)))
        fig, axes = new_figure(nrows, ncol, panel=(2.1, 1.6))
        used = remove_unused(axes, len(chosen))
        for ax, setting in zip(used, chosen, strict=True):
            g = swept.settings.index(setting)
            lo, hi = float(swept.lo[g, j]), float(swept.hi[g, j])
            sizes = np.unique(np.round(np.geomspace(lo, hi * beyond, GRID_POINTS)))  # counts
            rows = grid_rows(fit, setting, axis, sizes)
            shade_x(ax, outside_spans(lo, hi * beyond, lo, hi))
            for k, m in enumerate(stacked):
                mid, _, _ = _bands(predict(m.tree, rows, observed=False).loss, success, prob)
                ax.plot(sizes, mid, color=PALETTE[k % len(PALETTE)], lw=1.0, ls="--",
                        label=f"{m.form} (weight {m.weight:.2f})")  # fmt: skip
            mid, band_lo, band_hi = _bands(predict(fit, rows, observed=False).loss, success, prob)
            ax.fill_between(sizes, band_lo, band_hi, color=STACK_COLOR, alpha=0.15, lw=0)
            label = "stack" if stacked else "the fit"
            ax.plot(sizes, mid, color=STACK_COLOR, lw=1.4, label=f"{label}, {prob:.0%} band")
            ax.set_xscale("log")
            ax.set_title(setting, fontsize="small")
        handles, labels = used[0].get_legend_handles_labels()
        fig.legend(
            handles, labels, loc="outside upper center", ncols=min(3, len(labels)), frameon=False
        )
        fig.supxlabel(
            f"{axis}, log scale (the other axes at their largest swept values; shaded: beyond "
            "the sweep)"
        )
        fig.supylabel("success rate" if success else "loss")
        stamp(fig, verdict(fit))
    return attach_provenance(fig, provenance(fit))
