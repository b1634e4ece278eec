"""The report's sections on the law, pricing, the held-out check and prior sensitivity, each
written from the fit objects (:class:`~bayesscale.fits.law.LawFit`,
:class:`~bayesscale.fits.pricing.PricingFit`); the recipe's is
:mod:`bayesscale.pipeline.report_recipe`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import xarray as xr

from bayesscale import names
from bayesscale.data.extrapolation import reach_from_attr
from bayesscale.pipeline.report_options import MAX_SETTINGS_SHOWN, ReportOptions
from bayesscale.report.markdown import (
    Sections,
    diagnostics_line,
    sentence,
    write_csv,
    write_figure,
    write_tables,
)

if TYPE_CHECKING:
    from bayesscale.core.prices import Prices
    from bayesscale.fits.law import LawFit
    from bayesscale.fits.pricing import PricingFit


SENSITIVITY_FIT = "law_wider_prior.nc"


def law_section(options: ReportOptions, law: LawFit, tmp: Path, md: Sections) -> dict[str, Any]:
    """The law's diagnostics, exponents (text, table, forest plot), what the data identify,
    and the law along each axis (of a stacked law, each form's and the stack's:
    :func:`forms_section`); saves ``fits/law.nc``. Returns the law's summary."""
    from bayesscale.report.figures import save_figure
    from bayesscale.report.tables import exponent_table, with_verdict

    summary = law.summary(prob=options.prob)
    law.save(tmp / "fits" / "law.nc")  # with its diagnostics and identification, now known
    md.add("## The law", "", diagnostics_line("law fit", law.diagnostics, law.tree))
    figures = [("exponents", law.plot_exponents())]
    if summary.get("stack") is None:  # a stack's law along each axis: its forms' figures
        figures += [(f"law_{a}", law.plot_law(a)) for a in law.spec.axis_names]
    md.add(exponent_text(summary, options.prob))
    md.add(identification_text(summary))
    exponents = with_verdict(exponent_table(summary), law.diagnostics.headline())
    md.add(*write_tables(tmp, "exponents", [("", exponents)]))
    for name, fig in figures:
        md.add(write_figure(tmp, name, fig, save_figure))
    if summary.get("stack") is not None:
        forms_section(summary["stack"], law, tmp, md)
    return summary


def forms_section(stack: dict[str, Any], law: LawFit, tmp: Path, md: Sections) -> None:
    """A stacked fit's forms (``bayesscale fit --forms``, ``report --forms``): what each form
    weighs and scores (the table ``forms``), and each form's law and the stack's with its band
    beyond the sweep, per axis (the figures ``forms_<axis>``, in place of ``law_<axis>``)."""
    from bayesscale.report.figures import save_figure
    from bayesscale.report.tables import forms_table

    weights = ", ".join(f"{form} {row['weight']:.2f}" for form, row in stack["forms"].items())
    md.add(
        "### The law's form",
        "",
        f"The law is a stack of the forms {', '.join(stack['forms'])}, each fitted to every run "
        f"and weighted by how well it predicted the runs its out-of-scale refits left out "
        f"(weights {weights}). The exponents above are the {stack['root_form']} fit's, the "
        "form with the largest weight; predictions, the figures below and the held-out check "
        "are the mixture. "
        + (
            "The data separate the forms."
            if stack["separated"]
            else "The data do not separate the forms: the weights' intervals say how little "
            "they decide, and the mixture carries that uncertainty beyond the sweep."
        ),
        "",
    )
    md.add(*write_tables(tmp, "forms", [("", forms_table(stack))]))
    for axis in law.spec.axis_names:
        md.add(write_figure(tmp, f"forms_{axis}", law.plot_forms(axis), save_figure))


def exponent_text(summary: dict[str, Any], prob: float) -> str:
    pop = summary["exponents"]["population"]
    parts = [
        f"{axis} {v['median']:.3f} [{v['lower']:.3f}, {v['upper']:.3f}]" for axis, v in pop.items()
    ]
    text = (
        f"Population exponents (posterior median [{prob:.0%} equal-tailed interval]): "
        + "; ".join(parts)
        + "."
    )
    order = summary.get("ordering")
    if order:
        text += (
            f" Posterior probability of the ordering {' > '.join(order['axes'])}: "
            f"{order['population']:.2f}."
        )
    return text


def identification_text(summary: dict[str, Any]) -> str:
    """What the data identify: contraction and power-scaling per population exponent, and
    which exponents lean on the prior (:mod:`bayesscale.law.sensitivity`)."""
    from bayesscale.law.sensitivity import MARKERS
    from bayesscale.law.summary import flagged

    ident = summary["identification"]
    parts = []
    for axis, v in summary["exponents"]["population"].items():
        text = f"{axis} {v['contraction']:.2f}"
        if v["prior_sensitivity"] is not None:
            text += f" (power-scaling sensitivity: prior {v['prior_sensitivity']:.3f}"
            text += f", likelihood {v['likelihood_sensitivity']:.3f})"
        if v["flag"]:
            text += f" {MARKERS[v['flag']]} **{v['flag']}**"
        parts.append(text)
    notes = flagged(summary)
    n_settings = sum(1 for n in notes if "(population)" not in n)
    total = len(summary["exponents"]["settings"]) * len(summary["ordering"]["axes"])
    lines = [
        "What the data identify. Contraction of each population exponent (1 - posterior / "
        "prior variance of log α; 1: the data decide it, 0: the prior does): "
        + "; ".join(parts)
        + f". Per setting, {n_settings} of {total} exponents are flagged (marked in the table). "
        f"Rule: {ident['rule']}. A flagged exponent's interval, and the ordering probability "
        "that rests on it, say as much about the prior as about the data"
        + (
            ": the section *Prior sensitivity* refits with wider exponent priors." if notes else "."
        ),
    ]
    return "\n".join(lines)


def pricing_section(
    options: ReportOptions,
    pricing: PricingFit,
    table: Any,
    caught: list[str],
    tmp: Path,
    md: Sections,
) -> None:
    """The pricing fit's verdict, its data, the kappa0 / r* table and the collapse figures."""
    from bayesscale.report.figures import save_figure
    from bayesscale.report.tables import pricing_table, with_verdict

    pricing.save(tmp / "fits" / "pricing.nc")
    verdict = pricing.diagnostics
    md.add(
        "## Pricing synthetic data",
        "",
        diagnostics_line("pricing fit", verdict, pricing.tree),
        "",
        f"Data: `{table.source}` ({len(table.frame)} usable runs, sha256 `{table.sha256[:16]}…`).",
    )
    if caught:
        md.add("Left out of the pricing fit, with the reason:", "")
        md.add(*[f"* {message}" for message in caught])
    summary = pricing.summary(prob=options.prob)
    priced = with_verdict(pricing_table(summary), verdict.headline())
    md.add(*write_tables(tmp, "pricing", [("", priced)]))
    fig = pricing.plot_collapse(quantity="kappa")
    md.add(write_figure(tmp, "collapse_kappa", fig, save_figure))
    fig = pricing.plot_collapse(quantity="success", table=table)
    md.add(write_figure(tmp, "collapse_success", fig, save_figure))


def heldout_section(
    options: ReportOptions,
    heldout: tuple[Any, pd.DataFrame],
    tmp: Path,
    law: LawFit,
    md: Sections,
) -> None:
    """The held-out check: coverage, percentiles, error, how far the runs reach; its table
    and figure."""
    from bayesscale.checks.heldout import summary as check_summary
    from bayesscale.report.figures import plot_heldout, provenance, save_figure
    from bayesscale.report.tables import heldout_table, with_verdict

    table, frame = heldout
    write_csv(tmp / "heldout.csv", frame)
    result = check_summary(frame, options.warn_beyond)
    overall = result["overall"]
    md.add(
        "## Held-out check",
        "",
        f"{overall[names.N_ROWS]} held-out runs of `{table.source}` the fit never saw: "
        f"{options.prob:.0%} posterior-predictive coverage {overall[names.COVERAGE]:.3f} "
        f"(calibrated: about {options.prob:.2f}), mean predictive percentile "
        f"{overall[names.MEAN_PERCENTILE]:.3f} (calibrated: about 0.5), mean absolute error "
        f"{overall[names.MAE]:.4f}. Intervals include seed-to-seed spread. Per row: "
        "`heldout.csv`.",
        "",
        sentence(result["calibration"]["note"]),
    )
    extent = result["extrapolation"]
    if extent:
        reach = ", ".join(f"{a} {f:.3g}x" for a, f in extent["largest_over_max"].items())
        parts = [
            f"{extent[k][names.N_ROWS]} rows {k} {extent['warn_factor']:g}x of the swept range "
            f"cover at {extent[k][names.COVERAGE]:.3f}"
            for k in ("within", "beyond")
            if extent[k] is not None
        ]
        md.add(
            f"The held-out runs reach, per axis, up to this many times the largest swept value: "
            f"{reach}; {'; '.join(parts)}. The check vouches for the law that far out, not "
            "further.",
            "",
        )
    table_md = with_verdict(heldout_table(frame), law.diagnostics.headline())
    md.add(*write_tables(tmp, "heldout", [("", table_md)]))
    fig = plot_heldout(frame, provenance=provenance(law.tree, table), fit=law.tree)
    md.add(write_figure(tmp, "heldout", fig, save_figure))


def sensitivity_section(
    options: ReportOptions,
    tmp: Path,
    summary: dict[str, Any],
    ds: xr.Dataset,
    wide: LawFit,
    pricing: PricingFit | None,
    prices: Prices,
    md: Sections,
    base: LawFit | None = None,
) -> None:
    """The ordering and the recipe under the default and the wider exponent prior. ``base``:
    of a stacked law, its power law's own fit, which the (one-form) wider-prior refit is
    compared with: its recipe is solved here at the middle budget, in ``ds``'s place."""
    from bayesscale.report.tables import Interval, Number, PaperTable

    scale = options.sensitivity_scale
    wide_summary = wide.summary(prob=options.prob)
    axes = summary["ordering"]["axes"]
    middle = options.middle_budget
    settings = [str(s) for s in ds[names.SETTING_DIM].to_numpy()][:MAX_SETTINGS_SHOWN]
    bound = reach_from_attr(ds.attrs.get("within_data", "none"))  # the headline's, alike

    def middle_recipe(fit: LawFit) -> xr.Dataset:
        return fit.recipe_result(
            [middle],
            vouched=False,
            prices=prices,
            pricing=pricing,
            settings=settings,
            max_draws=options.max_recipe_draws,
            multipliers=False,
            within_data=bound,
        ).ds

    wide_ds = middle_recipe(wide)
    if base is not None:
        ds = middle_recipe(base)
    rows: list[list[Any]] = []
    for a in axes:
        rows.append(
            [
                f"α {a} (population)",
                Interval.of(summary["exponents"]["population"][a]),
                Interval.of(wide_summary["exponents"]["population"][a]),
            ]
        )
    rows.append(
        [
            "P(" + " > ".join(axes) + ")",
            Number(summary["ordering"]["population"]),
            Number(wide_summary["ordering"]["population"]),
        ]
    )
    breaks = [len(rows)]

    def decision(recipe_ds: xr.Dataset, setting: str) -> str:
        sel = {names.SETTING_DIM: setting, names.BUDGET_DIM: middle}
        spend = recipe_ds[names.DECISION_SPEND].sel(sel)
        shares = " / ".join(
            f"{float(spend.sel({names.AXIS_DIM: a}) / spend.sum()):.2f}" for a in axes
        )
        return f"{shares} (E[p] {float(recipe_ds[names.EXPECTED_SUCCESS].sel(sel)):.3f})"

    for s in settings:
        rows.append([f"{s}: spend {' / '.join(axes)}", decision(ds, s), decision(wide_ds, s)])
    table = PaperTable(
        ["quantity", "default prior", f"exponent priors {scale:g}x as wide"],
        rows,
        caption=(
            f"Prior sensitivity: population exponents (median [{options.prob:.0%} interval]), "
            f"the ordering probability, and the recipe's decision at {middle:,.0f} "
            f"{ds.attrs.get(names.ATTR_CURRENCY, '')} (share of spend per axis and the expected "
            "success E[p] of the decision) under the default exponent priors and under priors "
            f"{scale:g}x as wide (log-sd and spreads)."
        ),
        label="tab:prior-sensitivity",
        breaks=tuple(breaks),
    )
    md.add(
        "## Prior sensitivity",
        "",
        diagnostics_line(f"wider-prior fit ({scale:g}x)", wide.diagnostics, wide.tree),
        "",
        "The law refitted with every exponent prior "
        f"{scale:g}x as wide (`bayesscale fit --prior-scale {scale:g}`: each axis's "
        "`exponent.log_sd` and `exponent_spread`; medians unchanged). A quantity that moves "
        "much was set by the prior. One that barely moves is not thereby identified: a wider "
        "prior with the same median can still pull it toward that median, which the "
        "contraction figures of the law section (and † / ‡) measure. Full fit: "
        f"`fits/{SENSITIVITY_FIT}`."
        + (
            " The law is a stack: the refit is of its power law alone, and compared with the "
            "power law's own fit, not with the stack."
            if base is not None
            else ""
        ),
    )
    md.add(*write_tables(tmp, "prior_sensitivity", [("", table)]))
