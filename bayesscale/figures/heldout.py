"""Held-out check: predicted against observed success, with each run's predictive interval.

The input is the held-out check's frame (:func:`bayesscale.check.check`; one row per
held-out run): ``setting``, ``observed``, ``predicted``, ``lower``, ``upper`` (success rates in
[0, 1], or losses with ``attrs["outcome"] == "loss"``, then drawn log-log; ``[lower, upper]``
the posterior predictive interval of the observed value) and ``attrs["prob"]`` (its mass),
``attrs["coverage"]``. A run is covered when

.. math::

    \\mathrm{lower}_i \\le \\mathrm{observed}_i \\le \\mathrm{upper}_i,
    \\qquad \\mathrm{coverage} = \\frac{1}{n} \\sum_i [\\,\\text{run } i \\text{ covered}\\,],

and a calibrated model covers about ``prob`` of the runs. Each run is a point at
(predicted, observed) with its interval as a vertical bar (the interval is for the observed
rate); runs outside their interval are drawn in a second colour; the diagonal is
observed = predicted.

Example
-------
>>> fig = plot_heldout(check_frame, provenance=provenance(fit, heldout_table))  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Final

import pandas as pd
from matplotlib.figure import Figure

from bayesscale.figures.provenance import Provenance, attach_provenance
from bayesscale.figures.style import (
    DATA_COLOR,
    PALETTE,
    FigureError,
    new_figure,
    paper_style,
)
from bayesscale.tables import (
    ATTR_OUTCOME,
    LOWER,
    OBSERVED,
    PREDICTED,
    UPPER,
    check_heldout,
    covered,
)

INSIDE_GID: Final = "inside"
OUTSIDE_GID: Final = "outside"
OUTSIDE_COLOR: Final = PALETTE[1]


def plot_heldout(frame: pd.DataFrame, *, provenance: Provenance) -> Figure:
    """Predicted against observed held-out success with predictive intervals (one panel).

    ``provenance``: the fit's and the held-out table's, ``provenance(law_fit, heldout_table)``.
    """
    if not isinstance(provenance, Provenance):
        raise FigureError("plot_heldout needs provenance=provenance(law_fit, heldout_table)")
    frame = check_heldout(frame)
    prob = float(frame.attrs["prob"])
    loss = frame.attrs.get(ATTR_OUTCOME, "success") == "loss"
    inside = covered(frame)
    with paper_style():
        fig, grid = new_figure(1, 1, panel=(3.4, 3.2))
        ax = grid[0, 0]
        for mask, color, gid, label in (
            (inside, DATA_COLOR, INSIDE_GID, "observed inside its interval"),
            (~inside, OUTSIDE_COLOR, OUTSIDE_GID, "observed outside its interval"),
        ):
            part = frame[mask]
            if part.empty:
                continue
            ax.vlines(part[PREDICTED], part[LOWER], part[UPPER], color=color, lw=0.6, alpha=0.45)
            ax.scatter(
                part[PREDICTED], part[OBSERVED], s=7, color=color, zorder=3, gid=gid, label=label
            )
        values = frame[[OBSERVED, PREDICTED, LOWER, UPPER]].to_numpy(float)
        lo, hi = float(values.min()), float(values.max())
        if loss:
            lim = (lo / 1.1, hi * 1.1)
            ax.set_xscale("log")
            ax.set_yscale("log")
        else:
            pad = 0.04 * max(hi - lo, 1e-3)
            lim = (max(0.0, lo - pad), min(1.0, hi + pad))
        ax.plot(lim, lim, color="0.5", lw=0.8, ls="--", label="observed = predicted")
        ax.set_xlim(lim)
        ax.set_ylim(lim)
        ax.set_aspect("equal")
        what = "loss" if loss else "success"
        ax.set_xlabel(f"predicted {what} (posterior predictive median)")
        ax.set_ylabel(f"observed {what}\n(bar: {round(100 * prob)}% predictive interval)")
        n, k = len(frame), int(inside.sum())
        ax.set_title(
            f"held-out check: {k} of {n} runs ({k / n:.0%}) inside\n"
            f"their {round(100 * prob)}% predictive interval",
            fontsize=8,
        )
        ax.legend(loc="upper left", frameon=False)
    return attach_provenance(fig, provenance)
