"""bayesscale: Bayesian scaling laws for agentic RL data.

``import bayesscale as bs``, one call to fit, and the fit object answers the rest:

>>> import bayesscale as bs
>>> fit = bs.fit("data/reference/observations.csv")  # doctest: +SKIP
>>> print(fit.summary_text())  # doctest: +SKIP
>>> fit.recipe([1e5], summarize=True)  # doctest: +SKIP
>>> fit.check("data/reference/heldout.csv")  # doctest: +SKIP
>>> fit.save("fits/law.nc")  # doctest: +SKIP

The package is layered, imports pointing down only:

.. code-block:: text

    cli/                   the command line, thin
    api, fits/             bs.fit, bs.load; LawFit, PricingFit (no PyMC to read a fit)
    report/                tables, figures, the recipe as text, the report folder
    checks/   recipe/      held-out checks, calibration   |  the KKT recipe over the posterior
    law/      pricing/     the law: model, fit, summary   |  the discount model, fit, summary
    data/                  specs, observation tables, simulation, swept ranges, fit files
    core/     sampling/    pure NumPy math               |  the package's NUTS driver (JAX)
    names                  every variable, dim and attribute name, once

``verl/`` (plan, launch and ingest sweeps) sits beside ``data/``. Attributes are loaded on
first use, so ``import bayesscale`` imports neither PyMC nor JAX.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from bayesscale._version import __version__

_EXPORTS = {
    "fit": "bayesscale.api",
    "fit_pricing": "bayesscale.api",
    "load": "bayesscale.api",
    "CaveatWarning": "bayesscale.fits.caveats",
    "LawFit": "bayesscale.fits.law",
    "PricingFit": "bayesscale.fits.pricing",
    "FitConfig": "bayesscale.sampling.config",
    "load_observations": "bayesscale.data.observations",
    "load_spec": "bayesscale.data.spec",
    "load_example": "bayesscale.data.examples",
}

__all__ = [
    "CaveatWarning",
    "FitConfig",
    "LawFit",
    "PricingFit",
    "__version__",
    "fit",
    "fit_pricing",
    "load",
    "load_example",
    "load_observations",
    "load_spec",
]

if TYPE_CHECKING:
    from bayesscale.api import fit, fit_pricing, load
    from bayesscale.data.examples import load_example
    from bayesscale.data.observations import load_observations
    from bayesscale.data.spec import load_spec
    from bayesscale.fits.caveats import CaveatWarning
    from bayesscale.fits.law import LawFit
    from bayesscale.fits.pricing import PricingFit
    from bayesscale.sampling.config import FitConfig


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'bayesscale' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
