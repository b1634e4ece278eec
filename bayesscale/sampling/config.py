"""Sampler settings and their defaults, declared once: :class:`FitConfig` is what the
library takes and what every command's ``--help`` shows. Pure Python (no PyMC or JAX
import), so the command line can read the defaults without loading either.

Example
-------
>>> FitConfig(seed=1).sampler
'bayesscale'
>>> preview = FitConfig().as_preview()
>>> preview.preview, preview.tune
(True, 0)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

# The package's own driver (warm-up, chains in parallel, ESS target, Ctrl-C): by default with
# the MAMS transition (bayesscale.sampling.mams), or with NUTS's (docs/speed.md)
DEFAULT_SAMPLER = "bayesscale"
NUTS_SAMPLER = "nuts"
OWN_SAMPLERS = (DEFAULT_SAMPLER, NUTS_SAMPLER)
SAMPLERS = (*OWN_SAMPLERS, "numpyro", "nutpie", "pymc")
DEFAULT_SEED = 20261129
ESS_TARGET = 400  # bulk and tail ESS every stored quantity must reach (and R-hat <= 1.01)
DEFAULT_TUNE = 400
DEFAULT_DRAWS = 500
DEFAULT_MAX_DRAWS = 4000
DEFAULT_TARGET_ACCEPT = 0.8
# MAMS's target is the Metropolis acceptance of whole trajectories, not NUTS's average over a
# tree. Over 3 designs x 10 seeds (benchmarks/robust_defaults.py; two probes, the step size's
# power 3), 28 of 30 fits passed (no divergence, R-hat <= 1.01) at 0.9 and 30 of 30 at 0.95,
# and 29 of 30 at 0.95 on ten fresh seeds, for 7% more of the benchmark's wall time
# (docs/speed.md, "The defaults across designs and seeds")
MAMS_TARGET_ACCEPT = 0.95
# the transitions the package's own sampler runs (bayesscale.sampling.mams and .nuts)
MAMS_KERNEL = "mams"
NUTS_KERNEL = "nuts"
KERNELS = (MAMS_KERNEL, NUTS_KERNEL)
# The pricing model's collapse (kappa(r) crossing zero, the soft floor on effective data)
# and its thinly identified axis laws (exponent against slope) have high curvature. With
# HalfNormal spread priors the default sampler diverged 3-4 times per fit at 0.8 and 1-9 at
# 0.9 on data/pricing, most in the funnel at a near-zero spread; with lognormal spread
# priors of medians 0.3 / 0.15, 1 in each of 2 seeds of 4 at 0.9, and with the bundled ones
# (0.35 / 0.2) none in 5 seeds of 5 at 0.95 (2 chains, 1,200-2,000 draws each; the bundled
# ones were not measured at 0.9; docs/pricing.md), and one in each of 2 seeds of 10 after
# the sampler's starting points were evaluated by its compiled chunk (other rounding).
PRICING_TARGET_ACCEPT = 0.95
# --preview: the Laplace approximation (a Gaussian at the posterior mode) instead of NUTS, for
# iterating on a spec; PREVIEW_DRAWS independent draws. Never for conclusions (docs/speed.md).
PREVIEW_DRAWS = 1000


def default_accept(kernel: str) -> float:
    """The law's target acceptance with ``kernel``: ``MAMS_TARGET_ACCEPT`` for MAMS,
    ``DEFAULT_TARGET_ACCEPT`` for NUTS.

    >>> default_accept(MAMS_KERNEL), default_accept(NUTS_KERNEL)
    (0.95, 0.8)
    """
    return MAMS_TARGET_ACCEPT if kernel == MAMS_KERNEL else DEFAULT_TARGET_ACCEPT


def default_chains() -> int:
    """One chain per core, at least 2 (R-hat needs them) and at most 4: on 2 cores, 4 chains
    share the cores and each runs at half speed, and warm-up is paid per chain (measured on
    the reference data: 2 chains 14-19 s, 4 chains 24-30 s to the same ESS)."""
    return min(4, max(2, os.cpu_count() or 1))


@dataclass(frozen=True)
class FitConfig:
    """How to sample. ``seed`` makes the whole fit reproducible.

    ``draws`` per chain come first; with the package's own samplers (``bayesscale``, MAMS,
    and ``nuts``), while any stored quantity has bulk or tail ESS below ``ess_target`` (or
    R-hat above 1.01) the chains run on, up to ``max_draws`` per chain (``ess_target=0``
    keeps exactly ``draws``). The other samplers always take ``draws``. ``preview`` replaces
    sampling by the Laplace approximation (see :meth:`as_preview`). ``target_accept=None``
    (the default) is the model's own: for the law ``DEFAULT_TARGET_ACCEPT`` (0.8) with NUTS
    and ``MAMS_TARGET_ACCEPT`` (0.9) with MAMS, ``PRICING_TARGET_ACCEPT`` (0.95) for the
    pricing model; a number is used as given.
    """

    sampler: str = DEFAULT_SAMPLER
    chains: int = field(default_factory=default_chains)
    draws: int = DEFAULT_DRAWS
    tune: int = DEFAULT_TUNE
    target_accept: float | None = None  # None: the model's own (see with_default_accept)
    seed: int = DEFAULT_SEED
    progress: bool = True
    ess_target: float = ESS_TARGET
    max_draws: int = DEFAULT_MAX_DRAWS
    preview: bool = False

    def __post_init__(self) -> None:
        if self.sampler not in SAMPLERS:
            raise ValueError(f"unknown sampler {self.sampler!r}; choose one of {SAMPLERS}")
        if self.chains < 1 or self.draws < 1 or self.tune < 0:
            raise ValueError(
                f"chains and draws must be >= 1 and tune >= 0, got chains={self.chains}, "
                f"draws={self.draws}, tune={self.tune}"
            )
        if self.target_accept is not None and not 0 < self.target_accept < 1:
            raise ValueError(f"target_accept must be in (0, 1), got {self.target_accept}")
        if self.ess_target < 0:
            raise ValueError(f"ess_target must be >= 0, got {self.ess_target}")
        if self.max_draws < self.draws:
            raise ValueError(f"max_draws ({self.max_draws}) must be >= draws ({self.draws})")

    def describe(self) -> str:
        """One line for the user: sampler, chains, warm-up and draws, target acceptance (the
        law's default for the kernel where none is set: a pricing fit sets its own first),
        seed.

        >>> FitConfig(seed=1).describe().split(", ")[-2]
        "target_accept 0.95 (MAMS's default)"
        >>> FitConfig(sampler="nuts", target_accept=0.85).describe().split(", ")[-2]
        'target_accept 0.85'
        """
        if self.sampler in OWN_SAMPLERS and self.ess_target > 0:
            draws = f"{self.draws}+ draws (until ESS {self.ess_target:g}, at most {self.max_draws})"
        else:
            draws = f"{self.draws} draws"
        if self.preview:
            return f"PREVIEW: Laplace approximation, {self.draws} draws, seed {self.seed}"
        accept = (
            f"{self.accept:g} ({self.kernel.upper()}'s default)"
            if self.target_accept is None
            else f"{self.target_accept:g}"
        )
        return (
            f"{self.sampler}, {self.chains} chains x ({self.tune} warm-up + {draws}), "
            f"target_accept {accept}, seed {self.seed}"
        )

    def with_default_accept(self, target_accept: float) -> FitConfig:
        """This config with a model's default target acceptance where it names none.

        >>> FitConfig().with_default_accept(0.95).target_accept
        0.95
        >>> FitConfig(target_accept=0.9).with_default_accept(0.95).target_accept
        0.9
        """
        if self.target_accept is not None:
            return self
        return replace(self, target_accept=target_accept)

    @property
    def kernel(self) -> str:
        """Which transition the sampler runs, ``"mams"`` for the default sampler and
        ``"nuts"`` for every other (the package's ``nuts``, and PyMC's, NumPyro's and
        nutpie's NUTS)."""
        return MAMS_KERNEL if self.sampler == DEFAULT_SAMPLER else NUTS_KERNEL

    @property
    def accept(self) -> float:
        """The target acceptance a fit samples with, ``target_accept`` or else the law's
        default for the kernel, ``DEFAULT_TARGET_ACCEPT`` (NUTS) or ``MAMS_TARGET_ACCEPT``
        (a pricing fit sets its own first, with :meth:`with_default_accept`)."""
        if self.target_accept is not None:
            return self.target_accept
        return default_accept(self.kernel)

    def as_preview(self) -> FitConfig:
        """A preview of this fit: ``PREVIEW_DRAWS`` independent draws from the Laplace
        approximation (:mod:`bayesscale.sampling.laplace`), marked as a preview in the fit."""
        return replace(
            self,
            chains=1,
            tune=0,
            draws=PREVIEW_DRAWS,
            max_draws=PREVIEW_DRAWS,
            ess_target=0.0,
            preview=True,
        )
