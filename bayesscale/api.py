"""What ``import bayesscale as bs`` offers: fit, load, and the inputs they take.

.. code-block:: python

    import bayesscale as bs

    fit = bs.fit("data/reference/observations.csv")          # a LawFit
    print(fit.summary_text())
    fit.recipe([1e5, 1e6], summarize=True)
    fit.check("data/reference/heldout.csv")
    fit.save("fits/law.nc")
    pricing = bs.fit_pricing("data/pricing/pricing.csv")      # a PricingFit
    same = bs.load("fits/law.nc")

Fitting imports PyMC and JAX (seconds). Loading and reading a fit do not, when the fit carries
its identification figures (every fit written by ``bayesscale fit`` or ``LawFit.save``): for
an older file, the first ``summary`` computes them with ArviZ, which loads JAX.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from bayesscale import names
from bayesscale.checks.form_scores import FormScores
from bayesscale.core.forms import DEFAULT_STACK
from bayesscale.data.fitfile import load_fit
from bayesscale.data.observations import Table, frame_sha256, load_observations, read_table
from bayesscale.data.spec import ModelSpec, forms_to_fit, load_spec, with_exponent_prior_scale
from bayesscale.fits.caveats import announce, failed_fit, single_setting, verdict
from bayesscale.fits.law import LawFit
from bayesscale.fits.pricing import PricingFit
from bayesscale.law.predict import validate_rows
from bayesscale.sampling.config import FitConfig

if TYPE_CHECKING:
    from bayesscale.pricing.spec import PricingSpec
    from bayesscale.pricing.table import PricingTable


def fit(
    data: str | Path | Table | pd.DataFrame,
    spec: str | Path | ModelSpec | None = None,
    config: FitConfig | None = None,
    *,
    prior_scale: float = 1.0,
    forms: Sequence[str] | None = None,
    out_of_scale: bool = True,
    workers: int | None = None,
    ray_address: str | None = None,
    **sampling: Any,
) -> LawFit:
    """Fit the pooled scaling law of ``spec`` (default: the bundled ``agentic_rl``) to
    observations (a CSV/parquet path, a data frame or a validated table).

    ``config`` or keyword overrides of :class:`~bayesscale.sampling.config.FitConfig`
    (``draws=``, ``seed=`` …) set the sampler (``config=FitConfig().as_preview()`` for a
    preview, as ``bayesscale fit --preview``); a fit whose diagnostics
    fail is warned (:class:`~bayesscale.fits.caveats.CaveatWarning`). ``prior_scale=2`` widens
    every exponent prior twice (``bayesscale fit --prior-scale 2``): what a refit with it
    changes, the data do not identify. ``forms=["power", "offset_power"]`` fits each form on
    every axis, scores each on its out-of-scale refits and returns their stack
    (``bayesscale fit --forms``; :mod:`bayesscale.law.stack`): ``fit.forms``,
    ``fit.stack_weights``, and predictions that are the mixture. That stack is the default
    for a spec that names no axis's form (the bundled specs);
    ``forms=["power"]`` fits the power law alone, and a spec that names its forms is fitted as
    written (:func:`bayesscale.data.spec.forms_to_fit`). By default the fit also
    refits without each axis's largest scales and stores how far the law's coverage holds
    beyond the sweep (:func:`bayesscale.checks.out_of_scale.out_of_scale`; the refits are jobs
    on ``workers`` local Ray workers or the cluster at ``ray_address``): ``fit.reach``, and
    the recipe's headline bounded there. ``out_of_scale=False`` skips those refits
    (``bayesscale fit --no-out-of-scale``); the recipe then assumes a reach.

    >>> fit = bs.fit("data/reference/observations.csv", seed=1)  # doctest: +SKIP
    """
    from bayesscale.law.inference import fit as fit_law

    spec = spec if isinstance(spec, ModelSpec) else load_spec(spec)
    config = replace(config or FitConfig(), **sampling)
    spec, stack = forms_to_fit(with_exponent_prior_scale(spec, prior_scale), forms, config.preview)
    table = _table(data, spec)
    if stack:
        law, _ = LawFit.stacked(
            table, spec, stack, config, workers=workers, ray_address=ray_address
        )
    else:
        law = LawFit(fit_law(table, spec, config), table=table)
    announce([*failed_fit(law.diagnostics, "law fit"), *single_setting(len(law.settings))])
    if out_of_scale:
        law = law.checked_out_of_scale(
            table, spec, config, workers=workers, ray_address=ray_address
        )
    return law


def compare_forms(
    data: str | Path | Table | pd.DataFrame,
    spec: str | Path | ModelSpec | None = None,
    config: FitConfig | None = None,
    *,
    forms: Sequence[str] = DEFAULT_STACK,
    leave_out: Sequence[str] | None = None,
    heldout: str | Path | Table | pd.DataFrame | None = None,
    **options: Any,
) -> FormScores:
    """Which law form predicts the next scale (``bayesscale forms``): each of ``forms`` on
    every axis fitted to ``data`` (PSIS-LOO) and refitted without each ``leave_out`` rule's
    rows (default: each axis's largest value), or scored on ``heldout`` runs; the stacking
    weights on those out-of-scale rows and whether the data separate the forms
    (:func:`bayesscale.checks.form_scores.compare_forms`; ``options``: its ``prob``,
    ``workers``, ``ray_address``, ``n_boot``).

    >>> scores = bs.compare_forms("data/lab/observations.csv",
    ...                           heldout="data/lab/heldout.csv")  # doctest: +SKIP
    >>> print(scores.summary_text())  # doctest: +SKIP
    """
    from bayesscale.checks.form_scores import compare_forms as compare

    spec = spec if isinstance(spec, ModelSpec) else load_spec(spec)
    table = _table(data, spec)
    held = None
    if heldout is not None:
        frame, source, digest = _frame(heldout)
        held = Table(validate_rows(frame, spec, source, observed=True), source, digest)
    return compare(table, spec, forms, leave_out, config or FitConfig(), heldout=held, **options)


def _table(data: str | Path | Table | pd.DataFrame, spec: ModelSpec) -> Table:
    """Observations for fitting, from a path, a data frame or a table."""
    if isinstance(data, pd.DataFrame):
        return Table.from_frame(data, spec)
    return data if isinstance(data, Table) else load_observations(data, spec)


def _frame(data: str | Path | Table | pd.DataFrame) -> tuple[pd.DataFrame, str, str]:
    """Rows, their source and digest, from a path, a data frame or a table."""
    if isinstance(data, Table):
        return data.frame, data.source, data.sha256
    if isinstance(data, pd.DataFrame):
        return data, "<DataFrame>", frame_sha256(data)
    frame, digest = read_table(data)
    return frame, str(data), digest


def fit_pricing(
    data: str | Path | PricingTable,
    spec: str | Path | PricingSpec | None = None,
    config: FitConfig | None = None,
    law: LawFit | None = None,
    **sampling: Any,
) -> PricingFit:
    """Fit the discount model (default spec: the bundled ``pricing``) to a pricing table.

    ``config`` or keyword overrides of :class:`~bayesscale.sampling.config.FitConfig` set the
    sampler; unless they name a ``target_accept``, it is the pricing model's own, 0.95
    (``PRICING_TARGET_ACCEPT``, as ``bayesscale price``), also with a ``config`` made for the
    law (``FitConfig()`` names none). ``law``: a law fit whose exponents become the
    priors of the pricing fit's, as ``bayesscale price --law-fit`` does. A failed fit, or
    one made from a failed or preview law fit, is warned
    (:class:`~bayesscale.fits.caveats.CaveatWarning`).

    >>> price = bs.fit_pricing("data/pricing/pricing.csv", seed=1)  # doctest: +SKIP
    """
    from bayesscale.pricing.fit import fit_pricing as fit_discount
    from bayesscale.pricing.model import exponent_priors_from_law_fit
    from bayesscale.pricing.spec import PricingSpec, load_pricing_spec
    from bayesscale.pricing.table import PricingTable, load_pricing

    spec = spec if isinstance(spec, PricingSpec) else load_pricing_spec(spec)
    table = data if isinstance(data, PricingTable) else load_pricing(data, spec)
    config = replace(config or FitConfig(), **sampling)  # the pricing fit's own accept
    priors = exponent_priors_from_law_fit(law.tree) if law is not None else None
    source = str(law.path) if law is not None and law.path is not None else ""
    tree = fit_discount(table, spec, config, exponent_priors=priors, exponent_source=source)
    pricing = PricingFit(tree)
    caveats = failed_fit(pricing.diagnostics, "pricing fit")
    if law is not None:
        caveats += verdict(law.diagnostics, "the law fit whose exponents set its priors")
    announce(caveats)
    return pricing


def load(path: str | Path) -> LawFit | PricingFit:
    """Read a saved fit, law or pricing, as its fit object (no PyMC needed)."""
    tree = load_fit(path, kind=None)
    if tree.attrs.get(names.ATTR_KIND) == names.KIND_PRICING_FIT:
        return PricingFit(tree, path=Path(path))
    return LawFit(tree, path=Path(path))
