"""Checking a law before trusting it: held-out runs, calibration, cross-validation, model comparison.

* :mod:`~bayesscale.checks.heldout` — posterior-predictive checks on held-out runs;
* :mod:`~bayesscale.checks.crossval` — refit without a slice, predict the slice;
* :mod:`~bayesscale.checks.compare` — PSIS-LOO between fits of the same data;
* :mod:`~bayesscale.checks.calibration` — simulation-based calibration and coverage.
"""
