"""Paper figures, one module per figure, each returning a :class:`matplotlib.figure.Figure`
with the provenance of its inputs attached; :func:`~bayesscale.report.figures.provenance.save_figure` writes it (PNG/PDF/SVG)
atomically with that provenance in the file's metadata.

========================  ======================================================================
``plot_law``              observed points and the posterior law along one axis, per setting
``plot_exponents``        forest plot of ``alpha[setting, axis]`` around ``alpha_pop[axis]``
``plot_collapse``         ``kappa(r)``, ``G+(r)`` or ``S(r)`` per synthetic-data method, with r*
``plot_allocation``       fan chart of the per-draw optimal allocation against budget
``plot_iso_budget``       success along a fixed budget as one axis's share varies
``plot_heldout``          held-out predicted against observed, with predictive intervals
========================  ======================================================================

Example
-------
>>> from bayesscale.report.figures import plot_exponents, save_figure, read_provenance
>>> save_figure(plot_exponents(fit), "exponents.png")  # doctest: +SKIP
>>> read_provenance("exponents.png").sources[0].seed  # doctest: +SKIP
11
"""

from bayesscale.report.figures.allocation import plot_allocation
from bayesscale.report.figures.collapse import plot_collapse
from bayesscale.report.figures.exponents import plot_exponents
from bayesscale.report.figures.heldout import plot_heldout
from bayesscale.report.figures.iso_budget import plot_iso_budget
from bayesscale.report.figures.law import find_sweep, plot_law
from bayesscale.report.figures.provenance import (
    Provenance,
    Source,
    attach_provenance,
    figure_provenance,
    provenance,
    read_png_text,
    read_provenance,
    save_figure,
)
from bayesscale.report.figures.style import FigureError

__all__ = [
    "FigureError",
    "Provenance",
    "Source",
    "attach_provenance",
    "figure_provenance",
    "find_sweep",
    "plot_allocation",
    "plot_collapse",
    "plot_exponents",
    "plot_heldout",
    "plot_iso_budget",
    "plot_law",
    "provenance",
    "read_png_text",
    "read_provenance",
    "save_figure",
]
