"""The Monte Carlo error of a coverage count (bayesscale.checks.coverage_noise)."""

from __future__ import annotations

import numpy as np
import pytest

from bayesscale.checks.coverage_noise import block_length, count_mcse, resampled_draws


def test_the_resampled_draws_are_blocks_of_consecutive_draws() -> None:
    index = resampled_draws(1000, np.random.default_rng(0), 50)
    size = block_length(1000)
    assert size == 10 and index.shape == (50, 1000)
    assert index.min() >= 0 and index.max() <= 999
    blocks = index[:, : 100 * size].reshape(50, 100, size)
    assert (np.diff(blocks, axis=-1) == 1).all()  # each block runs over consecutive draws


def test_only_rows_near_an_end_of_their_interval_move_the_count() -> None:
    rng = np.random.default_rng(1)
    rates = rng.normal(size=(4000, 60))
    # 20 rows at the middle and 20 far beyond their intervals: their verdicts cannot move
    observed = np.r_[np.zeros(20), np.full(20, 6.0), np.full(20, 1.6449)]
    group = np.repeat([0, 1, 2], 20)
    mcse = count_mcse(rates, observed, group, 3, 0.9, seed=2, replicates=200)
    assert mcse[0] == 0 and mcse[1] == 0
    # 20 rows at the 95% quantile: each inside about half the time, and they share the draws'
    # noise only through their own columns (independent here): sd about sqrt(20 x 0.25) = 2.2
    assert 1.5 < mcse[2] < 3.0


def test_correlated_draws_carry_more_monte_carlo_error() -> None:
    """An AR(1) chain (lag-one correlation 0.9) holds about 1/19 of its draws' information:
    its 95% quantile wanders about 0.15 around the truth where independent draws' wanders
    0.03, so rows observed at 1.75 (0.1 beyond the true end) sit near their sample interval's
    end far more often, and the blocks see it."""
    rng = np.random.default_rng(3)
    shocks = rng.normal(size=(4000, 40))
    chain = np.empty_like(shocks)
    chain[0] = shocks[0]
    for t in range(1, len(chain)):
        chain[t] = 0.9 * chain[t - 1] + np.sqrt(1 - 0.81) * shocks[t]
    observed = np.full(40, 1.75)
    group = np.zeros(40, dtype=np.int64)
    correlated = count_mcse(chain, observed, group, 1, 0.9, seed=4)[0]
    independent = count_mcse(shocks, observed, group, 1, 0.9, seed=4)[0]
    assert correlated > 3 * independent


def test_replicates_of_one_draw_move_together() -> None:
    """A draw's ``per_draw`` predictive samples (replicate-major blocks) are resampled with the
    same draw indices: the error is the spread of counts over exactly those resamples."""
    rng = np.random.default_rng(5)
    rates = rng.normal(size=(2 * 500, 6))
    observed, group = np.full(6, 1.6), np.zeros(6, dtype=np.int64)
    mcse = count_mcse(rates, observed, group, 1, 0.9, seed=7, replicates=30, per_draw=2)
    counts = []
    for index in resampled_draws(500, np.random.default_rng(7), 30):
        picked = rates[np.concatenate([index, index + 500])]
        lower, upper = np.quantile(picked, [0.05, 0.95], axis=0)
        counts.append(np.count_nonzero((lower <= observed) & (observed <= upper)))
    assert mcse[0] == pytest.approx(np.std(counts, ddof=1)) and mcse[0] > 0
    with pytest.raises(ValueError, match="999 draws are not 2 replicates"):
        count_mcse(rates[:-1], observed, group, 1, 0.9, per_draw=2)


def test_segments_are_resampled_apart() -> None:
    """Each chain (or each form of a stack's mixture) is resampled within its own draws, so a
    mixture keeps its forms' shares and no block runs across two chains."""
    index = resampled_draws(1000, np.random.default_rng(8), 40, segments=[500, 300, 200])
    assert index.shape == (40, 1000)
    assert ((index[:, :500] >= 0) & (index[:, :500] < 500)).all()
    assert ((index[:, 500:800] >= 500) & (index[:, 500:800] < 800)).all()
    assert ((index[:, 800:] >= 800) & (index[:, 800:] < 1000)).all()
    with pytest.raises(ValueError, match="do not split 1000 draws"):
        resampled_draws(1000, np.random.default_rng(8), 40, segments=[500, 400])
