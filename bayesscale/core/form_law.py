"""The law with any form per axis, batched over draws: what the recipe solves for a stack.

.. math::

    L(D) = L_\\infty + \\sum_i T_i\\big(\\log(D_i / D_{\\mathrm{ref},i})\\big),

each term ``T_i`` an offset power (knee ``k_i >= 0``; ``k_i = 0`` is the power law) or a
saturating curve in log size (:mod:`bayesscale.core.forms`), chosen per draw and axis, so one
batch holds the draws of a stack's mixture. It answers what the recipe's solvers ask of
:class:`~bayesscale.core.allocate.PowerLaw` (``loss``, ``gradient``, ``log_derivatives``), and
gives the **power-law majorizer** of each term at a point (:meth:`FormLaw.power_majorizer`):
``log T`` is concave in ``x = log D`` for both forms (``d^2 log T / dx^2 = -alpha w (1 - w)``
for the offset power, ``-beta^2 s (1 - s)`` for the saturating form), so the tangent of ``log
T`` lies above it,

.. math::

    T(x) \\le T(x_0)\\, e^{-\\alpha_0 (x - x_0)}, \\qquad \\alpha_0 = -T'(x_0)/T(x_0),

a power law with exponent ``alpha_0`` that touches ``T`` at ``x_0``
(:func:`bayesscale.core.form_allocation.solve_forms` minimises these in turn).

Example
-------
>>> law = FormLaw(amplitude=np.array([0.2, 0.3]), alpha=np.array([0.5, 0.4]),
...               reference=np.array([10.0, 100.0]), knee=np.array([1.0, 0.0]))
>>> d = np.array([40.0, 100.0])
>>> round(float(law.loss(d)), 6)  # 0.2 (50/20)^-0.5 + 0.3
0.426491
>>> bound = law.power_majorizer(d)  # touches at d ...
>>> round(float(bound.loss(d)), 6), bool(bound.loss(d * 3) >= law.loss(d * 3))  # ... lies above
(0.426491, True)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from bayesscale.core import forms
from bayesscale.core.allocate import PowerLaw

Array = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


def _float(x: ArrayLike) -> Array:
    return np.asarray(x, dtype=float)


@dataclass(frozen=True)
class FormLaw:
    """``L(D) = floor + sum_i T_i(log(D_i / reference_i))``, arrays broadcast (..., n).

    ``alpha`` is the exponent of an offset-power term and the steepness of a saturating one;
    ``knee`` (``D_0 / D_ref``, >= 0) is read on the offset-power terms, ``midpoint``
    (``log(D_mid / D_ref)``) on the saturating ones (``saturating`` True); both default to the
    power law (knee 0, no saturating term)."""

    amplitude: Array
    alpha: Array
    reference: Array
    floor: Array | float = 0.0
    knee: Array | float = 0.0
    midpoint: Array | float = 0.0
    saturating: BoolArray | bool = field(default=False)

    def __post_init__(self) -> None:
        for name in ("amplitude", "alpha", "reference", "knee", "midpoint"):
            object.__setattr__(self, name, _float(getattr(self, name)))
        object.__setattr__(self, "saturating", np.asarray(self.saturating, dtype=bool))
        if np.any(np.asarray(self.knee) < 0):
            raise ValueError("a knee D0 / D_ref must be >= 0")

    def map_axes(self, fn: Callable[[NDArray[Any]], NDArray[Any]], floor: ArrayLike) -> FormLaw:
        """This law with ``fn`` applied to every per-axis field (``amplitude``, ``alpha``,
        ``reference``, ``knee``, ``midpoint``, ``saturating``; a field left at its default is
        a scalar, so ``fn`` broadcasts before it indexes) and the floor ``floor``: a batch
        broadcast, indexed or cut to some axes in one place.

        >>> law = FormLaw(amplitude=np.array([0.2, 0.3]), alpha=np.array([0.5, 0.4]),
        ...               reference=np.array([10.0, 100.0]), knee=np.array([1.0, 0.0]))
        >>> law.map_axes(lambda x: np.broadcast_to(x, (2,))[:1], floor=0.1).knee.tolist()
        [1.0]
        """
        return FormLaw(
            amplitude=fn(self.amplitude),
            alpha=fn(self.alpha),
            reference=fn(self.reference),
            floor=np.asarray(floor, dtype=float),
            knee=fn(np.asarray(self.knee)),
            midpoint=fn(np.asarray(self.midpoint)),
            saturating=fn(np.asarray(self.saturating)),
        )

    def terms(self, sizes: ArrayLike) -> tuple[Array, Array, Array]:
        """Each axis's ``T``, ``dT/dx`` and ``d2T/dx2`` at ``x = log(D / D_ref)`` (..., n)."""
        x = np.log(_float(sizes) / self.reference)
        sat = np.asarray(self.saturating, dtype=bool)
        off = forms.FORMS[forms.OFFSET_POWER].curve(
            x, amplitude=self.amplitude, alpha=self.alpha, knee=np.where(sat, 0.0, self.knee)
        )
        if not sat.any():
            return off
        logistic = forms.FORMS[forms.SATURATING].curve(
            x,
            amplitude=self.amplitude,
            steepness=self.alpha,
            midpoint=np.where(sat, self.midpoint, 0.0),
        )
        t, t1, t2 = (np.where(sat, s, o) for s, o in zip(logistic, off, strict=True))
        return t, t1, t2

    def loss(self, sizes: ArrayLike) -> Array:
        """``L(D)`` (...)."""
        return np.asarray(_float(self.floor) + self.terms(sizes)[0].sum(axis=-1), dtype=float)

    def gradient(self, sizes: ArrayLike) -> Array:
        """``dL/dD_i = T_i'(x_i) / D_i`` (..., n)."""
        return np.asarray(self.terms(sizes)[1] / _float(sizes), dtype=float)

    def log_derivatives(self, sizes: ArrayLike) -> tuple[Array, Array, Array]:
        """``L``, ``dL/dy_i`` and ``d2L/dy_i dy_j`` in ``y = log D`` ((...), (..., n),
        (..., n, n); diagonal: the law is separable)."""
        t, t1, t2 = self.terms(sizes)
        n = t.shape[-1]
        lyy = np.zeros((*t.shape, n))
        idx = np.arange(n)
        lyy[..., idx, idx] = t2
        return np.asarray(_float(self.floor) + t.sum(axis=-1), dtype=float), t1, lyy

    def power_majorizer(self, sizes: ArrayLike) -> PowerLaw:
        """The power law touching this law at ``sizes`` and above it everywhere: per term,
        exponent ``alpha_0 = -T'/T`` at ``x_0`` and coefficient ``T(x_0) D^alpha_0`` (raw
        units), the same floor. Exact (the law itself) on a power term."""
        d = _float(sizes)
        t, t1, _ = self.terms(d)
        with np.errstate(divide="ignore", invalid="ignore"):
            local = np.where(t > 0, -t1 / t, 0.0)
        local = np.maximum(local, 0.0)
        coef = t * np.exp(local * np.log(d))
        return PowerLaw(coef, local, np.broadcast_to(_float(self.floor), t.shape[:-1]))

    def is_power(self) -> bool:
        """Whether every term is a power law (no knee, nothing saturating)."""
        return not np.asarray(self.saturating).any() and not np.any(np.asarray(self.knee) > 0)


type Law = PowerLaw | FormLaw  # what the recipe's solvers and scorers take
