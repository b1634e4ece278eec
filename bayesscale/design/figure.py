"""Value per cost over the candidate grid (the first greedy step), one panel per setting.

Each line is one axis swept from the anchors (as ``plan`` sweeps it), x the size on that axis
(log scale), y the candidate's value per unit of cost; a dashed line marks the value per cost
of a run at the recipe's decision point, rings the runs the batch chose.

Example
-------
>>> from bayesscale.recipe.synthetic import synthetic_fit
>>> from bayesscale.design.next_runs import next_runs, with_concentration
>>> fit = with_concentration(synthetic_fit(draws=50, spread=0.1), 800.0)
>>> fig = value_per_cost_figure(next_runs(fit, 2e4, runs=1, simulations=8, max_draws=50))
>>> len(fig.axes) >= 2
True
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from bayesscale.design.next_runs import DECISION_AXIS, NextRuns
from bayesscale.report.figures.style import (
    PALETTE,
    grid_shape,
    new_figure,
    paper_style,
    remove_unused,
)


def value_per_cost_figure(result: NextRuns, max_panels: int = 12) -> Figure:
    """The figure (see the module docstring); at most ``max_panels`` settings."""
    settings = list(dict.fromkeys(c.setting for c in result.candidates))[:max_panels]
    chosen = {(r.candidate.setting, r.candidate.sizes) for r in result.chosen}
    rows, cols = grid_shape(len(settings), max_cols=3)
    with paper_style():
        fig, axes = new_figure(rows, cols, panel=(2.6, 2.0))
        flat = axes.ravel()
        for k, setting in enumerate(settings):
            ax = flat[k]
            for i, axis in enumerate(result.axes):
                pts = sorted(
                    (result.candidates[v.candidate].sizes[i], v.per_cost, v.candidate)
                    for v in result.first_step
                    if result.candidates[v.candidate].setting == setting
                    and result.candidates[v.candidate].axis == axis
                )
                if not pts:
                    continue
                x = np.array([p[0] for p in pts], dtype=float)
                y = np.array([p[1] for p in pts], dtype=float)
                ax.plot(x, y, "o-", ms=3, color=PALETTE[i % len(PALETTE)], label=axis)
                picked = [
                    j
                    for j, p in enumerate(pts)
                    if (setting, result.candidates[p[2]].sizes) in chosen
                ]
                ax.plot(x[picked], y[picked], "o", ms=8, mfc="none", color="black")
            for v in result.first_step:
                c = result.candidates[v.candidate]
                if c.setting == setting and c.axis == DECISION_AXIS:
                    ax.annotate(
                        "decision",
                        (0.98, v.per_cost),
                        xycoords=("axes fraction", "data"),
                        ha="right",
                        fontsize=6,
                    )
                    ax.axhline(v.per_cost, color="grey", lw=0.6, ls="--")
            ax.set_xscale("log")
            ax.set_title(setting)
            ax.set_xlabel("size on the swept axis")
            ax.set_ylabel(f"value per {result.currency}")
            if k == 0:
                ax.legend()
        remove_unused(axes, len(settings))
        fig.suptitle(
            f"value per cost of one more run (target: {result.target}, budget {result.budget:g})"
        )
    return fig
