"""The drift beyond the sweep of a law fit: calibrated on its out-of-scale refits, applied to
its predictions.

:mod:`bayesscale.core.drift` defines the deviation ``tau_a ln(max(r_a, 1)) epsilon_a`` on the
link scale past the largest swept size of each axis. ``tau_a`` is chosen where the package has
evidence about extrapolation: the out-of-scale check (:mod:`bayesscale.checks.out_of_scale`)
refits the law without the largest scales of each axis and predicts them. On those left-out
rows, with ``r`` their ratio along the axis left out, each row's outcome on the link scale
(:func:`empirical_link`) is taken as Gaussian around the mean ``m`` of the refit's predictive
draws there, with their variance ``v`` (posterior and seed noise) plus the drift's:

.. math::

    \\hat\\tau = \\arg\\max_{0 \\le \\tau \\le \\tau_{\\max}} \\sum_i
        \\log N\\bigl(\\eta_i^{\\mathrm{obs}} \\mid m_i,\\; v_i + \\tau^2 \\ln^2 r_i\\bigr)

(``tau = 0`` where no drift scores better: the law's own predictions already hold; a
Gaussian on the link scale rather than the exact predictive density, whose integral over the
drift is too sharp to take by quadrature where trials are many and seed noise small). Axes
the check could not test take the ``tau`` of all tested rows pooled. The fit stores the
result as the JSON attr ``drift`` of its ``out_of_scale`` group;
:func:`bayesscale.law.predict.predict` applies it to every prediction of the fit unless
told not to (one ``epsilon`` per draw, setting and axis, seeded apart from the prediction's
other draws), so the held-out check, ``fit.predict``, the law figure and the report's figure
of the forms widen past the sweep; the recipe and ``next``'s value of runs read the law
without it. Rows inside the sweep are unchanged.

Example
-------
>>> tau = calibrate([(pred, ratio)])  # a refit's prediction of rows it left out  # doctest: +SKIP
>>> with_drift(fit, predict(fit, rows), seed=0)  # doctest: +SKIP
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Final

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike, NDArray
from scipy import optimize

from bayesscale import names
from bayesscale.core.drift import drift_scale, shifted_loss
from bayesscale.data.extrapolation import SweptRange
from bayesscale.data.fitfile import fit_spec
from bayesscale.data.observations import axis_sizes
from bayesscale.law.predict import Prediction

Array = NDArray[np.float64]

TAU_MAX: Final = 3.0  # the largest drift per e-fold of size calibrated (on the link scale)
REPLICATES: Final = 4  # predictive draws per posterior draw for a row's link moments
DRIFT_STREAM: Final = 7  # the seed stream of the drift's draws, apart from a prediction's others
MOMENTS_STREAM: Final = 8  # the seed stream of the calibration's predictive draws
MIN_VARIANCE: Final = 1e-6  # on the link scale: a row whose predictive draws all agree
TAU: Final = "tau"  # per axis
POOLED: Final = "pooled"  # over all tested rows: the tau of an untested axis
ROWS: Final = "rows"  # the tested rows beyond their refit's range, per axis


def row_ratios(fit: xr.DataTree, pred: Prediction) -> Array | None:
    """Each row's extrapolation ratio per axis of the law ``(R, A)``: its size over its
    setting's largest swept size (the widest range for a new setting); ``None`` for a fit
    without a stored range."""
    swept = SweptRange.from_fit(fit)
    if swept is None:
        return None
    spec = fit_spec(fit)
    rows = swept.for_rows(pred.setting, spec.axis_names)
    return rows.factor(axis_sizes(pred.frame, spec))


def stored_drift(fit: xr.DataTree) -> dict[str, float] | None:
    """The drift's ``tau`` per axis of the law stored with the fit's out-of-scale check (an
    untested axis takes the pooled one); ``None`` where the fit stores none."""
    if names.OUT_OF_SCALE_GROUP not in fit.children:
        return None
    text = fit[names.OUT_OF_SCALE_GROUP].attrs.get(names.ATTR_DRIFT, "")
    if not text:
        return None
    stored = json.loads(str(text))
    axes = fit_spec(fit).axis_names
    return {a: float(stored[TAU].get(a, stored[POOLED])) for a in axes}


def with_drift(fit: xr.DataTree, pred: Prediction, seed: int = 0) -> Prediction:
    """``pred`` (a prediction of ``fit``) with the fit's stored drift applied
    (:func:`drifted`); ``pred`` itself where the fit stores no drift or every ``tau`` is 0."""
    tau = stored_drift(fit)
    if not tau or not any(tau.values()):
        return pred
    ratio = row_ratios(fit, pred)
    if ratio is None:
        return pred
    return drifted(pred, ratio, list(tau.values()), seed)


def setting_shift(seed: int, setting: str, samples: int, scale: ArrayLike) -> Array:
    """One setting's link shift ``(samples, R)`` at its rows' drift scales ``(R, A)``
    (:func:`bayesscale.core.drift.drift_scale` per axis): ``sum_a scale_a epsilon_a`` with the
    ``epsilon`` seeded by ``[seed, DRIFT_STREAM, crc32(setting)]``, so a setting's draws do not
    depend on which other settings are predicted with it, and a prediction and a law curve of
    it share them."""
    sd = np.asarray(scale, dtype=float)
    rng = np.random.default_rng([seed, DRIFT_STREAM, zlib.crc32(setting.encode())])
    return np.asarray(rng.standard_normal((samples, sd.shape[1])) @ sd.T, dtype=float)


def curve_with_drift(
    fit: xr.DataTree, loss: ArrayLike, setting: str, axis: str, grid: ArrayLike, seed: int = 0
) -> Array:
    """A law curve's per-draw loss ``(S, G)`` along ``grid`` on ``axis`` for ``setting`` (the
    other axes inside the sweep) with the fit's stored drift: ``tau_axis ln(max(r, 1))
    epsilon_d`` on the link scale, ``r = grid / D_max`` of the setting (the widest for one the
    fit does not know), ``epsilon`` the setting's on that axis (:func:`setting_shift`); the
    loss as it is where the fit stores no drift for the axis."""
    loss = np.asarray(loss, dtype=float)
    tau = stored_drift(fit) or {}
    swept = SweptRange.from_fit(fit)
    if not tau.get(axis) or swept is None:
        return loss
    largest = float(swept.for_rows([setting], [axis]).hi[0, 0])
    scale = np.zeros((np.size(grid), len(tau)))
    scale[:, list(tau).index(axis)] = drift_scale(
        np.asarray(grid, dtype=float) / largest, tau[axis]
    )
    shift = setting_shift(seed, setting, loss.shape[0], scale)
    return shifted_loss(loss, fit_spec(fit).outcome, shift)


def drifted(pred: Prediction, ratio: ArrayLike, tau: ArrayLike, seed: int = 0) -> Prediction:
    """``pred`` with a drift ``tau`` ``(A,)`` at its rows' ratios ``(R, A)`` (``(R,)`` for one
    axis): each draw's loss moved by ``sum_a tau_a ln(max(r_a, 1)) epsilon_{d,s,a}``, the
    ``epsilon`` of each setting its own (:func:`setting_shift`)."""
    r = np.asarray(ratio, dtype=float)
    scale = drift_scale(r.reshape(len(r), -1), np.atleast_1d(np.asarray(tau, dtype=float)))
    setting = np.asarray(pred.setting)
    shift = np.zeros_like(pred.loss)
    for label in dict.fromkeys(pred.setting):
        rows = setting == label
        shift[:, rows] = setting_shift(seed, label, pred.loss.shape[0], scale[rows])
    return replace(pred, loss=shifted_loss(pred.loss, pred.outcome, shift))


def link_moments(pred: Prediction, seed: int = 0) -> tuple[Array, Array, Array]:
    """Per row of ``pred`` (with observed outcomes): the mean and variance of its predictive
    draws on the link scale (:func:`empirical_link`; the law's own predictive, seed noise
    included) and the observed outcome there, ``(R,)`` each."""
    if pred.observed is None:
        raise ValueError("calibrating the drift needs observed outcomes")
    draws = pred.sample(np.random.default_rng([seed, MOMENTS_STREAM]), replicates=REPLICATES)
    link = empirical_link(draws, pred.trials)
    return link.mean(axis=0), link.var(axis=0), empirical_link(pred.observed, pred.trials)


def empirical_link(values: ArrayLike, trials: ArrayLike | None) -> Array:
    """An outcome on the link scale: ``log((k + 1/2) / (n - k + 1/2))`` for ``k`` successes of
    ``n`` (finite at 0 and ``n``), ``log y`` for a loss (``trials`` ``None``).

    >>> empirical_link([0.0, 5.0], [10, 10]).round(4).tolist()
    [-3.0445, 0.0]
    """
    v = np.asarray(values, dtype=float)
    if trials is None:
        return np.asarray(np.log(v), dtype=float)
    n = np.asarray(trials, dtype=float)
    return np.asarray(np.log((v + 0.5) / (n - v + 0.5)), dtype=float)


def log_score(moments: Sequence[Moments], tau: float) -> float:
    """The Gaussian log density of the observed links under drift ``tau``: each row's link
    ``N(m, v + (tau ln r)^2)`` (``moments``: per part the rows' ``m``, ``v``, observed link
    and ratio ``r``; module docstring)."""
    total = 0.0
    for mean, var, observed, ratio in moments:
        spread = np.maximum(var, MIN_VARIANCE) + drift_scale(ratio, tau) ** 2
        total += float(
            np.sum(-0.5 * np.log(2 * np.pi * spread) - (observed - mean) ** 2 / (2 * spread))
        )
    return total


Moments = tuple[Array, Array, Array, Array]  # per row beyond: m, v, observed link, ratio


def beyond_moments(pred: Prediction, ratio: ArrayLike, seed: int = 0) -> Moments | None:
    """The rows of ``pred`` beyond their refit's range (``ratio`` > 1) as :func:`log_score`
    reads them: :func:`link_moments` and the ratio, restricted to those rows; ``None`` where
    no row lies beyond."""
    r = np.asarray(ratio, dtype=float)
    rows = np.isfinite(r) & (r > 1.0)
    if not rows.any():
        return None
    mean, var, observed = link_moments(pred, seed)
    return mean[rows], var[rows], observed[rows], r[rows]


def best_tau(moments: Sequence[Moments]) -> float:
    """The drift ``tau`` in ``[0, TAU_MAX]`` that maximises :func:`log_score` on ``moments``;
    0 where there are none or no drift scores better than none."""
    if not moments:
        return 0.0
    best = optimize.minimize_scalar(
        lambda t: -log_score(moments, float(t)),
        bounds=(0.0, TAU_MAX),
        method="bounded",
        options={"xatol": 1e-4},
    )
    tau = float(best.x)
    return tau if -float(best.fun) > log_score(moments, 0.0) else 0.0


def calibrate(parts: Sequence[tuple[Prediction, ArrayLike]], seed: int = 0) -> float:
    """The drift ``tau`` of ``parts`` (each a prediction with observed outcomes and its rows'
    ratios along the axis left out; rows inside their refit's range, ratio <= 1, do not
    enter): :func:`best_tau` of their :func:`beyond_moments`."""
    found = (beyond_moments(pred, ratio, seed) for pred, ratio in parts)
    return best_tau([m for m in found if m is not None])


def drift_attr(per_axis: Mapping[str, float], pooled: float, rows: Mapping[str, int]) -> str:
    """The JSON the out-of-scale group stores as ``drift`` (read by :func:`stored_drift`).

    >>> drift_attr({"env": 0.1}, 0.1, {"env": 12})
    '{"tau": {"env": 0.1}, "pooled": 0.1, "rows": {"env": 12}, "growth": "ln r"}'
    """
    return json.dumps(
        {
            TAU: {a: round(float(t), 6) for a, t in per_axis.items()},
            POOLED: round(float(pooled), 6),
            ROWS: {a: int(n) for a, n in rows.items()},
            "growth": "ln r",
        }
    )
