"""The scaling law as pure array math (NumPy only; no PyMC, no xarray).

The law, for one setting and data sizes ``D_a`` on each axis ``a``:

.. math::

    L(D) = L_\\infty + E\\,(N/N_\\mathrm{ref})^{-\\alpha_N}
           + \\sum_a A_a\\,(D_a / D_{a,\\mathrm{ref}})^{-\\alpha_a}
           - \\gamma\\,(D_E D_T)^{-\\beta}

``L`` is the loss-equivalent ``-log p_success``. Each amplitude ``A_a`` is the
value of its term *at the reference scale* ``D_ref`` (inside the swept range), not
at ``D = 1``: that choice decorrelates amplitude and exponent (DESIGN.md). The
interaction uses raw counts; with ``D >= 1`` its size is at most ``gamma``.

Every function broadcasts: leading dimensions (draws, settings, budgets) are free,
the axis is the last dimension where there is one.

Example
-------
>>> import numpy as np
>>> loss = power_terms(np.array([256.0]), np.array([0.2]), np.array([0.4]), np.array([64.0]))
>>> round(float(loss), 4)
0.1149
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from bayesscale.core import forms

Array = NDArray[np.float64]


def power_terms(
    sizes: ArrayLike, amplitude: ArrayLike, alpha: ArrayLike, reference: ArrayLike
) -> Array:
    """Sum over the last axis of ``A_a (D_a / D_ref,a)^(-alpha_a)``.

    >>> float(power_terms([2.0, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]))
    1.5
    """
    d = np.asarray(sizes, dtype=float)
    ratio = d / np.asarray(reference, dtype=float)
    return np.sum(np.asarray(amplitude, dtype=float) * ratio ** (-np.asarray(alpha)), axis=-1)


def axis_terms(
    axis_forms: Sequence[str],
    log_x: ArrayLike,
    amplitude: ArrayLike,
    alpha: ArrayLike,
    knee: ArrayLike | None = None,
    midpoint: ArrayLike | None = None,
) -> Array:
    """Sum over the last axis of each axis's term at ``x = log(D / D_ref)``: ``A e^(-alpha x)``
    on a power axis, the offset power ``A ((e^x + k)/(1 + k))^(-alpha)`` (knee ``k``, ``(..., A)``
    with any value on other axes) on an offset-power one, the logistic
    ``A (1 + e^(-alpha m)) / (1 + e^(alpha (x - m)))`` (steepness ``alpha``, midpoint ``m``,
    ``(..., A)``) on a saturating one (:mod:`bayesscale.core.forms`).

    >>> x = np.log([2.0, 4.0])  # D = 2 D_ref and 4 D_ref; knee 1 on the offset axis
    >>> float(axis_terms(["power", "offset_power"], x, [1.0, 1.0], [1.0, 1.0], [0.0, 1.0]))
    0.9
    >>> float(axis_terms(["saturating"], [0.0], [0.3], [2.0], midpoint=[1.0]))  # A at D_ref
    0.3
    """
    x = np.asarray(log_x, dtype=float)
    amp = np.broadcast_to(np.asarray(amplitude, dtype=float), x.shape)
    a = np.broadcast_to(np.asarray(alpha, dtype=float), x.shape)
    total = np.zeros(x.shape[:-1])
    for i, name in enumerate(axis_forms):
        if name == forms.POWER:
            total = total + amp[..., i] * np.exp(-a[..., i] * x[..., i])
        elif name == forms.OFFSET_POWER and knee is not None:
            k = np.broadcast_to(np.asarray(knee, dtype=float), x.shape)[..., i]
            total = total + forms.form(name).term(
                x[..., i], amplitude=amp[..., i], alpha=a[..., i], knee=k
            )
        elif name == forms.SATURATING and midpoint is not None:
            m = np.broadcast_to(np.asarray(midpoint, dtype=float), x.shape)[..., i]
            total = total + forms.form(name).term(
                x[..., i], amplitude=amp[..., i], steepness=a[..., i], midpoint=m
            )
        else:
            raise ValueError(
                f"axis {i}: form {name!r} needs its shape parameter (offset_power: knee; "
                "saturating: midpoint)"
            )
    return total


def amplitude_widening(
    axis_forms: Sequence[str],
    alpha: ArrayLike,
    knee: ArrayLike | None = None,
    midpoint: ArrayLike | None = None,
) -> Array:
    """Per axis, a term's amplitude at ``D_ref`` over ``s / alpha`` (``s = -dT/dlog D`` there,
    the slope the model samples): 1 on a power axis, ``1 + k`` on an offset-power one,
    ``1 + e^(alpha m)`` on a saturating one; broadcast like ``alpha`` (``(..., A)``).

    >>> amplitude_widening(["power", "saturating"], [0.5, 1.0], midpoint=[0.0, 0.0]).tolist()
    [1.0, 2.0]
    """
    a = np.asarray(alpha, dtype=float)
    out = np.ones(a.shape)
    for i, name in enumerate(axis_forms):
        if name == forms.OFFSET_POWER and knee is not None:
            out[..., i] = 1.0 + np.broadcast_to(np.asarray(knee, dtype=float), a.shape)[..., i]
        elif name == forms.SATURATING and midpoint is not None:
            m = np.broadcast_to(np.asarray(midpoint, dtype=float), a.shape)[..., i]
            out[..., i] = 1.0 + np.exp(a[..., i] * m)
    return out


def size_term(
    size: ArrayLike, size_amplitude: ArrayLike, alpha_size: ArrayLike, size_reference: float
) -> Array:
    """Model-size term ``E (N / N_ref)^(-alpha_N)``."""
    ratio = np.asarray(size, dtype=float) / size_reference
    return np.asarray(size_amplitude, dtype=float) * ratio ** (-np.asarray(alpha_size))


def interaction_term(
    n_envs: ArrayLike, n_tasks: ArrayLike, gamma: ArrayLike, beta: ArrayLike
) -> Array:
    """Environment-by-task interaction ``-gamma (D_E D_T)^(-beta)``, raw counts.

    >>> float(interaction_term(1.0, 1.0, 0.2, 0.5))
    -0.2
    """
    product = np.asarray(n_envs, dtype=float) * np.asarray(n_tasks, dtype=float)
    return -np.asarray(gamma, dtype=float) * product ** (-np.asarray(beta))


def success_from_loss(loss: ArrayLike) -> Array:
    """``p = exp(-max(L, 0))``: success probability, at most 1 (a draw whose floor lies below
    zero gives ``L < 0`` far beyond the data; it means certain success, not ``p > 1``).

    >>> success_from_loss([0.5, 0.0, -3.0]).round(4).tolist()
    [0.6065, 1.0, 1.0]
    """
    return np.exp(-np.maximum(np.asarray(loss, dtype=float), 0.0))


def logit_from_loss(loss: ArrayLike) -> Array:
    """``logit p = -L - log(-expm1(-L))``, stable for small and large ``L``.

    >>> round(float(logit_from_loss(np.log(2.0))), 12)  # p = 1/2
    0.0
    """
    loss = np.asarray(loss, dtype=float)
    return -loss - np.log(-np.expm1(-loss))


def loss_from_success(p: ArrayLike) -> Array:
    """``L = -log p``."""
    return -np.log(np.asarray(p, dtype=float))


def reference_scale(values: ArrayLike) -> float:
    """Geometric midpoint of the distinct swept values: ``sqrt(min * max)``.

    >>> reference_scale([8, 16, 32, 64, 128, 256])
    45.254833995939045
    """
    v = np.unique(np.asarray(values, dtype=float))
    return float(np.sqrt(v.min() * v.max()))


def amplitude_at_one(amplitude: ArrayLike, alpha: ArrayLike, reference: ArrayLike) -> Array:
    """Convert an amplitude at ``D_ref`` into the paper's amplitude at ``D = 1``.

    ``A (D/D_ref)^(-alpha) = (A D_ref^alpha) D^(-alpha)``, so ``K = A D_ref^alpha``; ``inf``
    where that overflows (an exponent in the hundreds, as in a preview's far tails).

    >>> float(amplitude_at_one(0.2, 0.5, 100.0)), float(amplitude_at_one(0.2, 1e5, 100.0))
    (2.0, inf)
    """
    with np.errstate(over="ignore"):
        return np.asarray(amplitude, dtype=float) * np.asarray(
            reference, dtype=float
        ) ** np.asarray(alpha, dtype=float)
