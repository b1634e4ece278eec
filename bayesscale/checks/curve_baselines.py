"""Per-curve baselines for extrapolating a learning curve: the last observed value, POW4, MMF4.

The simple rules researchers use beyond the sizes they ran (Mohr et al. 2022, LCDB's
parametric families), each fitted to one curve alone:

.. math::

    \\mathrm{POW4}(x) &= a - b\\,(d + x)^{-c}, \\qquad b, c, d \\ge 0 \\\\
    \\mathrm{MMF4}(x) &= \\frac{a b + c x^{d}}{b + x^{d}}, \\qquad b > 0,\\ d > 0

(POW4 is a power law with an offset on the size; MMF4 is saturating in log size, from ``a``
at ``x -> 0`` to ``c`` at ``x -> inf``). Both are fitted by bounded least squares
(``scipy.optimize.least_squares``) to the seeds' mean at each size, from several starts, in
sizes scaled by the largest fitted size; the best start (least squares) is kept. The last
observed value predicts the seeds' mean at the largest fitted size for every larger size.

**Predictive spread of one run.** Each baseline predicts a run's accuracy as
``Normal(f(x), sigma)``: for POW4 and MMF4 ``sigma^2`` is the residual variance of the runs
(every seed) about the fitted curve, ``sum (y_i - f(x_i))^2 / max(n - 4, 1)``; for the last
value it is the seeds' variance at the largest fitted size times ``1 + 1/m`` (``m`` seeds: the
spread of a run about the mean plus the mean's own uncertainty). ``sigma`` is at least
``1/n_test`` (one test example) so that a curve whose seeds agree exactly keeps a density.

Example
-------
>>> x = np.array([16.0, 32, 64, 128, 256, 512])
>>> params = fit_pow4(x, pow4(x, 0.9, 2.0, 0.5, 10.0))
>>> np.round(params, 3).tolist()
[0.9, 2.0, 0.5, 10.0]
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import least_squares

Array = NDArray[np.float64]

LAST_VALUE, POW4, MMF4 = "last value", "POW4", "MMF4"
BASELINES = (LAST_VALUE, POW4, MMF4)
N_PARAMETERS = 4


def pow4(x: ArrayLike, a: float, b: float, c: float, d: float) -> Array:
    """``a - b (d + x)^(-c)``.

    >>> float(pow4(0.0, 1.0, 1.0, 1.0, 1.0))
    0.0
    """
    return np.asarray(a - b * (d + np.asarray(x, dtype=float)) ** (-c), dtype=float)


def mmf4(x: ArrayLike, a: float, b: float, c: float, d: float) -> Array:
    """``(a b + c x^d) / (b + x^d)``.

    >>> float(mmf4(1.0, 0.2, 1.0, 0.8, 1.0))  # halfway at x = b^(1/d)
    0.5
    """
    xd = np.asarray(x, dtype=float) ** d
    return np.asarray((a * b + c * xd) / (b + xd), dtype=float)


def _best(
    residual: Callable[[Array], Array],
    jacobian: Callable[[Array], Array],
    starts: list[list[float]],
    lower: Array,
    upper: Array,
) -> Array:
    best, cost = None, np.inf
    for start in starts:
        s = np.clip(np.asarray(start, dtype=float), lower, upper)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            result = least_squares(residual, s, jac=jacobian, bounds=(lower, upper), x_scale="jac")
        if np.isfinite(result.cost) and result.cost < cost:
            best, cost = result.x, result.cost
    if best is None:
        raise ValueError("no start of the least-squares fit gave a finite residual")
    return np.asarray(best, dtype=float)


def _scaled(x: ArrayLike, y: ArrayLike) -> tuple[Array, Array, float]:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2:
        raise ValueError(
            f"sizes and values must be two 1-d arrays of one length >= 2, got {x.shape}"
        )
    scale = float(np.max(x))
    return x / scale, y, scale


def fit_pow4(x: ArrayLike, y: ArrayLike) -> Array:
    """POW4's ``(a, b, c, d)`` in the units of ``x``, by least squares on ``y``; bounds in
    sizes scaled by ``s = max x``: ``a`` (the asymptote) in [0, 1], ``b s^-c`` in [0, 100],
    ``c`` in [0, 5], ``d / s`` in [0, 10]. Starts: ``a`` the largest value, ``c`` in {0.2, 0.5,
    1.5}, ``d/s`` in {0, 0.1}, ``b`` from the smallest size's value."""
    u, y, s = _scaled(x, y)
    lower, upper = np.array([0.0, 0.0, 0.0, 0.0]), np.array([1.0, 100.0, 5.0, 10.0])

    def residual(p: Array) -> Array:
        return pow4(u, *p) - y

    def jacobian(p: Array) -> Array:
        _, b, c, d = p
        power = (d + u) ** (-c)
        return np.stack(
            [np.ones_like(u), -power, b * power * np.log(d + u), b * c * power / (d + u)], axis=1
        )

    top = float(np.max(y))
    starts = []
    for c, d in itertools.product((0.2, 0.5, 1.5), (0.0, 0.1)):
        b = max(top - float(y[np.argmin(u)]), 1e-3) * (d + float(np.min(u))) ** c
        starts.append([min(top + 0.02, 1.0), b, c, d])
    a, b, c, d = _best(residual, jacobian, starts, lower, upper)
    return np.array([a, b * s**c, c, d * s])


def fit_mmf4(x: ArrayLike, y: ArrayLike) -> Array:
    """MMF4's ``(a, b, c, d)`` in the units of ``x``, by least squares on ``y``; fitted as
    ``(a, log b', c, d)`` with ``b' = b s^-d`` (``s = max x``): the plateaus ``a, c`` in
    [0, 1], ``log b'`` in [-30, 30], ``d`` in [0.01, 10]. Starts: ``a`` the smallest size's
    value, ``c`` the largest value, ``d`` in {0.3, 1, 3}, the midpoint ``b'^(1/d)`` in
    {0.1, 1}."""
    u, y, s = _scaled(x, y)
    lower, upper = np.array([0.0, -30.0, 0.0, 0.01]), np.array([1.0, 30.0, 1.0, 10.0])

    def residual(p: Array) -> Array:
        return mmf4(u, p[0], np.exp(p[1]), p[2], p[3]) - y

    def jacobian(p: Array) -> Array:
        a, log_b, c, d = p
        big, xd = np.exp(log_b), u**d
        den = big + xd
        shift = (c - a) * big * xd / den**2
        return np.stack([big / den, -shift, xd / den, shift * np.log(u)], axis=1)

    first, top = float(y[np.argmin(u)]), float(np.max(y))
    starts = [
        [first, d * np.log(mid), min(top + 0.02, 1.0), d]
        for d, mid in itertools.product((0.3, 1.0, 3.0), (0.1, 1.0))
    ]
    a, log_b, c, d = _best(residual, jacobian, starts, lower, upper)
    return np.array([a, float(np.exp(log_b)) * s**d, c, d])


@dataclass(frozen=True)
class CurveBaseline:
    """One baseline fitted to one curve: ``mean(x)`` predicts the seeds' mean at size ``x``;
    ``sigma`` is the predictive standard deviation of one run's accuracy (module docstring)."""

    name: str
    params: Array
    sigma: float

    def mean(self, x: ArrayLike) -> Array:
        x = np.asarray(x, dtype=float)
        if self.name == LAST_VALUE:
            return np.full(x.shape, float(self.params[0]))
        form = pow4 if self.name == POW4 else mmf4
        return np.clip(form(x, *self.params), 0.0, 1.0)


def fit_baselines(
    sizes: ArrayLike, values: ArrayLike, min_sigma: float = 0.0
) -> dict[str, CurveBaseline]:
    """The three baselines of one curve from its runs (``sizes``, ``values``: one entry per
    run, several seeds per size); ``sigma`` of each at least ``min_sigma``.

    >>> fits = fit_baselines([16, 16, 32, 32, 64, 64], [0.5, 0.52, 0.6, 0.62, 0.7, 0.7])
    >>> round(float(fits[LAST_VALUE].mean(128.0)), 3), round(fits[LAST_VALUE].sigma, 3)
    (0.7, 0.0)
    """
    x, y = np.asarray(sizes, dtype=float), np.asarray(values, dtype=float)
    grid = np.unique(x)
    means = np.array([y[x == g].mean() for g in grid])
    last = y[x == grid[-1]]
    m = len(last)
    seed_var = float(np.var(last, ddof=1)) * (1 + 1 / m) if m > 1 else 0.0
    out = {
        LAST_VALUE: CurveBaseline(LAST_VALUE, np.array([means[-1]]), max(seed_var**0.5, min_sigma))
    }
    for name, fitter in ((POW4, fit_pow4), (MMF4, fit_mmf4)):
        params = fitter(grid, means)
        base = CurveBaseline(name, params, 0.0)
        resid = y - base.mean(x)
        sigma = float(np.sqrt(np.sum(resid**2) / max(len(y) - N_PARAMETERS, 1)))
        out[name] = CurveBaseline(name, params, max(sigma, min_sigma))
    return out
