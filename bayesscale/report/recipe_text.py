"""The recipe as text: what ``bayesscale recipe`` prints, from the recipe's JSON summary.

Every number has one format (:func:`bayesscale.formatting.format_number`: three
significant digits, k/M/G/T from a thousand up); intervals read ``median [lower, upper]``.

>>> from bayesscale.recipe.output import to_json
>>> from bayesscale.recipe.solve import recipe
>>> from bayesscale.recipe.synthetic import synthetic_fit
>>> text = format_recipe(to_json(recipe(synthetic_fit(draws=20, spread=0.0), [1e5])))
>>> text.splitlines()[0].startswith("cost model: exact")
True
"""

from __future__ import annotations

from typing import Any

from bayesscale.data.extrapolation import reach_text
from bayesscale.formatting import format_number, times
from bayesscale.formatting import money as money_text
from bayesscale.recipe.notes import discount_note, price_unit_note


def _fmt(x: float | str | None) -> str:
    """One number format for every cell: 3 significant digits, k/M/G from a thousand up."""
    if x is None:
        return "n/a"
    if isinstance(x, str):
        return format_number(float(x), None)  # "inf" / "-inf"
    return format_number(x, None)


def _interval(t: dict[str, float | str | None]) -> str:
    return f"{_fmt(t['median'])} [{_fmt(t['lower'])}, {_fmt(t['upper'])}]"


UNITS_BOUGHT = "units bought (a synthetic unit counts as one, before its discount kappa)"


def format_recipe(summary: dict[str, Any]) -> str:
    """The text ``bayesscale recipe`` prints: a table per (setting, budget) row of the recipe's
    JSON (:func:`bayesscale.recipe.output.to_json`), after the cost model, units, discounts and
    bounds it was computed with."""
    lines = _header_lines(summary)
    lines.append("")
    for row in summary["results"]:
        reach = _reach(summary, summary.get("extrapolation_warn_factor"))
        lines += _row_lines(row, summary["currency"], reach)
    return "\n".join(lines)


def _header_lines(summary: dict[str, Any]) -> list[str]:
    """What the recipe was computed with: cost model, units, discounts, bounds, intervals, and
    the legends of the markers its rows use."""
    from bayesscale.law.sensitivity import (
        FLAG_BORDERLINE,
        FLAG_DOMINATED,
        FLAG_SENSITIVE,
        MARKERS,
    )

    pct = round(100 * summary["prob"])
    cur = summary["currency"]
    powers = summary.get("cost_powers")
    units = summary.get("units", {})
    warn = summary.get("extrapolation_warn_factor")
    within = summary.get("within_data")
    lines = [
        f"cost model: {summary['cost_model']}; unit prices ({cur}): "
        + ", ".join(f"{a} {p:g}" for a, p in summary["unit_prices"].items())
        + (
            f"; cost powers: {', '.join(f'{a} {m:g}' for a, m in powers.items())}" if powers else ""
        ),
        "units: " + "; ".join(f"{a} = {u}" for a, u in units.items()),
        f"discounts: {summary['kappa']}; bounds (purchased units): "
        + ", ".join(
            f"{a} [{lo:g}, {'inf' if hi is None else f'{hi:g}'}]"
            for a, (lo, hi) in summary["bounds"].items()
        )
        + (f" (within {reach_text(within)} the largest swept values)" if within else ""),
        f"intervals: median [{pct}% equal-tailed] over posterior draws",
        f"x swept max: the decision (else the optimum's median) in {UNITS_BOUGHT} over the "
        f"largest value of the axis in the setting's data; ! = more than {warn:g}x outside the "
        "swept range",
    ]
    lines += [
        f"note: {n}"
        for n in (price_unit_note(summary), discount_note(summary.get("kappa")))
        if n is not None
    ]
    if any(r.get("exponent_flags") for r in summary["results"]):
        lines.append(
            f"{MARKERS[FLAG_DOMINATED]} / {MARKERS[FLAG_SENSITIVE]} / {MARKERS[FLAG_BORDERLINE]} "
            f"after an axis: its exponent is {FLAG_DOMINATED} / {FLAG_SENSITIVE} / "
            f"{FLAG_BORDERLINE} in that setting (bayesscale summary): the split along it leans, "
            "or may lean, on the prior"
        )
    if summary.get("headline") == "bounded to the data":
        reach = _reach(summary, warn)
        info = summary.get("reach") or {}
        lead = "what the data vouch for" if info.get("measured") else "within an assumed reach"
        lines.append(
            f"headline: {lead}. Where the unbounded recipe lies beyond the reach "
            f"({reach}) times the largest swept values, the table is the recipe bounded there, "
            "and the unbounded one follows it as an extrapolation; reach: "
            + info.get("source", "assumed")
        )
    return lines


def _reach(summary: dict[str, Any], warn: float | None) -> str:
    """The headline's reach as text (``4x``; ``env 4x, task 4x, traj 2x``)."""
    factor = (summary.get("reach") or {}).get("factor", warn)
    return "n/a" if factor is None else reach_text(factor)


def _row_lines(row: dict[str, Any], cur: str, reach: str) -> list[str]:
    """One (setting, budget) row's table and the lines under it, ending with a blank line."""
    from bayesscale.law.sensitivity import MARKERS

    lines: list[str] = []
    mark = ""
    if row.get("within_data") is False and "extrapolation_recipe" in row:
        mark = f"  |  bounded to the reach ({reach}) of the data"
    elif row.get("within_data"):
        mark = "  |  within the data"
    lines.append(f"== {row['setting']}  |  budget {money_text(row['budget'])} {cur}{mark}")
    head = ("axis", "optimum per draw", "decision", "spend", "x swept max", "exponent e_i")
    lines.append(
        f"   {head[0]:<10} {head[1]:<28} {head[2]:>9} {head[3]:>9}  {head[4]:<12} {head[5]}"
    )
    extent = row.get("extrapolation") or {}
    flags = row.get("exponent_flags") or {}
    for axis, t in row["allocation"].items():
        label = f"{axis} {MARKERS[flags[axis]]}" if axis in flags else axis
        dec = _fmt(row["decision"][axis]) if "decision" in row else "-"
        if "decision_spend" in row:
            money = _fmt(row["decision_spend"][axis])
        elif "spend" in row:
            money = _fmt(row["spend"][axis]["median"])
        else:
            money = "-"
        expo = _interval(row["recipe_exponent"][axis])
        factor = _factor(extent, axis)
        lines.append(f"   {label:<10} {_interval(t):<28} {dec:>9} {money:>9}  {factor:<12} {expo}")
    if "trajectories" in row:
        tr = row["trajectories"]
        text = f"   trajectories: optimum {_interval(tr['optimum'])}"
        if "decision" in tr:
            text += f"; decision {_fmt(tr['decision'])}"
        lines.append(text)
    spent = row.get("budget_spent")
    if spent is not None and spent < 0.99 * row["budget"]:
        lines.append(
            f"   spent: {_fmt(spent)} of {_fmt(row['budget'])} {cur}: the bounds leave the "
            "rest unspent"
        )
    if "success_at_decision" in row:
        lines.append(
            f"   success of the decision: {_interval(row['success_at_decision'])} "
            f"(expected {_fmt(row['expected_success'])})"
        )
    for b, entry in row.get("baselines", {}).items():
        text = f"   vs {b:<11} success {_interval(entry['success'])}"
        if "gain_of_decision" in entry:
            text += f"; gain {_interval(entry['gain_of_decision'])}"
        if "compute_multiplier" in entry:
            text += f"; budget x needed {_interval(entry['compute_multiplier'])}"
        lines.append(text)
    for key, value in row.items():
        if key.startswith("switch_price"):
            lines.append(f"   {key} ({cur} per unit): {_interval(value)}")
    if "extrapolation_recipe" in row:
        lines += _extrapolation_lines(row, cur)
    lines.append("")
    return lines


def _factor(extent: dict[str, Any], axis: str) -> str:
    """The decision's (else the optimum's median) factor over the largest swept value."""
    if not extent:
        return "n/a"
    e = extent["axes"][axis]
    over_max = e.get("decision_over_max", e["optimum_over_max"]["median"])
    factor = "n/a" if over_max is None else times(float(over_max))
    return factor + (" !" if axis in extent["beyond"] else "")


def _extrapolation_lines(row: dict[str, Any], cur: str) -> list[str]:
    """The unbounded recipe of a bounded row, labelled as the extrapolation it is, and what
    to sweep first."""
    far = row["extrapolation_recipe"]
    extent = far.get("extrapolation") or {}
    use = "decision" if "decision" in far else None
    parts = []
    for axis, t in far["allocation"].items():
        value = _fmt(far["decision"][axis]) if use else _fmt(t["median"])
        parts.append(f"{axis} {value} ({_factor(extent, axis)})")
    lines = [
        "   EXTRAPOLATION, not vouched for by the data (the unbounded recipe at this budget): "
        + ", ".join(parts)
    ]
    tr = far.get("trajectories")
    if tr:
        n = tr.get("decision", tr["optimum"]["median"])
        lines.append(f"     trajectories {_fmt(n)}")
    if "success_at_decision" in far:
        lines.append(f"     success it predicts: {_interval(far['success_at_decision'])}")
    else:
        lines.append(f"     success it predicts: {_interval(far['success_at_own_optimum'])}")
    if row.get("sweep_further"):
        lines.append(
            "   sweep further first: " + row["sweep_further"] + ", then refit: more "
            "budget than the bounded recipe spends buys sizes the law has not seen"
        )
    return lines
