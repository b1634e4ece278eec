"""Bayesian stacking of predictive distributions (Yao, Vehtari, Simpson & Gelman 2018).

Given each candidate's log predictive density of each held-out point, ``lpd[i, k] = log
p_k(y_i | data without y_i)`` (from PSIS-LOO, or from an out-of-scale refit that left ``y_i``'s
scale out), the stacking weights maximise the log score of the mixture:

.. math::

    \\hat w = \\arg\\max_{w \\in \\Delta_K} \\sum_i \\log \\sum_k w_k\\, e^{\\mathrm{lpd}_{ik}}

The objective is concave in ``w``; it is solved by the EM fixed point ``w_k <- w_k mean_i
r_ik``, ``r_ik = w_k p_ik / sum_j w_j p_ij`` (each step raises the objective; the KKT
conditions of the simplex hold at its limit, checked in the tests against a brute-force
search). How well the points pin the weights down: the same weights under Bayesian-bootstrap
reweightings of the points (Dirichlet(1, ..., 1) weights on the points' log scores),
:func:`weight_spread`. Stacking weights go to a corner whenever one candidate scores a little
better on nearly every point (two nested forms that predict almost alike do), so a corner is
not evidence by itself: the data *separate* the leading candidate only where its summed log
score also beats every other's by more than ``MIN_GAP`` = 4 (below that a difference of log
scores is small whatever its standard error: Sivula, Magnusson & Vehtari 2022) and by more
than twice the paired standard error of the difference (``se = sd_i(lpd_i,best -
lpd_i,k) sqrt(n)``, as LOO comparisons judge; over groups of dependent points where they are
given, and only where there are several), and its weight interval lies above theirs. Otherwise the data cannot tell the candidates apart, and
the mixture, not a pick, is what to report.

>>> lpd = np.log([[0.5, 0.1], [0.4, 0.2], [0.6, 0.1]])  # candidate 0 predicts every point better
>>> stacking_weights(lpd).round(6).tolist()
[1.0, 0.0]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.float64]
TOL = 1e-10  # on the largest change of a weight per EM step
MIN_GAP = 4.0  # a smaller difference of summed log scores is small (Sivula et al. 2022)
MAX_STEPS = 100_000


def _checked(lpd: ArrayLike) -> Array:
    arr = np.asarray(lpd, dtype=float)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"lpd must be (points, candidates), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(
            f"lpd[{bad[0]}, {bad[1]}] = {arr[tuple(bad)]}: every log predictive density must be "
            "finite (a candidate that gives a held-out point zero density cannot be stacked)"
        )
    return arr


def stacking_weights(lpd: ArrayLike, point_weights: ArrayLike | None = None) -> Array:
    """The stacking weights ``(K,)`` of ``lpd`` ``(n, K)``; ``point_weights`` ``(n,)`` (>= 0,
    default 1) weight each point's log score (the Bayesian bootstrap's draws)."""
    arr = _checked(lpd)
    n, k = arr.shape
    pw = np.ones(n) if point_weights is None else np.asarray(point_weights, dtype=float)
    if pw.shape != (n,) or np.any(pw < 0) or pw.sum() <= 0:
        raise ValueError("point_weights must be (points,), >= 0, not all 0")
    pw = pw / pw.sum()
    # densities relative to each point's best candidate: no underflow, same responsibilities
    p = np.exp(arr - arr.max(axis=1, keepdims=True))
    w = np.full(k, 1.0 / k)
    for _ in range(MAX_STEPS):
        mix = p @ w
        new = w * (pw @ (p / mix[:, None]))
        new = new / new.sum()
        if np.max(np.abs(new - w)) < TOL:
            w = new
            break
        w = new
    return np.asarray(w, dtype=float)


def log_score(lpd: ArrayLike, weights: ArrayLike) -> float:
    """``sum_i log sum_k w_k exp(lpd_ik)``: the mixture's log predictive density of the points.

    >>> round(log_score(np.log([[0.5, 0.1]]), [0.5, 0.5]), 6) == round(float(np.log(0.3)), 6)
    True
    """
    arr = _checked(lpd)
    w = np.asarray(weights, dtype=float)
    with np.errstate(divide="ignore"):
        logw = np.log(w)
    top = arr.max(axis=1)
    return float(np.sum(top + np.log(np.exp(arr - top[:, None]) @ np.exp(logw))))


@dataclass(frozen=True)
class Stack:
    """Stacking weights with their Bayesian-bootstrap spread: ``weights`` (K,), ``draws``
    (n_boot, K) the weights under reweighted points, ``lower``/``upper`` their central
    ``prob`` interval per candidate; ``elpd_gap``/``gap_se`` (K,) each candidate's summed log
    score below the leading one's and the paired standard error of that gap (0 for the
    leader); ``separated`` whether the data tell the leader apart (module docstring)."""

    names: tuple[str, ...]
    weights: Array
    draws: Array
    lower: Array
    upper: Array
    prob: float
    elpd_gap: Array
    gap_se: Array

    @property
    def leader(self) -> int:
        return int(np.argmax(self.weights))

    @property
    def separated(self) -> bool:
        best = self.leader
        others = [j for j in range(len(self.names)) if j != best]
        return all(
            self.lower[best] > self.upper[j]
            and self.elpd_gap[j] > max(MIN_GAP, 2.0 * self.gap_se[j])
            for j in others
        )

    def to_json(self) -> dict[str, object]:
        """The weights and their spread per candidate, and whether the data separate them."""
        return {
            "weights": dict(zip(self.names, np.round(self.weights, 6).tolist(), strict=True)),
            "interval": {
                name: [round(float(lo), 6), round(float(hi), 6)]
                for name, lo, hi in zip(self.names, self.lower, self.upper, strict=True)
            },
            "prob": self.prob,
            "bootstrap_draws": int(self.draws.shape[0]),
            "elpd_below_leader": {
                name: [round(float(g), 3), round(float(se), 3) if np.isfinite(se) else None]
                for name, g, se in zip(self.names, self.elpd_gap, self.gap_se, strict=True)
            },
            "separated": self.separated,
        }


def weight_spread(
    lpd: ArrayLike,
    names: tuple[str, ...] | list[str],
    n_boot: int = 200,
    seed: int = 0,
    prob: float = 0.9,
    groups: ArrayLike | None = None,
) -> Stack:
    """:func:`stacking_weights` of ``lpd`` and of ``n_boot`` Bayesian-bootstrap reweightings
    of its points (seeded), with the central ``prob`` interval of each weight.

    ``groups`` (n,): labels of points that are not independent (the seeds of one setting,
    the sizes of one curve share its posterior): the bootstrap then reweights whole groups
    and the paired standard error of a gap is over the groups' summed differences, so a
    handful of settings is not counted as many independent points."""
    arr = _checked(lpd)
    if len(names) != arr.shape[1]:
        raise ValueError(f"{len(names)} names for {arr.shape[1]} candidates")
    labels = np.arange(arr.shape[0]) if groups is None else np.asarray(groups)
    if labels.shape != (arr.shape[0],):
        raise ValueError(f"groups must be one label per point, got shape {labels.shape}")
    _, member = np.unique(labels, return_inverse=True)
    n_groups = int(member.max()) + 1
    rng = np.random.default_rng(seed)
    draws = np.array(
        [stacking_weights(arr, rng.dirichlet(np.ones(n_groups))[member]) for _ in range(n_boot)]
    )
    tail = (1.0 - prob) / 2.0
    weights = stacking_weights(arr)
    diff = arr[:, [int(np.argmax(weights))]] - arr  # (n, K): the leader's score minus each
    by_group = np.zeros((n_groups, arr.shape[1]))
    np.add.at(by_group, member, diff)
    return Stack(
        names=tuple(names),
        weights=weights,
        draws=draws,
        lower=np.quantile(draws, tail, axis=0),
        upper=np.quantile(draws, 1.0 - tail, axis=0),
        prob=prob,
        elpd_gap=diff.sum(axis=0),
        gap_se=(
            by_group.std(axis=0, ddof=1) * np.sqrt(n_groups)
            if n_groups > 1
            else np.full(arr.shape[1], np.inf)  # one group: no spread to judge a gap by
        ),
    )
