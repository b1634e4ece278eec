"""The pure math at the bottom of the package: NumPy only, no PyMC, no xarray.

* :mod:`~bayesscale.core.laws` — the scaling law and its inverse;
* :mod:`~bayesscale.core.allocate` — the KKT budget allocation (exact, per draw);
* :mod:`~bayesscale.core.geometric`, :mod:`~bayesscale.core.chain` — the allocation under the
  money cost (a geometric program);
* :mod:`~bayesscale.core.forms`, :mod:`~bayesscale.core.form_law`,
  :mod:`~bayesscale.core.form_allocation` — the law's forms, the law with a form per draw and
  axis, and its allocation (rounds of exact power-law bounds);
* :mod:`~bayesscale.core.collapse` — the discount curve kappa(r) and the collapse ratio r*;
* :mod:`~bayesscale.core.prices` — unit prices and discounts of the axes;
* :mod:`~bayesscale.core.intervals` — equal-tailed and highest-density intervals.

Everything above imports from here; nothing here imports from above.
"""
