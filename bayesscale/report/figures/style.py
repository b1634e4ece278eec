"""Shared look and helpers of the paper figures: style, panel grids, credible bands, checks.

Bands are computed over posterior draws at each plotted point, at the probabilities in
``probs`` (default 50% and 90%), as equal-tailed intervals around the median (``kind="eti"``,
the default: the intervals of the tables, the recipe and ``bayesscale summary``, so a figure
and a table agree) or highest-density intervals (``kind="hdi"``; both from :mod:`bayesscale.core.intervals`):

.. math::

    \\mathrm{ETI}_q = [Q((1-q)/2),\\ Q((1+q)/2)], \\qquad
    \\mathrm{HDI}_q = \\text{the shortest interval holding a share } q \\text{ of the draws}

Figures are built on :class:`matplotlib.figure.Figure` directly, not through ``pyplot``: no
global figure state, no backend needed to draw or save.

Example
-------
>>> import numpy as np
>>> lo, hi = credible_band(np.arange(101.0), 0.5, kind="eti")
>>> float(lo), float(hi)
(25.0, 75.0)
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final, Literal

import matplotlib as mpl
import numpy as np
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from numpy.typing import ArrayLike, NDArray

from bayesscale import names
from bayesscale.core.intervals import ETI, HDI, INTERVAL_KINDS, interval, quantiles

Array = NDArray[np.float64]

DEFAULT_PROBS: Final = (0.5, 0.9)
DEFAULT_KIND: Final = ETI  # the tables' and the text's interval: one kind everywhere
KIND_WORDS: Final = {ETI: "equal-tailed", HDI: "HDI"}

# Colour-blind-safe (Okabe-Ito); one hue per axis of the paper, grey for data.
PALETTE: Final = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442")
DATA_COLOR: Final = "#222222"
POPULATION_COLOR: Final = "#B22222"
BAND_ALPHA: Final = (0.38, 0.16)  # opacity of the narrowest and of the widest band

PAPER_RC: Final[dict[str, Any]] = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "figure.titlesize": 9,
    "figure.labelsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.25,
    "grid.linewidth": 0.5,
    "lines.linewidth": 1.3,
    "savefig.dpi": 200,
}


class FigureError(ValueError):
    """Input a figure or table cannot use: the message says what is missing or wrong."""


@contextmanager
def paper_style() -> Iterator[None]:
    """Matplotlib settings of every bayesscale figure (small fonts, light grid)."""
    with mpl.rc_context(PAPER_RC):  # type: ignore[arg-type]
        yield


def new_figure(
    nrows: int,
    ncols: int,
    panel: tuple[float, float] = (2.2, 1.8),
    sharex: bool | Literal["none", "all", "row", "col"] = False,
    sharey: bool | Literal["none", "all", "row", "col"] = False,
) -> tuple[Figure, NDArray[np.object_]]:
    """A constrained-layout figure with an ``nrows x ncols`` array of axes (always 2-D);
    ``panel`` is the size of one panel in inches. Call inside :func:`paper_style`."""
    fig = Figure(figsize=(panel[0] * ncols, panel[1] * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, sharex=sharex, sharey=sharey, squeeze=False)
    return fig, axes


def grid_shape(n: int, ncols: int | None = None, max_cols: int = 7) -> tuple[int, int]:
    """Rows and columns for ``n`` panels: ``ncols`` if given; else between ``sqrt(n)`` and
    ``max_cols`` columns, the count that leaves the fewest empty cells (then the most columns).

    >>> grid_shape(21), grid_shape(9), grid_shape(2), grid_shape(10)
    ((3, 7), (3, 3), (1, 2), (2, 5))
    """
    if n < 1:
        raise FigureError("nothing to plot: no panels")
    if ncols is None:
        top = min(n, max_cols)
        candidates = range(top, min(top, math.ceil(math.sqrt(n))) - 1, -1)
        ncols = min(candidates, key=lambda c: (math.ceil(n / c) * c - n, -c))
    if ncols < 1:
        raise FigureError(f"ncols must be >= 1, got {ncols}")
    ncols = min(ncols, n)
    return math.ceil(n / ncols), ncols


def remove_unused(axes: NDArray[np.object_], used: int) -> list[Axes]:
    """Remove the panels after the first ``used`` ones (row-major); return the used ones."""
    flat = list(axes.ravel())
    for ax in flat[used:]:
        ax.remove()
    return flat[:used]


def compact_number(x: float) -> str:
    """Tick text of a count: ``compact_number(10240) == '10k'``, ``compact_number(1280) == '1.3k'``.

    >>> [compact_number(v) for v in (2, 64, 320, 1280, 10240, 2.5e6, 0.25)]
    ['2', '64', '320', '1.3k', '10k', '2.5M', '0.25']
    """
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            v = x / scale
            return (f"{v:.0f}" if abs(v) >= 10 else f"{v:.2g}") + suffix
    return f"{x:.3g}"


def setting_title(label: str) -> str:
    """A setting label ``'Qwen3-8B | grpo | swe'`` as two short lines: ``'Qwen3-8B\\ngrpo · swe'``."""
    parts = [p.strip() for p in str(label).split("|")]
    if len(parts) <= 1:
        return str(label)
    return parts[0] + "\n" + " · ".join(parts[1:])


def check_probs(probs: Sequence[float]) -> tuple[float, ...]:
    """Band probabilities, validated and sorted from the narrowest."""
    out = tuple(sorted(float(p) for p in probs))
    if not out or any(not 0 < p < 1 for p in out):
        raise FigureError(f"band probabilities must lie in (0, 1), got {list(probs)}")
    if len(set(out)) != len(out):
        raise FigureError(f"band probabilities repeat: {list(probs)}")
    return out


def credible_band(values: ArrayLike, prob: float, kind: str = DEFAULT_KIND, axis: int = 0) -> Array:
    """``[lower, upper]`` of the ``prob`` interval over ``axis`` (the draws), stacked first:
    shape ``(2, *rest)``. NaN draws are ignored (an all-NaN slice gives NaN)."""
    try:
        return interval(values, prob, kind, axis=axis)
    except ValueError as exc:
        raise FigureError(str(exc)) from None


def draw_bands(
    ax: Axes,
    x: ArrayLike,
    draws: ArrayLike,
    probs: Sequence[float],
    kind: str,
    color: str,
    label: str | None = None,
    log: bool = False,
) -> Array:
    """Median line and nested bands of ``draws`` (draws first, then one value per ``x``).
    With ``log`` the intervals are taken of ``log draws`` (for a log-scale y axis: an HDI is
    not invariant under the transform, and on a log axis the log-space one is the shortest
    as seen). Returns the plotted median (NaN-ignoring)."""
    arr = np.asarray(draws, dtype=float)
    if log:
        if (arr[~np.isnan(arr)] <= 0).any():
            raise FigureError("log-scale bands need positive draws")
        arr = np.log(arr)
    back = np.exp if log else np.asarray
    for prob, alpha in reversed(list(zip(probs, band_alphas(len(probs)), strict=True))):
        lo, hi = credible_band(arr, prob, kind)
        ax.fill_between(x, back(lo), back(hi), color=color, alpha=alpha, linewidth=0)
    median = back(quantiles(arr, [0.5], axis=0)[0])
    ax.plot(x, median, "-", color=color, label=label)
    return np.asarray(median, dtype=float)


def band_alphas(n: int) -> list[float]:
    """Opacity of ``n`` nested bands, narrowest first (the bands overlap, so the inner ones
    look darker still).

    >>> band_alphas(2)
    [0.38, 0.16]
    """
    if n == 1:
        return [BAND_ALPHA[0]]
    return [float(a) for a in np.round(np.linspace(*BAND_ALPHA, n), 4)]


def band_handles(color: str, n: int) -> list[Patch]:
    """Legend patches of ``n`` nested bands, narrowest first, each as dark as it looks in the
    plot (a band is drawn over every wider one)."""
    alphas = band_alphas(n)
    out = []
    for i in range(n):
        seen = 1.0 - float(np.prod([1.0 - a for a in alphas[i:]]))
        out.append(Patch(facecolor=color, alpha=seen, linewidth=0))
    return out


def interval_words(kind: str) -> str:
    """How a legend names an interval kind: ``'equal-tailed'`` or ``'HDI'``.

    >>> interval_words("eti"), interval_words("hdi")
    ('equal-tailed', 'HDI')
    """
    if kind not in KIND_WORDS:
        raise FigureError(f"unknown interval kind {kind!r}; use one of {INTERVAL_KINDS}")
    return KIND_WORDS[kind]


def interval_label(prob: float, kind: str) -> str:
    """A band's legend entry: ``'90% equal-tailed'``, ``'90% HDI'``.

    >>> interval_label(0.9, "eti")
    '90% equal-tailed'
    """
    return f"{round(100 * prob)}% {interval_words(kind)}"


def band_legend_text(probs: Sequence[float], kind: str) -> str:
    """``'median, 50% and 90% equal-tailed'``.

    >>> band_legend_text((0.5, 0.9), "hdi")
    'median, 50% and 90% HDI'
    """
    pcts = [f"{round(100 * p)}%" for p in probs]
    joined = pcts[0] if len(pcts) == 1 else ", ".join(pcts[:-1]) + " and " + pcts[-1]
    return f"median, {joined} {interval_words(kind)}"


# --- checks on inputs ----------------------------------------------------------------------


def check_kind(tree: xr.DataTree, kind: str, what: str) -> None:
    """Refuse a fit of another kind (a pricing fit where a law fit is needed, and so on)."""
    if not isinstance(tree, xr.DataTree):
        raise FigureError(f"{what} needs a {kind!r} DataTree, got {type(tree).__name__}")
    found = tree.attrs.get(names.ATTR_KIND)
    if found != kind:
        raise FigureError(f"{what} needs a bayesscale {kind!r} fit; this one is {found!r}")
    if "posterior" not in tree.children:
        raise FigureError(f"{what}: the fit has no posterior group")


def require_vars(ds: xr.Dataset, variables: Sequence[str], where: str) -> None:
    """Raise naming every variable of ``variables`` that ``ds`` lacks."""
    missing = [v for v in variables if v not in ds.variables]
    if missing:
        raise FigureError(f"{where} has no {', '.join(map(repr, missing))}")
