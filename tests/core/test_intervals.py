"""bayesscale.core.intervals against brute force: every interval the package reports comes from here."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from bayesscale.core.intervals import (
    ETI,
    HDI,
    check_prob,
    describe,
    interval,
    quantiles,
    tail_quantiles,
)


def _brute_hdi(x: np.ndarray, prob: float) -> tuple[float, float]:
    """The narrowest [x_i, x_j] holding at least floor(prob n) + 1 draws, by trying every pair."""
    x = np.sort(x)
    need = int(np.floor(prob * x.size)) + 1
    best = (np.inf, 0.0, 0.0)
    for i, j in itertools.combinations(range(x.size), 2):
        if j - i + 1 >= need and x[j] - x[i] < best[0]:
            best = (x[j] - x[i], x[i], x[j])
    return best[1], best[2]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hdi_is_the_narrowest_window(seed: int) -> None:
    x = np.random.default_rng(seed).gamma(1.5, size=60)
    lo, hi = interval(x, 0.8, kind=HDI)
    assert (lo, hi) == pytest.approx(_brute_hdi(x, 0.8))
    eti = interval(x, 0.8, kind=ETI)
    assert hi - lo <= eti[1] - eti[0]


def test_equal_tailed_matches_numpy_on_finite_draws_and_keeps_infinity() -> None:
    x = np.random.default_rng(3).normal(size=(500, 4))
    expected = np.quantile(x, [0.05, 0.95], axis=0)
    np.testing.assert_allclose(interval(x, 0.9), expected)
    np.testing.assert_allclose(interval(x.T, 0.9, axis=1), expected)
    with_inf = np.r_[np.arange(9.0), np.inf, np.nan]
    assert quantiles(with_inf, [0.5, 1.0]).tolist() == [4.5, np.inf]
    assert np.isnan(quantiles([np.nan, np.nan], [0.5])[0])


def test_describe_and_the_mass_check() -> None:
    d = describe(np.arange(101.0), 0.9)
    assert d == pytest.approx({"mean": 50.0, "median": 50.0, "lower": 5.0, "upper": 95.0})
    assert tail_quantiles(0.5) == (0.25, 0.75)
    for bad in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(ValueError, match=r"prob must be in \(0, 1\)"):
            check_prob(bad)
    with pytest.raises(ValueError, match="unknown interval kind"):
        interval(np.arange(5.0), 0.5, kind="quantile")
    with pytest.raises(ValueError, match="an HDI needs finite draws"):
        interval(np.r_[np.arange(5.0), np.inf], 0.5, kind=HDI)


def test_nan_draws_are_left_out_and_infinities_kept() -> None:
    assert quantiles([-np.inf, 1.0, 2.0, np.inf], [0.0, 0.2, 0.5, 0.9, 1.0]).tolist() == [
        -np.inf,
        -np.inf,
        1.5,
        np.inf,
        np.inf,
    ]
    assert describe([1.0, np.nan, 3.0], 0.5) == {
        "mean": 2.0,
        "median": 2.0,
        "lower": 1.5,
        "upper": 2.5,
    }
    assert all(np.isnan(v) for v in describe([np.nan, np.nan], 0.5).values())
