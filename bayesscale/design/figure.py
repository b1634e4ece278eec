"""Value per cost over the candidate grid (the first greedy step), one panel per setting.

Each line is one axis swept from the anchors (as ``plan`` sweeps it), x the size on that axis
(log scale, units bought), y the candidate's value per unit of money; a dashed line marks the
value per cost of a run at the recipe's decision point, rings the runs the batch chose. Each
panel names the sizes the other axes are held at (the anchors after the pool's caps), and an
axis no candidate varies (the pool caps it at the size held) is said so in the panel.

Example
-------
>>> from bayesscale.recipe.synthetic import synthetic_fit
>>> from bayesscale.design.candidates import with_concentration
>>> from bayesscale.design.next_runs import next_runs
>>> fit = with_concentration(synthetic_fit(draws=50, spread=0.1), 800.0)
>>> fig = value_per_cost_figure(next_runs(fit, 2e4, runs=1, simulations=8, max_draws=50))
>>> len(fig.axes) >= 2
True
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from bayesscale.design.next_text import held_sizes
from bayesscale.design.results import DECISION_AXIS, NextRuns
from bayesscale.formatting import money
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
    varied: dict[str, set[str]] = {}
    for c in result.candidates:
        varied.setdefault(c.setting, set()).add(c.axis)
    rows, cols = grid_shape(len(settings), max_cols=3)
    held = held_sizes(result)
    with paper_style():
        fig, axes = new_figure(rows, cols, panel=(3.2, 2.6))
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
            at = held.get(setting, {})
            fixed = " ".join(f"{a}={at[a]:,}" for a in result.axes if a in at)
            ax.set_title(f"{setting}\nothers held at {fixed}" if fixed else setting)
            missing = [a for a in result.axes if a not in varied.get(setting, set())]
            if missing:
                ax.text(
                    0.02,
                    0.98,
                    f"no {', '.join(missing)} candidates: the pool caps it at the size held",
                    transform=ax.transAxes,
                    va="top",
                    fontsize=6,
                    color="0.35",
                )
            ax.set_xlabel("size on the varied axis (units bought)")
            ax.set_ylabel(f"value per {result.currency}")
            if k == 0:
                ax.legend()
        remove_unused(axes, len(settings))
        fig.suptitle(
            f"value per cost of one more run (target: {result.target}, recipe budget "
            f"{money(result.budget)} {result.currency})"
        )
    return fig
