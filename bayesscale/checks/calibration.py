"""Calibration of the method itself: simulation-based calibration and coverage over redraws.

**Simulation-based calibration** (SBC; Talts et al. 2018, arXiv:1804.06788). For
``n = 1..N``: draw ``theta_n`` from the model's prior, simulate ``y_n ~ p(y | theta_n)`` from the
model's own likelihood, fit, and take the rank of the true value among ``L`` roughly
independent posterior draws of a scalar quantity ``f``:

.. math::

    r_n = \\#\\{\\ell : f(\\theta^{(\\ell)}_n) < f(\\theta_n)\\} \\in \\{0, \\dots, L\\}, \\qquad
    u_n = (r_n + v_n) / (L + 1), \\quad v_n \\sim \\mathrm{U}(0, 1)

If the sampler draws from the exact posterior, ``r_n`` is uniform on ``{0..L}`` and the
randomised normalised rank ``u_n`` is exactly ``U(0, 1)``, whatever ``L`` is. Uniformity is
tested with a chi-square test on ``u`` in equal bins, a Kolmogorov-Smirnov test, and the ECDF
of ``u`` against simultaneous confidence bands (Säilynoja, Bürkner & Vehtari 2022;
:func:`ecdf_band`, :func:`ecdf_verdict`, :func:`plot_ecdf_difference`), which also say where
the ranks depart from uniformity. Besides the parameters, the default quantities include the
data's log-likelihood ``log p(y_n | theta)`` ranked at the truth among its values at the draws
(``LOG_LIKELIHOOD``; Modrák et al. 2023). Each dataset's fit is a seeded job of
:func:`bayesscale.checks.fanout.run_jobs`, run serially or as Ray tasks with the same ranks.

The law model's prior is not only its random variables: the soft wall
``pm.Potential("floor_positive", sum_s log sigmoid(L_inf,s / eps))`` multiplies it, and
parameters that put ``L <= 0`` at a design row (success above 1) have no likelihood at all,
so NUTS never visits them. The prior SBC must draw from is therefore

.. math::

    \\pi(\\theta) \\propto \\pi_0(\\theta)\\, e^{\\Phi(\\theta)}\\, 1[\\theta \\text{ valid}],
    \\qquad \\Phi = \\sum \\text{potentials} \\le 0,

which :func:`prior_datasets` draws exactly by rejection: a draw of the random variables
(``pm.sample_prior_predictive``, which ignores potentials) is kept with probability
``exp(Phi(theta))`` and only if every likelihood parameter is finite and positive.
Rejecting only draws with a negative floor would match the wall only approximately
(the wall also thins draws just above zero and keeps some just below it).

**Coverage over redraws** (:func:`coverage_study`, one job per redraw): re-simulate a
fixed truth's design ``R`` times, fit the pooled model and the frequentist bootstrap baseline
(:func:`bayesscale.law.baseline.bootstrap_fit`) to each redraw, and count how often each
method's 90% interval covers the true per-setting exponent and the population exponent.

**Sampling cost.** ``pm.sample(nuts_sampler="numpyro")`` builds a new JAX function and so
recompiles on every call. :class:`CompiledLawSampler` instead compiles the package's own
sampler once per design, with the observed outcome an
*argument* of the compiled program: refitting a new dataset of the same design reuses it.

Example
-------
>>> import numpy as np
>>> u = normalized_ranks(np.array([0, 5, 10]), np.array([10, 10, 10]), np.random.default_rng(0))
>>> bool(np.all((u >= 0) & (u < 1)))
True
>>> round(uniformity(np.linspace(0.025, 0.975, 20), bins=4).chi2_p, 6)
1.0
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from bayesscale import names
from bayesscale.core.intervals import ETI, interval
from bayesscale.data.observations import (
    Design,
    Table,
    frame_sha256,
    prepare,
    setting_labels,
    validate,
)
from bayesscale.data.simulate import PAPER_ANCHORS, PAPER_GRIDS, Truth, per_axis_design, simulate
from bayesscale.data.spec import ModelSpec
from bayesscale.sampling.config import OWN_SAMPLERS

if TYPE_CHECKING:
    import pymc as pm

    from bayesscale.law.inference import FitConfig

Array = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

# --- names of what this module writes (columns, labels, JSON keys) ---------------------------
DATASET: Final = "dataset"
QUANTITY: Final = "quantity"
TRUE_VALUE: Final = "true_value"
RANK: Final = "rank"
RANK_DRAWS: Final = "rank_draws"  # L: posterior draws the truth is ranked among
NORMALIZED_RANK: Final = "normalized_rank"  # u = (rank + v) / (L + 1)
ESS_BULK: Final = "ess_bulk"
DIVERGENCES: Final = "divergences"
MAX_RHAT: Final = "max_rhat"
MIN_ESS: Final = "min_ess_bulk"
SECONDS: Final = "seconds"
REDRAW: Final = "redraw"
ESTIMATOR: Final = "estimator"  # pooled | bootstrap
LEVEL: Final = "level"
LOWER: Final = "lower"
UPPER: Final = "upper"
COVERED: Final = "covered"
WIDTH: Final = "width"
COVERAGE: Final = "coverage"
COVERAGE_SE: Final = "coverage_se"
MEAN_WIDTH: Final = "mean_width"
N_INTERVALS: Final = "n_intervals"
POOLED: Final = "pooled"  # method label: the pooled Bayesian law
BOOTSTRAP: Final = "bootstrap"  # method label: the paper's per-panel bootstrap
SETTING_LEVEL: Final = "setting"  # level label: per-setting exponents alpha[s, a]
POPULATION_LEVEL: Final = "population"  # level label: alpha_pop[a]
# the joint quantity of Modrak et al. (2023): log p(y | theta), the data's log-likelihood
LOG_LIKELIHOOD: Final = "log_likelihood"
POTENTIAL_WARNING: Final = "The effect of Potentials on other parameters is ignored"
# PyTensor's Numba backend draws the beta-binomial in object mode (NumPy's generator) and
# says so with a UserWarning; that is only slower, so the message is silenced where we sample.
OBJECT_MODE_WARNING: Final = "Numba will use object mode"

COVERAGE_VARIABLES: Final = (names.ALPHA_POP, names.ALPHA)
DEFAULT_PROB = 0.9
DEFAULT_MAX_RANK_DRAWS = 100
MIN_RANK_DRAWS = 10
MAX_PRIOR_ROUNDS = 100


# --- pure statistics (NumPy/SciPy) -------------------------------------------------------------


def rank_of(truth: float, draws: ArrayLike) -> int:
    """``#{draws < truth}``: the SBC rank of a true value among posterior draws.

    >>> rank_of(0.5, [0.1, 0.7, 0.3])
    2
    """
    return int(np.sum(np.asarray(draws, dtype=float) < truth))


def thin(draws: ArrayLike, keep: int) -> Array:
    """``keep`` draws evenly spaced over ``draws`` (flattened in order, chains one after another).

    >>> thin(np.arange(10.0), 3).tolist()
    [0.0, 4.0, 9.0]
    """
    flat = np.asarray(draws, dtype=float).ravel()
    keep = max(1, min(int(keep), flat.size))
    return flat[np.round(np.linspace(0, flat.size - 1, keep)).astype(int)]


def normalized_ranks(ranks: ArrayLike, n_draws: ArrayLike, rng: np.random.Generator) -> Array:
    """Randomised normalised ranks ``u = (r + v) / (L + 1)``, ``v ~ U(0, 1)``.

    For ``r`` uniform on ``{0..L}``, ``u`` is exactly ``U(0, 1)``, so ranks among different
    numbers of draws ``L`` can be pooled and tested with continuous tests.
    """
    r = np.asarray(ranks, dtype=float)
    n = np.asarray(n_draws, dtype=float)
    if np.any(r < 0) or np.any(r > n):
        raise ValueError("every rank must lie in 0..n_draws")
    return (r + rng.uniform(size=r.shape)) / (n + 1.0)


@dataclass(frozen=True)
class Uniformity:
    """Tests of ``u ~ U(0, 1)``: chi-square on ``bins`` equal bins and Kolmogorov-Smirnov."""

    n: int
    bins: int
    counts: tuple[int, ...]
    chi2: float
    chi2_p: float
    ks: float
    ks_p: float

    @property
    def min_p(self) -> float:
        return min(self.chi2_p, self.ks_p)


def default_bins(n: int) -> int:
    """Equal bins with about 5 or more expected counts each, between 2 and 20.

    >>> default_bins(25), default_bins(100), default_bins(1000)
    (5, 20, 20)
    """
    return int(max(2, min(20, n // 5)))


def uniformity(u: ArrayLike, bins: int | None = None) -> Uniformity:
    """Chi-square (``sum_b (O_b - E)^2 / E``, ``bins - 1`` dof) and KS tests of ``u ~ U(0, 1)``.

    >>> round(uniformity([0.1, 0.3, 0.6, 0.9], bins=2).chi2, 6)
    0.0
    """
    values = np.asarray(u, dtype=float).ravel()
    if values.size == 0 or np.any((values < 0) | (values > 1)) or not np.all(np.isfinite(values)):
        raise ValueError("uniformity needs at least one value, all in [0, 1]")
    b = default_bins(values.size) if bins is None else int(bins)
    if b < 2:
        raise ValueError(f"bins must be >= 2, got {b}")
    counts = np.histogram(values, bins=b, range=(0.0, 1.0))[0]
    chi2, chi2_p = stats.chisquare(counts)
    ks = stats.kstest(values, "uniform")
    return Uniformity(
        n=int(values.size),
        bins=b,
        counts=tuple(int(c) for c in counts),
        chi2=float(chi2),
        chi2_p=float(chi2_p),
        ks=float(ks.statistic),
        ks_p=float(ks.pvalue),
    )


# --- ECDF with simultaneous bands (Säilynoja, Bürkner & Vehtari 2022) ----------------------


@dataclass(frozen=True)
class EcdfBand:
    """Simultaneous ``prob`` band for the ECDF of ``n`` values of ``U(0, 1)`` at the points
    ``z`` (``i / K``, ``i = 1..K-1``), in counts: under uniformity, the counts
    ``#{u <= z_i}`` all lie within ``[lower_i, upper_i]`` with probability about ``prob``.
    ``gamma`` is the per-point level that gives that joint level (found by simulation)."""

    n: int
    prob: float
    z: Array
    lower: Array
    upper: Array
    gamma: float
    n_sim: int
    seed: int


@dataclass(frozen=True)
class EcdfVerdict:
    """Where the ECDF of one quantity's normalised ranks leaves its band.

    ``outside``: ``(z_from, z_to, "above" | "below")`` for each run of consecutive evaluation
    points outside; ``max_excess``: the largest distance outside, in ECDF units (0 inside).
    Above the band at small ``z``: too many low ranks (the truth below the posterior); a
    hump above in the middle and below at the ends of the ECDF *difference*: a posterior too
    wide; the reverse (below, then above): too narrow."""

    quantity: str
    n: int
    inside: bool
    outside: tuple[tuple[float, float, str], ...]
    max_excess: float

    def where(self) -> str:
        """``inside``, or the stretches outside, ``above 0.05-0.15; below 0.85-0.95`` (runs
        on the same side with none on the other side between them are shown as one).

        >>> EcdfVerdict("q", 9, False, ((0.1, 0.2, "above"), (0.3, 0.3, "above")), 0.1).where()
        'above 0.10-0.30'
        """
        if self.inside:
            return "inside"
        merged: list[list[Any]] = []
        for lo, hi, side in self.outside:
            if merged and merged[-1][2] == side:
                merged[-1][1] = hi
            else:
                merged.append([lo, hi, side])
        return "; ".join(f"{side} {lo:.2f}-{hi:.2f}" for lo, hi, side in merged)


DEFAULT_BAND_PROB = 0.95
DEFAULT_BAND_SIMULATIONS = 4000
MAX_BAND_POINTS = 100


def _two_sided(counts: Array, n: int, z: Array) -> Array:
    """Per point ``2 min(P[X <= F], P[X >= F])``, ``X ~ Binomial(n, z)``, capped at 1."""
    below = stats.binom.cdf(counts, n, z)
    above = stats.binom.sf(counts - 1, n, z)
    return np.minimum(1.0, 2.0 * np.minimum(below, above))


def ecdf_counts(u: ArrayLike, z: ArrayLike) -> Array:
    """``#{u_j <= z_i}`` for each ``z_i``.

    >>> ecdf_counts([0.1, 0.4, 0.5], [0.25, 0.5, 0.75]).tolist()
    [1.0, 3.0, 3.0]
    """
    values = np.sort(np.asarray(u, dtype=float).ravel())
    return np.searchsorted(values, np.asarray(z, dtype=float), side="right").astype(float)


def ecdf_band(
    n: int,
    prob: float = DEFAULT_BAND_PROB,
    points: int | None = None,
    n_sim: int = DEFAULT_BAND_SIMULATIONS,
    seed: int = 0,
) -> EcdfBand:
    """Simultaneous band for the ECDF of ``n`` uniform values, by simulation (Säilynoja,
    Bürkner & Vehtari 2022, section 2.2).

    At ``z_i = i / K`` (``K = points``, default ``min(n, 100)``) the count ``n F(z_i)`` of a
    uniform sample is ``Binomial(n, z_i)``. For each of ``n_sim`` seeded uniform samples take
    the smallest two-sided per-point tail probability

    .. math::

        \\gamma_m = \\min_i 2 \\min\\{P[X_i \\le n F_m(z_i)],\\ P[X_i \\ge n F_m(z_i)]\\},
        \\qquad X_i \\sim \\mathrm{Bin}(n, z_i),

    let ``gamma`` be the ``1 - prob`` quantile of the ``gamma_m``, and bound each count by
    the binomial's ``gamma / 2`` and ``1 - gamma / 2`` quantiles: a uniform sample's ECDF
    then leaves the band anywhere with probability about ``1 - prob`` (somewhat less: the
    counts are discrete). Seeded, so the same arguments give the same band.

    >>> band = ecdf_band(50, points=10, n_sim=500)
    >>> bool(np.all(band.lower <= 50 * band.z)) and bool(np.all(50 * band.z <= band.upper))
    True
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not 0 < prob < 1:
        raise ValueError(f"prob must be in (0, 1), got {prob}")
    k = int(points if points is not None else min(n, MAX_BAND_POINTS))
    if k < 2:
        raise ValueError(f"points must be >= 2, got {k}")
    z = np.arange(1, k) / k
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), n, k]))
    gammas = np.empty(n_sim)
    chunk = max(1, 2_000_000 // max(n * k, 1))
    for start in range(0, n_sim, chunk):
        size = min(chunk, n_sim - start)
        u = np.sort(rng.uniform(size=(size, n)), axis=1)
        counts = np.stack([np.searchsorted(row, z, side="right") for row in u]).astype(float)
        gammas[start : start + size] = _two_sided(counts, n, z).min(axis=1)
    gamma = float(np.quantile(gammas, 1.0 - prob))
    lower = stats.binom.ppf(gamma / 2, n, z)
    upper = stats.binom.ppf(1 - gamma / 2, n, z)
    return EcdfBand(n, float(prob), z, lower, upper, gamma, int(n_sim), int(seed))


def ecdf_verdict(u: ArrayLike, band: EcdfBand, quantity: str = "") -> EcdfVerdict:
    """Whether the ECDF of ``u`` (normalised ranks) stays within ``band``, and where not.

    >>> band = ecdf_band(40, points=8, n_sim=500)
    >>> ecdf_verdict(np.linspace(0.01, 0.99, 40), band).inside
    True
    >>> ecdf_verdict(np.full(40, 0.02), band).where()
    'above 0.12-0.88'
    """
    values = np.asarray(u, dtype=float).ravel()
    if values.size != band.n:
        raise ValueError(f"the band is for {band.n} values, got {values.size}")
    counts = ecdf_counts(values, band.z)
    high = counts > band.upper
    low = counts < band.lower
    runs: list[tuple[float, float, str]] = []
    for side, mask in (("above", high), ("below", low)):
        idx = np.flatnonzero(mask)
        if idx.size:
            breaks = np.flatnonzero(np.diff(idx) > 1)
            for part in np.split(idx, breaks + 1):
                runs.append((float(band.z[part[0]]), float(band.z[part[-1]]), side))
    runs.sort()
    excess = np.maximum(counts - band.upper, band.lower - counts).max() / band.n
    return EcdfVerdict(
        quantity=quantity,
        n=int(values.size),
        inside=not runs,
        outside=tuple(runs),
        max_excess=float(max(0.0, excess)),
    )


def plot_ecdf_difference(
    ranks: Mapping[str, ArrayLike],
    path: str | Path,
    prob: float = DEFAULT_BAND_PROB,
    seed: int = 0,
    title: str = "",
) -> Path:
    """One panel per quantity: the ECDF difference ``F(z) - z`` of the normalised ranks with
    its simultaneous ``prob`` band (:func:`ecdf_band`), saved as a PNG at ``path``.

    >>> plot_ecdf_difference({"q": np.random.default_rng(0).uniform(size=50)}, "e.png")  # doctest: +SKIP
    """
    from matplotlib.figure import Figure

    path = Path(path)
    labels = list(ranks)
    cols = min(4, max(1, len(labels)))
    rows = math.ceil(len(labels) / cols)
    fig = Figure(figsize=(3.2 * cols, 2.6 * rows))  # no pyplot: no global backend state
    axes = fig.subplots(rows, cols, squeeze=False, sharex=True)
    for k, label in enumerate(labels):
        ax = axes[k // cols, k % cols]
        u = np.asarray(ranks[label], dtype=float)
        band = ecdf_band(u.size, prob, seed=seed)
        verdict = ecdf_verdict(u, band, label)
        # what the test judges: the ECDF at the band's points (and 0 at z = 0 and z = 1)
        z = np.concatenate([[0.0], band.z, [1.0]])
        lo = np.concatenate([[0.0], band.lower / u.size - band.z, [0.0]])
        hi = np.concatenate([[0.0], band.upper / u.size - band.z, [0.0]])
        diff = ecdf_counts(u, z) / u.size - z
        ax.fill_between(z, lo, hi, color="0.85", label=f"{prob:.0%} band")
        ax.plot(z, diff, color="C0" if verdict.inside else "C3", lw=1.0)
        ax.axhline(0.0, color="0.5", lw=0.6)
        ax.set_title(f"{label}\n{verdict.where()}", fontsize=8)
        ax.tick_params(labelsize=7)
        if k // cols == rows - 1:
            ax.set_xlabel("normalised rank z", fontsize=8)
        if k % cols == 0:
            ax.set_ylabel("ECDF(z) - z", fontsize=8)
    for k in range(len(labels), rows * cols):
        axes[k // cols, k % cols].set_visible(False)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path


def text_histogram(counts: Sequence[int], width: int = 40) -> list[str]:
    """One line per bin, ``#`` scaled to ``width`` at the largest count; ``|`` marks the
    uniform expectation.

    >>> text_histogram([2, 2], width=4)
    ['  0.00-0.50     2 ####|', '  0.50-1.00     2 ####|']
    """
    counts = [int(c) for c in counts]
    b, top = len(counts), max(max(counts), 1)
    expected = sum(counts) / b
    mark = round(expected / top * width)
    lines = []
    for i, c in enumerate(counts):
        bar = list("#" * round(c / top * width) + " " * (width + 1))
        bar.insert(mark, "|")
        lines.append(f"  {i / b:.2f}-{(i + 1) / b:.2f} {c:5d} {''.join(bar).rstrip()}")
    return lines


def equal_tailed(
    draws: ArrayLike, prob: float = DEFAULT_PROB, axis: int = 0
) -> tuple[Array, Array]:
    """``(lower, upper)``: the ``(1 - prob)/2`` and ``(1 + prob)/2`` quantiles along ``axis``."""
    lo, hi = interval(draws, prob, ETI, axis=axis)
    return lo, hi


def summarize_coverage(records: pd.DataFrame) -> pd.DataFrame:
    """Coverage and mean width per ``(method, level, axis)`` from interval records.

    ``coverage_se`` is the standard error over redraws (the sd of per-redraw coverage
    fractions over sqrt(R)), which respects the correlation of intervals within a redraw.
    """
    keys = [ESTIMATOR, LEVEL, names.AXIS_DIM]
    per_redraw = records.groupby([*keys, REDRAW])[COVERED].mean().rename("fraction").reset_index()
    grouped = records.groupby(keys)
    out = pd.DataFrame(
        {
            COVERAGE: grouped[COVERED].mean(),
            MEAN_WIDTH: grouped[WIDTH].mean(),
            N_INTERVALS: grouped[COVERED].size(),
        }
    )
    spread = per_redraw.groupby(keys)["fraction"].agg(["std", "size"])
    out[COVERAGE_SE] = spread["std"] / np.sqrt(spread["size"])
    return out.reset_index()


# --- designs for calibration runs ------------------------------------------------------------


def truth_subset(truth: Truth, settings: Sequence[int]) -> Truth:
    """The same truth restricted to some of its settings (by position)."""
    idx = [int(i) for i in settings]
    if not idx or any(i < 0 or i >= len(truth.settings) for i in idx):
        raise ValueError(f"setting positions must lie in 0..{len(truth.settings) - 1}, got {idx}")
    return replace(
        truth,
        settings=[dict(truth.settings[i]) for i in idx],
        alpha=[list(truth.alpha[i]) for i in idx],
        amplitude=[list(truth.amplitude[i]) for i in idx],
        loss_floor=[truth.loss_floor[i] for i in idx],
    )


def design_of(frame: pd.DataFrame, spec: ModelSpec, source: str) -> Design:
    """Validate a simulated table (errors name ``source``) and lay it out for the model."""
    clean = validate(frame, spec, source=source)
    return prepare(Table(clean, source, frame_sha256(clean)), spec)


def sbc_design(
    spec: ModelSpec,
    truth: Truth,
    settings: Sequence[int] = (0, 1),
    grids: Mapping[str, tuple[int, ...]] | None = None,
    anchors: Mapping[str, int] | None = None,
    seeds: tuple[int, ...] = (0, 1),
) -> Design:
    """A per-axis-sweep design for SBC: the settings of ``truth`` at ``settings`` (their keys
    and model sizes only), ``grids`` swept with the others at ``anchors``. The outcome column
    is a placeholder (half the trials): SBC replaces it with data simulated from the prior."""
    sub = truth_subset(truth, settings)
    frame = per_axis_design(
        sub, dict(grids) if grids else None, dict(anchors) if anchors else None, seeds
    )
    frame[names.SUCCESSES] = frame[names.TRIALS] // 2
    return design_of(frame, spec, "<SBC design>")


SMALL_GRIDS: Final = {axis: grid[::2] for axis, grid in PAPER_GRIDS.items()}
SMALL_ANCHORS: Final = {
    axis: grid[-1] if PAPER_ANCHORS[axis] == PAPER_GRIDS[axis][-1] else grid[len(grid) // 2]
    for axis, grid in SMALL_GRIDS.items()
}


# --- quantities ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Quantity:
    """A scalar of the model: a variable and a label on each of its dimensions."""

    variable: str
    selection: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        if not self.selection:
            return self.variable
        return f"{self.variable}[{','.join(v for _, v in self.selection)}]"

    def select(self, data: xr.DataArray) -> xr.DataArray:
        return data.sel({dim: value for dim, value in self.selection}) if self.selection else data


def default_quantities(design: Design, log_likelihood: bool = True) -> list[Quantity]:
    """``alpha_pop`` per axis, the first setting's exponents (with more than one setting),
    the concentration (success outcomes), the first setting's loss floor and (with
    ``log_likelihood``) the data's log-likelihood ``LOG_LIKELIHOOD``, ranked at the truth
    among its values at the draws (Modrák et al. 2023: a quantity that depends on the data)."""
    axes = design.spec.axis_names
    first = design.settings[0]
    out = [Quantity(names.ALPHA_POP, ((names.AXIS_DIM, a),)) for a in axes]
    if len(design.settings) > 1:
        out += [
            Quantity(names.ALPHA, ((names.SETTING_DIM, first), (names.AXIS_DIM, a))) for a in axes
        ]
    if design.spec.outcome == "success":
        out.append(Quantity(names.CONCENTRATION))
    out.append(Quantity(names.LOSS_FLOOR, ((names.SETTING_DIM, first),)))
    if log_likelihood:
        out.append(Quantity(LOG_LIKELIHOOD))
    return out


# --- a sampler compiled once per design -------------------------------------------------------


@dataclass
class QuickFit:
    """One run of :class:`CompiledLawSampler`: the requested variables' draws
    ``(chain, draw, ...)``, post-warm-up divergences, mean integration steps per draw and wall
    seconds."""

    posterior: xr.Dataset
    divergences: int
    mean_steps: float
    seconds: float

    def convergence(self) -> dict[str, float]:
        """Max rank-normalised R-hat and min bulk ESS over the returned variables."""
        from bayesscale.sampling.diagnostics import convergence_of

        check = convergence_of(self.posterior)
        return {MAX_RHAT: check.max_rhat, MIN_ESS: check.min_ess_bulk}


class CompiledLawSampler:
    """bayesscale's sampler (:mod:`bayesscale.sampling`) on a law model, compiled once; the
    observed outcome is an *argument* of the compiled program, so :meth:`fit` on a new
    dataset of the same design does not recompile.

    Each fit takes ``config.tune`` warm-up and ``config.draws`` draws per chain (no ESS target:
    calibration needs equal-length runs). With ``LOG_LIKELIHOOD`` among ``var_names``
    each fit also returns ``log p(y | theta)`` of its data at every draw
    (:meth:`log_likelihood`).

    >>> sampler = CompiledLawSampler(build_law_model(design), FitConfig(chains=2))  # doctest: +SKIP
    >>> fit = sampler.fit(design.successes, seed=1)  # doctest: +SKIP
    """

    def __init__(
        self, model: pm.Model, config: FitConfig, var_names: Sequence[str] | None = None
    ) -> None:
        from bayesscale.sampling import configure
        from bayesscale.sampling.engine import CompiledSampler
        from bayesscale.sampling.logdensity import LogDensity

        if config.sampler not in OWN_SAMPLERS:
            raise ValueError(
                f"CompiledLawSampler runs bayesscale's own sampler ({' or '.join(OWN_SAMPLERS)}); "
                f"got sampler={config.sampler!r}"
            )
        configure(config.chains)
        self.model, self.config = model, config
        self.var_names = list(var_names or [names.ALPHA_POP, names.ALPHA])
        self.density = LogDensity.from_model(model, observed_as_input=True)
        self._free = [rv.name for rv in model.free_RVs]
        self._loglik: Callable[..., Any] | None = None
        if LOG_LIKELIHOOD in self.var_names:
            self._loglik = _log_likelihood_function(model)
        missing = set(self.var_names) - set(self.density.var_names) - {LOG_LIKELIHOOD}
        if missing:
            raise ValueError(f"the model stores no {sorted(missing)}")
        [value] = self.density.data_values
        [self._dtype] = self.density.data_dtypes
        self.n_obs = int(np.size(value))
        self._shape = np.shape(value)
        self._sampler = CompiledSampler(self.density, config.chains, config.accept, config.kernel)
        self.design: Design | None = None

    @property
    def compile_seconds(self) -> float | None:
        return self._sampler.compile_seconds or None

    @classmethod
    def for_design(
        cls, design: Design, config: FitConfig, var_names: Sequence[str] | None = None
    ) -> CompiledLawSampler:
        """Build the law model of ``design`` and compile a sampler for its layout."""
        from bayesscale.law.model import build_law_model

        sampler = cls(build_law_model(design), config, var_names)
        sampler.design = design
        return sampler

    def same_layout(self, design: Design) -> bool:
        """Whether ``design`` has this sampler's settings, sizes and trials (outcome aside)."""
        mine = self.design
        if mine is None:
            return False
        same_trials = (mine.trials is None and design.trials is None) or (
            mine.trials is not None
            and design.trials is not None
            and np.array_equal(mine.trials, design.trials)
        )
        return (
            mine.spec.text == design.spec.text
            and mine.settings == design.settings
            and np.array_equal(mine.sizes, design.sizes)
            and np.array_equal(mine.setting_index, design.setting_index)
            and same_trials
        )

    def fit(self, observed: ArrayLike, seed: int) -> QuickFit:
        """Sample the posterior given ``observed`` (the outcome as the model observes it)."""
        from bayesscale.sampling.engine import RunSettings

        y = np.asarray(observed)
        if y.size != self.n_obs:
            raise ValueError(f"observed has {y.size} values; the design has {self.n_obs} rows")
        if np.issubdtype(self._dtype, np.integer) and not np.all(y == np.round(y)):
            raise ValueError("observed counts must be whole numbers")
        data = (y.astype(self._dtype).reshape(self._shape),)
        start = time.perf_counter()
        settings = RunSettings(tune=self.config.tune, draws=self.config.draws, seed=int(seed))
        result = self._sampler.run(settings, data=data)
        seconds = time.perf_counter() - start
        dims = self.density.dims
        coords = self.density.coords
        posterior = xr.Dataset(
            {
                v: ((names.CHAIN_DIM, names.DRAW_DIM, *dims[v]), result.posterior[v])
                for v in self.var_names
                if v != LOG_LIKELIHOOD
            }
        )
        if self._loglik is not None:
            chains, draws = result.posterior[self._free[0]].shape[:2]
            flat = [
                np.reshape(
                    result.posterior[v], (chains * draws, *np.shape(result.posterior[v])[2:])
                )
                for v in self._free
            ]
            values = np.asarray(self._loglik(flat, data[0]), dtype=float).reshape(chains, draws)
            posterior[LOG_LIKELIHOOD] = ((names.CHAIN_DIM, names.DRAW_DIM), values)
        posterior = posterior.assign_coords({d: coords[d] for d in posterior.dims if d in coords})
        return QuickFit(
            posterior=posterior,
            divergences=int(result.stats["diverging"].sum()),
            mean_steps=float(result.stats["n_steps"].mean()),
            seconds=seconds,
        )

    def log_likelihood(self, values: Mapping[str, ArrayLike], observed: ArrayLike) -> float:
        """``log p(y | theta)``: the data's log-likelihood at one point ``values`` (every free
        random variable on its own scale, by name; ``-inf`` where the likelihood is invalid).
        Needs ``LOG_LIKELIHOOD`` among the sampler's ``var_names``."""
        if self._loglik is None:
            raise ValueError(f"the sampler was built without {LOG_LIKELIHOOD!r} in var_names")
        y = np.asarray(observed).astype(self._dtype).reshape(self._shape)
        point = [np.asarray(values[v], dtype=float)[None] for v in self._free]
        return float(np.asarray(self._loglik(point, y))[0])


def _log_likelihood_function(model: pm.Model) -> Callable[..., Any]:
    """Compile ``(free RV values batched over draws, observed) -> sum_i log p(y_i | theta)``
    in JAX from the model's own likelihood graph (NaN, an invalid parameter, reads as
    ``-inf``)."""
    from bayesscale.sampling import configure

    configure()
    import jax
    import jax.numpy as jnp
    import pymc as pm
    import pytensor.tensor as pt
    from pymc.sampling.jax import get_jaxified_graph
    from pytensor.graph.replace import clone_replace

    observed_rv = model[names.OUTCOME]
    y = observed_rv.type()
    total = pt.sum(pm.logp(observed_rv, y))
    inputs = [rv.type() for rv in model.free_RVs]
    [out] = clone_replace([total], replace=dict(zip(model.free_RVs, inputs, strict=True)))
    graph = get_jaxified_graph(inputs=[*inputs, y], outputs=[out])

    def one(values: Any, data: Any) -> Any:
        [value] = graph(*values, data)
        return jnp.where(jnp.isnan(value), -jnp.inf, value)

    batched = jax.jit(jax.vmap(one, in_axes=(0, None)))

    def loglik(values: list[np.ndarray], data: np.ndarray) -> Array:
        return np.asarray(batched([jnp.asarray(v) for v in values], jnp.asarray(data)))

    return loglik


# --- exact draws from the model's prior, and data from its own likelihood ----------------------


@dataclass
class PriorDatasets:
    """Parameters drawn from the model's prior (potentials and validity included) and one
    simulated outcome vector per draw. ``truth`` has dim ``dataset`` first; ``outcomes`` is
    ``(dataset, obs)``; ``proposed`` counts prior draws before rejection."""

    truth: xr.Dataset
    outcomes: np.ndarray
    proposed: int
    invalid: int

    @property
    def acceptance(self) -> float:
        return self.truth.sizes[DATASET] / self.proposed


Perturbation = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]


def scale_variable(variable: str, factor: float) -> Perturbation:
    """A deliberately broken simulator for SBC negative controls: the free random variable
    ``variable`` multiplied by ``factor`` in the data, the truth left as drawn (for a
    ``log_*`` variable, pass the factor of the variable itself: ``log factor`` is added).

    >>> scale_variable("concentration", 4.0)({"concentration": np.array([100.0])})
    {'concentration': array([400.])}
    """
    if factor <= 0:
        raise ValueError(f"factor must be > 0, got {factor}")

    def perturb(values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if variable not in values:
            raise KeyError(f"{variable!r} is not a free random variable of the model")
        out = dict(values)
        if variable.startswith("log_"):
            out[variable] = np.asarray(values[variable]) + math.log(factor)
        else:
            out[variable] = np.asarray(values[variable]) * factor
        return out

    return perturb


def scale_exponents(factor: float) -> Perturbation:
    """Every exponent multiplied by ``factor`` in the simulated data (``log_alpha_pop``)."""
    return scale_variable(names.LOG_ALPHA_POP, factor)


def _prior_checks(model: pm.Model) -> Callable[[list[np.ndarray]], tuple[Array, BoolArray]]:
    """Compile ``free RV values (batched) -> (sum of potentials, likelihood valid)`` in JAX.

    Valid: every parameter of the likelihood finite and, for counts (the beta-binomial),
    positive.
    """
    from bayesscale.sampling import configure

    configure()
    import jax
    import jax.numpy as jnp
    import pytensor.tensor as pt
    from pymc.sampling.jax import get_jaxified_graph
    from pytensor.graph.replace import clone_replace

    observed_rv = model[names.OUTCOME]
    params = [
        i
        for i in observed_rv.owner.inputs
        if isinstance(i.type, pt.TensorType) and i.type.dtype.startswith("float")
    ]
    positive = observed_rv.type.dtype.startswith("int")  # counts: beta-binomial parameters
    total = pt.as_tensor(0.0)
    for potential in model.potentials:
        total = total + pt.sum(potential)
    inputs = [rv.type() for rv in model.free_RVs]
    outputs = clone_replace(
        [total, *params], replace=dict(zip(model.free_RVs, inputs, strict=True))
    )
    graph = get_jaxified_graph(inputs=inputs, outputs=outputs)

    def one(*values: Any) -> tuple[Any, Any]:
        phi, *pars = graph(*values)
        ok = jnp.all(jnp.asarray([jnp.all(jnp.isfinite(p)) for p in pars]))
        if positive:
            ok = ok & jnp.all(jnp.asarray([jnp.all(p > 0) for p in pars]))
        return phi, ok

    batched = jax.jit(jax.vmap(one))

    def check(values: list[np.ndarray]) -> tuple[Array, BoolArray]:
        phi, ok = batched(*[jnp.asarray(v) for v in values])
        return np.array(phi, dtype=float), np.array(ok, dtype=bool)

    return check


def prior_datasets(
    model: pm.Model,
    n: int,
    seed: int,
    variables: Sequence[str] = (),
    perturb: Perturbation | None = None,
    batch: int | None = None,
) -> PriorDatasets:
    """``n`` exact draws from the model's prior and data simulated from its likelihood.

    Draws of the random variables come from ``pm.sample_prior_predictive`` (which ignores
    potentials); each is kept with probability ``exp(sum of potentials)`` (all potentials must
    be <= 0) and only if every likelihood parameter is finite (and, for the beta-binomial,
    positive): the prior the fitted model actually has. Outcomes come from
    ``pm.sample_posterior_predictive`` on the kept draws: the model's own likelihood.
    ``perturb`` changes the free random variables *before simulating only* (a broken
    simulator for negative controls); ``truth`` keeps the drawn values.
    """
    import pymc as pm

    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    free = [rv.name for rv in model.free_RVs]
    keep_vars = sorted(set(free) | set(variables))
    check = _prior_checks(model)
    seeds = np.random.SeedSequence(seed).spawn(3)
    accept_rng = np.random.default_rng(seeds[1])
    batch = batch or max(2 * n, 50)
    kept: list[xr.Dataset] = []
    simulated: list[dict[str, np.ndarray]] = []
    proposed = invalid = 0
    for round_seed in seeds[0].spawn(MAX_PRIOR_ROUNDS):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=POTENTIAL_WARNING, category=UserWarning)
            prior = pm.sample_prior_predictive(
                draws=batch,
                model=model,
                var_names=keep_vars,
                random_seed=np.random.default_rng(round_seed),
            )["prior"].to_dataset()
        prior = prior.isel({names.CHAIN_DIM: 0}, drop=True)
        values = {v: prior[v].values for v in free}
        sim = perturb(values) if perturb is not None else values
        potential, valid = check([values[v] for v in free])
        if np.any(potential > 1e-9):
            raise ValueError(
                f"a potential of the model is positive ({potential.max():.3g}); rejection "
                "sampling of its prior needs every potential <= 0"
            )
        if perturb is not None:
            valid &= check([sim[v] for v in free])[1]
        accept = valid & (accept_rng.uniform(size=batch) < np.exp(potential))
        need = n - len(kept)
        take = np.flatnonzero(accept)[:need]
        for d in take:
            kept.append(prior.isel({names.DRAW_DIM: int(d)}, drop=True))
            simulated.append({v: sim[v][d] for v in free})
        # proposals consumed: up to the last draw taken once enough are kept
        used = int(take[-1]) + 1 if len(take) == need else batch
        proposed += used
        invalid += int(np.sum(~valid[:used]))
        if len(kept) == n:
            break
    else:
        raise RuntimeError(
            f"only {len(kept)} of {n} prior draws accepted after {proposed} proposals"
        )
    truth = xr.concat(kept, dim=DATASET).assign_coords({DATASET: np.arange(n)})
    trace = xr.Dataset(
        {
            v: (
                (names.CHAIN_DIM, names.DRAW_DIM, *prior[v].dims[1:]),
                np.stack([s[v] for s in simulated])[None],
            )
            for v in free
        },
        coords={
            names.CHAIN_DIM: [0],
            names.DRAW_DIM: np.arange(n),
            **{d: prior.coords[d].values for v in free for d in prior[v].dims[1:]},
        },
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=POTENTIAL_WARNING, category=UserWarning)
        warnings.filterwarnings("ignore", message=OBJECT_MODE_WARNING, category=UserWarning)
        predictive = pm.sample_posterior_predictive(
            trace,
            model=model,
            var_names=[names.OUTCOME],
            random_seed=np.random.default_rng(seeds[2]),
            progressbar=False,
        )
    outcomes = predictive["posterior_predictive"][names.OUTCOME].values[0]
    return PriorDatasets(
        truth=truth, outcomes=np.asarray(outcomes), proposed=proposed, invalid=invalid
    )


# --- simulation-based calibration ---------------------------------------------------------------


@dataclass
class SBCResult:
    """Ranks of the truth (one row per dataset and quantity), uniformity tests and the ECDF
    band verdicts (:func:`ecdf_verdict`) per quantity."""

    ranks: pd.DataFrame
    tests: dict[str, Uniformity]
    acceptance: float
    timing: dict[str, float]
    config: dict[str, Any] = field(default_factory=dict)
    ecdf: dict[str, EcdfVerdict] = field(default_factory=dict)
    band: EcdfBand | None = None

    @property
    def min_p(self) -> float:
        """The smallest p-value over quantities and both tests."""
        return min(t.min_p for t in self.tests.values())

    @property
    def ecdf_inside(self) -> bool:
        """Whether every quantity's ECDF stays inside its simultaneous band."""
        return all(v.inside for v in self.ecdf.values())

    def normalized(self) -> dict[str, Array]:
        """Each quantity's normalised ranks, in dataset order."""
        return {
            q: self.ranks.loc[self.ranks[QUANTITY] == q]
            .sort_values(DATASET)[NORMALIZED_RANK]
            .to_numpy(float)
            for q in self.tests
        }

    def table(self) -> pd.DataFrame:
        """One row per quantity: chi-square and KS statistics and p-values, and whether the
        ECDF leaves its band (and where)."""
        rows = []
        for q, t in self.tests.items():
            row: dict[str, Any] = {
                QUANTITY: q,
                "n": t.n,
                "bins": t.bins,
                "chi2": t.chi2,
                "chi2_p": t.chi2_p,
                "ks": t.ks,
                "ks_p": t.ks_p,
            }
            if q in self.ecdf:
                row["ecdf_inside"] = self.ecdf[q].inside
                row["ecdf_outside"] = self.ecdf[q].where()
                row["ecdf_max_excess"] = self.ecdf[q].max_excess
            rows.append(row)
        return pd.DataFrame(rows)

    def report(self) -> str:
        """Text rank histograms, p-values and ECDF band verdicts."""
        lines = []
        for q, t in self.tests.items():
            verdict = self.ecdf.get(q)
            band = f"; ECDF {verdict.where()}" if verdict is not None else ""
            lines.append(
                f"{q}: chi2 = {t.chi2:.2f} (p = {t.chi2_p:.3g}), KS = {t.ks:.3f} "
                f"(p = {t.ks_p:.3g}){band}"
            )
            lines += text_histogram(t.counts)
        if self.band is not None:
            lines.append(
                f"ECDF bands: simultaneous {self.band.prob:.0%} over {self.band.z.size} points, "
                f"{self.band.n_sim} simulations (seed {self.band.seed}), per-point level "
                f"{self.band.gamma:.4f}"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "acceptance": self.acceptance,
            "timing": self.timing,
            "tests": self.table().to_dict(orient="records"),
            "histograms": {q: list(t.counts) for q, t in self.tests.items()},
            "ecdf": {
                q: {
                    "inside": v.inside,
                    "outside": [list(r) for r in v.outside],
                    "max_excess": v.max_excess,
                }
                for q, v in self.ecdf.items()
            },
            "ecdf_band": None
            if self.band is None
            else {
                "prob": self.band.prob,
                "points": int(self.band.z.size),
                "gamma": self.band.gamma,
                "n_sim": self.band.n_sim,
                "seed": self.band.seed,
            },
            "divergent_fits": int((self.ranks.groupby(DATASET)[DIVERGENCES].first() > 0).sum()),
            "min_ess_bulk": float(self.ranks[ESS_BULK].min()),
        }


@dataclass(frozen=True)
class SBCJobs:
    """What every SBC job shares: the design, the sampler's configuration and variables,
    the quantities and the rank-draw cap (sent to each Ray worker once)."""

    design: Design
    config: FitConfig
    var_names: tuple[str, ...]
    quantities: tuple[Quantity, ...]
    max_rank_draws: int


@dataclass(frozen=True)
class SBCDataset:
    """One SBC job: dataset ``index``, its simulated ``outcome``, each quantity's true value
    (by label) and the true free random variables (for the log-likelihood)."""

    index: int
    outcome: np.ndarray
    truth: dict[str, float]
    free: dict[str, np.ndarray]


# compiled samplers of this process, by layout: a Ray worker compiles once for all its jobs
_SAMPLERS: dict[tuple[Any, ...], CompiledLawSampler] = {}


def _sampler_key(design: Design, config: FitConfig, var_names: Sequence[str]) -> tuple[Any, ...]:
    trials = None if design.trials is None else design.trials.tobytes()
    return (
        design.spec.text,
        tuple(design.settings),
        np.asarray(design.sizes).tobytes(),
        np.asarray(design.setting_index).tobytes(),
        trials,
        repr(config),
        tuple(var_names),
    )


def cached_sampler(
    design: Design, config: FitConfig, var_names: Sequence[str]
) -> CompiledLawSampler:
    """This process's :class:`CompiledLawSampler` for ``design``'s layout, ``config`` and
    ``var_names``, compiled on first use (every job a worker runs reuses it)."""
    key = _sampler_key(design, config, var_names)
    if key not in _SAMPLERS:
        _SAMPLERS[key] = CompiledLawSampler.for_design(design, config, var_names)
    return _SAMPLERS[key]


def sbc_job(jobs: SBCJobs, item: SBCDataset, seed: int) -> list[dict[str, Any]]:
    """Fit one SBC dataset and rank each quantity's truth (rows of ``SBCResult.ranks``).

    Everything random comes from ``seed``: the sampler's seed and the jitter ``v`` of the
    normalised ranks, so the rows depend on ``(jobs, item, seed)`` only, in any process.
    """
    import arviz as az

    sampler = cached_sampler(jobs.design, jobs.config, jobs.var_names)
    rng = np.random.default_rng(seed)
    fit = sampler.fit(item.outcome, seed=int(rng.integers(2**31 - 1)))
    rows = []
    for q in jobs.quantities:
        draws = q.select(fit.posterior[q.variable]).values
        if q.variable == LOG_LIKELIHOOD:
            truth = sampler.log_likelihood(item.free, item.outcome)
        else:
            truth = item.truth[q.label]
        ess = float(az.ess(draws, method="bulk"))
        usable = math.floor(ess) if np.isfinite(ess) else MIN_RANK_DRAWS
        keep = int(min(jobs.max_rank_draws, max(MIN_RANK_DRAWS, usable)))
        thinned = thin(draws, keep)
        rank = rank_of(truth, thinned)
        rows.append(
            {
                DATASET: item.index,
                QUANTITY: q.label,
                TRUE_VALUE: truth,
                RANK: rank,
                RANK_DRAWS: thinned.size,
                NORMALIZED_RANK: float(normalized_ranks([rank], [thinned.size], rng)[0]),
                ESS_BULK: ess,
                DIVERGENCES: fit.divergences,
                SECONDS: fit.seconds,
            }
        )
    return rows


def simulation_based_calibration(
    design: Design,
    n_datasets: int,
    config: FitConfig,
    seed: int = 0,
    quantities: Sequence[Quantity] | None = None,
    perturb: Perturbation | None = None,
    max_rank_draws: int = DEFAULT_MAX_RANK_DRAWS,
    bins: int | None = None,
    sampler: CompiledLawSampler | None = None,
    ray_address: str | None = None,
    workers: int | None = None,
    band_prob: float = DEFAULT_BAND_PROB,
    progress: Callable[[int, int], None] | None = None,
    time_limit: float | None = None,
) -> SBCResult:
    """SBC of the law model of ``design.spec`` on ``design``'s rows.

    Each quantity's truth is ranked among ``L = min(max_rank_draws, ESS_bulk)`` posterior
    draws spaced evenly over the chains (Talts et al.: thin to about independent draws).
    Pass ``sampler`` (from :meth:`CompiledLawSampler.for_design` on this design) to reuse a
    compiled one; its configuration then replaces ``config``.

    The prior datasets are drawn here (seeded by ``seed``); each dataset's fit is a job of
    :func:`bayesscale.checks.fanout.run_jobs` seeded by ``(seed, dataset)`` only
    (:func:`sbc_job`), run serially or on Ray (``ray_address``, ``workers``) with the same
    ranks either way. Uniformity is judged by chi-square and KS tests and by the ECDF of the
    normalised ranks against a simultaneous ``band_prob`` band (:func:`ecdf_band`, seeded by
    ``seed``). With ``time_limit`` (seconds of fitting) the study stops starting fits
    after that long and judges the first ``k`` datasets fitted: exactly the first ``k`` of
    the full study (``config["n_datasets"]`` says how many, ``"n_datasets_asked"`` how
    many were asked).

    >>> result = simulation_based_calibration(design, 25, FitConfig(chains=2, draws=200))  # doctest: +SKIP
    >>> result.min_p > 0.001, result.ecdf_inside  # doctest: +SKIP
    (True, True)
    """
    from bayesscale.checks.fanout import last_run, run_jobs

    if max_rank_draws < MIN_RANK_DRAWS:
        raise ValueError(f"max_rank_draws must be >= {MIN_RANK_DRAWS}")
    quantities = list(quantities or default_quantities(design))
    variables = sorted({q.variable for q in quantities})
    start = time.perf_counter()
    if sampler is None:
        sampler = cached_sampler(design, config, variables)
    elif not sampler.same_layout(design):
        raise ValueError("the sampler was compiled for another design (settings, sizes or trials)")
    else:  # serial jobs in this process use it
        _SAMPLERS[_sampler_key(design, sampler.config, sampler.var_names)] = sampler
    config = sampler.config
    missing = set(variables) - set(sampler.var_names)
    if missing:
        raise ValueError(f"the sampler does not return {sorted(missing)}")
    setup_seconds = time.perf_counter() - start
    model_vars = [v for v in variables if v != LOG_LIKELIHOOD]
    prior = prior_datasets(
        sampler.model, n_datasets, int(np.random.SeedSequence(seed).generate_state(1)[0]),
        model_vars, perturb,
    )  # fmt: skip
    prior_seconds = time.perf_counter() - start - setup_seconds
    free = [rv.name for rv in sampler.model.free_RVs]
    items = []
    for i in range(n_datasets):
        row = prior.truth.isel({DATASET: i})
        truth = {
            q.label: float(q.select(row[q.variable]).values)
            for q in quantities
            if q.variable != LOG_LIKELIHOOD
        }
        items.append(
            SBCDataset(
                index=i,
                outcome=np.asarray(prior.outcomes[i]),
                truth=truth,
                free={v: np.asarray(row[v].values) for v in free},
            )
        )
    jobs = SBCJobs(design, config, tuple(sampler.var_names), tuple(quantities), max_rank_draws)
    fanned = time.perf_counter()
    rows = run_jobs(
        sbc_job, items, seed, shared=jobs, ray_address=ray_address, workers=workers,
        progress=progress, time_limit=time_limit,
    )  # fmt: skip
    asked, n_datasets = n_datasets, len(rows)
    if n_datasets == 0:
        raise RuntimeError("no SBC dataset was fitted within the time limit")
    jobs_seconds = time.perf_counter() - fanned
    ranks = pd.DataFrame([r for part in rows for r in part])
    sampling = ranks.groupby(DATASET)[SECONDS].first().to_numpy(float)
    normalized = {
        q.label: ranks.loc[ranks[QUANTITY] == q.label, NORMALIZED_RANK].to_numpy(float)
        for q in quantities
    }
    tests = {label: uniformity(u, bins) for label, u in normalized.items()}
    band = ecdf_band(n_datasets, band_prob, seed=seed) if n_datasets >= 2 else None
    ecdf = (
        {label: ecdf_verdict(u, band, label) for label, u in normalized.items()}
        if band is not None
        else {}
    )
    info = last_run()
    return SBCResult(
        ranks=ranks,
        tests=tests,
        acceptance=prior.acceptance,
        ecdf=ecdf,
        band=band,
        timing={
            "setup_s": setup_seconds,
            "compile_s": float(sampler.compile_seconds or 0.0),
            "prior_draws_s": prior_seconds,
            "sampling_s_per_dataset": float(np.mean(sampling)),
            "sampling_s_total": float(np.sum(sampling)),
            "jobs_wall_s": jobs_seconds,
        },
        config={
            "n_datasets": n_datasets,
            "n_datasets_asked": asked,
            "rows": design.n_obs,
            "settings": len(design.settings),
            "chains": config.chains,
            "tune": config.tune,
            "draws": config.draws,
            "target_accept": config.accept,
            "kernel": config.kernel,
            "max_rank_draws": max_rank_draws,
            "seed": seed,
            "perturbed": perturb is not None,
            "mode": info.mode if info is not None else "serial",
            "ray_address": info.address if info is not None else None,
            "workers": info.workers if info is not None else 1,
        },
    )


# --- coverage over redraws: pooled model vs bootstrap baseline ---------------------------------


@dataclass
class CoverageResult:
    """Interval records (one per redraw, method, level, setting and axis) and their summary."""

    records: pd.DataFrame
    summary: pd.DataFrame
    fits: pd.DataFrame  # per redraw: pooled seconds, divergences, max R-hat, min bulk ESS
    timing: dict[str, float]
    config: dict[str, Any] = field(default_factory=dict)

    def report(self) -> str:
        """The coverage/width table, pooled and bootstrap side by side."""
        table = self.summary.pivot_table(
            index=[LEVEL, names.AXIS_DIM], columns=ESTIMATOR, values=[COVERAGE, MEAN_WIDTH]
        )
        return table.to_string(float_format=lambda v: f"{v:.3f}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "timing": self.timing,
            "summary": self.summary.to_dict(orient="records"),
            "pooled_fits": self.fits.to_dict(orient="records"),
        }


def _record(
    redraw: int,
    method: str,
    level: str,
    setting: str,
    axis: str,
    truth: float,
    lo: float,
    hi: float,
) -> dict[str, Any]:
    return {
        REDRAW: redraw,
        ESTIMATOR: method,
        LEVEL: level,
        names.SETTING_DIM: setting,
        names.AXIS_DIM: axis,
        TRUE_VALUE: truth,
        LOWER: lo,
        UPPER: hi,
        COVERED: bool(lo <= truth <= hi),
        WIDTH: hi - lo,
    }


@dataclass(frozen=True)
class CoverageJobs:
    """What every coverage redraw shares (sent to each Ray worker once)."""

    truth: Truth
    spec: ModelSpec
    frame: pd.DataFrame
    config: FitConfig
    var_names: tuple[str, ...]
    n_boot: int
    prob: float


def coverage_job(jobs: CoverageJobs, redraw: int, seed: int) -> dict[str, Any]:
    """One redraw of :func:`coverage_study`: simulate (seeded by ``seed``), fit the pooled law
    and the bootstrap, and record every interval; ``{"records": [...], "fit": {...},
    "pooled_s": s, "bootstrap_s": s}``."""
    from bayesscale.law.baseline import bootstrap_fit

    truth, spec, prob = jobs.truth, jobs.spec, jobs.prob
    data_seed, fit_seed, boot_seed = np.random.SeedSequence(seed).generate_state(3)
    truth_labels = list(setting_labels(pd.DataFrame(truth.settings), spec))
    axes = list(truth.axes)
    true_alpha = np.asarray(truth.alpha)
    frame = simulate(truth, jobs.frame, seed=int(data_seed))
    source = f"<coverage redraw {redraw}>"
    design_r = design_of(frame, spec, source)
    sampler = cached_sampler(design_r, jobs.config, jobs.var_names)
    if not sampler.same_layout(design_r):
        raise ValueError(f"{source}: the sampler was compiled for another design layout")
    row_of = {label: truth_labels.index(label) for label in design_r.settings}
    if design_r.successes is None:
        raise ValueError(f"{source}: coverage needs a success-count outcome")
    records: list[dict[str, Any]] = []
    fit = sampler.fit(design_r.successes, seed=int(fit_seed))
    fit_row = {
        REDRAW: redraw,
        SECONDS: fit.seconds,
        DIVERGENCES: fit.divergences,
        **fit.convergence(),
    }
    alpha = fit.posterior[names.ALPHA].stack(sample=(names.CHAIN_DIM, names.DRAW_DIM))
    lo, hi = equal_tailed(alpha.transpose("sample", ...).values, prob)
    for s, label in enumerate(alpha[names.SETTING_DIM].values.tolist()):
        for a, axis in enumerate(alpha[names.AXIS_DIM].values.tolist()):
            t = float(true_alpha[row_of[label], axes.index(axis)])
            records.append(
                _record(redraw, POOLED, SETTING_LEVEL, label, axis, t, lo[s, a], hi[s, a])
            )
    pop = fit.posterior[names.ALPHA_POP].stack(sample=(names.CHAIN_DIM, names.DRAW_DIM))
    plo, phi = equal_tailed(pop.transpose("sample", ...).values, prob)
    for a, axis in enumerate(pop[names.AXIS_DIM].values.tolist()):
        t = float(truth.alpha_pop[axes.index(axis)])
        records.append(_record(redraw, POOLED, POPULATION_LEVEL, "", axis, t, plo[a], phi[a]))
    start = time.perf_counter()
    boot = bootstrap_fit(frame, spec, n_boot=jobs.n_boot, prob=prob, seed=int(boot_seed))
    boot_s = time.perf_counter() - start
    for row in boot.exponents.itertuples(index=False):
        t = float(true_alpha[row_of[str(row.setting)], axes.index(str(row.axis))])
        records.append(
            _record(
                redraw, BOOTSTRAP, SETTING_LEVEL, str(row.setting), str(row.axis), t,
                float(row.lower), float(row.upper),
            )
        )  # fmt: skip
    medians = boot.replicates.groupby(["axis", "replicate"])["alpha"].median()
    for axis, values in medians.groupby(level="axis"):
        blo, bhi = equal_tailed(values.to_numpy(), prob)
        t = float(truth.alpha_pop[axes.index(str(axis))])
        records.append(
            _record(redraw, BOOTSTRAP, POPULATION_LEVEL, "", str(axis), t, float(blo), float(bhi))
        )
    return {"records": records, "fit": fit_row, "pooled_s": fit.seconds, "bootstrap_s": boot_s}


def coverage_study(
    truth: Truth,
    spec: ModelSpec,
    n_redraws: int,
    config: FitConfig,
    seed: int = 0,
    n_boot: int = 500,
    prob: float = DEFAULT_PROB,
    design_frame: pd.DataFrame | None = None,
    progress: Callable[[str], None] | None = None,
    sampler: CompiledLawSampler | None = None,
    ray_address: str | None = None,
    workers: int | None = None,
) -> CoverageResult:
    """Redraw ``truth``'s design (rows without outcomes; default
    :func:`bayesscale.data.simulate.per_axis_design`) ``n_redraws`` times; fit the pooled law
    (one compiled sampler per process for every redraw) and the bootstrap baseline to each,
    and record whether each ``prob`` interval covers the truth.

    Population intervals: the pooled model's ``alpha_pop``; for the baseline, the bootstrap
    distribution of the median over settings of the per-setting exponents (``alpha_pop`` is
    the population median), which ignores between-setting sampling variability. Pass
    ``sampler`` (returning ``alpha`` and ``alpha_pop``) to reuse one compiled for this layout.
    Each redraw is a job of :func:`bayesscale.checks.fanout.run_jobs` (:func:`coverage_job`,
    seeded by ``(seed, redraw)``), serially or on Ray (``ray_address``, ``workers``) with the
    same records either way; ``progress`` gets one line per redraw at the end.
    """
    from bayesscale.checks.fanout import run_jobs

    if n_redraws < 1:
        raise ValueError(f"n_redraws must be >= 1, got {n_redraws}")
    frame0 = per_axis_design(truth) if design_frame is None else design_frame
    var_names: tuple[str, ...] = COVERAGE_VARIABLES
    if sampler is not None:
        if sampler.design is None:
            raise ValueError("the sampler has no design (build it with for_design)")
        config, var_names = sampler.config, tuple(sampler.var_names)
        _SAMPLERS[_sampler_key(sampler.design, config, var_names)] = sampler
    jobs = CoverageJobs(truth, spec, frame0, config, var_names, n_boot, prob)
    done = run_jobs(
        coverage_job, list(range(n_redraws)), seed, shared=jobs, ray_address=ray_address,
        workers=workers,
    )  # fmt: skip
    records = [x for d in done for x in d["records"]]
    fits = [d["fit"] for d in done]
    timing = {
        "pooled_s": float(sum(d["pooled_s"] for d in done)),
        "bootstrap_s": float(sum(d["bootstrap_s"] for d in done)),
        "compile_s": float(sampler.compile_seconds or 0.0) if sampler is not None else 0.0,
    }
    frame_records = pd.DataFrame(records)
    if progress is not None:
        for r, fit in enumerate(fits):
            part = frame_records[frame_records[REDRAW] == r]
            text = ", ".join(
                f"{m} {lvl} {g[COVERED].mean():.2f}"
                for (m, lvl), g in part.groupby([ESTIMATOR, LEVEL])
            )
            progress(
                f"redraw {r + 1}/{n_redraws}: pooled {fit[SECONDS]:.1f} s, {fit[DIVERGENCES]} "
                f"divergences, max R-hat {fit[MAX_RHAT]:.3f}, min bulk ESS {fit[MIN_ESS]:.0f}; "
                f"coverage {text}"
            )
    return CoverageResult(
        records=frame_records,
        summary=summarize_coverage(frame_records),
        fits=pd.DataFrame(fits),
        timing=timing,
        config={
            "n_redraws": n_redraws,
            "settings": len(truth.settings),
            "rows": len(frame0),
            "chains": config.chains,
            "tune": config.tune,
            "draws": config.draws,
            "target_accept": config.accept,
            "n_boot": n_boot,
            "prob": prob,
            "seed": seed,
        },
    )


# --- output ----------------------------------------------------------------------------------


def write_json(payload: Mapping[str, Any], path: str | Path, overwrite: bool = False) -> Path:
    """Write JSON atomically (temporary file in the same folder, then rename); refuse to
    replace an existing file unless ``overwrite``."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists; pass --force (overwrite=True) to replace it")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(payload, handle, indent=1, default=_json_default)
            handle.write("\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")
