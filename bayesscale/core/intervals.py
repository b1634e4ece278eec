"""Credible intervals of posterior draws: equal-tailed (ETI) and highest-density (HDI).

The one place the package turns draws into intervals. For draws ``x_1 ≤ … ≤ x_n`` and mass
``p``:

.. math::

    \\mathrm{ETI}_p = [Q((1-p)/2),\\; Q((1+p)/2)], \\qquad
    \\mathrm{HDI}_p = \\operatorname*{arg\\,min}_{i} \\,(x_{i+k} - x_i),\\quad k = \\lfloor p n \\rfloor,

with ``Q`` the linear-interpolated quantile. Quantiles ignore NaN draws (an unfundable
baseline: every interval, mean included, is over the draws that are not NaN) and keep ``inf``
(r* of a draw without collapse), where ``numpy.quantile`` would return NaN for ``inf - inf``.
The HDI needs finite draws.

>>> import numpy as np
>>> draws = np.arange(101.0)
>>> interval(draws, 0.9).round(9).tolist()
[5.0, 95.0]
>>> interval(np.r_[draws, np.inf], 0.5).tolist()
[25.25, 75.75]
>>> interval(np.exp(draws / 20), 0.5, kind=HDI).round(3).tolist()
[1.0, 12.182]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.float64]

ETI: Final = "eti"
HDI: Final = "hdi"
INTERVAL_KINDS: Final = (ETI, HDI)
DEFAULT_PROB: Final = 0.9  # the credible mass of every interval the package reports by default


def check_prob(prob: float) -> float:
    """An interval's mass must lie in (0, 1)."""
    if not 0 < prob < 1:
        raise ValueError(f"prob must be in (0, 1), got {prob}")
    return float(prob)


def tail_quantiles(prob: float) -> tuple[float, float]:
    """The quantile levels ``((1 - prob)/2, (1 + prob)/2)`` of the equal-tailed interval."""
    check_prob(prob)
    return (1 - prob) / 2, (1 + prob) / 2


def quantiles(values: ArrayLike, q: Sequence[float], axis: int = 0) -> Array:
    """Linear-interpolated quantiles along ``axis`` that ignore NaN and keep ``inf`` and
    ``-inf``; all-NaN slices give NaN. The quantile dim comes first.

    >>> quantiles([1.0, 2.0, np.inf, np.nan], [0.0, 0.5, 1.0]).tolist()
    [1.0, 2.0, inf]
    >>> quantiles([-np.inf, 1.0], [0.5]).tolist()
    [-inf]
    """
    arr = np.moveaxis(np.asarray(values, dtype=float), axis, 0)
    srt = np.sort(arr, axis=0)  # NaN last
    count = np.sum(~np.isnan(arr), axis=0)
    out = np.full((len(q), *arr.shape[1:]), np.nan)
    for k, qk in enumerate(q):
        pos = qk * np.maximum(count - 1, 0)
        i0 = np.floor(pos).astype(int)
        i1 = np.minimum(i0 + 1, np.maximum(count - 1, 0))
        a = np.take_along_axis(srt, i0[None], axis=0)[0]
        b = np.take_along_axis(srt, i1[None], axis=0)[0]
        frac = pos - i0
        with np.errstate(invalid="ignore"):
            lerp = a + (b - a) * frac  # NaN between an infinite and a finite draw
        # between -inf and x the quantile is -inf, between x and inf it is inf (as NumPy's)
        val = np.where((a == b) | (frac == 0) | (a == -np.inf), a, np.where(b == np.inf, b, lerp))
        out[k] = np.where(count > 0, val, np.nan)
    return out


def _hdi_1d(x: Array, prob: float) -> tuple[float, float]:
    x = np.sort(x[~np.isnan(x)])
    n = x.size
    if n == 0:
        return np.nan, np.nan
    if not np.isfinite(x).all():
        raise ValueError("an HDI needs finite draws; use kind='eti' for draws with inf")
    k = int(np.floor(prob * n))
    if k >= n:
        return float(x[0]), float(x[-1])
    widths = x[k:] - x[: n - k]
    i = int(np.argmin(widths))
    return float(x[i]), float(x[i + k])


def interval(values: ArrayLike, prob: float, kind: str = ETI, axis: int = 0) -> Array:
    """``[lower, upper]`` of the ``prob`` interval of the draws along ``axis``, stacked first:
    shape ``(2, *rest)``. ``kind``: ``"eti"`` (equal-tailed) or ``"hdi"`` (highest density,
    the narrowest window holding ``floor(prob * n)`` draws beyond its first, as ArviZ's)."""
    check_prob(prob)
    arr = np.moveaxis(np.asarray(values, dtype=float), axis, 0)
    if kind == ETI:
        return quantiles(arr, tail_quantiles(prob), axis=0)
    if kind == HDI:
        flat = arr.reshape(arr.shape[0], -1)
        out = np.array([_hdi_1d(flat[:, j], prob) for j in range(flat.shape[1])]).T
        return out.reshape(2, *arr.shape[1:])
    raise ValueError(f"unknown interval kind {kind!r}; use one of {INTERVAL_KINDS}")


def describe(values: ArrayLike, prob: float) -> dict[str, float]:
    """Mean, median and the equal-tailed ``prob`` interval of one scalar's draws (flattened),
    over the draws that are not NaN (all NaN: all NaN). An infinite draw makes the mean
    ``inf``; ``inf`` and ``-inf`` together make it NaN.

    >>> {k: round(v, 9) for k, v in describe(np.arange(11.0), 0.8).items()}
    {'mean': 5.0, 'median': 5.0, 'lower': 1.0, 'upper': 9.0}
    """
    v = np.asarray(values, dtype=float).ravel()
    lower, upper = tail_quantiles(prob)
    kept = v[~np.isnan(v)]
    with np.errstate(invalid="ignore"):
        mean = float(kept.mean()) if kept.size else float("nan")
    median, lo, hi = quantiles(v, [0.5, lower, upper]).tolist()
    return {"mean": mean, "median": median, "lower": lo, "upper": hi}
