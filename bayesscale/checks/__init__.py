"""Checking a law before trusting it: held-out runs, calibration, cross-validation, model comparison.

* :mod:`~bayesscale.checks.heldout` — posterior-predictive checks on held-out runs;
* :mod:`~bayesscale.checks.crossval` — refit without a slice, predict the slice;
* :mod:`~bayesscale.checks.compare` — PSIS-LOO between fits of the same data;
* :mod:`~bayesscale.checks.sbc` — simulation-based calibration of the law model, built on
  :mod:`~bayesscale.checks.prior_draws` (exact prior draws), :mod:`~bayesscale.checks.law_sampler`
  (a sampler compiled once per design), :mod:`~bayesscale.checks.ranks` and
  :mod:`~bayesscale.checks.ecdf_bands` (the uniformity tests);
* :mod:`~bayesscale.checks.coverage` — coverage over redraws against the bootstrap baseline;
* :mod:`~bayesscale.checks.sim_designs` and :mod:`~bayesscale.checks.calibration_io` — the
  calibration studies' designs, and the names and JSON of what they write.
"""
