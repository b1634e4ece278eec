"""Unit prices of data for the budget recipe: defaults, TOML overrides, validation, and the
money a purchase costs.

Money is the sum of what is bought. Environments and tasks are priced per unit; a trajectory
is one rollout of one task, so the rollouts-per-task axis ``D_tau`` is bought as
``D_T D_tau`` trajectories (PAPER.md section 5):

.. math:: \\Phi(u) = c_E u_E + c_T u_T + c_\\mathrm{traj} u_T u_\\tau \\;(+\\, c_N N),

in purchased units ``u``; the law sees ``D_i = kappa_i u_i`` (``kappa_i`` the discount of
synthetic data, 1 for real data). With ``trajectories = "cells"`` every task is posed in
every environment and the trajectory term is ``c_traj u_E u_T u_tau``. With
``trajectories = "fixed-cells"`` and ``cells = C`` a run trains on ``C`` task-environment cells
whatever its environments and tasks (a sweep's ``[alignment] cells``,
:mod:`bayesscale.verl.plan`), so it makes ``C u_tau`` trajectories and the term is
``c_traj C u_tau``. Every other axis is priced per unit. :func:`money_cost` builds this posynomial for a fit's axes. The defaults
are the paper's, $4.10 per environment, $0.18 per task and $0.02 per trajectory, bundled in
``models/prices.toml``; a user file overrides them axis by axis::

    currency = "USD"
    [prices]
    env = 3.50
    [cost]
    trajectories = "cells"

Example
-------
>>> p = parse_prices('[prices]\\nenv = 3.5', source="<inline>")
>>> p.for_axes(["env", "task", "traj"]).tolist()
[3.5, 0.18, 0.02]
>>> cost = money_cost(["env", "task", "traj"], ["n_envs", "n_tasks", "rollouts"], p)
>>> round(float(cost([10, 100, 8])), 9)  # 35 + 18 + 0.02 x 800 trajectories
69.0
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bayesscale import _bundled, names
from bayesscale.core.geometric import Posynomial
from bayesscale.tomlfile import read_currency, read_toml

PRICES_FILE = _bundled.root() / "models" / "prices.toml"  # the repository's, shipped inside
DEFAULT_PRICES: dict[str, float] = {names.ENV: 4.10, names.TASK: 0.18, names.TRAJ: 0.02}
DEFAULT_CURRENCY = "USD"
_TOP_KEYS = ("currency", "prices", "cost")
# How many trajectories an allocation buys: tasks x rollouts per task (each task lives in one
# environment), or environments x tasks x rollouts per task (every task in every environment).
TRAJ_PER_TASK = "tasks"
TRAJ_PER_CELL = "cells"
# ... or a fixed number of cells per run, C x rollouts (a sweep's [alignment] cells = C).
TRAJ_FIXED_CELLS = "fixed-cells"
TRAJECTORY_RULES = (TRAJ_PER_TASK, TRAJ_PER_CELL, TRAJ_FIXED_CELLS)
_COST_KEYS = ("trajectories", "cells")


class PricesError(ValueError):
    """A prices file or value is malformed; the message names the file and key."""


@dataclass(frozen=True)
class Prices:
    """Unit prices per axis. ``explicit`` holds the axes a user set (from a file or a mapping):
    those must exist in the fit; defaults for axes a fit lacks are simply unused."""

    unit: Mapping[str, float]
    currency: str = DEFAULT_CURRENCY
    explicit: frozenset[str] = field(default_factory=frozenset)
    source: str = "defaults"
    trajectories: str = TRAJ_PER_TASK
    cells: int | None = None  # with trajectories = "fixed-cells": the cells a run trains on

    def trajectory_rule(self) -> str:
        """How trajectories are counted, in words.

        >>> Prices(unit={}, trajectories="fixed-cells", cells=2048).trajectory_rule()
        'a run trains on 2,048 task-environment cells: trajectories = 2,048 x rollouts per cell'
        """
        if self.trajectories == TRAJ_FIXED_CELLS:
            return (
                f"a run trains on {self.cells:,} task-environment cells: trajectories = "
                f"{self.cells:,} x rollouts per cell"
            )
        if self.trajectories == TRAJ_PER_CELL:
            return "every task in every environment: trajectories = envs x tasks x rollouts"
        return "each task in one environment: trajectories = tasks x rollouts per task"

    def check_axes(self, axes: Sequence[str]) -> None:
        """Raise if a user-set price names an axis the fit does not have, or an axis of the
        fit has no price.

        >>> default_prices().check_axes(["env", "task"]) is None  # defaults may go unused
        True
        """
        unknown = sorted(set(self.explicit) - set(axes) - {names.PARAMS_B})
        if unknown:
            raise PricesError(
                f"{self.source}: prices name axis/axes {unknown} that the fit does not have; "
                f"its axes: {list(axes)}"
            )
        for axis in axes:
            if axis not in self.unit:
                raise PricesError(
                    f"{self.source}: no price for axis {axis!r} (axes with prices: "
                    f"{', '.join(sorted(self.unit))}); set one in a prices file (--prices FILE, or "
                    "prices=FILE in Python)"
                )

    def for_axes(self, axes: Sequence[str]) -> NDArray[np.float64]:
        """Prices in the order of ``axes`` (validated with :meth:`check_axes`)."""
        self.check_axes(axes)
        return np.array([self.unit[a] for a in axes], dtype=float)

    def with_overrides(self, overrides: Mapping[str, float], source: str) -> Prices:
        """A copy with ``overrides`` applied (validated) and marked explicit."""
        checked = {k: _check_price(source, k, v) for k, v in overrides.items()}
        return Prices(
            unit={**self.unit, **checked},
            currency=self.currency,
            explicit=self.explicit | frozenset(checked),
            source=source,
            trajectories=self.trajectories,
            cells=self.cells,
        )


def _check_price(source: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PricesError(f"{source}: [prices] {key}: must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise PricesError(f"{source}: [prices] {key}: must be a finite price > 0, got {value!r}")
    return v


def default_prices() -> Prices:
    """The paper's unit prices (``models/prices.toml`` documents them)."""
    return Prices(unit=dict(DEFAULT_PRICES))


def parse_prices(text: str, source: str = "<string>", base: Prices | None = None) -> Prices:
    """Parse prices TOML text over ``base`` (default: the paper's prices)."""
    raw = read_toml(text, source, PricesError, known=_TOP_KEYS)
    base = base or default_prices()
    unit_currency = read_currency(raw, base.currency, source, PricesError)
    table = raw.get("prices", {})
    if not isinstance(table, dict):
        raise PricesError(f"{source}: [prices] must be a table of axis = price")
    out = base.with_overrides(table, source)
    cost = raw.get("cost", {})
    if not isinstance(cost, dict):
        raise PricesError(f"{source}: [cost] must be a table")
    unknown = sorted(set(cost) - set(_COST_KEYS))
    if unknown:
        raise PricesError(f"{source}: [cost]: unknown key(s) {unknown}; known: {list(_COST_KEYS)}")
    rule = cost.get("trajectories", base.trajectories)
    if rule not in TRAJECTORY_RULES:
        raise PricesError(
            f"{source}: [cost] trajectories: must be one of {list(TRAJECTORY_RULES)}, got {rule!r}"
        )
    cells = cost.get("cells", base.cells if rule == base.trajectories else None)
    if rule == TRAJ_FIXED_CELLS:
        if cells is None:
            raise PricesError(
                f'{source}: [cost] trajectories = "{TRAJ_FIXED_CELLS}" needs cells = the number '
                "of task-environment cells a run trains on (a sweep's [alignment] cells)"
            )
        if isinstance(cells, bool) or not isinstance(cells, int) or cells < 1:
            raise PricesError(f"{source}: [cost] cells: must be a whole number >= 1, got {cells!r}")
    elif "cells" in cost:
        raise PricesError(
            f'{source}: [cost] cells is only used with trajectories = "{TRAJ_FIXED_CELLS}" '
            f"(trajectories here: {rule!r})"
        )
    return Prices(
        unit=out.unit,
        currency=unit_currency,
        explicit=out.explicit,
        source=source,
        trajectories=rule,
        cells=cells if rule == TRAJ_FIXED_CELLS else None,
    )


def money_cost(axes: Sequence[str], columns: Sequence[str], prices: Prices) -> Posynomial:
    """The money a purchase costs, in purchased units of ``axes`` (counting ``columns``): one
    monomial per axis, monomial ``i`` buying axis ``i`` at its unit price, except that the
    rollouts-per-task axis is bought as trajectories: ``c_traj u_T u_tau`` (times ``u_E`` with
    ``trajectories = "cells"``), where the fit has a task (and environment) axis, or
    ``c_traj C u_tau`` with ``trajectories = "fixed-cells"``.

    >>> cost = money_cost(["env", "task", "traj"], ["n_envs", "n_tasks", "rollouts"], default_prices())
    >>> cost.powers.tolist()
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 1.0, 1.0]]
    >>> fixed = parse_prices('[cost]\\ntrajectories = "fixed-cells"\\ncells = 2048')
    >>> cost = money_cost(["env", "task", "traj"], ["n_envs", "n_tasks", "rollouts"], fixed)
    >>> cost.weights.round(9).tolist(), cost.powers.tolist()  # 0.02 x 2,048 per rollout
    ([4.1, 0.18, 40.96], [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    """
    weights = prices.for_axes(axes)
    powers = np.eye(len(axes))
    cols = list(columns)
    if prices.trajectories == TRAJ_FIXED_CELLS:
        if names.ROLLOUTS in cols:
            weights[cols.index(names.ROLLOUTS)] *= float(prices.cells or 1)
    elif names.ROLLOUTS in cols and names.N_TASKS in cols:
        r = cols.index(names.ROLLOUTS)
        powers[r, cols.index(names.N_TASKS)] = 1.0
        if prices.trajectories == TRAJ_PER_CELL and names.N_ENVS in cols:
            powers[r, cols.index(names.N_ENVS)] = 1.0
    return Posynomial(weights, powers)


def load_prices(path: str | Path | None = None) -> Prices:
    """Prices from a TOML file over the defaults; ``None`` gives the defaults.

    >>> load_prices().unit["traj"]
    0.02
    """
    if path is None:
        return default_prices()
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such prices file")
    return parse_prices(p.read_text(), source=str(p))


def check_kappa(kappa: Mapping[str, float], source: str = "kappa") -> dict[str, float]:
    """Validate user discounts: each ``0 < kappa <= 1``, the worth of one synthetic unit in real
    units (``kappa = 1``: as good as real data). A discount above 1 would claim a synthetic
    unit worth more than a real one, and the recipe would then buy it as more data than was
    bought: a slip (``env=100`` for ``env=1.00``, a collapse ratio given as a discount).

    >>> check_kappa({"env": 0.7})
    {'env': 0.7}
    >>> check_kappa({"env": 100})
    Traceback (most recent call last):
    ...
    bayesscale.core.prices.PricesError: kappa: env = 100: a discount is the worth of one synthetic unit in real ones and must lie in (0, 1] (1: as good as real data)
    """
    out = {}
    for axis, value in kappa.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise PricesError(f"{source}: {axis}: must be a number, got {value!r}")
        v = float(value)
        if not math.isfinite(v) or v <= 0 or v > 1:
            raise PricesError(
                f"{source}: {axis} = {value!r}: a discount is the worth of one synthetic unit "
                "in real ones and must lie in (0, 1] (1: as good as real data)"
            )
        out[axis] = v
    return out
