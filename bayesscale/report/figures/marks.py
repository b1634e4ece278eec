"""Marks that tell a reader how far to trust a figure: the fit's verdict and extrapolation.

**The verdict stamp.** A figure drawn from a fit whose diagnostics failed, or from a preview
fit (``--preview``, draws from a Laplace approximation), carries the verdict in red at its top,
e.g. ``FAILED DIAGNOSTICS: max R-hat 1.300 > 1.01, ...`` or ``PREVIEW FIT: Laplace
approximation, not a posterior sample; ...``. The verdict is the one of :func:`bayesscale.data.fitfile.diagnose` (the same
statistics and thresholds: R-hat <= 1.01, bulk and tail ESS >= 400, no divergent transitions),
read from the figures the fit keeps when they describe its draws (the sampler's last check),
else computed once and kept; drawing a figure never imports PyMC.

**Extrapolation.** A law fit stores, per setting and axis, the swept range ``[lo, hi]`` of the
data (:class:`bayesscale.data.extrapolation.SweptRange`). Where a figure shows sizes outside it, the
region is shaded light grey with hatching (gid ``"extrapolated"``) and the legend says
"beyond the swept range (extrapolated)". A fit written before the range was stored has no
shading.

Example
-------
>>> from bayesscale.recipe.synthetic import synthetic_fit
>>> fit = synthetic_fit(draws=50)
>>> fit.attrs[names.ATTR_PREVIEW] = 1
>>> verdict(fit)
'PREVIEW FIT: Laplace approximation, not a posterior sample; refit without --preview'
>>> beyond_spans(np.array([1.0, 10.0, 100.0]), np.array([1.0, 10.0, 100.0]), 1.0, 10.0)
[(10.0, 100.0)]
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Final

import numpy as np
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.patches import Patch
from matplotlib.text import Text

from bayesscale import names
from bayesscale.data.extrapolation import SweptRange
from bayesscale.data.fitfile import diagnose
from bayesscale.report.figures.style import Array

STAMP_GID: Final = "stamp"
EXTRAPOLATED_GID: Final = "extrapolated"
EXTRAPOLATED_TEXT: Final = "beyond the swept range (extrapolated)"
STAMP_WIDTH: Final = 48
LINE_HEIGHT: Final = 0.16  # inches a line of 8-point text takes: the figure grows by the stamp
STAMP_COLOR: Final = "#B00020"
SHADE_COLOR: Final = "0.55"
SHADE_ALPHA: Final = 0.13
SHADE_HATCH: Final = "////"


def verdict(fit: xr.DataTree, leave_out: Sequence[str] = ()) -> str | None:
    """The stamp of a fit: ``None`` when its diagnostics pass; else one line saying it is a
    preview or which diagnostics failed. ``leave_out``: posterior variables not diagnosed
    (a pricing fit's per-draw derived quantities, as :func:`bayesscale.pricing.summary`)."""
    if bool(int(fit.attrs.get(names.ATTR_PREVIEW, 0))):
        return "PREVIEW FIT: Laplace approximation, not a posterior sample; refit without --preview"
    if "posterior" not in fit.children:
        return None
    posterior = fit["posterior"].to_dataset().drop_vars(list(leave_out), errors="ignore")
    if not posterior.data_vars:
        return None
    # the fit's kept figures when they describe these draws
    failed = diagnose(fit, leave_out).failures()
    if not failed:
        return None
    return f"FAILED DIAGNOSTICS: {', '.join(failed)}; do not trust this figure yet"


def stamp(fig: Figure, text: str | None) -> None:
    """Write ``text`` (a :func:`verdict`) in red over the top of ``fig``; nothing for ``None``.

    On a figure with a figure-level legend above the panels the stamp is the legend's title
    (a constrained layout stacks an outside legend and a suptitle on top of each other, but
    makes room for a legend's title); otherwise it is the figure's suptitle. The figure grows
    by the stamp's height, so the panels keep their size. The text is
    broken after its first colon and its semicolons, and to lines of at most
    ``STAMP_WIDTH`` characters, so that it fits a narrow figure."""
    if text is None:
        return
    head, sep, rest = text.partition(": ")
    parts = [f"{head}:", *rest.split("; ")] if sep else [text]
    lines = "\n".join(textwrap.fill(p, STAMP_WIDTH) for p in parts)
    fig.set_figheight(fig.get_figheight() + LINE_HEIGHT * (lines.count("\n") + 1))
    if fig.legends:
        legend = fig.legends[0]
        legend.set_title(lines, prop=FontProperties(weight="bold", size=8))
        title = legend.get_title()
        title.set_color(STAMP_COLOR)
        title.set_gid(STAMP_GID)
    else:
        fig.suptitle(lines, color=STAMP_COLOR, fontweight="bold", fontsize=8, gid=STAMP_GID)


def stamp_of(fig: Figure) -> str | None:
    """The stamp's text on ``fig`` (``None`` when it has none), as drawn (several lines)."""
    found = [a for a in fig.findobj(Text) if a.get_gid() == STAMP_GID]
    return found[0].get_text() if found else None


def swept_range(fit: xr.DataTree | None) -> SweptRange | None:
    """The fit's swept range, ``None`` without a fit or for a fit written before it was stored."""
    return None if fit is None else SweptRange.from_fit(fit)


def axis_range(swept: SweptRange | None, setting: str, axis: str) -> tuple[float, float] | None:
    """``(lo, hi)`` of ``axis`` in ``setting``'s rows, ``None`` if the range does not hold it."""
    if swept is None or setting not in swept.settings or axis not in swept.axes:
        return None
    g, j = swept.settings.index(setting), swept.axes.index(axis)
    lo, hi = float(swept.lo[g, j]), float(swept.hi[g, j])
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return None
    return lo, hi


def shade_x(ax: Axes, spans: Sequence[tuple[float, float]]) -> None:
    """Shade each ``(x0, x1)`` of ``spans`` over the full height of ``ax`` (gid extrapolated)."""
    for x0, x1 in spans:
        if x1 > x0:
            ax.axvspan(
                x0,
                x1,
                facecolor=SHADE_COLOR,
                edgecolor=SHADE_COLOR,
                alpha=SHADE_ALPHA,
                hatch=SHADE_HATCH,
                lw=0.0,
                zorder=0.5,
                gid=EXTRAPOLATED_GID,
            )


def outside_spans(left: float, right: float, lo: float, hi: float) -> list[tuple[float, float]]:
    """The parts of ``[left, right]`` below ``lo`` and above ``hi``.

    >>> outside_spans(4.0, 400.0, 8.0, 256.0)
    [(4.0, 8.0), (256.0, 400.0)]
    """
    out = []
    if left < lo:
        out.append((left, min(lo, right)))
    if right > hi:
        out.append((max(hi, left), right))
    return out


def beyond_spans(x: Array, y: Array, lo: float, hi: float) -> list[tuple[float, float]]:
    """The ranges of ``x`` (increasing, > 0) where the curve ``y(x)`` (> 0) lies outside
    ``[lo, hi]``, each edge where the curve crosses ``lo`` or ``hi``, interpolated linearly in
    ``log x`` and ``log y``. NaN points count as inside."""
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ly = np.log(np.asarray(y, dtype=float))
    out = ~np.isnan(ly) & ((ly > np.log(hi)) | (ly < np.log(lo)))
    spans: list[tuple[float, float]] = []
    start: float | None = float(x[0]) if out[0] else None
    for k in range(1, x.size):
        if out[k] == out[k - 1]:
            continue
        edge = float(x[k] if np.isnan(ly[k - 1]) or np.isnan(ly[k]) else np.nan)
        if np.isnan(edge):
            a, b = ly[k - 1], ly[k]
            bound = np.log(hi) if max(a, b) > np.log(hi) else np.log(lo)
            t = (bound - a) / (b - a)
            edge = float(x[k - 1] * (x[k] / x[k - 1]) ** t)  # exactly x[k - 1] at t = 0
        if out[k]:
            start = edge
        else:
            assert start is not None
            spans.append((start, edge))
            start = None
    if start is not None:
        spans.append((start, float(x[-1])))
    return spans


def extrapolated_handle() -> Patch:
    """The legend patch of the shading."""
    return Patch(
        facecolor=SHADE_COLOR, edgecolor=SHADE_COLOR, alpha=SHADE_ALPHA, hatch=SHADE_HATCH, lw=0.0
    )
