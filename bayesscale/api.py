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

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bayesscale import names
from bayesscale.data.fitfile import load_fit
from bayesscale.data.observations import Table, load_observations
from bayesscale.data.spec import ModelSpec, load_spec
from bayesscale.fits.law import LawFit
from bayesscale.fits.pricing import PricingFit
from bayesscale.sampling.config import FitConfig

if TYPE_CHECKING:
    from bayesscale.pricing.spec import PricingSpec
    from bayesscale.pricing.table import PricingTable


def fit(
    data: str | Path | Table,
    spec: str | Path | ModelSpec | None = None,
    config: FitConfig | None = None,
    **sampling: Any,
) -> LawFit:
    """Fit the pooled scaling law of ``spec`` (default: the bundled ``agentic_rl``) to
    observations (a CSV/parquet path or a validated table).

    ``config`` or keyword overrides of :class:`~bayesscale.sampling.config.FitConfig`
    (``draws=``, ``seed=``, ``preview=True`` …) set the sampler.

    >>> fit = bs.fit("data/reference/observations.csv", seed=1)  # doctest: +SKIP
    """
    from bayesscale.law.inference import fit as fit_law

    spec = spec if isinstance(spec, ModelSpec) else load_spec(spec)
    table = data if isinstance(data, Table) else load_observations(data, spec)
    config = replace(config or FitConfig(), **sampling)
    return LawFit(fit_law(table, spec, config), table=table)


def fit_pricing(
    data: str | Path | PricingTable,
    spec: str | Path | PricingSpec | None = None,
    config: FitConfig | None = None,
    law: LawFit | None = None,
    **sampling: Any,
) -> PricingFit:
    """Fit the discount model (default spec: the bundled ``pricing``) to a pricing table.

    ``law``: a law fit whose exponents become the priors of the pricing fit's, as
    ``bayesscale price --law-fit`` does.
    """
    from bayesscale.pricing.fit import fit_pricing as fit_discount
    from bayesscale.pricing.model import exponent_priors_from_law_fit
    from bayesscale.pricing.spec import PricingSpec, load_pricing_spec
    from bayesscale.pricing.table import PricingTable, load_pricing
    from bayesscale.sampling.config import PRICING_TARGET_ACCEPT

    spec = spec if isinstance(spec, PricingSpec) else load_pricing_spec(spec)
    table = data if isinstance(data, PricingTable) else load_pricing(data, spec)
    config = replace(config or FitConfig(target_accept=PRICING_TARGET_ACCEPT), **sampling)
    priors = exponent_priors_from_law_fit(law.tree) if law is not None else None
    source = str(law.path) if law is not None and law.path is not None else ""
    tree = fit_discount(table, spec, config, exponent_priors=priors, exponent_source=source)
    return PricingFit(tree)


def load(path: str | Path) -> LawFit | PricingFit:
    """Read a saved fit, law or pricing, as its fit object (no PyMC needed)."""
    tree = load_fit(path, kind=None)
    if tree.attrs.get(names.ATTR_KIND) == names.KIND_PRICING_FIT:
        return PricingFit(tree, path=Path(path))
    return LawFit(tree, path=Path(path))
