"""Pricing synthetic data: the discount kappa(r) and the collapse ratio r*, in one pipeline.

spec (:mod:`~bayesscale.pricing.spec`) -> table (:mod:`~bayesscale.pricing.table`) -> design
(:mod:`~bayesscale.pricing.design`) -> PyMC model (:mod:`~bayesscale.pricing.model`) -> fit
(:mod:`~bayesscale.pricing.fit`) -> summary (:mod:`~bayesscale.pricing.summary`). The model
and its equations are described in :mod:`bayesscale.pricing.model`.
"""
