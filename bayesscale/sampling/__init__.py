"""Sampling: bayesscale's own sampler (MAMS or NUTS transitions) on a PyMC model's JAX log
density.

* :mod:`~bayesscale.sampling.jaxconfig` — host devices and the compilation cache, by call;
* :mod:`~bayesscale.sampling.logdensity` — the model's log density as a JAX function;
* :mod:`~bayesscale.sampling.mams` — the MAMS transition (the default), tuning parameters as
  arguments; :mod:`~bayesscale.sampling.nuts` — the NUTS transition, likewise;
* :mod:`~bayesscale.sampling.adapt` — warm-up windows, the mass matrix, MAMS's trajectory
  length and step-size correction;
* :mod:`~bayesscale.sampling.engine` — the driver: chunks, chains, ESS target, Ctrl-C;
* :mod:`~bayesscale.sampling.progress` — the bar; :mod:`~bayesscale.sampling.diagnostics`.
"""

from bayesscale.sampling.jaxconfig import configure

__all__ = ["configure"]
