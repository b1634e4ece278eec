"""Bayesian experimental design: which runs to launch next (``bayesscale next``).

* :mod:`bayesscale.design.preposterior` — the math on posterior draws (importance weights,
  Kish ESS, EVPI, EVSI, variance reduction), pure NumPy;
* :mod:`bayesscale.design.costs` — what a run costs (data beyond what is owned, GPU-hours);
* :mod:`bayesscale.design.next_runs` — candidates, their values, the greedy batch;
* :mod:`bayesscale.design.sweep_file` — the batch as a sweep file that ``plan`` accepts;
* :mod:`bayesscale.design.figure` — value per cost over the candidate grid.
"""
