"""The fit objects: a fitted DataTree with checked access and every answer it gives, without
PyMC (the fit file itself is :mod:`bayesscale.data.fitfile`).

* :mod:`~bayesscale.fits.law` — :class:`~bayesscale.fits.law.LawFit`;
* :mod:`~bayesscale.fits.pricing` — :class:`~bayesscale.fits.pricing.PricingFit`;
* :mod:`~bayesscale.fits.caveats` — :class:`~bayesscale.fits.caveats.CaveatWarning`: what a
  result cannot support, warned and kept with it.
"""
