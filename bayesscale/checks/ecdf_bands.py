"""The ECDF of normalised ranks against simultaneous confidence bands (Säilynoja, Bürkner &
Vehtari 2022): whether ranks that should be ``U(0, 1)`` are, and where they depart from it.

:func:`ecdf_band` finds by simulation a band that a uniform sample's ECDF leaves anywhere with
probability about ``1 - prob``; :func:`ecdf_verdict` says whether one quantity's ranks stay
inside and, where not, on which stretches and on which side; :func:`plot_ecdf_difference`
draws ``F(z) - z`` with its band (matplotlib, imported when drawing).

Example
-------
>>> import numpy as np
>>> band = ecdf_band(40, points=8, n_sim=500)
>>> ecdf_verdict(np.linspace(0.01, 0.99, 40), band).inside
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

Array = NDArray[np.float64]


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
