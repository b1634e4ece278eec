"""Jobs of several steps, built on the fit objects (:mod:`bayesscale.fits`).

* :mod:`~bayesscale.pipeline.report` — ``bayesscale report``: fit, price, allocate, check,
  and write it all up (:mod:`~bayesscale.pipeline.report_sections`,
  :mod:`~bayesscale.pipeline.report_recipe`).
"""
