"""How far a number lies beyond what the data measured: the swept range of each axis.

A law fitted over a swept range ``[lo, hi]`` of an axis says little about sizes far beyond it.
Every allocation, prediction and success the package reports carries, per axis, its
*extrapolation factor*

.. math::

    f = D / D_{\\max},

the value over the largest value of that axis in that setting's rows (``f <= 1``: inside or
below the range), and is flagged *beyond* when it lies more than ``threshold`` times outside
the range on either side, ``max(D / D_max, D_min / D) > threshold`` (default
:data:`WARN_FACTOR`, 4x).

A law fit stores the range as ``swept_min`` / ``swept_max`` (setting, axis) in its
``constant_data``; fits written before that have none, and :meth:`SweptRange.from_fit` returns
``None`` for them.

Example
-------
>>> import numpy as np
>>> r = SweptRange(("env",), ("S",), np.array([[8.0]]), np.array([[256.0]]))
>>> r.factor(np.array([[1024.0]])).tolist()
[[4.0]]
>>> r.outside(np.array([[1024.0, 2.0]]).T.reshape(2, 1, 1)).ravel().tolist()
[4.0, 4.0]
>>> describe(45.2)
'45x beyond the swept range'
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

if TYPE_CHECKING:
    import xarray as xr

from bayesscale import names
from bayesscale.formatting import times

Array = NDArray[np.float64]

WARN_FACTOR = 4.0
"""The default warning threshold (a value more than this many times outside the swept range)."""

# extrapolation ratios r = D / D_max (> 1) in buckets; an upper edge is inside its bucket
BUCKET_EDGES: Final = (2.0, 4.0, 8.0)
BUCKETS: Final = ("<=2x", "2-4x", "4-8x", ">8x")


@dataclass(frozen=True)
class SweptRange:
    """The smallest and largest value of each axis in each setting's rows, ``(G, n)``."""

    axes: tuple[str, ...]
    settings: tuple[str, ...]
    lo: Array
    hi: Array

    @classmethod
    def of_rows(
        cls,
        axes: Sequence[str],
        settings: Sequence[str],
        setting_index: NDArray[np.integer],
        sizes: Array,
    ) -> SweptRange:
        """From the rows of a design: ``sizes`` (rows, axes), ``setting_index`` (rows)."""
        g, n = len(settings), len(axes)
        lo = np.full((g, n), np.nan)
        hi = np.full((g, n), np.nan)
        for k in range(g):
            rows = sizes[setting_index == k]
            if rows.size:
                lo[k] = rows.min(axis=0)
                hi[k] = rows.max(axis=0)
        return cls(tuple(axes), tuple(settings), lo, hi)

    @classmethod
    def from_fit(cls, fit: xr.DataTree) -> SweptRange | None:
        """The range stored in a law fit; ``None`` for a fit written before it was stored.

        With a size term, ``params_b`` (the model size) is one more axis whose range is the
        model sizes of all settings (the size law is shared by all of them)."""
        if "constant_data" not in fit.children:
            return None
        const = fit["constant_data"].to_dataset()
        if names.SWEPT_MAX not in const or names.SWEPT_MIN not in const:
            return None
        lo = const[names.SWEPT_MIN].transpose(names.SETTING_DIM, names.AXIS_DIM)
        hi = const[names.SWEPT_MAX].transpose(names.SETTING_DIM, names.AXIS_DIM)
        axes = tuple(str(a) for a in lo[names.AXIS_DIM].to_numpy())
        settings = tuple(str(s) for s in lo[names.SETTING_DIM].to_numpy())
        lo_arr, hi_arr = lo.to_numpy().astype(float), hi.to_numpy().astype(float)
        if names.PARAMS_B in const and const[names.PARAMS_B].dims == (names.SETTING_DIM,):
            size = const[names.PARAMS_B].to_numpy().astype(float)
            g = len(settings)
            lo_arr = np.column_stack([lo_arr, np.full(g, size.min())])
            hi_arr = np.column_stack([hi_arr, np.full(g, size.max())])
            axes = (*axes, names.PARAMS_B)
        return cls(axes, settings, lo_arr, hi_arr)

    def select(self, settings: Sequence[str], axes: Sequence[str]) -> SweptRange:
        """The rows of ``settings`` and columns of ``axes`` (in that order)."""
        gi = [self.settings.index(s) for s in settings]
        ai = [self.axes.index(a) for a in axes]
        return SweptRange(
            tuple(axes), tuple(settings), self.lo[np.ix_(gi, ai)], self.hi[np.ix_(gi, ai)]
        )

    def for_rows(self, settings: Sequence[str], axes: Sequence[str]) -> SweptRange:
        """The range of each row of a table (``settings``: one label per row) on ``axes``: its
        setting's, or for a setting the range does not know (one drawn from the population)
        the widest over all settings.

        >>> r = SweptRange(("env",), ("S",), np.array([[8.0]]), np.array([[256.0]]))
        >>> r.for_rows(["S", "new"], ["env"]).hi.tolist()
        [[256.0], [256.0]]
        """
        ai = [self.axes.index(a) for a in axes]
        widest_lo = np.nanmin(self.lo[:, ai], axis=0)
        widest_hi = np.nanmax(self.hi[:, ai], axis=0)
        lo = np.empty((len(settings), len(ai)))
        hi = np.empty((len(settings), len(ai)))
        known = {s: g for g, s in enumerate(self.settings)}
        for r, setting in enumerate(settings):
            g = known.get(setting)
            lo[r], hi[r] = (widest_lo, widest_hi) if g is None else (self.lo[g, ai], self.hi[g, ai])
        return SweptRange(tuple(axes), tuple(settings), lo, hi)

    def factor(self, values: Array) -> Array:
        """``values / swept_max``; ``values`` end in (setting, axis) dims."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(values / self.hi, dtype=float)

    def outside(self, values: Array) -> Array:
        """How many times outside the range on either side (1 inside): :func:`outside`."""
        return outside(values, self.lo, self.hi)

    def dataset(self) -> xr.Dataset:
        """``swept_min`` / ``swept_max`` (setting, axis) for a fit's ``constant_data``."""
        dims = (names.SETTING_DIM, names.AXIS_DIM)
        import xarray as xr  # imported on use: the command-line parser reads WARN_FACTOR

        return xr.Dataset(
            {names.SWEPT_MIN: (dims, self.lo), names.SWEPT_MAX: (dims, self.hi)},
            coords={names.SETTING_DIM: list(self.settings), names.AXIS_DIM: list(self.axes)},
        )


def outside(values: ArrayLike, lo: ArrayLike, hi: ArrayLike) -> Array:
    """How many times outside ``[lo, hi]`` each value lies, on either side (1 inside):
    ``max(values / hi, lo / values, 1)``.

    >>> outside([1024.0, 16.0, 2.0], 8.0, 256.0).tolist()
    [4.0, 1.0, 4.0]
    """
    v = np.asarray(values, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.fmax(np.fmax(v / np.asarray(hi), np.asarray(lo) / v), 1.0)
    return np.asarray(out, dtype=float)


def beyond(far: ArrayLike, factor: float) -> Array:
    """Whether an :func:`outside` factor passes the warning ``factor``, up to rounding: a
    recipe capped at ``factor`` times the data (``within_data``) is within it.

    >>> beyond([4.0 * (1 + 1e-12), 4.01], 4.0).tolist()
    [False, True]
    """
    return np.asarray(np.asarray(far, dtype=float) > factor * (1 + 1e-9))


def describe(outside: float) -> str:
    """Words for an :func:`outside` factor.

    >>> describe(1.0), describe(2.5)
    ('inside the swept range', '2.5x beyond the swept range')
    """
    if not np.isfinite(outside):
        return "outside the swept range (no finite factor)"
    if outside <= 1.0:
        return "inside the swept range"
    return f"{times(outside)} beyond the swept range"


def check_threshold(threshold: float) -> float:
    """A warning threshold must be a finite number >= 1."""
    if not (np.isfinite(threshold) and threshold >= 1.0):
        raise ValueError(f"an extrapolation threshold must be a number >= 1, got {threshold:g}")
    return float(threshold)


# How far beyond the largest swept value a bounded recipe may go: one factor for every axis,
# or one per axis (the reach the fit's out-of-scale check measured,
# bayesscale.checks.out_of_scale). An axis a mapping does not name is not capped.
Reach = float | Mapping[str, float]


def reach_factor(reach: Reach, axis: str) -> float:
    """The factor of ``axis`` (``inf`` where a per-axis reach does not name it).

    >>> reach_factor(4.0, "env"), reach_factor({"env": 2.0}, "env"), reach_factor({"env": 2.0}, "traj")
    (4.0, 2.0, inf)
    """
    if isinstance(reach, Mapping):
        return float(reach.get(axis, np.inf))
    return float(reach)


def reach_text(reach: Reach) -> str:
    """``4x`` for one factor; ``env 4x, task 2x, traj 1x`` per axis.

    >>> reach_text(4.0), reach_text({"env": 4.0, "traj": 1.0})
    ('4x', 'env 4x, traj 1x')
    """
    if isinstance(reach, Mapping):
        return ", ".join(f"{axis} {times(f)}" for axis, f in reach.items())
    return times(reach)


def reach_attr(reach: Reach | None) -> float | str:
    """``reach`` as a netCDF/JSON attribute: the factor, a JSON object per axis, or ``"none"``.

    >>> reach_attr(4.0), reach_attr({"env": 2.0}), reach_attr(None)
    (4.0, '{"env": 2.0}', 'none')
    """
    if reach is None:
        return "none"
    if isinstance(reach, Mapping):
        return json.dumps({str(a): float(f) for a, f in reach.items()})
    return float(reach)


def reach_json(reach: Reach) -> float | dict[str, float]:
    """A reach as JSON: the factor, or an object axis -> factor.

    >>> reach_json(4.0), reach_json({"env": 4.0})
    (4.0, {'env': 4.0})
    """
    if isinstance(reach, Mapping):
        return {str(a): float(f) for a, f in reach.items()}
    return float(reach)


def reach_from_attr(value: object) -> Reach | None:
    """The inverse of :func:`reach_attr`.

    >>> reach_from_attr('{"env": 2.0}'), reach_from_attr(4.0), reach_from_attr("none")
    ({'env': 2.0}, 4.0, None)
    """
    if value is None or (isinstance(value, str) and value == "none"):
        return None
    if isinstance(value, str) and value.lstrip().startswith("{"):
        return {str(a): float(f) for a, f in json.loads(value).items()}
    return float(value)  # type: ignore[arg-type]


def check_reach(reach: Reach) -> Reach:
    """A reach's factors must be finite numbers >= 1."""
    factors = reach.values() if isinstance(reach, Mapping) else [reach]
    for f in factors:
        if not (np.isfinite(f) and f >= 1):
            raise ValueError(f"a reach must be a number >= 1 per axis, got {reach_text(reach)}")
    return reach
