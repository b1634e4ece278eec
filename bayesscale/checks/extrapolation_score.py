"""Scores of extrapolated learning curves, per extrapolation-ratio bucket.

Each held-out run ``i`` (curve ``c``, size ``x_i``, seed, ``k_i`` successes of ``n_i``) lies
``r_i = x_i / max_c`` beyond the largest size fitted on its curve; buckets: ``r <= 2``,
``2 < r <= 4``, ``4 < r <= 8``, ``r > 8`` (:func:`bucket`). A method's per-run scores
(:func:`score_frame`) are then summed up per bucket (:func:`bucket_table`):

* **MAE** over cells (curve, size): ``|m_c(x) - mean_seeds k/n|``, the method's predicted
  success (the law: the posterior median of ``p = exp(-L)``; a baseline: its curve) against
  the seeds' mean;
* **coverage**: the share of runs whose ``k/n`` lies in the method's central ``prob``
  predictive interval of one run's success fraction (for the law: law uncertainty,
  seed-to-seed spread and binomial noise, :meth:`bayesscale.law.predict.Prediction.sample`);
* **log density**: the mean over runs of the log predictive probability of the run's count,
  ``log (1/S) sum_d P(k_i | draw d)`` for the law (beta-binomial), and for a Gaussian
  baseline ``Normal(mu, sigma)`` on the fraction the mass of the count's bin
  ``[(k - 1/2)/n, (k + 1/2)/n]`` (the end bins reach to ``-inf`` and ``inf``):
  :func:`normal_count_logpmf`. Both are probabilities of the same count, so they compare.

Example
-------
>>> bucket([1.5, 2.0, 3.0, 8.0, 9.0]).tolist()
['<=2x', '<=2x', '2-4x', '4-8x', '>8x']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import special, stats

from bayesscale.core.intervals import quantiles, tail_quantiles
from bayesscale.data.extrapolation import BUCKET_EDGES, BUCKETS

Array = NDArray[np.float64]

MIDDLE_BUCKETS: Final = ("2-4x", "4-8x")  # the buckets the headline MAE pools
# columns of a score frame
METHOD, CURVE, SIZE, SEED, RATIO, BUCKET = "method", "curve", "size", "seed", "ratio", "bucket"
OBSERVED, PREDICTED, LOWER, UPPER, COVERED, LOG_DENSITY = (
    "observed", "predicted", "lower", "upper", "covered", "log_density",
)  # fmt: skip
MAE, COVERAGE, CELLS, RUNS = "mae", "coverage", "cells", "runs"


def bucket(ratio: ArrayLike) -> NDArray[np.object_]:
    """The bucket label of each extrapolation ratio (``r > 1``; the upper edge is inside)."""
    r = np.asarray(ratio, dtype=float)
    if np.any(~(r > 1)):
        raise ValueError("extrapolation ratios must be > 1 (sizes beyond the fitted ones)")
    index = np.searchsorted(np.asarray(BUCKET_EDGES), r, side="left")
    return np.asarray(BUCKETS, dtype=object)[index]


def _log_mass(lo: Array, hi: Array) -> Array:
    """``log (Phi(hi) - Phi(lo))`` for ``lo < hi``, stable in both tails."""
    upper = lo > 0  # both in the upper tail: Phi(hi) - Phi(lo) = Phi(-lo) - Phi(-hi)
    a = np.where(upper, -hi, lo)
    b = np.where(upper, -lo, hi)
    log_b, log_a = special.log_ndtr(b), special.log_ndtr(a)
    with np.errstate(divide="ignore"):
        return np.asarray(log_b + np.log1p(-np.exp(log_a - log_b)), dtype=float)


def normal_count_logpmf(k: ArrayLike, n: ArrayLike, mean: ArrayLike, sd: ArrayLike) -> Array:
    """``log P(K = k)`` for ``K/n`` a ``Normal(mean, sd)`` rounded to the nearest count in
    ``0..n``: the mass of ``[(k - 1/2)/n, (k + 1/2)/n]``, the end bins open.

    >>> p = np.exp(normal_count_logpmf(np.arange(11), 10, 0.4, 0.2))
    >>> round(float(p.sum()), 12), round(float(p[4]), 4)
    (1.0, 0.1974)
    """
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    mean, sd = np.asarray(mean, dtype=float), np.asarray(sd, dtype=float)
    lo = np.where(k <= 0, -np.inf, ((k - 0.5) / n - mean) / sd)
    hi = np.where(k >= n, np.inf, ((k + 0.5) / n - mean) / sd)
    return _log_mass(lo, hi)


def gaussian_scores(
    mean: ArrayLike, sd: ArrayLike, successes: ArrayLike, trials: ArrayLike, prob: float
) -> dict[str, Array]:
    """A Gaussian predictive of one run's fraction: ``lower``, ``upper`` (``mean -/+ z sd``,
    within [0, 1]), ``covered`` and ``log_density`` (:func:`normal_count_logpmf`).

    >>> s = gaussian_scores([0.5], [0.1], [60], [100], 0.9)
    >>> round(float(s["upper"][0]), 4), bool(s["covered"][0])
    (0.6645, True)
    """
    mean, sd = np.asarray(mean, dtype=float), np.asarray(sd, dtype=float)
    k, n = np.asarray(successes, dtype=float), np.asarray(trials, dtype=float)
    z = stats.norm.ppf(tail_quantiles(prob)[1])
    lower, upper = np.clip(mean - z * sd, 0, 1), np.clip(mean + z * sd, 0, 1)
    observed = k / n
    return {
        PREDICTED: mean,
        LOWER: lower,
        UPPER: upper,
        COVERED: (lower <= observed) & (observed <= upper),
        LOG_DENSITY: normal_count_logpmf(k, n, mean, sd),
    }


def draw_scores(
    success: Array, counts: Array, log_likelihood: Array, successes: ArrayLike,
    trials: ArrayLike, prob: float,
) -> dict[str, Array]:  # fmt: skip
    """Scores from posterior draws ``(S, R)``: ``success`` the expected success ``p`` per draw,
    ``counts`` posterior-predictive counts of one run, ``log_likelihood`` the count's log
    probability per draw. ``predicted`` is the median of ``p``; the interval the central
    ``prob`` of ``counts / n``; ``log_density`` ``log mean_d exp(log_likelihood)``.

    >>> p = np.full((4, 1), 0.5); c = np.array([[4.0], [5.0], [5.0], [6.0]])
    >>> s = draw_scores(p, c, np.log(np.full((4, 1), 0.25)), [5], [10], 0.5)
    >>> float(s["predicted"][0]), bool(s["covered"][0]), round(float(s["log_density"][0]), 4)
    (0.5, True, -1.3863)
    """
    k, n = np.asarray(successes, dtype=float), np.asarray(trials, dtype=float)
    tail, head = tail_quantiles(prob)
    lower, upper = quantiles(counts / n[None, :], [tail, head], axis=0)
    observed = k / n
    draws = log_likelihood.shape[0]
    return {
        PREDICTED: np.median(success, axis=0),
        LOWER: lower,
        UPPER: upper,
        COVERED: (lower <= observed) & (observed <= upper),
        LOG_DENSITY: special.logsumexp(log_likelihood, axis=0) - np.log(draws),
    }


def score_frame(
    method: str, rows: pd.DataFrame, scores: dict[str, Array], curve: str = CURVE,
    size: str = SIZE, successes: str = "successes", trials: str = "trials",
) -> pd.DataFrame:  # fmt: skip
    """One method's per-run scores: ``rows`` (held-out runs with a ``ratio`` column, and the
    named curve, size, successes and trials columns) with ``scores`` (:func:`gaussian_scores`
    or :func:`draw_scores`) beside them, in the columns of this module."""
    out = pd.DataFrame(
        {
            METHOD: method,
            CURVE: rows[curve].to_numpy(),
            SIZE: rows[size].to_numpy(float),
            RATIO: rows[RATIO].to_numpy(float),
            BUCKET: bucket(rows[RATIO].to_numpy(float)),
            OBSERVED: rows[successes].to_numpy(float) / rows[trials].to_numpy(float),
        }
    )
    for key in (PREDICTED, LOWER, UPPER, COVERED, LOG_DENSITY):
        out[key] = np.asarray(scores[key])
    return out


def cell_errors(scores: pd.DataFrame) -> pd.DataFrame:
    """One row per (method, curve, size): its bucket and ``|predicted - mean observed|``."""
    cells = scores.groupby([METHOD, CURVE, SIZE], sort=False).agg(
        bucket=(BUCKET, "first"), predicted=(PREDICTED, "mean"), observed=(OBSERVED, "mean")
    )
    cells["error"] = (cells[PREDICTED] - cells[OBSERVED]).abs()
    return cells.reset_index()


def bucket_table(scores: pd.DataFrame) -> pd.DataFrame:
    """Per method and bucket (and ``all``): ``cells``, ``runs``, ``mae``, ``coverage`` and the
    mean ``log_density`` (:mod:`module docstring <bayesscale.checks.extrapolation_score>`).

    >>> rows = pd.DataFrame({"curve": ["a", "a", "a"], "size": [32.0, 32.0, 128.0],
    ...                      "ratio": [2.0, 2.0, 8.0], "successes": [5, 7, 9], "trials": 10})
    >>> s = gaussian_scores([0.5, 0.5, 0.5], [0.1] * 3, [5, 7, 9], [10] * 3, 0.9)
    >>> t = bucket_table(score_frame("m", rows, s))
    >>> t["bucket"].tolist(), t[["cells", "runs", "mae", "coverage"]].round(3).values.tolist()
    (['<=2x', '4-8x', 'all'], [[1.0, 2.0, 0.1, 0.5], [1.0, 1.0, 0.4, 0.0], [2.0, 3.0, 0.25, 0.333]])
    """
    cells = cell_errors(scores)
    records = []
    for method in dict.fromkeys(scores[METHOD]):
        runs = scores[scores[METHOD] == method]
        errs = cells[cells[METHOD] == method]
        for label in (*BUCKETS, "all"):
            r = runs if label == "all" else runs[runs[BUCKET] == label]
            e = errs if label == "all" else errs[errs[BUCKET] == label]
            if len(r):
                records.append(
                    {
                        METHOD: method,
                        BUCKET: label,
                        CELLS: len(e),
                        RUNS: len(r),
                        MAE: float(e["error"].mean()),
                        COVERAGE: float(r[COVERED].mean()),
                        LOG_DENSITY: float(r[LOG_DENSITY].mean()),
                    }
                )
    return pd.DataFrame.from_records(records)


def pooled_mae(scores: pd.DataFrame, buckets: Sequence[str] = MIDDLE_BUCKETS) -> pd.Series:
    """Each method's MAE over the cells of ``buckets`` together (default 2-4x and 4-8x)."""
    cells = cell_errors(scores)
    part = cells[cells[BUCKET].isin(list(buckets))]
    return part.groupby(METHOD, sort=False)["error"].mean()
