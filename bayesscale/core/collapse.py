"""Pricing synthetic data as pure array math (NumPy only): the discount, effective data,
normalised success, the collapse ratio r* and the ratio of peak benefit.

A run with ``D_r`` real and ``D_s`` synthetic units on one axis (ratio ``r = D_s / D_r``)
sees the effective data

.. math::

    D_\\mathrm{eff} = D_r + \\kappa(r)\\,D_s = D_r\\,G(r), \\qquad G(r) = 1 + r\\,\\kappa(r),
    \\qquad \\kappa(r) = \\kappa_0 - (1 - \\kappa_0)\\,\\frac{r}{c}

(PAPER.md section 6: the small-ratio discount ``kappa0`` declines linearly with the ratio
and crosses zero at ``r = c kappa0 / (1 - kappa0)``; past that, synthetic data is harmful).
``G`` falls below zero for large ratios, where the law is undefined, so the model uses the
smooth positive multiplier

.. math::

    G^+(r) = h(G(r)) / h(1), \\qquad h(G) = g_\\min + \\epsilon \\log(1 + e^{(G - g_\\min)/\\epsilon})

equal to ``G`` within 0.2% wherever ``G > 0.5`` (``epsilon = 0.1``, ``g_min = 0.05``; at
``r = 0`` exactly 1) and never below ``g_min / h(1)``: a collapsed run keeps about 5% of its
real data's worth. The floor also keeps the law's power-law singularity at ``D -> 0`` out of
the likelihood (with ``g_min = 1e-3`` NUTS needed tree depth 9.5 and 160 s; with 0.05, 6-7).

The law on that axis is written in the slope form of ``bayesscale.law.model``:
``L(x) = level + slope ((x)^(-alpha) - 1) / alpha`` with ``x = D / D_ref``, and success
``p = exp(-L)``. Normalised success compares a mix with the pure-real baseline, in one
of two frames:

* ``"fixed_real"`` (augmentation; the default): the real data ``D_r`` is held and
  ``D_s = r D_r`` synthetic units are added, ``S(r) = p(D_r G^+(r)) / p(D_r)``. ``S`` rises
  to a peak at ``r_peak = c kappa0 / (2 (1 - kappa0))`` and falls below the baseline when
  ``kappa(r) < 0``; the collapse ratio ``r*`` is where it falls below ``threshold`` (0.95).
  As ``threshold -> 1``, ``r* -> c kappa0 / (1 - kappa0)``: the paper's section 6 reading.
* ``"fixed_total"``: the total ``D = D_r + D_s`` is held, ``S(r) = p(D G^+(r) / (1 + r)) /
  p(D)``. With ``kappa <= 1`` the peak is always at ``r = 0`` (no benefit), and a constant
  discount can also "collapse" here; offered for comparison, see ``docs/pricing.md``.

Every function broadcasts over its arguments (draws, methods, ratios).

Example
-------
>>> import numpy as np
>>> abs(float(kappa_linear(4.1 * 0.71 / 0.29, 0.71, 4.1))) < 1e-12  # kappa crosses zero
True
>>> round(float(peak_ratio(0.71, 4.1)), 3)
5.019
>>> r = collapse_ratio(0.71, 4.1, level=0.8, slope=0.12, alpha=0.41, x_baseline=1.0)
>>> bool(10.0 < r < 12.0)
True
"""

from __future__ import annotations

from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.float64]

FIXED_REAL: Final = "fixed_real"
FIXED_TOTAL: Final = "fixed_total"
FRAMES: Final = (FIXED_REAL, FIXED_TOTAL)
DEFAULT_THRESHOLD: Final = 0.95
DEFAULT_SOFTNESS: Final = 0.1
DEFAULT_FLOOR: Final = 0.05
_BISECTIONS = 80


def _f(x: ArrayLike) -> Array:
    return np.asarray(x, dtype=float)


def kappa_linear(ratio: ArrayLike, kappa0: ArrayLike, scale: ArrayLike) -> Array:
    """The discount at ratio ``r``: ``kappa(r) = kappa0 - (1 - kappa0) r / c``.

    >>> [round(float(kappa_linear(r, 0.6, 2.0)), 12) for r in (0.0, 2.0)]
    [0.6, 0.2]
    """
    k0 = _f(kappa0)
    return k0 - (1.0 - k0) * _f(ratio) / _f(scale)


def kappa_zero_ratio(kappa0: ArrayLike, scale: ArrayLike) -> Array:
    """Ratio where ``kappa(r) = 0``: ``r_0 = c kappa0 / (1 - kappa0)`` (PAPER.md section 6).

    >>> round(float(kappa_zero_ratio(0.31, 2.6)), 3)
    1.168
    """
    k0 = _f(kappa0)
    return _f(scale) * k0 / (1.0 - k0)


def multiplier(ratio: ArrayLike, kappa0: ArrayLike, scale: ArrayLike) -> Array:
    """``G(r) = 1 + r kappa(r) = D_eff / D_r`` (unbounded below).

    >>> float(multiplier(1.0, 0.5, 1.0))
    1.0
    """
    r = _f(ratio)
    return 1.0 + r * kappa_linear(r, kappa0, scale)


def soft_multiplier(
    ratio: ArrayLike,
    kappa0: ArrayLike,
    scale: ArrayLike,
    softness: float = DEFAULT_SOFTNESS,
    floor: float = DEFAULT_FLOOR,
) -> Array:
    """The positive multiplier ``G+ = h(G) / h(1)``, ``h(G) = g_min + eps log(1 + exp((G - g_min) / eps))``.

    >>> round(float(soft_multiplier(0.0, 0.5, 1.0)), 9)  # no synthetic data: exactly D_r
    1.0
    >>> float(soft_multiplier(100.0, 0.5, 1.0)) > 0.049  # the floor: ~5% of the real data
    True
    """
    if softness <= 0 or not 0 <= floor < 1:
        raise ValueError(f"softness must be > 0 and floor in [0, 1), got {softness}, {floor}")
    g = multiplier(ratio, kappa0, scale)
    return _soft(g, softness, floor) / _soft(1.0, softness, floor)


def _soft(g: ArrayLike, softness: float, floor: float) -> Array:
    return floor + softness * np.logaddexp(0.0, (_f(g) - floor) / softness)


def effective_data(
    real: ArrayLike,
    synthetic: ArrayLike,
    kappa0: ArrayLike,
    scale: ArrayLike,
    softness: float = DEFAULT_SOFTNESS,
    floor: float = DEFAULT_FLOOR,
) -> Array:
    """``D_eff = D_r G+(D_s / D_r)``, i.e. ``D_r + kappa(r) D_s`` kept positive.

    >>> round(float(effective_data(100.0, 25.0, 0.8, 10.0)), 1)  # 100 + 0.795 * 25 = 119.875
    119.9
    """
    d_r = _f(real)
    if np.any(d_r <= 0):
        raise ValueError("real counts must be > 0 (a ratio needs a real denominator)")
    return d_r * soft_multiplier(_f(synthetic) / d_r, kappa0, scale, softness, floor)


def law_loss(x: ArrayLike, level: ArrayLike, slope: ArrayLike, alpha: ArrayLike) -> Array:
    """The axis law in slope form, ``L(x) = level + slope (x^(-alpha) - 1) / alpha``, ``x = D / D_ref``.

    >>> float(law_loss(1.0, 0.8, 0.1, 0.4))  # at the reference scale L is the level
    0.8
    """
    a = _f(alpha)
    return _f(level) + _f(slope) * np.expm1(-a * np.log(_f(x))) / a


def normalised_success(
    ratio: ArrayLike,
    kappa0: ArrayLike,
    scale: ArrayLike,
    level: ArrayLike,
    slope: ArrayLike,
    alpha: ArrayLike,
    x_baseline: ArrayLike,
    frame: str = FIXED_REAL,
    softness: float = DEFAULT_SOFTNESS,
    floor: float = DEFAULT_FLOOR,
) -> Array:
    """Success of a mix at ratio ``r`` over the pure-real baseline's, ``S(r) = p(mix) / p(base)``.

    ``x_baseline = D / D_ref`` is the baseline's real data in reference units. In the
    ``fixed_real`` frame the mix has ``D_eff = D G+(r)``; in ``fixed_total`` it has
    ``D_eff = D G+(r) / (1 + r)``.

    >>> round(float(normalised_success(0.0, 0.5, 2.0, 0.8, 0.1, 0.4, 1.0)), 12)
    1.0
    """
    if frame not in FRAMES:
        raise ValueError(f"unknown frame {frame!r}; use one of {FRAMES}")
    r = _f(ratio)
    x = _f(x_baseline)
    g = soft_multiplier(r, kappa0, scale, softness, floor)
    if frame == FIXED_TOTAL:
        g = g / (1.0 + r)
    base = law_loss(x, level, slope, alpha)
    mix = law_loss(x * g, level, slope, alpha)
    return np.exp(base - mix)


def peak_ratio(kappa0: ArrayLike, scale: ArrayLike, frame: str = FIXED_REAL) -> Array:
    """Ratio of peak benefit: ``argmax_r G(r) = c kappa0 / (2 (1 - kappa0))`` at fixed real data.

    ``p`` rises with ``D_eff``, so the success peak is the multiplier's peak, whatever the law.
    At fixed total data ``G(r) / (1 + r)`` falls from ``r = 0`` for any ``kappa0 < 1``: 0.

    >>> float(peak_ratio(0.5, 2.0)), float(peak_ratio(0.5, 2.0, frame="fixed_total"))
    (1.0, 0.0)
    """
    if frame not in FRAMES:
        raise ValueError(f"unknown frame {frame!r}; use one of {FRAMES}")
    k0, c = np.broadcast_arrays(_f(kappa0), _f(scale))
    if frame == FIXED_TOTAL:
        return np.zeros(k0.shape)
    return c * k0 / (2.0 * (1.0 - k0))


def threshold_multiplier(
    level: ArrayLike,
    slope: ArrayLike,
    alpha: ArrayLike,
    x_baseline: ArrayLike,
    threshold: float = DEFAULT_THRESHOLD,
) -> Array:
    """The data multiplier ``g*`` at which success is ``threshold`` times the baseline's.

    From ``L(x g*) - L(x) = -log(threshold)`` in the slope form:
    ``g* = (1 + alpha delta / (slope x^(-alpha)))^(-1/alpha)``, ``delta = -log threshold``.
    (The level cancels; it is accepted to keep the signature parallel.)

    >>> g = threshold_multiplier(0.8, 0.1, 0.4, 1.0)
    >>> round(float(normalised_success_of_multiplier(g, 0.8, 0.1, 0.4, 1.0)), 12)
    0.95
    """
    _check_threshold(threshold)
    del level
    a, s, x = _f(alpha), _f(slope), _f(x_baseline)
    delta = -np.log(threshold)
    return (1.0 + a * delta / (s * x ** (-a))) ** (-1.0 / a)


def normalised_success_of_multiplier(
    g: ArrayLike, level: ArrayLike, slope: ArrayLike, alpha: ArrayLike, x_baseline: ArrayLike
) -> Array:
    """``p(x g) / p(x)`` for a data multiplier ``g`` (helper for checks)."""
    x = _f(x_baseline)
    return np.exp(law_loss(x, level, slope, alpha) - law_loss(x * _f(g), level, slope, alpha))


def collapse_ratio_closed_form(kappa0: ArrayLike, scale: ArrayLike, g_star: ArrayLike) -> Array:
    """Fixed-real ``r*`` for the raw multiplier ``G`` (no soft floor): the larger root of
    ``G(r) = g*``, ``r* = c (kappa0 + sqrt(kappa0^2 + 4 (1 - kappa0)(1 - g*) / c)) / (2 (1 - kappa0))``.

    At ``g* = 1`` (threshold 1) this is ``c kappa0 / (1 - kappa0)``.

    >>> round(float(collapse_ratio_closed_form(0.5, 2.0, 1.0)), 12)
    2.0
    """
    k0, c, g = _f(kappa0), _f(scale), _f(g_star)
    b = (1.0 - k0) / c
    return (k0 + np.sqrt(k0**2 + 4.0 * b * (1.0 - g))) / (2.0 * b)


def collapse_ratio(
    kappa0: ArrayLike,
    scale: ArrayLike,
    level: ArrayLike,
    slope: ArrayLike,
    alpha: ArrayLike,
    x_baseline: ArrayLike,
    threshold: float = DEFAULT_THRESHOLD,
    frame: str = FIXED_REAL,
    softness: float = DEFAULT_SOFTNESS,
    floor: float = DEFAULT_FLOOR,
) -> Array:
    """The collapse ratio ``r*``: the smallest ratio past the peak with ``S(r) = threshold``.

    Solved by bisection on ``[r_peak, r_hi]`` (``S`` is strictly decreasing there, as ``G+``
    is), vectorised over all broadcast inputs. If success never falls that low (the soft
    floor keeps ``D_eff >= g_min D_r``, so a very shallow law may never lose 5%), the result
    is ``inf``.

    >>> r = collapse_ratio(0.5, 2.0, 0.8, 0.1, 0.4, 1.0)
    >>> round(float(normalised_success(r, 0.5, 2.0, 0.8, 0.1, 0.4, 1.0)), 9)
    0.95
    """
    _check_threshold(threshold)
    if frame not in FRAMES:
        raise ValueError(f"unknown frame {frame!r}; use one of {FRAMES}")
    k0, c, lev, s, a, x = np.broadcast_arrays(
        _f(kappa0), _f(scale), _f(level), _f(slope), _f(alpha), _f(x_baseline)
    )
    if np.any((k0 <= 0) | (k0 >= 1)) or np.any(c <= 0):
        raise ValueError("kappa0 must lie in (0, 1) and the collapse scale must be > 0")

    def excess(r: Array) -> Array:
        return normalised_success(r, k0, c, lev, s, a, x, frame, softness, floor) - threshold

    lo = peak_ratio(k0, c, frame)
    # G(r) = g_min at the latest past r_g = root of G = 0 plus a margin: start there and grow.
    hi = np.maximum(2.0 * kappa_zero_ratio(k0, c) + 1.0, 2.0 * lo + 1.0)
    for _ in range(60):
        above = excess(hi) > 0
        if not above.any():
            break
        hi = np.where(above, hi * 2.0, hi)
    never = excess(hi) > 0
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        up = excess(mid) > 0
        lo = np.where(up, mid, lo)
        hi = np.where(up, hi, mid)
    out = 0.5 * (lo + hi)
    return np.where(never, np.inf, out)


def logistic_collapse(ratio: ArrayLike, r_star: ArrayLike, steepness: ArrayLike) -> Array:
    """The paper's descriptive collapse curve ``S(r) = 1 / (1 + (r / r*)^h / 19)``.

    It equals 0.95 at ``r*`` for every steepness ``h``, which the paper's table does not
    identify (PAPER.md section 6).

    >>> round(float(logistic_collapse(3.0, 3.0, 4.0)), 12)
    0.95
    """
    return 1.0 / (1.0 + (_f(ratio) / _f(r_star)) ** _f(steepness) / 19.0)


def _check_threshold(threshold: float) -> None:
    if not 0 < threshold < 1:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
