"""How far a coverage count moves with the Monte Carlo noise of the draws behind it.

A held-out row is *inside* when its observed rate lies between the ``tail`` and ``head``
quantiles of its ``M`` predictive draws (:func:`bayesscale.checks.heldout.predictive_rates`).
Another run of the sampler gives other draws, and rows near an end of their interval move
across it: the count of rows inside a group (a ratio bucket of the out-of-scale check) carries
a Monte Carlo error of its own. It is estimated by a moving-block bootstrap over the draws
(Künsch 1989): ``B`` times, within each segment of the draws (a chain; of a stack's mixture,
each form's draws, so that the forms keep their shares), draw ``ceil(m / b)`` blocks of
``b = ceil(m^(1/3))`` consecutive draws with replacement (consecutive draws of one chain are
correlated; a block keeps that), recompute each row's interval from them and count the rows
inside per group. The count's Monte
Carlo standard error is the spread of those counts,

.. math::

    \\mathrm{mcse}_g = \\mathrm{sd}_{b=1..B}\\, \\#\\{i \\in g : q_{tail}^{(b)}(i) \\le y_i
    \\le q_{head}^{(b)}(i)\\}

where the replicate and draw dims are kept together (a draw's ``replicates`` predictive
samples move as one, as they share its parameters). The out-of-scale check calls a bucket
*borderline* when its verdict differs at the count ``± BORDERLINE_Z mcse``
(:func:`bayesscale.checks.out_of_scale.bucket_verdict`), as the identification flags do with
their contraction's Monte Carlo error (:mod:`bayesscale.law.sensitivity`).

Example
-------
>>> rng = np.random.default_rng(0)
>>> rates = rng.normal(size=(2000, 3))  # 2,000 draws of 3 rows, each N(0, 1)
>>> observed = np.array([0.0, 1.64, 5.0])  # the middle, an end of the 90% interval, far out
>>> mcse = count_mcse(rates, observed, np.array([0, 1, 2]), 3, 0.9, seed=0)
>>> [round(float(x), 1) for x in mcse]  # only the row at the end of its interval moves
[0.0, 0.4, 0.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
from numpy.typing import NDArray

from bayesscale.core.intervals import quantiles, tail_quantiles

Array = NDArray[np.float64]
BOOTSTRAP_REPLICATES: Final = 100  # resampled draw sets behind each count's Monte Carlo error


def block_length(draws: int) -> int:
    """The bootstrap's block: ``ceil(M^(1/3))`` consecutive draws (at least 1).

    >>> block_length(2000)
    13
    """
    return max(1, int(np.ceil(draws ** (1.0 / 3.0) - 1e-9)))


def resampled_draws(
    draws: int,
    rng: np.random.Generator,
    replicates: int,
    segments: Sequence[int] | None = None,
) -> NDArray[np.int64]:
    """``replicates`` moving-block resamples of ``range(draws)`` (``(replicates, draws)``):
    within each of ``segments`` (consecutive lengths summing to ``draws``; default one), blocks
    of :func:`block_length` consecutive indices from uniform starts, cut to its length."""
    lengths = [draws] if segments is None else [int(m) for m in segments]
    if sum(lengths) != draws or min(lengths) < 1:
        raise ValueError(f"segments {lengths} do not split {draws} draws")
    parts, start = [], 0
    for m in lengths:
        size = block_length(m)
        blocks = -(-m // size)
        starts = rng.integers(0, m - size + 1, size=(replicates, blocks))
        index = (starts[:, :, None] + np.arange(size)[None, None, :]).reshape(replicates, -1)
        parts.append(start + index[:, :m])
        start += m
    return np.asarray(np.concatenate(parts, axis=1), dtype=np.int64)


def count_mcse(
    rates: Array,
    observed: Array,
    group: NDArray[np.int64],
    groups: int,
    prob: float,
    seed: int | list[int] = 0,
    replicates: int = BOOTSTRAP_REPLICATES,
    per_draw: int = 1,
    segments: Sequence[int] | None = None,
) -> Array:
    """The Monte Carlo standard error ``(groups,)`` of the count of rows inside their central
    ``prob`` intervals, per group (module docstring). ``rates`` are the predictive draws
    ``(per_draw x M, R)`` (``per_draw`` replicate-major blocks of the ``M`` posterior draws,
    as :meth:`bayesscale.law.predict.Prediction.sample` returns them); ``group`` gives each
    row's group in ``0 .. groups - 1`` (another value: in none); ``segments``: the lengths of
    the runs of the ``M`` draws resampled apart (:func:`resampled_draws`)."""
    total, rows = rates.shape
    if observed.shape != (rows,) or group.shape != (rows,):
        raise ValueError(f"observed and group need one entry per row of the {rows} rows")
    if total % per_draw:
        raise ValueError(f"{total} draws are not {per_draw} replicates of the same draws")
    draws = total // per_draw
    rng = np.random.default_rng(seed)
    tail, head = tail_quantiles(prob)
    counts = np.zeros((replicates, groups))
    member = [group == g for g in range(groups)]
    for b, index in enumerate(resampled_draws(draws, rng, replicates, segments)):
        picked = np.concatenate([index + r * draws for r in range(per_draw)])
        lower, upper = quantiles(rates[picked], [tail, head], axis=0)
        inside = (lower <= observed) & (observed <= upper)
        counts[b] = [np.count_nonzero(inside & m) for m in member]
    return np.asarray(counts.std(axis=0, ddof=1) if replicates > 1 else np.zeros(groups))
