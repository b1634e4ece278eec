"""A law fit as one object: the fitted DataTree, with checked access and every answer it gives.

:class:`LawFit` owns what the outputs read from a law fit: its spec (parsed once), its
diagnostics verdict (computed once, stored with the fit), the draws of the law per setting, the
layout for prediction and the swept range. It answers the questions a notebook asks of a fit:

.. code-block:: text

    fit.summary()            exponents, ordering and identification (the ``summary`` command)
    fit.recipe(budgets)      the KKT allocation over the posterior (the ``recipe`` command)
    fit.check(heldout)       posterior-predictive check on held-out runs (``check``)
    fit.reach                how far beyond its sweep the fit's out-of-scale check vouches
                             for each axis (``bayesscale fit`` measures it)
    fit.plot_law(axis)       observations and the law with its bands; fit.plot_exponents()
    fit.plot_forms(axis)     a stacked fit's forms and their mixture beyond the sweep
    fit.save(path)           atomic, refuses to overwrite unless asked

Nothing here imports PyMC: loading a fit and reading it are fast. Fitting is
:func:`bayesscale.api.fit`, which returns a :class:`LawFit`.

Example
-------
>>> import bayesscale as bs
>>> fit = bs.load("fits/law.nc")  # doctest: +SKIP
>>> print(fit.summary_text())  # doctest: +SKIP
>>> fit.recipe([1e5, 1e6]).sel(setting=fit.settings[0])  # doctest: +SKIP
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

from bayesscale import names
from bayesscale.core.intervals import DEFAULT_PROB
from bayesscale.core.prices import load_prices
from bayesscale.data.extrapolation import WARN_FACTOR, SweptRange
from bayesscale.data.fitfile import (
    Diagnostics,
    FitFileError,
    diagnose,
    fit_spec,
    load_fit,
    save_fit,
)
from bayesscale.fits.caveats import announce
from bayesscale.law.reach import reach as measured_reach
from bayesscale.law.stack import WEIGHT, members, stack_summary

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from bayesscale.checks.form_scores import FormScores
    from bayesscale.core.prices import Prices
    from bayesscale.data.observations import Table
    from bayesscale.data.spec import ModelSpec
    from bayesscale.fits.pricing import PricingFit
    from bayesscale.law.posterior import FitLayout, LawDraws
    from bayesscale.law.predict import Prediction
    from bayesscale.recipe.result import RecipeResult
    from bayesscale.sampling.config import FitConfig


class LawFit:
    """A fitted pooled scaling law.

    ``tree`` is the fit's :class:`xarray.DataTree` (groups ``posterior``, ``sample_stats``,
    ``constant_data``, ``observed_data``, ``log_prior``; attributes name the spec, data and
    sampler); ``table`` the observations it was fitted on, when known (fits made in this
    session keep it; a loaded fit does not, and :meth:`plot_law` then needs one).
    """

    def __init__(self, tree: xr.DataTree, table: Table | None = None, path: Path | None = None):
        kind = tree.attrs.get(names.ATTR_KIND)
        if kind != names.KIND_LAW_FIT:
            raise FitFileError(f"expected a law fit ({names.KIND_LAW_FIT!r}), got {kind!r}")
        self.tree = tree
        self.table = table
        self.path = path

    @classmethod
    def load(cls, path: str | Path) -> LawFit:
        """Read a fit saved by :meth:`save` or ``bayesscale fit --out`` (no PyMC needed)."""
        return cls(load_fit(path, names.KIND_LAW_FIT), path=Path(path))

    def save(self, path: str | Path, overwrite: bool = False) -> Path:
        """Write the fit to netCDF atomically; an existing file needs ``overwrite=True``.
        The file carries the diagnostics and the identification figures, computed now if
        they were not yet, so that every later reader of it skips that work. A fit is never
        lost to them: when the identification fails, the fit is written without it (with a
        warning), and ``summary`` computes it when read."""
        self.diagnostics  # noqa: B018
        try:
            self.identification  # noqa: B018
        except Exception as exc:  # the sampled fit matters more than a figure derived from it
            warnings.warn(
                f"the fit is saved without its identification figures ({exc})",
                RuntimeWarning,
                stacklevel=2,
            )
        self.path = save_fit(self.tree, path, overwrite=overwrite)
        return self.path

    def __repr__(self) -> str:
        verdict = self.diagnostics.headline() or "diagnostics passed"
        return (
            f"<LawFit {self.spec.name!r}: {len(self.settings)} settings, axes "
            f"{', '.join(self.spec.axis_names)}; {verdict}>"
        )

    # --- what the fit is ---------------------------------------------------------------------

    @cached_property
    def spec(self) -> ModelSpec:
        """The model spec the fit was made with."""
        return fit_spec(self.tree)

    @cached_property
    def diagnostics(self) -> Diagnostics:
        """R-hat, ESS and divergences, with the verdict every output states first."""
        return diagnose(self.tree)

    @cached_property
    def identification(self) -> dict[str, Any]:
        """What the data identify of each exponent (its prior contraction, power-scaling
        sensitivity and flag; :func:`bayesscale.law.sensitivity.assess`)."""
        from bayesscale.law.sensitivity import assess

        return assess(self.tree, self.spec)

    @property
    def settings(self) -> list[str]:
        """The (model, algorithm, domain) settings, as labelled in the fit."""
        return [str(s) for s in self.tree["posterior"].to_dataset()[names.SETTING_DIM].to_numpy()]

    @cached_property
    def layout(self) -> FitLayout:
        """Settings, groups and size terms as prediction needs them."""
        from bayesscale.law.posterior import fit_layout

        return fit_layout(self.tree)

    @cached_property
    def draws(self) -> LawDraws:
        """The law's draws per setting in raw counts, what the recipe optimises; a stack's
        are the mixture of its forms, each draw with its form's shape
        (:func:`~bayesscale.law.mixed_draws.recipe_draws`)."""
        from bayesscale.law.mixed_draws import recipe_draws

        return recipe_draws(self.tree)

    @cached_property
    def swept(self) -> SweptRange | None:
        """The swept range of every axis per setting (``None`` for fits of older versions)."""

        return SweptRange.from_fit(self.tree)

    @property
    def forms(self) -> dict[str, LawFit] | None:
        """A stacked fit's forms (``bayesscale fit --forms``), each its own fit, the root's
        form first; ``None`` for a fit of one form. The stack's predictions are their mixture
        by weight (:mod:`bayesscale.law.stack`)."""
        found = members(self.tree)
        if found is None:
            return None
        return {m.form: LawFit(m.tree, table=self.table) for m in found}

    @property
    def stack_weights(self) -> dict[str, float] | None:
        """A stacked fit's weight per form; ``None`` for a fit of one form."""
        table = stack_summary(self.tree)
        if table is None:
            return None
        return {
            str(f): float(w)
            for f, w in zip(table[names.FORM_DIM].to_numpy(), table[WEIGHT].to_numpy(), strict=True)
        }

    @property
    def out_of_scale(self) -> xr.Dataset | None:
        """The out-of-scale check stored with the fit (made by ``bayesscale fit`` and
        ``bs.fit`` unless told not to; :mod:`bayesscale.checks.out_of_scale`), else ``None``."""
        if names.OUT_OF_SCALE_GROUP not in self.tree.children:
            return None
        return self.tree[names.OUT_OF_SCALE_GROUP].to_dataset()

    @property
    def reach(self) -> dict[str, float] | None:
        """Per axis the check tested, how many times beyond its largest swept value the fit's
        out-of-scale check found the law's coverage to hold (1: only within the sweep);
        ``None`` without a stored check. The recipe's headline is bounded there; an axis the
        check could not test keeps the assumed ``warn_beyond``, and the recipe says so."""
        evidence = self.out_of_scale
        return None if evidence is None else measured_reach(evidence)

    @classmethod
    def stacked(
        cls,
        table: Table,
        spec: ModelSpec,
        forms: Sequence[str],
        config: FitConfig,
        *,
        workers: int | None = None,
        ray_address: str | None = None,
    ) -> tuple[LawFit, FormScores]:
        """The stack of ``forms`` as one fit (:mod:`bayesscale.law.stack`), with the comparison
        it comes from: each form fitted to every row and scored on its out-of-scale refits
        (:func:`bayesscale.checks.form_scores.compare_forms`; jobs on ``workers`` local Ray
        workers or the cluster at ``ray_address``). ``spec`` names no form."""
        from bayesscale.checks.form_scores import compare_forms

        scores = compare_forms(
            table, spec, forms, None, config, workers=workers, ray_address=ray_address,
            keep_fits=True,
        )  # fmt: skip
        return cls(scores.stacked_tree(), table=table), scores

    def checked_out_of_scale(
        self,
        table: Table,
        spec: ModelSpec,
        config: FitConfig,
        prob: float = DEFAULT_PROB,
        *,
        workers: int | None = None,
        ray_address: str | None = None,
    ) -> LawFit:
        """This fit with its out-of-scale check made now
        (:func:`bayesscale.checks.out_of_scale.out_of_scale` of ``table`` under ``spec``, the
        spec the fit was made from; a stack's check refits every form with weight and scores
        their mixture): a new fit object, unsaved."""
        from bayesscale.checks.out_of_scale import out_of_scale

        evidence = out_of_scale(
            table, spec, config, prob, workers=workers, ray_address=ray_address,
            forms=self.stack_weights,
        )  # fmt: skip
        return self.with_out_of_scale(evidence)

    def with_out_of_scale(self, evidence: xr.Dataset) -> LawFit:
        """This fit with ``evidence`` (:func:`bayesscale.checks.out_of_scale.out_of_scale` of
        the fit's own table and spec) stored: a new fit object, unsaved."""
        tree = self.tree.copy()
        tree[names.OUT_OF_SCALE_GROUP] = xr.DataTree(evidence)
        return LawFit(tree, table=self.table, path=None)

    def _headline_reach(self, warn_beyond: float) -> tuple[float | dict[str, float], str]:
        """The recipe headline's reach and where it comes from: the measured reach per axis
        (``warn_beyond`` where the check could not test an axis; a dict), else ``warn_beyond``
        (a float: an assumption)."""
        from bayesscale.recipe.notes import REACH_ASSUMED, REACH_MEASURED

        measured = self.reach
        if measured is None:
            return warn_beyond, REACH_ASSUMED
        if not measured:
            return warn_beyond, (
                "an assumed reach, the same for every axis: the fit's out-of-scale check "
                "could test no axis (`bayesscale summary` says why)"
            )
        untested = [a for a in self.spec.axis_names if a not in measured]
        source = REACH_MEASURED
        if untested:
            source += (
                f"; {', '.join(untested)} could not be tested (see `bayesscale summary`) and "
                f"keep the assumed {warn_beyond:g}x"
            )
        return {a: measured.get(a, warn_beyond) for a in self.spec.axis_names}, source

    def with_log_likelihood(self, table: Table | str | Path | None = None) -> LawFit:
        """This fit with ArviZ's ``log_likelihood`` group (``outcome``: chain, draw, obs), for
        ``az.loo(fit.tree)`` and ``az.compare``: itself where the fit stores it (every sampled
        fit does, unless a value is not finite), else (a preview, or a fit of an older version)
        a new fit with it computed from ``table``, the fit's own table or the file its
        ``data_source`` names (checked against its ``data_sha256``)."""
        from bayesscale.checks.compare import observation_table, with_log_likelihood

        if names.LOG_LIKELIHOOD_GROUP in self.tree.children:
            return self
        data = observation_table(self.tree, table if table is not None else self.table)
        return LawFit(with_log_likelihood(self.tree, data), table=self.table, path=None)

    # --- what the fit answers ----------------------------------------------------------------

    def summary(self, prob: float = DEFAULT_PROB) -> dict[str, Any]:
        """Exponents with intervals, their ordering and identification (JSON-ready)."""
        from bayesscale.law.summary import summarise

        return summarise(self.tree, prob)

    def summary_text(self, prob: float = DEFAULT_PROB) -> str:
        """:meth:`summary` as the text ``bayesscale summary`` prints."""
        from bayesscale.law.summary import format_text

        return format_text(self.summary(prob))

    def recipe(
        self,
        budgets: float | Sequence[float],
        *,
        pricing: PricingFit | xr.DataTree | str | Path | None = None,
        prices: Prices | str | Path | None = None,
        summarize: bool = False,
        prob: float = DEFAULT_PROB,
        vouched: bool = True,
        warn_beyond: float = WARN_FACTOR,
        **options: Any,
    ) -> xr.Dataset:
        """The allocation of every draw and the decision at each budget
        (:func:`bayesscale.recipe.solve.recipe`, whose keyword ``options`` it takes);
        ``summarize=True`` returns medians and ``prob`` equal-tailed intervals instead of draws.

        ``pricing``: a pricing fit (object, tree or saved file) whose discounts price the
        synthetic axes; ``prices``: unit prices (a prices TOML file, or
        :func:`bayesscale.core.prices.load_prices`'s result; default: the paper's).
        With ``vouched`` (the default) and no ``within_data``, the recipe is what the data
        vouch for (:func:`bayesscale.recipe.vouched.vouched_recipe`): where the unbounded
        recipe lies beyond the fit's :attr:`reach` of some axis (the reach its out-of-scale
        check measured per axis; without a stored check, the assumed ``warn_beyond`` times the
        swept range), the result is the recipe bounded to that reach, its ``beyond_data``
        (setting, budget) marks those rows, and a caveat says so and where the reach comes
        from; ``vouched=False`` gives the unbounded recipe, an extrapolation.
        What the recipe cannot support (a failed or preview fit, extrapolation far beyond
        the data, exponents the data barely identify) is warned
        (:class:`~bayesscale.fits.caveats.CaveatWarning`) and kept in ``attrs["caveats"]``;
        :meth:`recipe_result` returns the same with the unbounded recipe and its JSON summary.
        """
        from bayesscale.recipe.output import summarize as summarize_recipe

        result = self.recipe_result(
            budgets,
            pricing=pricing,
            prices=prices,
            vouched=vouched,
            warn_beyond=warn_beyond,
            **options,
        )
        out = summarize_recipe(result.ds, prob) if summarize else result.ds
        out.attrs["caveats"] = "\n".join(result.notes)
        announce(result.notes)
        return out

    def recipe_result(
        self,
        budgets: float | Sequence[float],
        *,
        pricing: PricingFit | xr.DataTree | str | Path | None = None,
        prices: Prices | str | Path | None = None,
        vouched: bool = True,
        warn_beyond: float = WARN_FACTOR,
        cost_model: str | None = None,
        where: str | None = None,
        **options: Any,
    ) -> RecipeResult:
        """The recipe as :meth:`recipe` solves it, with everything said about it: the
        unbounded recipe where the headline is bounded, the notes (unannounced), and its JSON
        summary (:meth:`~bayesscale.recipe.result.RecipeResult.to_json`). ``cost_model``
        ``"compute"`` solves under a FLOPs budget
        (:func:`~bayesscale.recipe.compute.compute_recipe`, whose ``options`` it then takes);
        ``where`` says where a bounded headline's unbounded recipe is shown."""
        from bayesscale.fits.pricing import PricingFit
        from bayesscale.recipe.result import COST_COMPUTE, build_recipe

        if isinstance(budgets, int | float | np.number):  # one budget (a NumPy scalar too)
            budgets = [float(budgets)]
        if isinstance(pricing, str | Path):
            pricing = PricingFit.load(pricing)
        elif isinstance(pricing, xr.DataTree):
            pricing = PricingFit(pricing)
        if isinstance(prices, str | Path):
            prices = load_prices(prices)
        verdicts = {"law fit": self.diagnostics}
        reach, reach_source = self._headline_reach(warn_beyond)
        reach_measured = isinstance(reach, dict)
        if pricing is not None:
            verdicts["pricing fit"] = pricing.diagnostics
        if cost_model != COST_COMPUTE:
            options["prices"] = prices
            options["pricing"] = pricing.tree if pricing is not None else None
        return build_recipe(
            self.tree,
            list(budgets),
            verdicts=verdicts,
            identification=self.identification,
            vouched=vouched,
            warn_beyond=warn_beyond,
            reach=reach,
            reach_source=reach_source,
            reach_measured=reach_measured,
            cost_model=cost_model,
            **({} if where is None else {"where": where}),
            **options,
        )

    def predict(self, rows: Table | pd.DataFrame, **options: Any) -> Prediction:
        """Per-draw law and predictive parameters for ``rows``
        (:func:`bayesscale.law.predict.predict`)."""
        from bayesscale.law.predict import predict

        return predict(self.tree, rows, **options)

    def check(
        self, heldout: str | Path | Table, prob: float = DEFAULT_PROB, **options: Any
    ) -> pd.DataFrame:
        """Posterior-predictive check of held-out runs (a path or a table), one row per run
        (:func:`bayesscale.checks.heldout.check`). A failed or preview fit, rows far outside
        the swept range and intervals too narrow for the runs (coverage below the nominal
        level beyond chance) are warned (:class:`~bayesscale.fits.caveats.CaveatWarning`) and
        kept in ``attrs["caveats"]``, one per line."""
        frame, notes = self.check_result(heldout, prob, **options)
        frame.attrs["caveats"] = "\n".join(notes)
        announce(notes)
        return frame

    def check_result(
        self,
        heldout: str | Path | Table,
        prob: float = DEFAULT_PROB,
        warn_beyond: float = WARN_FACTOR,
        **options: Any,
    ) -> tuple[pd.DataFrame, list[str]]:
        """:meth:`check`'s table and its notes (:func:`bayesscale.checks.heldout.check_notes`,
        rows ``warn_beyond`` times outside the swept range noted), without warning them."""
        from bayesscale.checks.heldout import check, check_notes, load_heldout

        table = load_heldout(heldout, self.tree) if isinstance(heldout, str | Path) else heldout
        frame = check(self.tree, table, prob, **options)
        return frame, check_notes(self.diagnostics, frame, warn_beyond)

    def plot_law(self, axis: str, table: Table | None = None, **options: Any) -> Figure:
        """Observations and the posterior law along ``axis``, per setting. The observations
        are ``table``, else the ones the fit was made with: kept by a fit made in this
        session, else read from the file its ``data_source`` names (checked against its
        ``data_sha256``; pass ``table=bs.load_observations(path, fit.spec)`` where it moved)."""
        from bayesscale.checks.compare import observation_table
        from bayesscale.report.figures import plot_law

        if table is None:
            if self.table is None:
                self.table = observation_table(self.tree)
            table = self.table
        return plot_law(self.tree, table, axis, **options)

    def loo(self, table: Table | str | Path | None = None, **options: Any) -> Any:
        """PSIS-LOO of the fit (``arviz_stats.loo`` on :meth:`with_log_likelihood`'s tree:
        the stored log-likelihood, else computed from ``table``, the fit's own table or the
        file its ``data_source`` names). ``az.loo(fit.tree)`` works where the fit stores its
        log-likelihood (every sampled fit); this works for every fit."""
        from arviz_stats import loo

        return loo(self.with_log_likelihood(table).tree, **options)

    def plot_forms(self, axis: str, **options: Any) -> Figure:
        """Each form's law along ``axis`` and the stack's with its band, beyond the sweep
        (:func:`bayesscale.report.figures.forms.plot_forms`); a fit of one form draws its own
        curve alone."""
        from bayesscale.report.figures.forms import plot_forms

        return plot_forms(self.tree, axis, **options)

    def plot_exponents(self, **options: Any) -> Figure:
        """Forest plot of every setting's exponents around the population's."""
        from bayesscale.report.figures import plot_exponents

        return plot_exponents(self.tree, **options)
