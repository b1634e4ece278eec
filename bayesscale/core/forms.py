"""Law forms: one axis's term of the loss as a function of size, with its derivatives.

The law is ``L = L_inf + sum_a T_a(D_a)`` (:mod:`bayesscale.core.laws`). Each form gives one
axis's term ``T`` as a function of ``x = log(D / D_ref)`` (``D_ref`` the axis's reference
scale inside the sweep), and its first and second derivatives in ``x``, which the exact
per-draw allocation needs (:mod:`bayesscale.core.form_allocation`). Every form is
non-increasing in size, positive, and equals its amplitude ``A`` at ``D = D_ref``:

.. math::

    \\text{power:}\\quad & T = A\\,e^{-\\alpha x} = A\\,(D/D_\\mathrm{ref})^{-\\alpha} \\\\
    \\text{offset power:}\\quad & T = A\\left(\\frac{D + D_0}{D_\\mathrm{ref} + D_0}\\right)^{-\\alpha},
        \\quad D_0 = k\\,D_\\mathrm{ref},\\ k \\ge 0 \\\\
    \\text{saturating:}\\quad & T = A\\,\\frac{1 + e^{-\\beta m}}{1 + e^{\\beta (x - m)}}

The offset power (POW4's shape on the loss) is flat below the knee ``D_0`` and a power law
above it; at ``k = 0`` it is the power law. The saturating form is logistic in log size (MMF4's
shape): a plateau ``A (1 + e^{-beta m})`` at small sizes, zero at large ones (the floor
``L_inf`` then holds the loss), steepness ``beta`` and midpoint ``D_ref e^m``.

**Priors** (what the model builders give these parameters; per setting, pooled across
settings as the exponents are): ``alpha`` the axis's ``exponent`` prior (``LogNormal``,
spec); the knee ``k = kappa z``, ``kappa ~ HalfNormal(1)`` per axis and ``z ~ HalfNormal(1)``
(in units of ``D_ref``: mass at 0, the power law; a knee beyond ``D_ref`` flattens the lower
half of the sweep; a fit of one setting has ``k ~ HalfNormal(1)``); the steepness ``beta``
takes the place of the exponent (the same prior and pooling: far above the midpoint the term
is a power law of exponent ``beta``); the midpoint ``m = mu + omega z`` per setting, its mean
``mu ~ Normal(0, 2)`` (within about ``e^{±4}``, 55x, of ``D_ref``, 95% a priori) and spread
``omega ~ HalfNormal(1)`` per axis, ``z ~ Normal(0, 1)`` (a fit of one setting: ``m ~
Normal(0, 2)``).

Example
-------
>>> x = np.log([0.5, 1.0, 2.0])
>>> FORMS["offset_power"].term(x, amplitude=0.2, alpha=0.5, knee=0.0).round(4).tolist()
[0.2828, 0.2, 0.1414]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.float64]

POWER: Final = "power"
OFFSET_POWER: Final = "offset_power"
SATURATING: Final = "saturating"
#: The forms a fit stacks when its spec names no axis's form, the power law and the offset
#: power, which contains it (on LCDB the saturating form never separated from the offset
#: power, docs/extrapolation.md, and a third form is another fit per refit).
DEFAULT_STACK: Final = (POWER, OFFSET_POWER)
KNEE_PRIOR_SCALE: Final = 1.0  # the knee k = D0 / D_ref's half-normal (or its scale's) sigma
#: The median of HalfNormal(1), ``sqrt(2) erfinv(1/2)``: a per-setting knee's population median
#: is its scale times this.
HALF_NORMAL_MEDIAN: Final = 0.6744897501960817
MIDPOINT_PRIOR_SCALE: Final = (
    2.0  # the midpoint m = log(D_mid / D_ref) (its mean) ~ Normal(0, this)
)
MIDPOINT_SPREAD_SCALE: Final = 1.0  # the per-setting midpoints' sd ~ HalfNormal(this)
# parameter names (each form's term takes them as keyword arguments)
AMPLITUDE, ALPHA, KNEE, STEEPNESS, MIDPOINT = "amplitude", "alpha", "knee", "steepness", "midpoint"


def _a(v: ArrayLike) -> Array:
    return np.asarray(v, dtype=float)


def _log_expit(z: Array) -> Array:
    """``log(1 / (1 + e^-z))`` without overflow."""
    return np.asarray(-np.logaddexp(0.0, -z), dtype=float)


def _expit(z: Array) -> Array:
    """``1 / (1 + e^-z)``, to full relative precision in both tails."""
    return np.exp(_log_expit(z))


# --- power: T = A e^{-alpha x} -------------------------------------------------------------


def _power(x: ArrayLike, amplitude: ArrayLike, alpha: ArrayLike) -> tuple[Array, Array, Array]:
    t = _a(amplitude) * np.exp(-_a(alpha) * _a(x))
    a = _a(alpha)
    return t, -a * t, a * a * t


# --- offset power: T = A ((D + D0)/(D_ref + D0))^-alpha, D0 = k D_ref ------------------------


def _offset_power(
    x: ArrayLike, amplitude: ArrayLike, alpha: ArrayLike, knee: ArrayLike
) -> tuple[Array, Array, Array]:
    """With ``u = log((e^x + k)/(1 + k))``, ``T = A e^{-alpha u}``; ``du/dx = w = e^x/(e^x + k)``,
    ``dw/dx = w (1 - w)``: ``T' = -alpha w T``, ``T'' = alpha w T (alpha w - (1 - w))``."""
    x, k, a = _a(x), _a(knee), _a(alpha)
    if np.any(k < 0):
        raise ValueError("the knee D0 / D_ref must be >= 0")
    # u and w in logs: exact at k = 0 (u = x, w = 1) and free of overflow for large |x|
    log_k = np.log(np.where(k > 0, k, 1.0))
    u = np.where(k > 0, np.logaddexp(x, log_k) - np.log1p(k), x)
    w = np.where(k > 0, _expit(np.asarray(x - log_k)), 1.0)
    t = _a(amplitude) * np.exp(-a * u)
    return t, -a * w * t, a * w * t * (a * w - (1.0 - w))


# --- saturating: T = A (1 + e^{-beta m}) / (1 + e^{beta (x - m)}) ---------------------------


def _saturating(
    x: ArrayLike, amplitude: ArrayLike, steepness: ArrayLike, midpoint: ArrayLike
) -> tuple[Array, Array, Array]:
    """With ``s = sigmoid(beta (x - m))``, ``T = H (1 - s)``, ``H = A / sigmoid(beta m)``:
    ``T' = -beta s T``, ``T'' = -beta^2 s (1 - 2 s) T``."""
    b, m = _a(steepness), _a(midpoint)
    z = b * (_a(x) - m)
    # log T = log A - log sigmoid(beta m) + log sigmoid(-z)
    log_t = np.log(_a(amplitude)) - _log_expit(b * m) + _log_expit(-z)
    t = np.exp(log_t)
    s = _expit(z)
    return t, -b * s * t, -b * b * s * (1.0 - 2.0 * s) * t


@dataclass(frozen=True)
class Form:
    """One law form: its parameters (keyword names of :meth:`term`), their documented priors,
    and the term with its derivatives in ``x = log(D/D_ref)``."""

    name: str
    parameters: tuple[str, ...]
    priors: Mapping[str, str]
    _curve: Callable[..., tuple[Array, Array, Array]]

    def _check(self, params: Mapping[str, ArrayLike]) -> None:
        if set(params) != set(self.parameters):
            raise TypeError(
                f"form {self.name!r} takes parameters {list(self.parameters)}, got {sorted(params)}"
            )

    def curve(self, x: ArrayLike, **params: ArrayLike) -> tuple[Array, Array, Array]:
        """``(T, dT/dx, d2T/dx2)`` at ``x = log(D/D_ref)``, broadcast."""
        self._check(params)
        return self._curve(x, **params)

    def term(self, x: ArrayLike, **params: ArrayLike) -> Array:
        """``T(x)``, broadcast over ``x`` and the parameters."""
        return self.curve(x, **params)[0]

    def d1(self, x: ArrayLike, **params: ArrayLike) -> Array:
        """``dT/dx`` (``x = log(D/D_ref)``): <= 0."""
        return self.curve(x, **params)[1]

    def d2(self, x: ArrayLike, **params: ArrayLike) -> Array:
        """``d2T/dx2``."""
        return self.curve(x, **params)[2]


_ALPHA_PRIOR = "the axis's exponent prior (LogNormal; spec [[axes]] exponent)"
_AMPLITUDE_PRIOR = "from the slope at D_ref (LogNormal; spec [slope]) over -dT/dx / T there"
FORMS: Final[Mapping[str, Form]] = {
    POWER: Form(
        POWER, (AMPLITUDE, ALPHA), {AMPLITUDE: _AMPLITUDE_PRIOR, ALPHA: _ALPHA_PRIOR}, _power
    ),
    OFFSET_POWER: Form(
        OFFSET_POWER,
        (AMPLITUDE, ALPHA, KNEE),
        {
            AMPLITUDE: _AMPLITUDE_PRIOR,
            ALPHA: _ALPHA_PRIOR,
            KNEE: "kappa z, kappa and z HalfNormal(1), D0 / D_ref per setting",
        },
        _offset_power,
    ),
    SATURATING: Form(
        SATURATING,
        (AMPLITUDE, STEEPNESS, MIDPOINT),
        {
            AMPLITUDE: _AMPLITUDE_PRIOR,
            STEEPNESS: _ALPHA_PRIOR + ", as the steepness",
            MIDPOINT: "mu + omega z, mu ~ Normal(0, 2), omega ~ HalfNormal(1), log(D_mid / D_ref)",
        },
        _saturating,
    ),
}
FORM_NAMES: Final = tuple(FORMS)


def form(name: str) -> Form:
    """The form called ``name`` (``FORM_NAMES``); a clear error otherwise."""
    if name not in FORMS:
        raise ValueError(f"unknown law form {name!r}; the forms are {list(FORM_NAMES)}")
    return FORMS[name]


def evaluate_term(
    name: str, sizes: ArrayLike, reference: ArrayLike, params: Mapping[str, ArrayLike]
) -> Array:
    """Form ``name``'s term at raw ``sizes``: ``T(log(sizes / reference); params)``, every
    array broadcast (e.g. sizes ``(R,)`` against parameters ``(S, 1)`` per draw). The call a fit
    reader makes per axis: ``L = L_inf + sum_a evaluate_term(form_a, D_a, D_ref,a, params_a)``.

    >>> float(evaluate_term("power", 256.0, 64.0, {"amplitude": 0.2, "alpha": 0.5}))
    0.1
    """
    x = np.log(_a(sizes) / _a(reference))
    return form(name).term(x, **params)
