"""The pooled scaling law: likelihood, PyMC model, sampling, prediction.

* :mod:`~bayesscale.law.likelihood` — the observation likelihoods, shared with pricing;
* :mod:`~bayesscale.law.model` — the PyMC model, built in named steps;
* :mod:`~bayesscale.law.inference` — fitting it (the package NUTS driver or PyMC);
* :mod:`~bayesscale.law.posterior` — the one reader of a fit: layout, draws, population;
* :mod:`~bayesscale.law.predict` — posterior predictions in NumPy, without PyMC;
* :mod:`~bayesscale.law.sensitivity` — how much each exponent owes to its prior;
* :mod:`~bayesscale.law.summary` — exponents with intervals, their ordering, what is identified;
* :mod:`~bayesscale.law.baseline` — the per-setting least-squares fit of the paper.
"""
