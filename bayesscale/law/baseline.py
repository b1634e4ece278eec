"""The paper's frequentist procedure, for side-by-side comparison with the Bayesian fit.

Per setting and axis (one *panel*: the axis swept, the others at their anchors), on the
seed-mean loss ``L_k = -log(mean success)`` at grid points ``D_k``:

.. math::

    L_k = c + K D_k^{-\\alpha}

fitted by weighted nonlinear least squares with the offset ``c`` (the floor plus the
other axes' terms at the anchors) profiled on a grid and, for each ``c``, the inner
log-linear problem ``log(L_k - c) = log K - alpha log D_k`` solved in closed form.
Intervals come from a bootstrap over seeds within grid points; exponent differences
from a *paired* bootstrap (the same replicate for both axes). ``local_slopes`` gives
the fit-free check: ``-Δ log L / Δ log D`` between neighbouring grid points.

Example
-------
>>> result = bootstrap_fit(frame, spec, n_boot=200, seed=0)  # doctest: +SKIP
>>> result.exponents.head()  # doctest: +SKIP
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayesscale import names
from bayesscale.core import laws
from bayesscale.core.intervals import quantiles
from bayesscale.data.observations import axis_sizes, setting_labels
from bayesscale.data.spec import ModelSpec

OFFSET_GRID = 200
MIN_POINTS = 3


@dataclass(frozen=True)
class Panel:
    """One setting's sweep of one axis: grid values and per-seed success rates."""

    setting: str
    axis: str
    sizes: np.ndarray  # (points,)
    rates: list[np.ndarray]  # per point, one success rate per seed, in seed order
    trials: np.ndarray  # (points,) mean trials per run


def panels(frame: pd.DataFrame, spec: ModelSpec) -> list[Panel]:
    """Split a per-axis-sweep table into panels. A row belongs to axis ``a``'s sweep when
    every other axis sits at its anchor (the setting's most common value)."""
    labels = setting_labels(frame, spec)
    sizes = axis_sizes(frame, spec)
    rates = (frame[names.SUCCESSES] / frame[names.TRIALS]).to_numpy(float)
    trials = frame[names.TRIALS].to_numpy(float)
    seeds = frame[names.SEED].to_numpy()
    out = []
    for setting in dict.fromkeys(labels):
        rows = np.flatnonzero((labels == setting).to_numpy())
        anchors = [pd.Series(sizes[rows, j]).mode().max() for j in range(len(spec.axes))]
        for j, axis in enumerate(spec.axes):
            others = [k for k in range(len(spec.axes)) if k != j]
            at_anchor = np.all(sizes[np.ix_(rows, others)] == np.array(anchors)[others], axis=1)
            sweep = rows[at_anchor]
            grid = np.unique(sizes[sweep, j])
            if len(grid) < MIN_POINTS:
                continue
            at_point = [sweep[sizes[sweep, j] == g] for g in grid]
            at_point = [idx[np.argsort(seeds[idx], kind="stable")] for idx in at_point]  # by seed
            point_rates = [rates[idx] for idx in at_point]
            point_trials = np.array([trials[idx].mean() for idx in at_point])
            out.append(Panel(setting, axis.name, grid, point_rates, point_trials))
    return out


def _point_stats(rates: list[np.ndarray], trials: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Seed-mean loss per point and its variance (delta method; binomial floor)."""
    mean = np.array([r.mean() for r in rates]).clip(1e-4, 1 - 1e-4)
    seed_var = np.array([r.var(ddof=1) / len(r) if len(r) > 1 else np.nan for r in rates])
    binom_var = mean * (1 - mean) / (trials * np.array([len(r) for r in rates]))
    var_p = np.fmax(np.nan_to_num(seed_var, nan=0.0), binom_var)
    return laws.loss_from_success(mean), var_p / mean**2


def fit_panel(
    sizes: np.ndarray, loss: np.ndarray, loss_var: np.ndarray
) -> tuple[float, float, float]:
    """Weighted least squares for ``L = c + K D^-alpha`` with ``c`` profiled on a grid.

    Returns ``(alpha, K, c)``; ``K`` is the amplitude at ``D = 1``.

    >>> d = np.array([1.0, 2, 4, 8, 16, 32])
    >>> a, k, c = fit_panel(d, 0.3 + 0.5 * d**-0.4, np.full(6, 1e-6))
    >>> round(a, 2), round(c, 2)
    (0.4, 0.3)
    """
    x = np.log(sizes)
    w = 1.0 / loss_var
    offsets = np.linspace(0.0, loss.min() * (1 - 1e-6), OFFSET_GRID)  # (g,)
    resid = loss[None, :] - offsets[:, None]  # (g, k)
    y = np.log(resid)
    wl = w[None, :] * resid**2  # weights of log residuals (delta method)
    sw = wl.sum(1)
    xm = (wl * x).sum(1) / sw
    ym = (wl * y).sum(1) / sw
    slope = (wl * (x - xm[:, None]) * (y - ym[:, None])).sum(1) / (wl * (x - xm[:, None]) ** 2).sum(
        1
    )
    intercept = ym - slope * xm
    pred = offsets[:, None] + np.exp(intercept[:, None] + slope[:, None] * x[None, :])
    sse = (w[None, :] * (loss[None, :] - pred) ** 2).sum(1)
    best = int(np.argmin(sse))
    return float(-slope[best]), float(np.exp(intercept[best])), float(offsets[best])


@dataclass(frozen=True)
class BaselineResult:
    """Point estimates and bootstrap intervals per panel, and paired differences."""

    exponents: pd.DataFrame  # setting, axis, alpha, lower, upper, amplitude_at_one, offset
    differences: pd.DataFrame  # pair, setting ('mean over settings' too), diff, lower, upper
    replicates: pd.DataFrame  # setting, axis, replicate, alpha
    prob: float


def bootstrap_fit(
    frame: pd.DataFrame, spec: ModelSpec, n_boot: int = 1000, prob: float = 0.9, seed: int = 0
) -> BaselineResult:
    """Fit every panel; bootstrap by resampling seeds, paired within a setting.

    Replicate ``b`` of a setting draws one resampling of seed positions and applies it to
    every grid point of every axis of that setting, so exponent differences between
    axes are computed on the same resampled seeds (the paper's paired bootstrap).
    """
    rng = np.random.default_rng(seed)
    all_panels = panels(frame, spec)
    if not all_panels:
        raise ValueError(
            "no per-axis sweep panel with >= 3 grid points: the baseline needs each axis swept "
            "with the others held at anchors"
        )
    lo, hi = (1 - prob) / 2, 1 - (1 - prob) / 2
    by_setting: dict[str, list[Panel]] = {}
    for panel in all_panels:
        by_setting.setdefault(panel.setting, []).append(panel)
    rows, reps = [], []
    for setting, setting_panels in by_setting.items():
        n_seeds = max(len(r) for p in setting_panels for r in p.rates)
        draws = rng.integers(0, n_seeds, size=(n_boot, n_seeds))
        for panel in setting_panels:
            loss, var = _point_stats(panel.rates, panel.trials)
            alpha, k, c = fit_panel(panel.sizes, loss, var)
            boot = np.empty(n_boot)
            for b in range(n_boot):
                resampled = [r[draws[b, : len(r)] % len(r)] for r in panel.rates]
                boot[b] = fit_panel(panel.sizes, *_point_stats(resampled, panel.trials))[0]
            lower, upper = quantiles(boot, [lo, hi]).tolist()
            rows.append(
                {
                    "setting": setting,
                    "axis": panel.axis,
                    "alpha": alpha,
                    "lower": lower,
                    "upper": upper,
                    "amplitude_at_one": k,
                    "offset": c,
                }
            )
            reps.append(
                pd.DataFrame(
                    {
                        "setting": setting,
                        "axis": panel.axis,
                        "replicate": np.arange(n_boot),
                        "alpha": boot,
                    }
                )
            )
    exponents = pd.DataFrame(rows)
    replicates = pd.concat(reps, ignore_index=True)
    return BaselineResult(exponents, _differences(replicates, spec, lo, hi), replicates, prob)


def _differences(replicates: pd.DataFrame, spec: ModelSpec, lo: float, hi: float) -> pd.DataFrame:
    wide = replicates.pivot_table(index=["setting", "replicate"], columns="axis", values="alpha")
    out = []
    order = [a.name for a in spec.axes]
    for first, second in itertools.pairwise(order):
        if first not in wide or second not in wide:
            continue
        diff = (wide[first] - wide[second]).dropna()
        for setting, values in diff.groupby(level="setting"):
            out.append(_interval(f"{first}-{second}", str(setting), values.to_numpy(), lo, hi))
        mean = diff.groupby(level="replicate").mean().to_numpy()
        out.append(_interval(f"{first}-{second}", "mean over settings", mean, lo, hi))
    return pd.DataFrame(out)


def _interval(
    pair: str, setting: str, values: np.ndarray, lo: float, hi: float
) -> dict[str, object]:
    median, lower, upper = quantiles(np.ravel(values), [0.5, lo, hi]).tolist()
    return {"pair": pair, "setting": setting, "diff": median, "lower": lower, "upper": upper}


def local_slopes(frame: pd.DataFrame, spec: ModelSpec) -> pd.DataFrame:
    """Fit-free local log-log slopes ``-Δ log L / Δ log D`` between neighbouring grid points."""
    rows = []
    for panel in panels(frame, spec):
        loss, _ = _point_stats(panel.rates, panel.trials)
        slope = -np.diff(np.log(loss)) / np.diff(np.log(panel.sizes))
        for k, s in enumerate(slope):
            rows.append(
                {
                    "setting": panel.setting,
                    "axis": panel.axis,
                    "from": panel.sizes[k],
                    "to": panel.sizes[k + 1],
                    "slope": float(s),
                }
            )
    return pd.DataFrame(rows)
