"""Held-out check: predicted against observed success, with each run's predictive interval.

The input is the held-out check's frame (:func:`bayesscale.checks.heldout.check`; one row per
held-out run): ``setting``, ``observed``, ``predicted``, ``lower``, ``upper`` (success rates in
[0, 1], or losses with ``attrs["outcome"] == "loss"``, then drawn log-log; ``[lower, upper]``
the posterior predictive interval of the observed value) and ``attrs["prob"]`` (its mass),
``attrs["coverage"]``. A run is covered when

.. math::

    \\mathrm{lower}_i \\le \\mathrm{observed}_i \\le \\mathrm{upper}_i,
    \\qquad \\mathrm{coverage} = \\frac{1}{n} \\sum_i [\\,\\text{run } i \\text{ covered}\\,],

and a calibrated model covers about ``prob`` of the runs. Each run is a small open circle at
(predicted, observed); runs outside their interval are filled, in a second colour; the
diagonal is observed = predicted. The seeds of one design point share its prediction and its
interval (same setting, sizes and trials), so the interval is drawn once per design point, as
a vertical bar (gid ``"interval"``; the interval is for the observed rate) under the runs,
which are drawn at their point's prediction: the reference held-out set has 315 runs at 105
points, and one bar per run drew each bar three times over, side by side, hidden under filled
markers. Open markers keep the bar visible through them.

Example
-------
>>> fig = plot_heldout(check_frame, provenance=provenance(fit, heldout_table))  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Final

import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.figure import Figure

from bayesscale import names
from bayesscale.report.figures.marks import stamp, verdict
from bayesscale.report.figures.provenance import Provenance, attach_provenance
from bayesscale.report.figures.style import (
    DATA_COLOR,
    PALETTE,
    FigureError,
    new_figure,
    paper_style,
)
from bayesscale.report.tables import (
    ATTR_OUTCOME,
    LOWER,
    OBSERVED,
    PREDICTED,
    UPPER,
    check_heldout,
    covered,
)

INSIDE_GID: Final = "inside"
INTERVAL_GID: Final = "interval"
PER_RUN: Final = frozenset(
    {
        names.ROW,
        names.LINE,
        names.SEED,
        names.SUCCESSES,
        names.LOSS,
        names.OBSERVED,
        names.PREDICTED,
        names.LOWER,
        names.UPPER,
        names.MEAN_LOWER,
        names.MEAN_UPPER,
        names.PERCENTILE,
        names.COVERED,
    }
)  # columns of the check frame that belong to a run, not to its design point
OUTSIDE_GID: Final = "outside"
OUTSIDE_COLOR: Final = PALETTE[1]


def plot_heldout(
    frame: pd.DataFrame, *, provenance: Provenance, fit: xr.DataTree | None = None
) -> Figure:
    """Predicted against observed held-out success with predictive intervals (one panel).

    ``provenance``: the fit's and the held-out table's, ``provenance(law_fit, heldout_table)``.
    ``fit``: the law fit of the check, for the diagnostics stamp.
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
        points = design_points(frame)
        ax.vlines(
            points[PREDICTED],
            points[LOWER],
            points[UPPER],
            color="0.55",
            lw=1.1,
            alpha=0.5,
            zorder=2,
            gid=INTERVAL_GID,
            label=f"{round(100 * prob)}% predictive interval (one per design point)",
        )
        x = points[PREDICTED].to_numpy(float)[points.attrs["point_of_run"]]
        for mask, color, gid, label, fill in (
            (inside, DATA_COLOR, INSIDE_GID, "run inside its interval", "none"),
            (~inside, OUTSIDE_COLOR, OUTSIDE_GID, "run outside its interval", OUTSIDE_COLOR),
        ):
            mask = np.asarray(mask, dtype=bool)
            if not mask.any():
                continue
            ax.scatter(
                x[mask],
                frame[OBSERVED].to_numpy(float)[mask],
                s=9,
                facecolors=fill,
                edgecolors=color,
                linewidths=0.6,
                zorder=3,
                gid=gid,
                label=label,
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
            f"their {round(100 * prob)}% predictive interval ({len(points)} design points)",
            fontsize=8,
        )
        ax.legend(loc="upper left", frameon=False, fontsize=6)
        if fit is not None:
            stamp(fig, verdict(fit))
    return attach_provenance(fig, provenance)


def design_points(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per design point, the runs that differ only by seed: the columns of the frame
    that are not per run (``PER_RUN``) are the key; ``predicted``, ``lower`` and
    ``upper`` are the means over the point's runs (they differ only by Monte Carlo noise,
    at most 0.0025 on the reference held-out set) and ``runs`` their count.
    ``attrs["point_of_run"]``: the point of each run of ``frame``, in its order.
    A frame without a ``seed`` column has one point per run."""
    if names.SEED in frame.columns:
        keys = [c for c in frame.columns if c not in PER_RUN]
        codes = frame.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
    else:
        codes = np.arange(len(frame))
    grouped = frame[[PREDICTED, LOWER, UPPER]].groupby(codes, sort=True)
    points = grouped.mean().assign(runs=grouped.size()).reset_index(drop=True)
    points.attrs["point_of_run"] = codes
    return points
