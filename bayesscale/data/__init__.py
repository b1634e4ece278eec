"""Inputs: model specs, observation tables, simulated and external data.

* :mod:`~bayesscale.data.spec` — the model spec (TOML) and its parser;
* :mod:`~bayesscale.data.observations` — reading and checking observation tables;
* :mod:`~bayesscale.data.simulate` — observations simulated from a declared truth;
* :mod:`~bayesscale.data.external` — the bundled external data (Chinchilla);
* :mod:`~bayesscale.data.extrapolation` — the swept range of every axis, and how far beyond it
  a number lies;
* :mod:`~bayesscale.data.fitfile` — a fit on disk: saving, loading, its stored spec and its
  diagnostics verdict, without PyMC.
"""
