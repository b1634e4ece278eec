"""The fitted law along one axis, setting by setting: observed points and posterior bands.

For setting ``s`` and the plotted axis ``a``, the curve varies ``D_a`` and holds every other
axis at the setting's *anchor*, the values at which axis ``a`` was swept in the data (the
combination of the other axes' sizes under which ``D_a`` takes the most distinct values).
For every posterior draw ``d`` (raw counts; a stack's draws are its forms' mixture,
:func:`bayesscale.law.mixed_draws.draws_with`, each draw's terms of its own form)

.. math::

    L_d(D) = L_{\\infty,d} + E_d (N_s/N_\\mathrm{ref})^{-\\alpha_{N,d}}
             + \\sum_i K_{d,i} D_i^{-\\alpha_{d,i}} - \\gamma_d (D_a D_b)^{-\\beta_d},
    \\qquad p_d = e^{-L_d},

(each term ``K D^{-alpha}`` replaced by its own form's where the fit has other forms,
:class:`bayesscale.core.form_law.FormLaw`), and the panel shows the median over draws of
``p_d`` (or ``L_d`` for a loss outcome) with nested credible bands (equal-tailed by default). The sizes outside the setting's swept range
of the axis (stored in the fit, :class:`bayesscale.data.extrapolation.SweptRange`) are shaded: the
curve there is an extrapolation. Tick labels are the swept sizes (all of them up to
``MAX_TICKS``, always the smallest and largest). A fit whose diagnostics failed, or a
preview fit, is stamped in red (:mod:`bayesscale.report.figures.marks`). Observed points are the mean over seeds at each swept size, with a bar
from the lowest to the highest seed. Dense-reward runs (a spec with ``[dense_reward]``) are a
second series whose curve multiplies the dense axis by the fitted ``dense_multiplier``.

Example
-------
>>> fig = plot_law(fit, table, "env")  # doctest: +SKIP
>>> save_figure(fig, "law_env.png")  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from bayesscale import names
from bayesscale.core import laws
from bayesscale.core.form_law import Law
from bayesscale.data.fitfile import fit_spec
from bayesscale.data.observations import Table, axis_sizes, setting_labels
from bayesscale.data.spec import ModelSpec
from bayesscale.law.drift import curve_with_drift
from bayesscale.law.mixed_draws import draws_with
from bayesscale.law.posterior import LawDraws
from bayesscale.report.figures.marks import (
    EXTRAPOLATED_TEXT,
    LINE_HEIGHT,
    axis_range,
    extrapolated_handle,
    outside_spans,
    shade_x,
    stamp,
    swept_range,
    verdict,
)
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
    compact_number,
    draw_bands,
    grid_shape,
    interval_label,
    new_figure,
    paper_style,
    remove_unused,
    setting_title,
)

MEDIAN_GID: Final = "median"  # gid of each panel's median line (one per series)
OBSERVED_GID: Final = "observed"  # gid of each panel's observed points
GRID_POINTS: Final = 60
EXTEND: Final = 1.5  # the curve runs from min / EXTEND to max * EXTEND of the swept sizes
SPARSE: Final = "sparse"
MAX_TICKS: Final = 7  # at most this many labelled sizes per panel (always the smallest and largest)


@dataclass(frozen=True)
class Sweep:
    """The rows of one setting along which one axis was swept, and the other axes' values."""

    setting: str
    axis: str
    anchor: dict[str, float]  # the other axes' sizes, held fixed along the sweep
    rows: pd.Index  # the table's rows on the sweep


def find_sweep(
    frame: pd.DataFrame,
    spec: ModelSpec,
    setting: str,
    axis: str,
    labels: pd.Series | None = None,
) -> Sweep:
    """The sweep of ``axis`` in ``setting``'s rows: the combination of the other axes' sizes
    under which ``axis`` takes the most distinct values (ties: more rows, then larger sizes).

    >>> find_sweep(frame, spec, "Qwen3-4B | grpo | math+code", "env").anchor  # doctest: +SKIP
    {'task': 10240.0, 'traj': 8.0}

    ``labels`` are the rows' setting labels (``observations.setting_labels``) if already known.
    """
    labels = setting_labels(frame, spec) if labels is None else labels
    mine = frame.index[labels.to_numpy() == setting]
    if len(mine) == 0:
        raise FigureError(f"the table has no rows of setting {setting!r}")
    sizes = pd.DataFrame(
        axis_sizes(frame.loc[mine], spec), index=mine, columns=list(spec.axis_names)
    )
    others = [a for a in spec.axis_names if a != axis]
    if not others:
        return Sweep(setting, axis, {}, mine)
    best: tuple[int, int, tuple[float, ...]] | None = None
    chosen = mine
    for key, group in sizes.groupby(others, sort=True):
        values = tuple(float(k) for k in (key if isinstance(key, tuple) else (key,)))
        rank = (int(group[axis].nunique()), len(group), values)
        if best is None or rank > best:
            best, chosen = rank, group.index
    assert best is not None
    return Sweep(setting, axis, dict(zip(others, best[2], strict=True)), chosen)


def _observed(frame: pd.DataFrame, rows: pd.Index, x: Array, spec: ModelSpec) -> pd.DataFrame:
    """Mean, min and max over the sweep's rows at each size ``x`` (the outcome per row)."""
    if spec.outcome == "success":
        value = frame.loc[rows, names.SUCCESSES] / frame.loc[rows, names.TRIALS]
    else:
        value = frame.loc[rows, names.LOSS].astype(float)
    grouped = pd.Series(value.to_numpy(float), index=x).groupby(level=0)
    return pd.DataFrame({"mean": grouped.mean(), "low": grouped.min(), "high": grouped.max()})


def _law(draws: LawDraws, g: int) -> Law:
    """Setting ``g``'s laws, one per draw, shaped to broadcast over a grid: (S, 1, n)."""
    return draws.law(setting=g, extra=1)


def law_curve_draws(
    draws: LawDraws,
    setting: str,
    axis: str,
    grid: Array,
    anchor: dict[str, float],
    scale: Array | None = None,
) -> Array:
    """``L_d`` per draw along ``grid`` on ``axis``, other axes at ``anchor``: shape
    (draws, grid). ``scale`` (draws, axes) multiplies the sizes (the dense multiplier)."""
    g = draws.settings.index(setting)
    j = draws.axes.index(axis)
    sizes = np.empty((grid.size, len(draws.axes)))
    for i, a in enumerate(draws.axes):
        sizes[:, i] = grid if i == j else anchor[a]
    full = sizes[None, :, :] if scale is None else sizes[None, :, :] * scale[:, None, :]
    return np.asarray(_law(draws, g).loss(full), dtype=float)


def _dense_scale(multiplier: Array, draws: LawDraws, spec: ModelSpec) -> Array:
    """Per draw and axis: the dense ``multiplier`` (per draw) on the dense axis, 1 elsewhere."""
    if spec.dense_reward is None:
        raise FigureError("the spec has no [dense_reward]")
    scale = np.ones((draws.samples, len(draws.axes)))
    scale[:, draws.axes.index(spec.dense_reward.axis)] = multiplier
    return scale


def _series(
    frame: pd.DataFrame, rows: pd.Index, x_rows: Array, dense: bool, dense_scale: Array | None
) -> list[tuple[str, pd.Index, Array, Array | None]]:
    """A sweep's rows as the series a panel draws: one per reward level with dense reward in
    the table (the dense one scaled by its multiplier), else one."""
    series: list[tuple[str, pd.Index, Array, Array | None]] = []
    if dense:
        reward = frame.loc[rows, names.REWARD]
        for level in names.REWARD_LEVELS:
            mask = (reward == level).to_numpy()
            if mask.any():
                scale = dense_scale if level == names.DENSE else None
                series.append((level, rows[mask], x_rows[mask], scale))
    else:
        series.append((SPARSE, rows, x_rows, None))
    return series


def _draw_series(
    ax: Axes,
    fit: xr.DataTree,
    draws: LawDraws,
    sweep: Sweep,
    axis: str,
    grid: Array,
    series: list[tuple[str, pd.Index, Array, Array | None]],
    frame: pd.DataFrame,
    spec: ModelSpec,
    probs: Sequence[float],
    kind: str,
    colors: tuple[str, str],
) -> None:
    """Each series' law along ``grid`` (median and bands, past the sweep with the fit's drift:
    :mod:`bayesscale.law.drift`) and its observed points."""
    color, dense_color = colors
    y_is_success = spec.outcome == "success"
    for k, (level, rows, x, scale) in enumerate(series):
        c = color if k == 0 else dense_color
        loss = law_curve_draws(draws, sweep.setting, axis, grid, sweep.anchor, scale)
        loss = curve_with_drift(fit, loss, sweep.setting, axis, grid)
        y = laws.success_from_loss(loss) if y_is_success else loss
        draw_bands(ax, grid, y, probs, kind, c)
        ax.lines[-1].set_gid(MEDIAN_GID)
        obs = _observed(frame, rows, x, spec)
        err = np.vstack([obs["mean"] - obs["low"], obs["high"] - obs["mean"]])
        marker = "o" if level != names.DENSE else "s"
        bars = ax.errorbar(
            obs.index.to_numpy(float),
            obs["mean"].to_numpy(),
            yerr=err,
            fmt=marker,
            ms=2.8,
            color=DATA_COLOR if k == 0 else c,
            ecolor=DATA_COLOR if k == 0 else c,
            elinewidth=0.8,
            capsize=0,
            zorder=3,
        )
        bars.lines[0].set_gid(OBSERVED_GID)


def _format_panel(
    ax: Axes, x_rows: Array, sweep: Sweep, sweeps: Sequence[Sweep], y_is_success: bool
) -> None:
    """Log scales, ticks at the swept sizes, the setting's title and, where the panels'
    anchors differ, this one's."""
    ax.set_xscale("log")
    if not y_is_success:
        ax.set_yscale("log")
    ax.xaxis.set_major_locator(FixedLocator(grid_ticks(x_rows).tolist()))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: compact_number(v)))
    ax.set_title(setting_title(sweep.setting), fontsize=7, pad=3)
    anchors = {tuple(sorted(s.anchor.items())) for s in sweeps}
    if len(anchors) > 1:
        ax.text(
            0.97,
            0.04 if y_is_success else 0.96,
            _anchor_text(sweep.anchor),
            transform=ax.transAxes,
            ha="right",
            va="bottom" if y_is_success else "top",
            fontsize=5.5,
            color="0.35",
        )


def plot_law(
    fit: xr.DataTree,
    table: Table,
    axis: str,
    *,
    settings: Sequence[str] | None = None,
    probs: Sequence[float] = DEFAULT_PROBS,
    kind: str = DEFAULT_KIND,
    ncols: int | None = None,
    max_draws: int | None = 250,
    sharey: bool = False,
) -> Figure:
    """One panel per setting: the law along ``axis`` (log x) with observed points.

    ``table`` is the validated observation table (``observations.load_observations``) whose
    points are drawn, usually the one the fit was made on. ``max_draws`` thins each chain
    (``None``: every draw). Returns a figure with its provenance attached (the fit, and the
    table if it is not the fit's data).
    """
    check_kind(fit, names.KIND_LAW_FIT, "plot_law")
    probs = check_probs(probs)
    spec = fit_spec(fit)
    if axis not in spec.axis_names:
        raise FigureError(f"axis {axis!r} is not an axis of the fit: {list(spec.axis_names)}")
    if not isinstance(table, Table):
        raise FigureError(
            f"plot_law needs a validated observations.Table, got {type(table).__name__}"
        )
    frame = table.frame
    dense = spec.dense_reward is not None and names.REWARD in frame.columns
    if dense and names.DENSE_MULTIPLIER not in fit["posterior"]:
        raise FigureError(f"the fit's posterior has no {names.DENSE_MULTIPLIER!r}")
    draws, values = draws_with(fit, [names.DENSE_MULTIPLIER] if dense else [], settings, max_draws)
    labels = setting_labels(frame, spec)
    swept = swept_range(fit)
    shaded = False
    unknown = sorted(set(labels) - set(fit["posterior"][names.SETTING_DIM].to_numpy().astype(str)))
    if unknown:
        raise FigureError(
            f"{table.source}: rows of setting(s) {unknown} that the fit does not have"
        )
    chosen = list(draws.settings)
    dense_scale = _dense_scale(values[names.DENSE_MULTIPLIER], draws, spec) if dense else None
    sweeps = [find_sweep(frame, spec, s, axis, labels) for s in chosen]
    j = spec.axis_names.index(axis)
    all_x = axis_sizes(frame, spec)[:, j]
    positions = {idx: k for k, idx in enumerate(frame.index)}
    y_is_success = spec.outcome == "success"
    color = PALETTE[j % len(PALETTE)]
    dense_color = PALETTE[(j + 3) % len(PALETTE)]
    label = spec.axes[j].label

    with paper_style():
        nrows, ncol = grid_shape(len(chosen), ncols)
        fig, axes = new_figure(nrows, ncol, panel=(1.9, 1.55), sharey=sharey)
        used = remove_unused(axes, len(chosen))
        for ax, sweep in zip(used, sweeps, strict=True):
            x_rows = all_x[[positions[i] for i in sweep.rows]]
            series = _series(frame, sweep.rows, x_rows, dense, dense_scale)
            lo, hi = float(np.min(x_rows)), float(np.max(x_rows))
            grid = np.geomspace(lo / EXTEND, hi * EXTEND, GRID_POINTS)
            ax.set_xlim(float(grid[0]), float(grid[-1]))
            fitted = axis_range(swept, sweep.setting, axis)
            if fitted is not None:
                spans = outside_spans(float(grid[0]), float(grid[-1]), *fitted)
                shade_x(ax, spans)
                shaded = shaded or bool(spans)
            _draw_series(
                ax, fit, draws, sweep, axis, grid, series, frame, spec, probs, kind,
                (color, dense_color),
            )  # fmt: skip
            _format_panel(ax, x_rows, sweep, sweeps, y_is_success)
        anchor_note = ""
        if len({tuple(sorted(s.anchor.items())) for s in sweeps}) == 1 and sweeps[0].anchor:
            anchor_note = f" ({_anchor_text(sweeps[0].anchor)})"
        what = "success rate" if y_is_success else "loss"
        named = label if label == axis else f"{label} ({axis})"
        fig.supxlabel(f"{named}, log scale{anchor_note}")
        fig.supylabel(what)
        _legend(fig, color, probs, kind, dense_color if dense else None, shaded)
        stamp(fig, verdict(fit))
    prov = provenance(fit)
    if source_of(table).data_sha256 != prov.sources[0].data_sha256:
        prov = prov.merged(provenance(table))
    return attach_provenance(fig, prov)


def grid_ticks(values: Array, most: int = MAX_TICKS) -> Array:
    """The sizes to label: every distinct swept value if there are at most ``most``, else
    ``most`` of them evenly spaced in rank, always the smallest and the largest.

    >>> grid_ticks(np.array([8.0, 16, 32, 64, 128, 256, 8])).tolist()
    [8.0, 16.0, 32.0, 64.0, 128.0, 256.0]
    >>> grid_ticks(2.0 ** np.arange(10), most=4).tolist()
    [1.0, 8.0, 64.0, 512.0]
    """
    unique = np.unique(np.asarray(values, dtype=float))
    if unique.size <= most:
        return unique
    return unique[np.unique(np.round(np.linspace(0, unique.size - 1, most)).astype(int))]


def _anchor_text(anchor: dict[str, float]) -> str:
    return ", ".join(f"{a} = {compact_number(v)}" for a, v in anchor.items())


def _legend(
    fig: Figure,
    color: str,
    probs: Sequence[float],
    kind: str,
    dense_color: str | None,
    shaded: bool = False,
) -> None:
    handles = [
        Line2D([], [], color=DATA_COLOR, marker="o", ls="", ms=3),
        Line2D([], [], color=color),
        *band_handles(color, len(probs)),
    ]
    texts = [
        "observed: mean over seeds (bar: seed range)",
        "law (expected rate, no seed noise): posterior median",
        *[interval_label(p, kind) for p in probs],
    ]
    if dense_color is not None:
        handles.append(Line2D([], [], color=dense_color, marker="s", ls="-", ms=3))
        texts.append("dense reward")
    if shaded:
        handles.append(extrapolated_handle())
        texts.append(EXTRAPOLATED_TEXT)
    wide = fig.get_figwidth() >= 7.0
    ncols = len(handles) if wide else (2 if fig.get_figwidth() >= 5.0 else 1)
    rows = -(-len(handles) // ncols)
    if rows > 2:  # a one-row figure has room for two rows of legend: grow it for the others
        fig.set_figheight(fig.get_figheight() + LINE_HEIGHT * (rows - 2))
    fig.legend(handles, texts, loc="outside upper center", ncols=ncols, frameon=False)
