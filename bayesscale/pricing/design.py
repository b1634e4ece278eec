"""The design of a pricing fit: the index arrays and reference sizes the model is built from
(methods, axes, the real and synthetic counts of every row).

>>> design = prepare_pricing(table, spec)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bayesscale import names
from bayesscale.pricing.spec import PricingSpec
from bayesscale.pricing.table import PricingTable

# --- design ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PricingDesign:
    """Arrays the pricing model needs, with coordinates."""

    methods: tuple[str, ...]
    axes: tuple[str, ...]  # priced axes, the paper's first
    method_axis: np.ndarray  # (method,) index into axes
    method_index: np.ndarray  # (obs,)
    real: np.ndarray
    synthetic: np.ndarray
    reference: np.ndarray  # (axis,) D_ref
    baseline_real: np.ndarray  # (method,)
    successes: np.ndarray | None
    trials: np.ndarray | None
    loss: np.ndarray | None

    @property
    def ratio(self) -> np.ndarray:
        return self.synthetic / self.real

    @property
    def n_obs(self) -> int:
        return int(self.real.shape[0])

    def coords(self) -> dict[str, Sequence[str] | np.ndarray]:
        return {
            names.OBS_DIM: np.arange(self.n_obs),
            names.METHOD_DIM: list(self.methods),
            names.PRICED_AXIS_DIM: list(self.axes),
        }


def prepare_pricing(table: PricingTable, spec: PricingSpec) -> PricingDesign:
    """Lay out a validated pricing table for :func:`~bayesscale.pricing.model.build_pricing_model`.

    ``D_ref`` of an axis is the geometric mean of its runs' real counts; a method's r* is
    evaluated at its largest pure-real count (its full-budget baseline).
    """
    frame = table.frame
    methods = table.methods
    axis_of = frame.groupby(names.METHOD, sort=False)[names.AXIS_COLUMN].first()
    found = list(dict.fromkeys(axis_of[list(methods)]))
    axes = tuple(
        [a for a in names.PAPER_AXES if a in found]
        + [a for a in found if a not in names.PAPER_AXES]
    )
    method_axis = np.array([axes.index(axis_of[m]) for m in methods], dtype=np.int64)
    method_index = frame[names.METHOD].map({m: i for i, m in enumerate(methods)}).to_numpy(np.int64)
    real = frame[names.REAL].to_numpy(float)
    synthetic = frame[names.SYNTHETIC].to_numpy(float)
    pure = synthetic == 0
    row_axis = method_axis[method_index]
    # D_ref at the runs' centre of mass (geometric mean of every real count on the axis), so
    # the level is pinned where the data are: at the midpoint of the pure-real sweep the level
    # and exponent were correlated at -0.7 to -0.9.
    reference = np.array([np.exp(np.log(real[row_axis == j]).mean()) for j in range(len(axes))])
    baseline = np.array([real[pure & (method_index == i)].max() for i in range(len(methods))])
    success = spec.outcome == "success"
    return PricingDesign(
        methods=methods,
        axes=axes,
        method_axis=method_axis,
        method_index=method_index,
        real=real,
        synthetic=synthetic,
        reference=reference,
        baseline_real=baseline,
        successes=frame[names.SUCCESSES].to_numpy(np.int64) if success else None,
        trials=frame[names.TRIALS].to_numpy(np.int64) if success else None,
        loss=None if success else frame[names.LOSS].to_numpy(float),
    )
