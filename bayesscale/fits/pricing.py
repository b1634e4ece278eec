"""A pricing fit as one object: the discount kappa(r) and collapse ratio r* of each
synthetic-data method, with checked access and its answers.

.. code-block:: text

    fit.summary()          kappa0, collapse scale, r* and peak ratio per method (``pricing-table``)
    fit.plot_collapse()    kappa(r), G+(r) or S(r) per method, with r*
    fit.save(path)         atomic, refuses to overwrite unless asked

Example
-------
>>> import bayesscale as bs
>>> pricing = bs.load("fits/pricing.nc")  # doctest: +SKIP
>>> print(pricing.summary_text())  # doctest: +SKIP
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import xarray as xr

from bayesscale import names
from bayesscale.core.intervals import DEFAULT_PROB
from bayesscale.data.fitfile import Diagnostics, FitFileError, load_fit, save_fit
from bayesscale.pricing.spec import pricing_fit_spec

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from bayesscale.pricing.spec import PricingSpec


class PricingFit:
    """A fitted discount model (``tree``: the pricing fit's :class:`xarray.DataTree`)."""

    def __init__(self, tree: xr.DataTree, path: Path | None = None):
        kind = tree.attrs.get(names.ATTR_KIND)
        if kind != names.KIND_PRICING_FIT:
            raise FitFileError(f"expected a pricing fit ({names.KIND_PRICING_FIT!r}), got {kind!r}")
        self.tree = tree
        self.path = path

    @classmethod
    def load(cls, path: str | Path) -> PricingFit:
        """Read a fit saved by :meth:`save` or ``bayesscale price --out``."""
        return cls(load_fit(path, names.KIND_PRICING_FIT), path=Path(path))

    def save(self, path: str | Path, overwrite: bool = False) -> Path:
        """Write the fit to netCDF atomically; an existing file needs ``overwrite=True``.
        The file carries the diagnostics, computed now if they were not yet."""
        self.diagnostics  # noqa: B018
        self.path = save_fit(self.tree, path, overwrite=overwrite)
        return self.path

    def __repr__(self) -> str:
        verdict = self.diagnostics.headline() or "diagnostics passed"
        return f"<PricingFit: methods {', '.join(self.methods)}; {verdict}>"

    @cached_property
    def spec(self) -> PricingSpec:
        """The pricing spec the fit was made with."""
        return pricing_fit_spec(self.tree)

    @cached_property
    def diagnostics(self) -> Diagnostics:
        """Convergence of the sampled variables (r* and the peak ratio are derived after)."""
        from bayesscale.pricing.summary import pricing_diagnostics

        return pricing_diagnostics(self.tree)

    @property
    def methods(self) -> list[str]:
        """The synthetic-data methods (generators) the fit prices."""
        return [str(m) for m in self.tree["posterior"].to_dataset()[names.METHOD_DIM].to_numpy()]

    def summary(self, prob: float = DEFAULT_PROB) -> dict[str, Any]:
        """Per method: kappa0, collapse scale, r*, peak ratio with intervals (JSON-ready)."""
        from bayesscale.pricing.summary import summarise_pricing

        return summarise_pricing(self.tree, prob)

    def summary_text(self, prob: float = DEFAULT_PROB) -> str:
        """:meth:`summary` as the text ``bayesscale pricing-table`` prints."""
        from bayesscale.pricing.summary import format_pricing_text

        return format_pricing_text(self.summary(prob))

    def plot_collapse(self, **options: Any) -> Figure:
        """``kappa(r)`` (or ``quantity="multiplier"|"success"``) per method, with r*."""
        from bayesscale.report.figures import plot_collapse

        return plot_collapse(self.tree, **options)
