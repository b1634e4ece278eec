"""bayesscale: Bayesian scaling laws for agentic RL data.

``import bayesscale as bs``, one call to fit, and the fit object answers the rest:

>>> import bayesscale as bs
>>> fit = bs.fit("data/reference/observations.csv")  # doctest: +SKIP
>>> print(fit.summary_text())  # doctest: +SKIP
>>> fit.recipe([1e5], summarize=True)  # doctest: +SKIP
>>> fit.check("data/reference/heldout.csv")  # doctest: +SKIP
>>> fit.save("fits/law.nc")  # doctest: +SKIP

The package is layered, imports pointing down only (``tests/test_layers.py`` holds the code to
it), top to bottom:

.. code-block:: text

    cli/                   the command line, thin: parse, call a fit object, print its notes
    api                    bs.fit, bs.fit_pricing, bs.load
    pipeline/              jobs of several steps on the fit objects: the report
    design/                which runs next, the decision as a sweep file
    fits/                  LawFit, PricingFit: the one route every front end takes
    report/                rendering only: tables, figures, the recipe as text, Markdown
    recipe/ checks/ pricing/   the recipe and its notes | held-out checks, CV, LOO, SBC | kappa, r*
    law/                   the law's model, fit, summary; law/posterior.py reads every fit
    verl/                  plan, launch, ingest, count verl sweeps
    data/                  specs, observation tables, simulation, swept ranges, fit files
    core/                  pure NumPy math: laws, allocation, geometric programs, intervals
    sampling/              the MAMS/NUTS sampler on a JAX log density
    leaves                 names, atomic, tomlfile, _version, _bundled, formatting, jobs, heavy

Attributes are loaded on first use, so ``import bayesscale`` imports neither PyMC nor JAX.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from bayesscale._version import __version__

_EXPORTS = {
    "fit": "bayesscale.api",
    "fit_pricing": "bayesscale.api",
    "compare_forms": "bayesscale.api",
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
    "compare_forms",
    "fit",
    "fit_pricing",
    "load",
    "load_example",
    "load_observations",
    "load_spec",
]

if TYPE_CHECKING:
    from bayesscale.api import compare_forms, fit, fit_pricing, load
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
