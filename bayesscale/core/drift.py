"""Drift beyond the sweep: the law's prediction loosened with the distance past the data.

Past the largest swept size of an axis nothing in the data pins the law's form, and on data it
was not simulated from the law's own posterior narrows too fast there (docs/extrapolation.md).
The *drift* adds, on the link scale of the outcome (``logit p`` for success, ``log L`` for a
loss), a deviation that is zero inside the sweep and grows with the log of the extrapolation
ratio ``r_a = D_a / D_{a,max}`` of each axis:

.. math::

    \\eta' = \\eta + \\sum_a \\tau_a \\ln(\\max(r_a, 1))\\, \\varepsilon_a,
    \\qquad \\varepsilon_a \\sim N(0, 1),

a slope in log size the data cannot see (one ``epsilon`` per posterior draw, setting and axis,
so one setting's sizes move together). ``tau_a`` (per e-fold of size) is calibrated on the
package's own out-of-scale refits (:mod:`bayesscale.law.drift`).

Example
-------
>>> import numpy as np
>>> drift_scale([0.5, 1.0, np.e], 0.2).round(6).tolist()
[0.0, 0.0, 0.2]
>>> float(shifted_loss(np.log(2.0), "success", 0.0)) == float(np.log(2.0))  # p = 1/2 stays
True
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from bayesscale.core.laws import logit_from_loss

Array = NDArray[np.float64]


def drift_scale(ratio: ArrayLike, tau: ArrayLike) -> Array:
    """The drift's standard deviation ``tau ln(max(r, 1))`` at extrapolation ratio ``r``
    (0 inside the sweep; a NaN ratio, a fit without a stored range, gives 0)."""
    r = np.asarray(ratio, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        steps = np.where(np.isfinite(r) & (r > 1.0), np.log(np.where(r > 1.0, r, 1.0)), 0.0)
    return np.asarray(np.asarray(tau, dtype=float) * steps, dtype=float)


def shifted_loss(loss: ArrayLike, outcome: str, shift: ArrayLike) -> Array:
    """The loss whose link moved by ``shift``: for success ``L' = log(1 + e^(-(logit p +
    shift)))`` with ``p = e^(-L)`` (a draw with ``L <= 0``, certain success, and a shift of 0
    keep their loss exactly); for a loss ``L' = L e^(shift)``.

    >>> round(float(shifted_loss(np.log(2.0), "success", np.log(3.0))), 12)  # odds 1 -> 3
    0.287682072452
    """
    loss = np.asarray(loss, dtype=float)
    shift = np.asarray(shift, dtype=float)
    if outcome != "success":
        return np.asarray(loss * np.exp(shift), dtype=float)
    positive = loss > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        logit = logit_from_loss(np.where(positive, loss, 1.0))
    moved = np.logaddexp(0.0, -(logit + shift))
    return np.asarray(np.where(positive & (shift != 0), moved, loss), dtype=float)
