"""bayesscale: Bayesian scaling laws for agentic RL data.

The pure math (``laws``) imports no PyMC; fitting lives in ``inference``, model
builders in ``models``, observation I/O in ``observations``.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("bayesscale")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
