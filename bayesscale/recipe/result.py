"""A recipe and everything said about it: the one object every front end reads.

:func:`build_recipe` solves the recipe over the posterior (money: :func:`~bayesscale.recipe.vouched.vouched_recipe` or
:func:`~bayesscale.recipe.solve.recipe`; compute: :func:`~bayesscale.recipe.compute.compute_recipe`)
and returns a :class:`RecipeResult`: the per-draw results, the unbounded recipe where the
headline is bounded to the data, and the notes of :func:`~bayesscale.recipe.notes.recipe_notes`.
Its :meth:`RecipeResult.to_json` is the summary ``bayesscale recipe --json`` prints and the
report writes as ``recipe.json``. :meth:`bayesscale.fits.law.LawFit.recipe_result` calls it with
the fit's cached diagnostics and identification, so nothing here reads a fit's draws twice.

>>> from bayesscale.data.fitfile import diagnose
>>> from bayesscale.recipe.synthetic import synthetic_fit
>>> fit = synthetic_fit(draws=20, spread=0.0)
>>> ident = {"settings": {}}
>>> result = build_recipe(fit, [1e3], verdicts={}, identification=ident)
>>> result.unbounded is None, result.notes
(True, [])
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import xarray as xr

from bayesscale import names
from bayesscale.core.intervals import DEFAULT_PROB
from bayesscale.data.extrapolation import WARN_FACTOR, Reach, reach_json
from bayesscale.data.fitfile import verdict
from bayesscale.recipe.compute import compute_recipe
from bayesscale.recipe.notes import REACH_ASSUMED, UNBOUNDED_IN_PYTHON, recipe_notes
from bayesscale.recipe.output import exponent_flags, flag_rows, to_json
from bayesscale.recipe.solve import recipe
from bayesscale.recipe.vouched import headline_json, vouched_recipe

if TYPE_CHECKING:
    from bayesscale.data.fitfile import Diagnostics

COST_COMPUTE = "compute"  # the cost model whose budget is FLOPs (recipe.compute)


@dataclass
class RecipeResult:
    """A solved recipe: ``ds`` the headline's per-draw results (the recipe bounded to
    ``reach`` times the data in the rows ``ds.beyond_data`` marks, when ``unbounded`` is
    given), ``unbounded`` the recipe without that bound, ``within`` the factor (one, or one per
    axis) the headline is kept within the data (``None``: not bounded), ``reach`` how far the
    headline may go and ``reach_source`` where that reach comes from, ``notes`` what it cannot
    support."""

    ds: xr.Dataset
    unbounded: xr.Dataset | None
    warn_beyond: float
    within: Reach | None
    flags: dict[str, dict[str, str]]
    verdicts: dict[str, Diagnostics]
    vouched: bool = True
    reach: Reach = WARN_FACTOR
    reach_source: str = REACH_ASSUMED
    reach_measured: bool = False  # some axis's reach comes from the fit's out-of-scale check
    notes: list[str] = field(default_factory=list)
    # to_json's summaries by prob: the notes, the command and the report read the same one
    _summaries: dict[float, dict[str, Any]] = field(default_factory=dict, repr=False)

    @property
    def verdict_notes(self) -> list[str]:
        """The notes that are the fits' verdicts (a failed or preview fit), in ``notes``."""
        return [line for what, d in self.verdicts.items() for line in verdict(d, what)]

    def to_json(self, prob: float = DEFAULT_PROB) -> dict[str, Any]:
        """The JSON summary: per setting and budget, the allocation with ``prob`` intervals,
        ``within_data`` and, on bounded rows, the unbounded row as ``extrapolation_recipe``;
        per row the exponents the data barely identify; the fits' diagnostics. Built once per
        ``prob``; each call returns its own copy (callers add to it)."""
        if prob not in self._summaries:
            self._summaries[prob] = self._summary(prob)
        return copy.deepcopy(self._summaries[prob])

    def _summary(self, prob: float) -> dict[str, Any]:
        summary = to_json(self.ds, prob, self.warn_beyond)
        if self.vouched:
            far = (
                None if self.unbounded is None else to_json(self.unbounded, prob, self.warn_beyond)
            )
            summary = headline_json(summary, far, self.reach, self.ds.get(names.BEYOND_DATA))
            summary["reach"] = {
                "factor": reach_json(self.reach),
                "source": self.reach_source,
                "measured": self.reach_measured,
            }
        flag_rows(summary, self.flags)
        summary["fit_diagnostics"] = {
            what.replace(" ", "_"): d.to_dict() for what, d in self.verdicts.items()
        }
        return summary


def build_recipe(
    fit: xr.DataTree,
    budgets: Sequence[float],
    *,
    verdicts: Mapping[str, Diagnostics],
    identification: Mapping[str, Any],
    vouched: bool = True,
    warn_beyond: float = WARN_FACTOR,
    reach: Reach | None = None,
    reach_source: str = REACH_ASSUMED,
    reach_measured: bool = False,
    cost_model: str | None = None,
    where: str = UNBOUNDED_IN_PYTHON,
    **options: Any,
) -> RecipeResult:
    """Solve the recipe of ``fit`` at ``budgets`` and say what it cannot support.

    ``verdicts``: each fit's diagnostics by what it is (``"law fit"``, ``"pricing fit"``);
    ``identification``: the law's (:func:`bayesscale.law.sensitivity.assess`); ``vouched``:
    lead with the recipe bounded to ``reach`` (default ``warn_beyond``; one factor, or one per
    axis) times the data where the unbounded one lies further
    (:func:`~bayesscale.recipe.vouched.vouched_recipe`), ``reach_source`` saying where the
    reach comes from and ``reach_measured`` whether some axis's reach was measured (else it is
    an assumption, and the headline is not called what the data vouch for); ``cost_model``:
    ``"exact"`` (default), ``"linearised"`` or ``"compute"`` (``options`` then are
    :func:`~bayesscale.recipe.compute.compute_recipe`'s); other ``options`` are
    :func:`~bayesscale.recipe.solve.recipe`'s.
    """
    unbounded = None
    reach = warn_beyond if reach is None else reach
    model: dict[str, Any] = {} if cost_model is None else {"cost_model": cost_model}
    if cost_model == COST_COMPUTE:
        ds = compute_recipe(fit, budgets, **options)
    elif vouched:
        ds, unbounded = vouched_recipe(fit, budgets, reach=reach, **model, **options)
    else:
        ds = recipe(fit, budgets, **model, **options)
    within = options.get("within_data") if unbounded is None else reach
    result = RecipeResult(
        ds=ds,
        unbounded=unbounded,
        warn_beyond=warn_beyond,
        within=within,
        flags=exponent_flags(identification),
        verdicts=dict(verdicts),
        vouched=vouched and cost_model != COST_COMPUTE,
        reach=reach,
        reach_source=reach_source,
        reach_measured=reach_measured,
    )
    result.notes = recipe_notes(
        result.to_json(),
        verdicts=verdicts,
        within=within,
        bounded=None if unbounded is None else (ds, unbounded, reach),
        reach_source=reach_source,
        solver_failures=int(ds.attrs.get("decision_solver_failures", 0)),
        where=where,
    )
    return result
