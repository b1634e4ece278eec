"""Bayesian experimental design: which runs to launch next (``bayesscale next``).

* :mod:`bayesscale.design.preposterior` — the math on posterior draws (importance weights,
  Kish ESS, EVPI, EVSI, variance reduction), pure NumPy;
* :mod:`bayesscale.design.costs` — what a run costs (data beyond what is owned, GPU-hours);
* :mod:`bayesscale.design.next_runs` — the next batch of runs (the method, ``next_runs``);
* :mod:`bayesscale.design.results` — its result types and :class:`~bayesscale.design.results.DesignError`;
* :mod:`bayesscale.design.candidates` — the candidate runs;
* :mod:`bayesscale.design.run_value` — the preposterior value of a run or batch and its MCSE;
* :mod:`bayesscale.design.greedy` — the greedy batch under a run count or spend cap;
* :mod:`bayesscale.design.refit` — the refit check of the batch's value;
* :mod:`bayesscale.design.next_text` — the batch as text and JSON;
* :mod:`bayesscale.design.sweep_file` — the batch as a sweep file that ``plan`` accepts;
* :mod:`bayesscale.design.figure` — value per cost over the candidate grid.
"""
