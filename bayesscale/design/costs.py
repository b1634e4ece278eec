"""What a next run costs: data beyond what is already bought, plus GPU-hours.

The cost of a run at sizes ``D`` (one value per axis) for a model of ``N`` billion parameters:

.. math::

    \\mathrm{cost} = \\sum_i c_i \\max(0, D_i - O_i)
        + h_\\mathrm{ref}\\, \\pi_\\mathrm{GPU}\\,
          \\frac{N}{N_\\mathrm{ref}} \\frac{D_\\tau}{D_{\\tau,\\mathrm{ref}}}
          \\frac{U}{U_\\mathrm{ref}} \\frac{C}{C_\\mathrm{ref}}

with ``c_i`` the unit price of axis ``i`` (the recipe's prices, ``models/prices.toml``),
``O_i`` what is already owned (the largest value of the axis in the fit's rows of the
domain, raised by every run already chosen), ``h_ref`` the GPU-hours of a reference run
(``N_ref`` billion parameters, ``D_tau,ref`` rollouts per task, ``U_ref`` updates over
``C_ref`` task-environment cells) and ``pi_GPU`` the price of one GPU-hour: GPU time is
proportional to updates x cells x rollouts (tokens) x model size.

A costs file (TOML) overrides any of the defaults::

    currency = "USD"
    [data]                      # price per unit beyond what is owned (default: the recipe's)
    env = 4.10
    task = 0.18
    traj = 0.02
    [gpu]
    price_per_hour = 2.0        # money per GPU-hour
    hours_per_run = 48.0        # GPU-hours of the reference run
    reference_params_b = 8.0
    reference_rollouts = 8
    reference_updates = 1000
    reference_cells = 256000

Example
-------
>>> costs = parse_costs('[gpu]\\nprice_per_hour = 1.0', source="<inline>")
>>> round(costs.gpu_hours(params_b=8.0, rollouts=16, updates=1000, cells=256000), 6)
96.0
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bayesscale.core.prices import DEFAULT_CURRENCY, DEFAULT_PRICES
from bayesscale.tomlfile import read_currency, read_toml

DEFAULT_PRICE_PER_HOUR = 2.0
DEFAULT_HOURS_PER_RUN = 48.0
DEFAULT_REFERENCE = {
    "reference_params_b": 8.0,
    "reference_rollouts": 8.0,
    "reference_updates": 1000.0,
    "reference_cells": 256_000.0,
}
_GPU_KEYS = ("price_per_hour", "hours_per_run", *DEFAULT_REFERENCE)


class CostsError(ValueError):
    """A costs file or value is malformed; the message names the file and key."""


@dataclass(frozen=True)
class Costs:
    """Unit prices of data (per axis) and the GPU-hour model of one run."""

    data: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    currency: str = DEFAULT_CURRENCY
    price_per_hour: float = DEFAULT_PRICE_PER_HOUR
    hours_per_run: float = DEFAULT_HOURS_PER_RUN
    reference_params_b: float = DEFAULT_REFERENCE["reference_params_b"]
    reference_rollouts: float = DEFAULT_REFERENCE["reference_rollouts"]
    reference_updates: float = DEFAULT_REFERENCE["reference_updates"]
    reference_cells: float = DEFAULT_REFERENCE["reference_cells"]
    source: str = "defaults"

    def gpu_hours(
        self,
        params_b: float | None = None,
        rollouts: float | None = None,
        updates: float | None = None,
        cells: float | None = None,
    ) -> float:
        """GPU-hours of one run (a missing size is taken at its reference)."""
        hours = self.hours_per_run
        for value, ref in (
            (params_b, self.reference_params_b),
            (rollouts, self.reference_rollouts),
            (updates, self.reference_updates),
            (cells, self.reference_cells),
        ):
            if value is not None:
                hours *= float(value) / ref
        return hours

    def data_price(self, axis: str) -> float:
        """Price per unit of ``axis`` (0 for an axis without a price: nothing to buy)."""
        return float(self.data.get(axis, 0.0))


def _positive(source: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CostsError(f"{source}: {key}: must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0:
        raise CostsError(f"{source}: {key}: must be a finite number >= 0, got {value!r}")
    return v


def parse_costs(text: str, source: str = "<string>", base: Costs | None = None) -> Costs:
    """Parse a costs TOML text over ``base`` (default: :class:`Costs` defaults)."""
    raw = read_toml(text, source, CostsError)
    unknown = sorted(set(raw) - {"currency", "data", "gpu"})
    if unknown:
        raise CostsError(f"{source}: unknown key(s) {unknown}; known: currency, data, gpu")
    out = base or Costs()
    cost_currency = read_currency(raw, out.currency, source, CostsError)
    data = raw.get("data", {})
    if not isinstance(data, dict):
        raise CostsError(f"{source}: [data] must be a table of axis = price per unit")
    prices = {**out.data, **{k: _positive(source, f"[data] {k}", v) for k, v in data.items()}}
    gpu = raw.get("gpu", {})
    if not isinstance(gpu, dict):
        raise CostsError(f"{source}: [gpu] must be a table")
    bad = sorted(set(gpu) - set(_GPU_KEYS))
    if bad:
        raise CostsError(f"{source}: [gpu]: unknown key(s) {bad}; known: {list(_GPU_KEYS)}")
    values = {k: _positive(source, f"[gpu] {k}", v) for k, v in gpu.items()}
    for key in DEFAULT_REFERENCE:
        if key in values and values[key] == 0:
            raise CostsError(f"{source}: [gpu] {key}: must be > 0")
    return replace(out, data=prices, currency=cost_currency, source=source, **values)


def load_costs(path: str | Path | None = None, base: Costs | None = None) -> Costs:
    """Costs from a TOML file over ``base``; ``None`` gives ``base`` (or the defaults)."""
    if path is None:
        return base or Costs()
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such costs file")
    return parse_costs(p.read_text(encoding="utf-8"), source=str(p), base=base)
