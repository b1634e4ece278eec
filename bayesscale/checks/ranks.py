"""Ranks of a truth among posterior draws, and tests that they are uniform.

Simulation-based calibration (Talts et al. 2018, arXiv:1804.06788) ranks the true value of a
scalar ``f`` among ``L`` roughly independent posterior draws:

.. math::

    r_n = \\#\\{\\ell : f(\\theta^{(\\ell)}_n) < f(\\theta_n)\\} \\in \\{0, \\dots, L\\}, \\qquad
    u_n = (r_n + v_n) / (L + 1), \\quad v_n \\sim \\mathrm{U}(0, 1)

If the sampler draws from the exact posterior, ``r_n`` is uniform on ``{0..L}`` and the
randomised normalised rank ``u_n`` is exactly ``U(0, 1)``, whatever ``L`` is. Uniformity is
tested here with a chi-square test on ``u`` in equal bins and a Kolmogorov-Smirnov test (the
ECDF bands are :mod:`~bayesscale.checks.ecdf_bands`). NumPy and SciPy only.

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

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

Array = NDArray[np.float64]


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
