"""The ECDF bands of simulation-based calibration (:mod:`bayesscale.checks.ecdf_bands`) on
known answers."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from bayesscale.checks.ecdf_bands import ecdf_band, ecdf_verdict, plot_ecdf_difference
from bayesscale.checks.ranks import normalized_ranks, rank_of


def test_ecdf_band_brackets_the_uniform_expectation() -> None:
    band = ecdf_band(100, prob=0.95, n_sim=2000, seed=1)
    assert band.z.size == 99 and 0 < band.gamma < 0.05
    assert np.all(band.lower <= 100 * band.z) and np.all(100 * band.z <= band.upper)
    # the simultaneous band is wider than the pointwise 95% one
    assert np.all(band.upper >= stats.binom.ppf(0.975, 100, band.z))
    same = ecdf_band(100, prob=0.95, n_sim=2000, seed=1)
    assert np.array_equal(band.upper, same.upper)  # seeded


def test_uniform_ranks_stay_inside_at_the_nominal_rate() -> None:
    """300 seeded samples of 100 uniform normalised ranks against one 95% band: the share
    outside is 0.05 up to Monte Carlo error (sd 0.013) and the discreteness of the counts."""
    band = ecdf_band(100, prob=0.95, n_sim=4000, seed=2)
    rng = np.random.default_rng(3)
    outside = [not ecdf_verdict(rng.uniform(size=100), band).inside for _ in range(300)]
    assert 0.01 <= np.mean(outside) <= 0.10, np.mean(outside)


def test_too_narrow_and_too_wide_posteriors_leave_the_band() -> None:
    """The truth drawn from N(0, 1), ranked among 99 draws of a 'posterior' N(0, s^2): with
    s = 0.5 (too narrow) ranks pile at both ends, the ECDF rises above the band low and falls
    below it high; with s = 2 (too wide) the reverse."""
    rng = np.random.default_rng(4)
    n, draws = 200, 99
    band = ecdf_band(n, n_sim=2000, seed=5)
    for scale, first, last in ((0.5, "above", "below"), (2.0, "below", "above")):
        truth = rng.normal(size=n)
        ranks = np.array([rank_of(t, rng.normal(scale=scale, size=draws)) for t in truth])
        u = normalized_ranks(ranks, np.full(n, draws), rng)
        verdict = ecdf_verdict(u, band, "theta")
        assert not verdict.inside, scale
        assert verdict.outside[0][2] == first and verdict.outside[0][1] < 0.5
        assert verdict.outside[-1][2] == last and verdict.outside[-1][0] > 0.5
        assert verdict.max_excess > 0
    # the same draws from the right posterior (the prior: no data) stay inside
    truth = rng.normal(size=n)
    ranks = np.array([rank_of(t, rng.normal(size=draws)) for t in truth])
    assert ecdf_verdict(normalized_ranks(ranks, np.full(n, draws), rng), band).inside


def test_ecdf_verdict_reports_where_and_refuses_another_size(tmp_path) -> None:
    band = ecdf_band(40, points=8, n_sim=500)
    verdict = ecdf_verdict(np.full(40, 0.02), band, "q")
    assert verdict.outside == ((0.125, 0.875, "above"),)
    assert verdict.where() == "above 0.12-0.88"
    with pytest.raises(ValueError, match="40 values"):
        ecdf_verdict(np.full(39, 0.5), band)
    path = plot_ecdf_difference(
        {"q": np.full(40, 0.02), "r": np.linspace(0.01, 0.99, 40)}, tmp_path / "ecdf.png"
    )
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
