"""The recipe's summaries: medians and equal-tailed intervals over draws, and the JSON.

>>> from bayesscale.recipe.solve import recipe
>>> from bayesscale.recipe.synthetic import synthetic_fit
>>> s = summarize(recipe(synthetic_fit(draws=50, spread=0.0), [1e5]))
>>> "quantile" in s.dims
True
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from bayesscale import names
from bayesscale.core.intervals import DEFAULT_PROB, quantiles, tail_quantiles
from bayesscale.data.extrapolation import (
    WARN_FACTOR,
    beyond,
    check_threshold,
    outside,
    reach_from_attr,
    reach_json,
)
from bayesscale.recipe.draws import RecipeError

# --- summaries --------------------------------------------------------------------------------


def summarize(ds: xr.Dataset, prob: float = DEFAULT_PROB) -> xr.Dataset:
    """Median and equal-tailed credible interval over draws of every per-draw variable.

    Returns variables with a ``quantile`` dim (lower, median, upper); decision variables pass
    through unchanged. NaN draws (an unfundable baseline) are ignored; ``inf`` is kept.
    """
    if not 0 < prob < 1:
        raise RecipeError(f"prob must be in (0, 1), got {prob}")
    lower, upper = tail_quantiles(prob)
    q = [lower, 0.5, upper]
    out = {name: _summarize_var(da, q) for name, da in ds.data_vars.items()}
    res = xr.Dataset(out)
    res.attrs = {**ds.attrs, "prob": prob}
    return res


def _summarize_var(da: xr.DataArray, q: Sequence[float]) -> xr.DataArray:
    sample = (names.CHAIN_DIM, names.DRAW_DIM)
    if not set(sample) <= set(da.dims):
        return da
    rest = [d for d in da.dims if d not in sample]
    arr = da.transpose(*sample, *rest).to_numpy()
    vals = quantiles(arr.reshape(-1, *arr.shape[2:]), q, axis=0)
    coords = {d: da[d] for d in rest if d in da.coords}
    return xr.DataArray(
        vals, dims=(names.QUANTILE_DIM, *rest), coords={names.QUANTILE_DIM: list(q), **coords}
    )


def _json_number(x: float) -> float | str | None:
    """Strict-JSON number: NaN (undefined, e.g. an unfundable baseline) -> null, +-inf -> "inf"."""
    if np.isnan(x):
        return None
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    return float(x)


def to_json(
    ds: xr.Dataset, prob: float = DEFAULT_PROB, warn_factor: float = WARN_FACTOR
) -> dict[str, object]:
    """A JSON-ready summary: per setting and budget, intervals per axis and per baseline, and
    per axis how far the optimum and the decision lie beyond the swept range (``beyond``: the
    axes more than ``warn_factor`` times outside it)."""
    warn_factor = check_threshold(warn_factor)
    s = summarize(ds, prob)
    at = _Lookup(s)
    axes = [str(a) for a in ds[names.AXIS_DIM].to_numpy()]
    baselines = (
        [str(b) for b in ds[names.BASELINE_DIM].to_numpy()] if names.BASELINE_DIM in ds.dims else []
    )

    rows = [
        _json_row(ds, s, at, setting, budget, axes, baselines, warn_factor)
        for setting in s[names.SETTING_DIM].to_numpy()
        for budget in s[names.BUDGET_DIM].to_numpy()
    ]
    return {
        "prob": prob,
        "cost_model": ds.attrs.get(names.ATTR_COST_MODEL),
        "cost_kind": ds.attrs.get(names.ATTR_COST_KIND),
        "money_cost_powers": json.loads(ds.attrs.get(names.ATTR_COST_POWERS, "null")),
        "money_cost_weights": json.loads(ds.attrs.get(names.ATTR_COST_WEIGHTS, "null")),
        "allocation_solver_fallbacks": int(ds.attrs.get("allocation_solver_fallbacks", 0)),
        "currency": ds.attrs.get(names.ATTR_CURRENCY),
        "unit_prices": json.loads(ds.attrs.get(names.ATTR_PRICES, "{}")),
        "kappa": ds.attrs.get(names.ATTR_KAPPA_SOURCE),
        "bounds": json.loads(ds.attrs.get("bounds", "{}")),
        "anchors": json.loads(ds.attrs.get("anchors", "{}")),
        "decision_solver_failures": int(ds.attrs.get("decision_solver_failures", 0)),
        "draws_left_out": int(ds.attrs.get("draws_left_out", 0)),
        "law_forms": json.loads(ds.attrs.get(names.ATTR_LAW_FORMS, "{}")),
        "units": json.loads(ds.attrs.get("units_json", "{}")),
        "within_data": _json_attr(ds.attrs.get("within_data", "none")),
        "extrapolation_warn_factor": warn_factor,
        "results": rows,
        # the compute recipe's powers (the money cost's are money_cost_powers)
        **(
            {"cost_powers": json.loads(ds.attrs["cost_powers"])}
            if "cost_powers" in ds.attrs
            else {}
        ),
    }


def _trio(values: np.ndarray) -> dict[str, float | str | None]:
    """A summary's (lower, median, upper) as strict-JSON numbers."""
    return {
        k: _json_number(x)
        for k, x in zip(("lower", "median", "upper"), values.astype(float), strict=True)
    }


def _json_row(
    ds: xr.Dataset,
    s: xr.Dataset,
    at: _Lookup,
    setting: Any,
    budget: Any,
    axes: Sequence[str],
    baselines: Sequence[str],
    warn_factor: float,
) -> dict[str, object]:
    """One (setting, budget) row of :func:`to_json`'s ``results``."""
    sel = {names.SETTING_DIM: setting, names.BUDGET_DIM: budget}
    row: dict[str, object] = {"setting": str(setting), "budget": float(budget)}
    row["allocation"] = {a: _trio(at(names.PURCHASED, {**sel, names.AXIS_DIM: a})) for a in axes}
    if names.SPEND_SHARE in s:
        row["spend_share"] = {
            a: _trio(at(names.SPEND_SHARE, {**sel, names.AXIS_DIM: a})) for a in axes
        }
        row["spend"] = {
            a: _trio(at(names.SPEND_SHARE, {**sel, names.AXIS_DIM: a}) * float(budget))
            for a in axes
        }
    row["recipe_exponent"] = {
        a: _trio(at(names.RECIPE_EXPONENT, {**sel, names.AXIS_DIM: a})) for a in axes
    }
    row["success_at_own_optimum"] = _trio(at(names.SUCCESS_OPTIMUM, sel))
    if names.DECISION in s:
        row["decision"] = {
            a: _json_number(float(at(names.DECISION, {**sel, names.AXIS_DIM: a}))) for a in axes
        }
        row["decision_spend"] = {
            a: _json_number(float(at(names.DECISION_SPEND, {**sel, names.AXIS_DIM: a})))
            for a in axes
        }
        row["expected_success"] = _json_number(float(at(names.EXPECTED_SUCCESS, sel)))
        row["success_at_decision"] = _trio(at(names.SUCCESS_DECISION, sel))
    row["baselines"] = {b: _baseline_json(s, at, sel, b) for b in baselines}
    for name in s.data_vars:
        if str(name).startswith(names.SWITCH_PRICE):
            row[str(name)] = _trio(at(str(name), sel))
    if names.TRAJECTORIES in s:
        trajectories: dict[str, object] = {"optimum": _trio(at(names.TRAJECTORIES, sel))}
        if names.DECISION_TRAJECTORIES in s:
            trajectories["decision"] = _json_number(float(at(names.DECISION_TRAJECTORIES, sel)))
        row["trajectories"] = trajectories
    if names.DECISION_SPEND in s:
        spent = float(np.nansum(at(names.DECISION_SPEND, sel)))
    elif names.SPEND_SHARE in ds:
        shares = ds[names.SPEND_SHARE].sel(sel).sum(names.AXIS_DIM)
        spent = float(shares.median()) * float(budget)
    else:
        spent = float("nan")  # a compute budget: spent in full by construction
    row["budget_spent"] = _json_number(spent)
    row["extrapolation"] = _extent_json(at, sel, axes, warn_factor)
    return row


def _baseline_json(s: xr.Dataset, at: _Lookup, sel: Mapping[str, Any], b: str) -> dict[str, object]:
    """A row's entry for baseline ``b``: its success, and the decision's gain over it and the
    budget multiplier it needs where the summary has them."""
    entry: dict[str, object] = {
        "success": _trio(at(names.SUCCESS_BASELINE, {**sel, names.BASELINE_DIM: b}))
    }
    if names.SUCCESS_GAIN in s:
        entry["gain_of_decision"] = _trio(at(names.SUCCESS_GAIN, {**sel, names.BASELINE_DIM: b}))
    if names.COMPUTE_MULTIPLIER in s:
        entry["compute_multiplier"] = _trio(
            at(names.COMPUTE_MULTIPLIER, {**sel, names.BASELINE_DIM: b})
        )
    return entry


def exponent_flags(identification: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Setting -> ``{axis: flag}`` for the exponents the data barely identify
    (``prior-dominated`` or ``prior-sensitive``), from a law fit's identification
    (:func:`bayesscale.law.sensitivity.assess`): along such an axis the recipe's split leans
    on the prior.

    >>> exponent_flags({"settings": {"s": {"env": {"flag": None}, "traj": {"flag": "x"}}}})
    {'s': {'traj': 'x'}}
    """
    return {
        setting: {axis: e["flag"] for axis, e in entries.items() if e["flag"]}
        for setting, entries in identification["settings"].items()
    }


def flag_rows(summary: Mapping[str, Any], flags: Mapping[str, Mapping[str, str]]) -> None:
    """Add ``exponent_flags`` (:func:`exponent_flags` of the row's setting) to every row of
    :func:`to_json`'s ``results``."""
    for row in summary["results"]:
        row["exponent_flags"] = dict(flags.get(row["setting"], {}))


def _json_attr(value: object) -> object:
    """A ``within_data`` attribute as JSON: ``None``, the factor or an object per axis."""
    reach = reach_from_attr(value)
    return None if reach is None else reach_json(reach)


class _Lookup:
    """``lookup(name, {dim: label, ...})``: a summary's variable at those labels, as NumPy
    (the dims not named stay, in the variable's order): what ``s[name].sel(...)`` gives,
    without xarray's ~0.5 ms a call (a JSON row makes ~50)."""

    def __init__(self, s: xr.Dataset) -> None:
        self.s = s
        self.index = {
            str(d): {label: i for i, label in enumerate(s[d].to_numpy().tolist())}
            for d in s.dims
            if d in s.coords
        }
        self.arrays: dict[str, tuple[tuple[str, ...], np.ndarray]] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.s

    def __call__(self, name: str, at: Mapping[str, Any]) -> np.ndarray:
        if name not in self.arrays:
            da = self.s[name]
            self.arrays[name] = (tuple(str(d) for d in da.dims), da.to_numpy())
        dims, values = self.arrays[name]
        key = tuple(self.index[d][_label(at[d])] if d in at else slice(None) for d in dims)
        return np.asarray(values[key])


def _label(x: Any) -> Any:
    return x.item() if isinstance(x, np.generic) else x


def _extent_json(
    s: _Lookup, sel: Mapping[str, object], axes: Sequence[str], warn_factor: float
) -> dict[str, object] | None:
    """Per axis: the swept range, the optimum's and the decision's factor over its largest
    value, and how far outside the range the decision (else the optimum's median) lies."""
    if names.SWEPT_MAX not in s:
        return None
    per_axis: dict[str, object] = {}
    far_axes = []
    for a in axes:
        at = {**sel, names.AXIS_DIM: a}
        lo = float(
            s(names.SWEPT_MIN, {names.SETTING_DIM: sel[names.SETTING_DIM], names.AXIS_DIM: a})
        )
        hi = float(
            s(names.SWEPT_MAX, {names.SETTING_DIM: sel[names.SETTING_DIM], names.AXIS_DIM: a})
        )
        opt = s(names.EXTRAPOLATION, at)
        entry: dict[str, object] = {
            "swept_min": lo,
            "swept_max": hi,
            "optimum_over_max": {
                k: _json_number(x)
                for k, x in zip(("lower", "median", "upper"), opt.astype(float), strict=True)
            },
        }
        factor = float(s(names.EXTRAPOLATION, {**at, names.QUANTILE_DIM: 0.5}))
        if names.DECISION_EXTRAPOLATION in s:
            factor = float(s(names.DECISION_EXTRAPOLATION, at))
            entry["decision_over_max"] = _json_number(factor)
        far = float(outside(factor * hi, lo, hi))
        entry["outside"] = _json_number(far)
        if beyond(far, warn_factor):
            far_axes.append(a)
        per_axis[a] = entry
    return {"axes": per_axis, "beyond": far_axes}
