"""Forest plot of the per-setting exponents around the population exponent, one column per axis.

For axis ``a`` the law fit has ``alpha_pop[a]`` (the population median exponent) and
``alpha[s, a]`` for every setting, pooled toward it:

.. math::

    \\log \\alpha_{s,a} = \\log \\bar\\alpha_a + \\tau_a z_{s,a}

Each row is a setting: the posterior median (dot) with its narrower (thick) and wider (thin)
credible interval. The top row is the population exponent, whose median and widest interval
also run down the column as a line and a shaded band, so a setting whose interval misses the
band stands out.

Example
-------
>>> fig = plot_exponents(fit)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from bayesscale import names
from bayesscale.data.fitfile import fit_spec
from bayesscale.report.figures.marks import stamp, verdict
from bayesscale.report.figures.provenance import attach_provenance, provenance
from bayesscale.report.figures.style import (
    DATA_COLOR,
    DEFAULT_KIND,
    DEFAULT_PROBS,
    PALETTE,
    POPULATION_COLOR,
    Array,
    FigureError,
    check_kind,
    check_probs,
    credible_band,
    interval_words,
    new_figure,
    paper_style,
    require_vars,
)

POPULATION_LABEL: Final = "population"
MEDIAN_GID: Final = "median"  # the per-setting median dots of a column (one scatter)
POPULATION_GID: Final = "population_median"
WIDTHS: Final = (2.6, 0.9)  # line widths of the narrower and of the wider interval


def _draws(da: xr.DataArray) -> Array:
    """Draws first: (chain * draw, rest...)."""
    sample = (names.CHAIN_DIM, names.DRAW_DIM)
    rest = [d for d in da.dims if d not in sample]
    arr = da.transpose(*sample, *rest).to_numpy().astype(float)
    return arr.reshape(-1, *arr.shape[2:])


def plot_exponents(
    fit: xr.DataTree,
    *,
    settings: Sequence[str] | None = None,
    probs: Sequence[float] = DEFAULT_PROBS,
    kind: str = DEFAULT_KIND,
    sort_by: str | None = None,
) -> Figure:
    """Forest plot of ``alpha[setting, axis]`` around ``alpha_pop[axis]``, one column per axis.

    ``settings`` picks and orders rows (default: the fit's order); ``sort_by`` (an axis name)
    orders them by that axis's median exponent instead. Two interval probabilities at most
    (thick and thin lines).
    """
    check_kind(fit, names.KIND_LAW_FIT, "plot_exponents")
    probs = check_probs(probs)
    if len(probs) > len(WIDTHS):
        raise FigureError(f"a forest plot draws at most {len(WIDTHS)} intervals, got {probs}")
    post = fit["posterior"].to_dataset()
    require_vars(post, [names.ALPHA, names.ALPHA_POP], "the law fit's posterior")
    axes = [str(a) for a in post[names.AXIS_DIM].to_numpy()]
    all_settings = [str(s) for s in post[names.SETTING_DIM].to_numpy()]
    chosen = list(settings) if settings is not None else all_settings
    missing = [s for s in chosen if s not in all_settings]
    if missing:
        raise FigureError(f"setting(s) {missing} not in the fit; its settings: {all_settings}")
    alpha = _draws(
        post[names.ALPHA].sel({names.SETTING_DIM: chosen}).transpose(..., names.AXIS_DIM)
    )
    pop = _draws(post[names.ALPHA_POP].transpose(..., names.AXIS_DIM))
    if sort_by is not None:
        if sort_by not in axes:
            raise FigureError(f"sort_by {sort_by!r} is not an axis of the fit: {axes}")
        order = np.argsort(np.median(alpha[:, :, axes.index(sort_by)], axis=0))
        chosen = [chosen[i] for i in order]
        alpha = alpha[:, order, :]
    try:
        spec_labels = {a.name: a.label for a in fit_spec(fit).axes}
    except ValueError:
        spec_labels = {}

    n = len(chosen)
    y = np.arange(n, 0, -1, dtype=float)  # settings top to bottom, population above them
    y_pop = float(n + 1.3)
    with paper_style():
        fig, grid = new_figure(1, len(axes), panel=(2.0, 0.6 + 0.17 * (n + 2)), sharey=True)
        for j, (ax, axis) in enumerate(zip(grid[0], axes, strict=True)):
            color = PALETTE[j % len(PALETTE)]
            widest = credible_band(pop[:, j], probs[-1], kind)
            pop_median = float(np.median(pop[:, j]))
            ax.axvspan(float(widest[0]), float(widest[1]), color=POPULATION_COLOR, alpha=0.1, lw=0)
            ax.axvline(pop_median, color=POPULATION_COLOR, lw=0.8, ls="--")
            for prob, width in zip(probs, WIDTHS, strict=False):
                lo, hi = credible_band(alpha[:, :, j], prob, kind)
                ax.hlines(y, lo, hi, color=color, lw=width)
                p_lo, p_hi = credible_band(pop[:, j], prob, kind)
                ax.hlines([y_pop], [p_lo], [p_hi], color=POPULATION_COLOR, lw=width)
            med = np.median(alpha[:, :, j], axis=0)
            ax.scatter(med, y, s=9, color=DATA_COLOR, zorder=3, gid=MEDIAN_GID)
            ax.scatter(
                [pop_median], [y_pop], s=14, color=POPULATION_COLOR, zorder=3, gid=POPULATION_GID
            )
            ax.axhline(n + 0.65, color="0.6", lw=0.5)
            title = spec_labels.get(axis, axis)
            ax.set_title(f"{title}\n$\\alpha_{{\\mathrm{{{axis}}}}}$", fontsize=8)
            ax.grid(axis="y", visible=False)
            ax.set_ylim(0.4, y_pop + 0.7)
        grid[0, 0].set_yticks([y_pop, *y], [POPULATION_LABEL, *chosen])
        grid[0, 0].get_yticklabels()[0].set_color(POPULATION_COLOR)
        pcts = " and ".join(f"{round(100 * p)}%" for p in probs)
        fig.supxlabel(
            f"exponent (dot: posterior median; lines: {pcts} {interval_words(kind)}; "
            f"band: population {round(100 * probs[-1])}%)"
        )
        stamp(fig, verdict(fit))
    return attach_provenance(fig, provenance(fit))
