"""Collapse curves of a pricing fit: the discount, the data multiplier or the normalised
success of each synthetic-data method against the synthetic ratio ``r``, with the r* posterior.

Per posterior draw (equations of :mod:`bayesscale.core.collapse`):

.. math::

    \\kappa(r) = \\kappa_0 - (1 - \\kappa_0)\\, r / c, \\qquad
    G^+(r) = h(1 + r\\,\\kappa(r)) / h(1), \\qquad
    S(r) = p(D_b\\, G^+(r)) / p(D_b)

(``S`` in the fit's frame, at the method's pure-real baseline ``D_b``). Each panel is one
method: the posterior median curve with nested bands, and r*, where ``S`` falls to the
threshold (0.95), as its median (dashed line) and equal-tailed interval (grey span; an
interval because r* may be infinite, "no collapse", in some draws). With ``quantity="success"``
and the pricing table, the observed normalised success of the baseline's runs is drawn too.

Example
-------
>>> fig = plot_collapse(pricing_fit, quantity="kappa")  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from bayesscale import names
from bayesscale.core import collapse
from bayesscale.core.intervals import quantiles
from bayesscale.pricing.spec import DERIVED, pricing_fit_spec
from bayesscale.report.figures.marks import stamp, verdict
from bayesscale.report.figures.provenance import attach_provenance, provenance, source_of
from bayesscale.report.figures.style import (
    DATA_COLOR,
    DEFAULT_KIND,
    DEFAULT_PROBS,
    PALETTE,
    Array,
    FigureError,
    band_handles,
    check_kind,
    check_probs,
    draw_bands,
    grid_shape,
    interval_label,
    new_figure,
    paper_style,
    remove_unused,
)

KAPPA: Final = "kappa"
MULTIPLIER: Final = "multiplier"
SUCCESS: Final = "success"
QUANTITIES: Final = (KAPPA, MULTIPLIER, SUCCESS)
MEDIAN_GID: Final = "median"
R_STAR_GID: Final = "r_star"
OBSERVED_GID: Final = "observed"
GRID_POINTS: Final = 121
R_STAR_COLOR: Final = "#E69F00"
Y_LABELS: Final = {
    KAPPA: "discount $\\kappa(r)$",
    MULTIPLIER: "data multiplier $G^+(r) = D_{\\mathrm{eff}}/D_r$",
    SUCCESS: "normalised success $S(r)$",
}
NEEDED: Final = (
    names.KAPPA0,
    names.COLLAPSE_SCALE,
    names.PRICING_LEVEL,
    names.PRICING_SLOPE,
    names.PRICING_ALPHA,
    names.R_STAR,
)


def _flat(da: xr.DataArray) -> Array:
    arr = da.transpose(names.CHAIN_DIM, names.DRAW_DIM, ...).to_numpy().astype(float)
    return arr.reshape(-1, *arr.shape[2:])


def _num(x: float) -> str:
    """Three significant digits, trailing zeros kept (``3.00``); ``∞`` for infinity."""
    return "∞" if not np.isfinite(x) else f"{x:#.3g}".rstrip(".")


def collapse_curve_draws(
    fit: xr.DataTree, method: str, ratio: Array, quantity: str = KAPPA
) -> Array:
    """Per draw (chain x draw flattened) the curve of ``method`` at ``ratio``: (draws, ratios)."""
    if quantity not in QUANTITIES:
        raise FigureError(f"unknown quantity {quantity!r}; use one of {QUANTITIES}")
    post = fit["posterior"].to_dataset()
    const = fit["constant_data"].to_dataset()
    sel = {names.METHOD_DIM: method}
    k0 = _flat(post[names.KAPPA0].sel(sel))[:, None]
    c = _flat(post[names.COLLAPSE_SCALE].sel(sel))[:, None]
    r = np.asarray(ratio, dtype=float)[None, :]
    if quantity == KAPPA:
        return np.asarray(collapse.kappa_linear(r, k0, c), dtype=float)
    softness, floor = _softness_floor(fit)
    if quantity == MULTIPLIER:
        return np.asarray(collapse.soft_multiplier(r, k0, c, softness, floor), dtype=float)
    axis = {names.PRICED_AXIS_DIM: str(const[names.METHOD_AXIS].sel(sel).item())}
    x = float(const[names.BASELINE_REAL].sel(sel)) / float(const[names.PRICING_REFERENCE].sel(axis))
    return np.asarray(
        collapse.normalised_success(
            r,
            k0,
            c,
            _flat(post[names.PRICING_LEVEL].sel(sel))[:, None],
            _flat(post[names.PRICING_SLOPE].sel(axis))[:, None],
            _flat(post[names.PRICING_ALPHA].sel(axis))[:, None],
            x,
            frame=str(fit.attrs.get(names.ATTR_FRAME, collapse.FIXED_REAL)),
            softness=softness,
            floor=floor,
        ),
        dtype=np.float64,
    )


def _softness_floor(fit: xr.DataTree) -> tuple[float, float]:
    if not fit.attrs.get(names.ATTR_SPEC):
        return collapse.DEFAULT_SOFTNESS, collapse.DEFAULT_FLOOR
    spec = pricing_fit_spec(fit)
    return spec.softness, spec.floor


def observed_normalised_success(
    table: pd.DataFrame, method: str, baseline_real: float
) -> pd.DataFrame:
    """The runs of ``method`` at its baseline real count: per ratio, the mean over seeds of
    ``rate / mean rate at r = 0`` and its lowest and highest seed (columns mean, low, high)."""
    rows = table[(table[names.METHOD] == method) & (table[names.REAL] == baseline_real)]
    if rows.empty:
        return pd.DataFrame(columns=["mean", "low", "high"], dtype=float)
    rate = rows[names.SUCCESSES] / rows[names.TRIALS]
    ratio = (rows[names.SYNTHETIC] / rows[names.REAL]).round(9)
    base = rate[ratio == 0]
    if base.empty or float(base.mean()) <= 0:
        raise FigureError(
            f"method {method!r}: no pure-real run with success > 0 at real = {baseline_real:g}"
        )
    norm = pd.Series((rate / float(base.mean())).to_numpy(), index=ratio.to_numpy())
    g = norm.groupby(level=0)
    return pd.DataFrame({"mean": g.mean(), "low": g.min(), "high": g.max()})


def _draw_r_star(ax: Axes, lo: float, med: float, hi: float, r_max: float) -> str:
    """r*'s interval shaded and its median marked (none where the median is infinite: no
    collapse); the panel title's r* text."""
    if np.isfinite(med):
        ax.axvspan(lo, min(hi, r_max), color=R_STAR_COLOR, alpha=0.3, lw=0)
        ax.axvline(med, color="0.2", lw=0.9, ls="--", gid=R_STAR_GID)
        r_text = f"r* {_num(med)} [{_num(lo)}, {_num(hi)}]"
    else:
        r_text = "r*: no collapse (median ∞)"
    return r_text


def _draw_observed(ax: Axes, frame: pd.DataFrame, const: xr.Dataset, method: str) -> None:
    """The observed normalised success of ``method`` (mean over seeds, seed range)."""
    base = float(const[names.BASELINE_REAL].sel({names.METHOD_DIM: method}))
    obs = observed_normalised_success(frame, method, base)
    if not obs.empty:
        err = np.vstack([obs["mean"] - obs["low"], obs["high"] - obs["mean"]])
        bars = ax.errorbar(
            obs.index.to_numpy(float),
            obs["mean"].to_numpy(float),
            yerr=err,
            fmt="o",
            ms=2.5,
            color=DATA_COLOR,
            elinewidth=0.7,
            zorder=3,
        )
        bars.lines[0].set_gid(OBSERVED_GID)


def _legend(
    fig: Figure,
    probs: Sequence[float],
    kind: str,
    threshold: float,
    r_star_prob: float,
    observed: bool,
) -> None:
    """The median, the bands, r*'s median and interval and the observed points, above the
    panels."""
    handles = [
        Line2D([], [], color="0.2"),
        *band_handles("0.2", len(probs)),
        Line2D([], [], color="0.2", ls="--"),
        Patch(facecolor=R_STAR_COLOR, alpha=0.3, lw=0),
    ]
    texts = [
        "posterior median",
        *[interval_label(p, kind) for p in probs],
        f"r* median (S = {threshold:g})",
        f"r* {round(100 * r_star_prob)}% equal-tailed",
    ]
    if observed:
        handles.append(Line2D([], [], color=DATA_COLOR, marker="o", ls="", ms=3))
        texts.append("observed (mean over seeds, seed range)")
    fig.legend(
        handles,
        texts,
        loc="outside upper center",
        ncols=len(handles) if fig.get_figwidth() >= 7 else 3,
        frameon=False,
    )


def plot_collapse(
    fit: xr.DataTree,
    *,
    quantity: str = KAPPA,
    methods: Sequence[str] | None = None,
    table: object | None = None,
    probs: Sequence[float] = DEFAULT_PROBS,
    kind: str = DEFAULT_KIND,
    r_star_prob: float = 0.9,
    r_max: float | None = None,
    ncols: int | None = None,
) -> Figure:
    """One panel per method: ``quantity`` (``"kappa"``, ``"multiplier"`` or ``"success"``)
    against the synthetic ratio, median and bands, with r* (median and ``r_star_prob``
    equal-tailed interval). ``table`` (a ``pricing.PricingTable``) adds the observed normalised
    success to ``quantity="success"``. The x range runs to ``r_max`` (default: past the
    largest observed ratio and the r* intervals)."""
    check_kind(fit, names.KIND_PRICING_FIT, "plot_collapse")
    if quantity not in QUANTITIES:
        raise FigureError(f"unknown quantity {quantity!r}; use one of {QUANTITIES}")
    probs = check_probs(probs)
    if not 0 < r_star_prob < 1:
        raise FigureError(f"r_star_prob must be in (0, 1), got {r_star_prob}")
    post = fit["posterior"].to_dataset()
    missing = [v for v in NEEDED if v not in post]
    if "constant_data" not in fit.children:
        missing.append("constant_data")
    if missing:
        raise FigureError(f"the pricing fit lacks {missing}")
    const = fit["constant_data"].to_dataset()
    all_methods = [str(m) for m in post[names.METHOD_DIM].to_numpy()]
    chosen = list(methods) if methods is not None else all_methods
    unknown = [m for m in chosen if m not in all_methods]
    if unknown:
        raise FigureError(f"method(s) {unknown} not in the pricing fit: {all_methods}")
    if table is not None and quantity != SUCCESS:
        raise FigureError("observed points (table=) are normalised success: use quantity='success'")
    frame = None
    if table is not None:
        frame = getattr(table, "frame", None)
        if not isinstance(frame, pd.DataFrame):
            raise FigureError("table= must be a pricing.PricingTable (load_pricing)")
    ratios = (const[names.SYNTHETIC] / const[names.REAL]).to_numpy()
    axis_of = dict(zip(all_methods, const[names.METHOD_AXIS].to_numpy().astype(str), strict=True))
    threshold = float(fit.attrs.get(names.ATTR_THRESHOLD, collapse.DEFAULT_THRESHOLD))
    tail = (1 - r_star_prob) / 2
    r_star = {
        m: quantiles(_flat(post[names.R_STAR].sel({names.METHOD_DIM: m})), [tail, 0.5, 1 - tail])
        for m in chosen
    }
    if r_max is None:
        finite = [v for m in chosen for v in r_star[m] if np.isfinite(v)]
        r_max = 1.08 * max([float(ratios.max()), *finite])

    with paper_style():
        nrows, ncol = grid_shape(len(chosen), ncols)
        fig, grid = new_figure(nrows, ncol, panel=(2.0, 1.6), sharex=True)
        used = remove_unused(grid, len(chosen))
        r = np.linspace(0.0, r_max, GRID_POINTS)
        axis_names = list(dict.fromkeys(axis_of[m] for m in all_methods))
        for ax, method in zip(used, chosen, strict=True):
            color = PALETTE[axis_names.index(axis_of[method]) % len(PALETTE)]
            curve = collapse_curve_draws(fit, method, r, quantity)
            draw_bands(ax, r, curve, probs, kind, color)
            ax.lines[-1].set_gid(MEDIAN_GID)
            reference = {KAPPA: 0.0, MULTIPLIER: 1.0, SUCCESS: threshold}[quantity]
            ax.axhline(reference, color="0.5", lw=0.6, ls=":")
            lo, med, hi = (float(v) for v in r_star[method])
            r_text = _draw_r_star(ax, lo, med, hi, r_max)
            if frame is not None:
                _draw_observed(ax, frame, const, method)
            ax.set_title(f"{method} ({axis_of[method]})\n{r_text}", fontsize=7, pad=3)
            ax.set_xlim(0, r_max)
        fig.supxlabel("synthetic ratio $r$ = synthetic / real")
        fig.supylabel(Y_LABELS[quantity])
        _legend(fig, probs, kind, threshold, r_star_prob, frame is not None)
        stamp(fig, verdict(fit, leave_out=DERIVED))
    prov = provenance(fit)
    if table is not None and source_of(table).data_sha256 != prov.sources[0].data_sha256:
        prov = prov.merged(provenance(table))
    return attach_provenance(fig, prov)
