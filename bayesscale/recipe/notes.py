"""Every note a recipe carries, in one place: what the command line prints on standard
error, what a notebook is warned (:class:`~bayesscale.fits.caveats.CaveatWarning`), and what the
report writes beside its tables.

The notes read the recipe's JSON summary (:func:`bayesscale.recipe.output.to_json`) and the
fits' own verdicts, never a fit object: the fits' diagnostics
(:class:`~bayesscale.data.fitfile.Diagnostics`) and the law's identification
(:func:`bayesscale.law.sensitivity.assess`). :func:`recipe_notes` assembles them in the order
they are shown:

1. the bounded headline (:func:`bounded_caveat`) where the unbounded recipe left the data;
2. each fit's verdict where its diagnostics failed (or it is a preview);
3. how far rows lie beyond the swept range (:func:`extrapolation_warning`);
4. exponents the data barely identify (:func:`exponent_flags_note`);
5. a stack's forms and their weights, which the draws mix (:func:`forms_note`);
6. settings where the expected-success optimiser failed (:func:`solver_failures_note`).

:func:`price_unit_note` and :func:`discount_note` explain the units and discounts; the recipe's
text prints them beside its table.

>>> solver_failures_note(0) is None
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import xarray as xr

from bayesscale import names
from bayesscale.data.extrapolation import Reach, describe, reach_factor, reach_text
from bayesscale.data.fitfile import verdict
from bayesscale.formatting import times
from bayesscale.law.sensitivity import FLAG_BORDERLINE, FLAG_DOMINATED, FLAG_SENSITIVE, MARKERS
from bayesscale.recipe.draws import KAPPA_FROM_PRICING_FIT
from bayesscale.recipe.vouched import rows_worst

if TYPE_CHECKING:
    from bayesscale.data.fitfile import Diagnostics

# where the reach of a bounded headline comes from (RecipeResult.reach_source)
REACH_ASSUMED = (
    "an assumed reach, the same for every axis: the fit stores no out-of-scale check "
    "(`bayesscale fit` measures one unless given --no-out-of-scale)"
)
REACH_MEASURED = (
    "the reach the fit's out-of-scale check measured per axis (`bayesscale summary` shows it)"
)
# where a bounded headline's unbounded recipe is found, from Python
UNBOUNDED_IN_PYTHON = (
    "`beyond_data` marks those rows. The unbounded recipe is an extrapolation (`vouched=False`)"
)


def recipe_notes(
    summary: Mapping[str, Any],
    *,
    verdicts: Mapping[str, Diagnostics],
    within: Reach | None,
    bounded: tuple[xr.Dataset, xr.Dataset, Reach] | None = None,
    solver_failures: int = 0,
    where: str = UNBOUNDED_IN_PYTHON,
    reach_source: str = REACH_ASSUMED,
) -> list[str]:
    """Every note of a recipe, in the order they are shown (see the module docstring).

    ``summary``: the recipe's JSON with ``exponent_flags`` on its rows
    (:func:`bayesscale.recipe.output.flag_rows`); ``verdicts``: each fit's diagnostics by what
    it is (``"law fit"``, ``"pricing fit"``); ``within``: the factor the recipe was kept within
    the data, if any; ``bounded``: ``(headline, unbounded, reach)`` when the headline is
    the bounded recipe; ``where``: where the unbounded recipe is to be found;
    ``reach_source``: where the reach comes from.
    """
    notes = [] if bounded is None else [bounded_caveat(*bounded, where=where, source=reach_source)]
    notes += [line for what, d in verdicts.items() for line in verdict(d, what)]
    notes += [
        line
        for line in (
            extrapolation_warning(summary, within),
            exponent_flags_note(summary),
            forms_note(summary),
            solver_failures_note(solver_failures),
        )
        if line is not None
    ]
    return notes


def bounded_caveat(
    bounded: xr.Dataset,
    unbounded: xr.Dataset,
    reach: Reach,
    where: str = UNBOUNDED_IN_PYTHON,
    source: str = REACH_ASSUMED,
) -> str:
    """The caveat of a bounded headline: how many rows, how far the unbounded recipe went, the
    reach (one factor, or one per axis) and where it comes from (``source``), and what to do;
    ``where`` says where the unbounded recipe is to be found."""
    beyond = bounded[names.BEYOND_DATA]
    worst = rows_worst(unbounded)
    axes = ", ".join(f"{a} {times(f)}" for a, f in worst.items() if f > reach_factor(reach, a))
    return (
        f"in {int(beyond.sum())} of {beyond.size} (setting, budget) rows the unbounded recipe "
        f"asks for more than its reach ({reach_text(reach)}) times the largest swept value of "
        f"an axis (up to: {axes}); those rows are the recipe within that reach of the data "
        f"({source}); {where}: sweep further first, then refit"
    )


def extrapolation_warning(summary: Mapping[str, Any], within: Reach | None) -> str | None:
    """One line when rows of the recipe's JSON lie beyond its warning threshold (how many, the
    worst factor per axis, and what keeps the recipe inside the data), a note when the fit
    stores no swept range, else ``None``. ``within``: the ``--within-data`` factor, if any."""
    results = summary["results"]
    if results and not any(r.get("extrapolation") for r in results):
        return (
            "note: this fit stores no swept range (written by an older version): refit it to "
            "see how far the recipe extrapolates"
        )
    beyond = [r for r in results if r.get("extrapolation") and r["extrapolation"]["beyond"]]
    if not beyond:
        return None
    worst: dict[str, float] = {}
    for r in beyond:
        for axis in r["extrapolation"]["beyond"]:
            factor = _as_float(r["extrapolation"]["axes"][axis]["outside"])
            worst[axis] = max(worst.get(axis, 0.0), factor)
    threshold = summary["extrapolation_warn_factor"]
    axes = ", ".join(
        f"{a} up to {describe(f).removesuffix(' the swept range')}"
        for a, f in sorted(worst.items(), key=lambda kv: -kv[1])
    )
    hint = (
        f"--within-data {threshold:g}, or within_data={threshold:g} in Python, keeps the "
        f"recipe within {threshold:g}x"
        if within is None
        else "with --within-data, what remains lies below the swept range"
    )
    return (
        f"warning: {len(beyond)} of {len(results)} (setting, budget) rows lie more than "
        f"{threshold:g}x outside the swept range: {axes}; a power law says little that far "
        f"beyond the range it was fitted on ({hint})"
    )


def exponent_flags_note(summary: Mapping[str, Any]) -> str | None:
    """One note when rows of the recipe's JSON carry ``exponent_flags``
    (:func:`bayesscale.recipe.output.flag_rows`): which axes the data barely identify, in how
    many settings, and what to do; else ``None``."""
    settings = {row["setting"]: row.get("exponent_flags", {}) for row in summary["results"]}
    counts: dict[tuple[str, str], int] = {}
    for marked in settings.values():
        for axis, flag in marked.items():
            counts[(axis, flag)] = counts.get((axis, flag), 0) + 1
    if not counts:
        return None
    order = {FLAG_DOMINATED: 0, FLAG_SENSITIVE: 1, FLAG_BORDERLINE: 2}
    parts = [
        f"{axis} {flag} ({MARKERS[flag]}) in {n} of {len(settings)} settings"
        for (axis, flag), n in sorted(counts.items(), key=lambda kv: (order[kv[0][1]], -kv[1]))
    ]
    return (
        "note: exponents the data barely identify, marked in the table: "
        f"{'; '.join(parts)}. Where the decision leans on such an axis it says as much about "
        "the prior as about the data: refit with `bayesscale fit --prior-scale 2` (in Python, "
        "`bs.fit(..., prior_scale=2)`) and compare (docs/identification.md)"
    )


def forms_note(summary: Mapping[str, Any]) -> str | None:
    """One note when the recipe mixes a stack's forms: their weights, and what that means.

    >>> forms_note({"law_forms": {"power": 0.7, "offset_power": 0.3}})[:45]
    'note: the law is a stack of forms (power 0.70'
    >>> forms_note({"law_forms": {}}) is None
    True
    """
    forms = summary.get("law_forms") or {}
    if len(forms) < 2:
        return None
    listed = ", ".join(f"{form} {float(w):.2f}" for form, w in forms.items())
    return (
        f"note: the law is a stack of forms ({listed}); every draw's allocation is solved "
        "under its own form and the draws are mixed by weight, so the intervals include the "
        "uncertainty about the form"
    )


def solver_failures_note(failures: int) -> str | None:
    """One note when the expected-success optimiser failed for some (setting, budget) pairs.

    >>> solver_failures_note(0) is None, solver_failures_note(2)[:40]
    (True, 'note: the expected-success optimiser did')
    """
    if not failures:
        return None
    return (
        f"note: the expected-success optimiser did not converge for {failures} (setting, "
        "budget) pair(s); the better of its last point and the median per-draw optimum is "
        "reported there"
    )


def _as_float(x: float | str | None) -> float:
    """A JSON number back to a float (``"inf"`` too; ``None`` is NaN)."""
    return float("nan") if x is None else float(x)


def price_unit_note(summary: Mapping[str, Any]) -> str | None:
    """How the money cost prices trajectories (where an axis is bought as trajectories), or,
    under the paper's linearised convention, what its rollout price means; else ``None``."""
    powers = summary.get("money_cost_powers")
    prices = summary.get("unit_prices", {})
    axes = list(prices)
    if not powers or len(powers) != len(axes):
        return None
    weights = summary.get("money_cost_weights") or [prices[a] for a in axes]
    for i, a in enumerate(axes):
        per_unit = weights[i] / prices[a]
        if not math.isclose(per_unit, 1.0) and not any(
            p for j, p in enumerate(powers[i]) if j != i
        ):
            return (
                f"the {a} price is per trajectory (one rollout of one task): a run trains on "
                f"{per_unit:,.6g} task-environment cells, so an allocation buys {per_unit:,.6g} x "
                f"{a} trajectories"
            )
    for i, row in enumerate(powers):
        others = [axes[j] for j, p in enumerate(row) if p and j != i]
        if not others:
            continue
        times_ = " x ".join([*others, axes[i]])
        if summary.get("cost_kind") == "linearised":
            return (
                f"the paper's linearised convention: one {axes[i]} unit is priced at the "
                f"{axes[i]} price x the optimum's {' x '.join(others)} (a fixed point per draw), "
                f"so the money spent equals {times_} trajectories at the {axes[i]} price; it is "
                "not the optimum of that money (--cost exact is)"
            )
        return (
            f"the {axes[i]} price is per trajectory (one rollout of one task): an allocation "
            f"buys {times_} trajectories"
        )
    return None


def discount_note(kappa_source: str | None) -> str | None:
    """Where discounts come from a pricing fit: they are small-ratio intercepts, optimistic
    where synthetic data dominate (else ``None``)."""
    if not kappa_source or KAPPA_FROM_PRICING_FIT not in kappa_source:
        return None
    return (
        "a pricing fit's discount is its small-ratio kappa0: every unit is priced as synthetic "
        "data at that rate, but past a method's collapse ratio r* synthetic data are worth "
        "less, so the recipe is optimistic where synthetic data would dominate an axis"
    )
