"""The report's budget recipe: the recipe the law fit answers
(:meth:`bayesscale.fits.law.LawFit.recipe_result`), written up as text, tables and figures.

The section states the cost model and units, how far the recipe lies beyond the data, the
headline recipe's tables (bounded to the data where the unbounded optimum lies further, that
one then following as an extrapolation), how far the held-out check reaches, the allocation fan
and the iso-budget curves at the middle budget. Everything it reads of the posterior comes
from the fit objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pandas as pd
import xarray as xr

from bayesscale import names
from bayesscale.data.extrapolation import reach_text
from bayesscale.formatting import times
from bayesscale.pipeline.report_options import MAX_SETTINGS_SHOWN, ReportOptions
from bayesscale.recipe.notes import discount_note, price_unit_note
from bayesscale.recipe.output import to_json
from bayesscale.recipe.result import RecipeResult
from bayesscale.recipe.vouched import mark_heldout_reach, sweep_further_text, sweep_targets
from bayesscale.report.markdown import Sections, sentence, write_figure, write_json, write_tables
from bayesscale.report.recipe_text import UNITS_BOUGHT

if TYPE_CHECKING:
    from bayesscale.core.prices import Prices
    from bayesscale.fits.law import LawFit
    from bayesscale.fits.pricing import PricingFit
    from bayesscale.report.figures.provenance import Provenance

MAX_ROWS_NAMED = 6  # rows named in a sentence of the report before "and N more"


def recipe_section(
    options: ReportOptions,
    tmp: Path,
    law: LawFit,
    pricing: PricingFit | None,
    prices: Prices,
    prov: Provenance,
    md: Sections,
    heldout: pd.DataFrame | None = None,
    note: str | None = None,
) -> RecipeResult:
    """Solve the recipe at the report's budgets and write its section (``recipe.json``, the
    tables ``recipe*``, the figures ``allocation*`` and ``iso_budget``); ``note``: a
    paragraph on which law the recipe is solved on, first in the section."""
    result = law.recipe_result(
        list(options.budgets),
        pricing=pricing,
        prices=prices,
        warn_beyond=options.warn_beyond,
        max_draws=options.max_recipe_draws,
        multipliers=False,
        within_data=options.within_data,
    )
    summary = result.to_json(options.prob)
    far = (
        None
        if result.unbounded is None
        else to_json(result.unbounded, options.prob, options.warn_beyond)
    )
    results = cast(list[dict[str, Any]], summary["results"])
    reach = None
    if heldout is not None:
        from bayesscale.checks.heldout import extent_summary

        extent = extent_summary(heldout, options.warn_beyond)
        reach = None if extent is None else extent["largest_over_max"]
    outside = None if reach is None else mark_heldout_reach(results, reach)
    write_json(tmp / "recipe.json", summary)
    md.add("## The budget recipe", "", *([note, ""] if note else []))
    md.add(_intro(summary, options), "", _extent_text(far or summary, options))
    settings = [str(s) for s in result.ds[names.SETTING_DIM].to_numpy()][:MAX_SETTINGS_SHOWN]
    shown = sorted({options.budgets[0], options.middle_budget, options.budgets[-1]})
    if result.unbounded is not None:
        md.add(_bounded_text(results, result), "")
    _tables(tmp, md, result, result.ds, shown, settings, options, "recipe", "tab:recipe")
    write_tables(
        tmp, "recipe", [("all", _table(result, result.ds, None, None, options, "tab:recipe-all"))]
    )
    if reach is not None and outside is not None:
        md.add(_heldout_reach_text(reach, outside, len(results)), "")
    md.add(
        f"Shown: {len(settings)} of {result.ds.sizes[names.SETTING_DIM]} settings at "
        f"{len(shown)} of {len(options.budgets)} budgets; every setting and budget: "
        "`tables/recipe_all.md` (`.tex`).",
        "",
    )
    short = [r for r in results if r["budget_spent"] < 0.99 * r["budget"]]
    if short:
        md.add(
            f"In {len(short)} of {len(results)} rows the bounds leave part of the budget unspent "
            f"(at {short[-1]['budget']:,.0f} {summary['currency']}, "
            f"{short[-1]['budget_spent']:,.0f} is spent): more money buys nothing the data "
            "can vouch for.",
            "",
        )
    md.add(_allocation_figure(tmp, result.ds, prov, settings, law, "allocation"))
    if result.unbounded is not None and far is not None:
        _extrapolation_subsection(tmp, md, result, far, shown, settings, prov, law, options)
    _iso_budget(tmp, md, result, law, pricing, prices, settings, prov, options, summary)
    return result


def _intro(summary: dict[str, Any], options: ReportOptions) -> str:
    """The cost model, prices, discounts and units, and what the tables summarise."""
    units = cast(dict[str, str], summary["units"])
    prices = cast(dict[str, float], summary["unit_prices"])
    notes = (price_unit_note(summary), discount_note(cast(str, summary.get("kappa"))))
    return (
        f"Cost: {summary['cost_model']}; unit prices ({summary['currency']}): "
        + ", ".join(f"{a} {p:g}" for a, p in prices.items())
        + f". Discounts: {summary['kappa']}. Units: "
        + "; ".join(f"{a} = {u}" for a, u in units.items())
        + ". "
        + "".join(sentence(n) + " " for n in notes if n is not None)
        + "Each posterior draw's optimal allocation (exact KKT), summarised as posterior median "
        f"[{options.prob:.0%} equal-tailed interval]; the decision is the one allocation that "
        "maximises expected success. Full results: `recipe.json`."
    )


def _bounded_text(results: list[dict[str, Any]], result: RecipeResult) -> str:
    """Why the headline tables hold the recipe bounded to the data, and where its reach
    comes from."""
    n_far = sum(1 for r in results if r.get("within_data") is False)
    lead = "What the data vouch for" if result.reach_measured else "Within an assumed reach"
    return (
        f"**{lead}.** In {n_far} of {len(results)} (setting, budget) rows "
        f"the unbounded optimum lies beyond the reach ({reach_text(result.reach)}) times the "
        "largest swept value of an axis, so the table below is the recipe with every axis "
        f"bounded at its reach, in units bought. The reach is {result.reach_source}. The "
        "unbounded recipe follows, labelled as the extrapolation it is."
    )


def _table(
    result: RecipeResult,
    ds: xr.Dataset,
    budgets: Sequence[float] | None,
    settings: Sequence[str] | None,
    options: ReportOptions,
    label: str,
) -> Any:
    """One recipe table of ``ds``, marked with the fits' verdicts."""
    from bayesscale.report.tables import recipe_table, with_verdict

    headline = "; ".join(
        f"{what}: {d.headline()}" for what, d in result.verdicts.items() if d.headline()
    )
    table = recipe_table(
        ds,
        budgets=budgets,
        settings=settings,
        prob=options.prob,
        warn_factor=options.warn_beyond,
        label=label,
        exponent_flags=result.flags,
    )
    return with_verdict(table, headline or None)


def _tables(
    tmp: Path,
    md: Sections,
    result: RecipeResult,
    ds: xr.Dataset,
    budgets: Sequence[float],
    settings: Sequence[str],
    options: ReportOptions,
    name: str,
    label: str,
) -> None:
    md.add(*write_tables(tmp, name, [("", _table(result, ds, budgets, settings, options, label))]))


def _heldout_reach_text(reach: dict[str, float], outside: list[str], n_rows: int) -> str:
    """Which rows of the recipe stay within the reach of the held-out runs."""
    held = ", ".join(f"{a} {times(f)}" for a, f in reach.items())
    text = (
        f"**What the held-out check covers.** The held-out runs reach, per axis, this many "
        f"times the largest swept value: {held}. {n_rows - len(outside)} of "
        f"{n_rows} rows stay within that reach on every axis"
    )
    if not outside:
        return text + "."
    more = f"; and {len(outside) - MAX_ROWS_NAMED} more" if len(outside) > MAX_ROWS_NAMED else ""
    return (
        text
        + "; beyond it (the law untested there): "
        + "; ".join(outside[:MAX_ROWS_NAMED])
        + more
        + " (`within_heldout_reach` in `recipe.json`)."
    )


def _allocation_figure(
    tmp: Path,
    ds: xr.Dataset,
    prov: Provenance,
    settings: Sequence[str],
    law: LawFit,
    name: str,
) -> str:
    from bayesscale.report.figures import plot_allocation, save_figure

    fig = plot_allocation(ds, provenance=prov, settings=settings, fit=law.tree)
    return write_figure(tmp, name, fig, save_figure)


def _extrapolation_subsection(
    tmp: Path,
    md: Sections,
    result: RecipeResult,
    far: dict[str, Any],
    shown: Sequence[float],
    settings: Sequence[str],
    prov: Provenance,
    law: LawFit,
    options: ReportOptions,
) -> None:
    """The unbounded recipe, labelled as the extrapolation it is, and what to sweep first."""
    assert result.unbounded is not None
    targets = sweep_targets(cast(list[dict[str, Any]], far["results"]), result.reach)
    further = sweep_further_text(targets)
    md.add(
        "### Extrapolation: the unbounded recipe (not vouched for by the data)",
        "",
        "The optimum with no bound but the box's, at the same budgets: `!` marks the axes "
        f"more than {options.warn_beyond:g}x outside the swept range. A power law fitted "
        "over the sweep says little there. Sweep further first, then refit: "
        + (further or "(no axis)")
        + ".",
        "",
    )
    _tables(
        tmp,
        md,
        result,
        result.unbounded,
        shown,
        settings,
        options,
        "recipe_extrapolation",
        "tab:recipe-extrapolation",
    )
    md.add(
        "The unbounded recipe's allocation (an extrapolation; shaded where it lies beyond "
        "the data):",
        "",
    )
    md.add(
        _allocation_figure(tmp, result.unbounded, prov, settings, law, "allocation_extrapolation")
    )


def _iso_budget(
    tmp: Path,
    md: Sections,
    result: RecipeResult,
    law: LawFit,
    pricing: PricingFit | None,
    prices: Prices,
    settings: Sequence[str],
    prov: Provenance,
    options: ReportOptions,
    summary: dict[str, Any],
) -> None:
    """Iso-budget curves at the middle budget, through the decision."""
    from bayesscale.recipe.iso_budget import iso_budget
    from bayesscale.report.figures import plot_iso_budget, save_figure

    middle = options.middle_budget
    sel = {names.BUDGET_DIM: middle, names.SETTING_DIM: settings}
    decision = result.ds[names.DECISION_SPEND].sel(sel)
    iso = iso_budget(
        law.tree,
        middle,
        prices=prices,
        pricing=pricing.tree if pricing is not None else None,
        settings=settings,
        reference_spend=decision.transpose(names.SETTING_DIM, names.AXIS_DIM).to_numpy(),
        max_draws=options.max_recipe_draws,
        within_data=result.within,
    )
    fig = plot_iso_budget(iso, provenance=prov, settings=settings, recipe=result.ds, fit=law.tree)
    md.add(
        f"Iso-budget curves at {middle:,.0f} {summary['currency']}: each panel moves one axis's "
        "share of the budget and splits the rest over the other axes as the decision at this "
        "budget splits it (the figure's reference spend), so every curve passes through the "
        "decision where the decision spends the whole budget; shares outside the box (the "
        "bounds) are drawn dashed.",
        "",
    )
    md.add(write_figure(tmp, "iso_budget", fig, save_figure))


def _extent_text(summary: dict[str, Any], options: ReportOptions) -> str:
    """How far the recipe lies beyond the data, in words: the worst factor per axis over the
    largest swept value, and how many rows pass the warning factor."""
    rows = [r for r in cast(list[dict[str, Any]], summary["results"]) if r.get("extrapolation")]
    if not rows:
        return (
            "The law fit stores no swept range (an older fit): how far the recipe extrapolates "
            "is not shown. Refit to see it."
        )
    worst: dict[str, float] = {}
    ranges: dict[str, set[tuple[float, float]]] = {}
    for r in rows:
        for axis, e in r["extrapolation"]["axes"].items():
            factor = float(e.get("decision_over_max", e["optimum_over_max"]["median"]))
            worst[axis] = max(worst.get(axis, 0.0), factor)
            ranges.setdefault(axis, set()).add((e["swept_min"], e["swept_max"]))
    parts = []
    for a, found in ranges.items():
        if len(found) == 1:
            ((lo, hi),) = found
            parts.append(f"{a} {lo:,g}-{hi:,g}")
        else:
            parts.append(f"{a} varies by setting")
    swept = "; ".join(parts)
    beyond = sum(1 for r in rows if r["extrapolation"]["beyond"])
    factor = options.warn_beyond
    axes = ", ".join(f"{a} {times(f)}" for a, f in sorted(worst.items(), key=lambda kv: -kv[1]))
    text = (
        f"**How far beyond the data.** Swept ranges: {swept}. Over all settings and budgets the "
        f"decision reaches, per axis, up to this many times the largest swept value, in "
        f"{UNITS_BOUGHT}: {axes}. "
        f"{beyond} of {len(rows)} (setting, budget) rows lie more than {factor:g}x outside the "
        "swept range on some axis (the tables' last column names the axes). "
    )
    if beyond:
        text += (
            "A power law fitted over the swept range says little that far beyond it: read those "
            "rows as the law's extrapolation, not as a measured recipe; the out-of-scale "
            "cross-validation in `docs/checks.md` measures how well the law predicts one step "
            "beyond its range."
        )
    return text
