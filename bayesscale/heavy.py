"""The modules the package imports inside functions only: each is slow to import or optional.

A command that reads a fit (``bayesscale summary``, ``recipe``, ``check``) needs NumPy, xarray
and a file reader, never PyMC or JAX; ``bayesscale --help`` registers every command and needs
none of them. So these modules, and the package modules that import them at module level, are
imported inside the function that needs them; every other import sits at the top of its module
(``tests/test_imports.py`` holds the package to it). Measured with
``python -X importtime -c "import X"`` (the module's cumulative time, each in a fresh
process, on a shared 2-core machine under load; ``import bayesscale.cli`` took 0.16 s
there):

- ``pymc`` 0.7 s, ``pytensor`` 0.3 s: building and sampling a model only;
- ``jax`` 0.7 s, ``numpyro`` 1.1 s, ``blackjax`` 1.7 s, ``nutpie`` 2.3 s (and ``jaxlib``):
  the samplers only;
- ``arviz`` 2.9 s, ``arviz_stats`` 1.3 s, ``arviz_base`` 0.6 s: diagnostics and LOO only;
- ``matplotlib`` (``matplotlib.pyplot`` 0.7 s): figures only;
- ``ray`` 0.5 s, optional: parallel jobs and the verl launcher; ``torch``, not a dependency
  and not imported today: listed so that an import of it stays inside a function;
- ``scipy`` (``scipy.optimize`` 0.5 s, ``scipy.stats`` 0.8 s): optimisation, distributions;
- ``xarray`` 0.5 s, ``pandas`` 0.3 s: fit files and tables, which ``--help`` does not need.

>>> from bayesscale.heavy import is_heavy
>>> is_heavy("scipy.optimize"), is_heavy("numpy")
(True, False)
"""

from __future__ import annotations

#: The top-level modules (a submodule counts as its package) imported inside functions only.
HEAVY_MODULES: tuple[str, ...] = (
    "pymc",
    "pytensor",
    "jax",
    "jaxlib",
    "numpyro",
    "blackjax",
    "nutpie",
    "arviz",
    "arviz_stats",
    "arviz_base",
    "matplotlib",
    "ray",
    "torch",
    "scipy",
    "xarray",
    "pandas",
)


def is_heavy(module: str) -> bool:
    """Whether ``module`` is one of :data:`HEAVY_MODULES` or a submodule of one."""
    return any(module == name or module.startswith(name + ".") for name in HEAVY_MODULES)
