"""Known answers for the pure collapse math (bayesscale.core.collapse): no sampling."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bayesscale.core import collapse

# a steep law: success is sensitive to effective data, so r* sits close to kappa's zero
STEEP = {"level": 0.8, "slope": 0.4, "alpha": 0.5, "x_baseline": 1.0}
PAPER = {"level": 0.8, "slope": 0.12, "alpha": 0.41, "x_baseline": 2.0}


def test_kappa_family_and_its_zero():
    r = np.linspace(0, 20, 201)
    k = collapse.kappa_linear(r, 0.71, 4.1)
    assert k[0] == pytest.approx(0.71)
    assert np.all(np.diff(k) < 0)
    zero = collapse.kappa_zero_ratio(0.71, 4.1)
    assert zero == pytest.approx(4.1 * 0.71 / 0.29)
    assert collapse.kappa_linear(zero, 0.71, 4.1) == pytest.approx(0.0, abs=1e-12)
    # the multiplier G = 1 + r kappa(r) returns to 1 exactly where kappa is zero
    assert collapse.multiplier(zero, 0.71, 4.1) == pytest.approx(1.0)


def test_section6_table_reading():
    """PAPER.md section 6: r* ~ c kappa0 / (1 - kappa0) with c_env 4.1, c_task = c_traj 2.6
    reproduces the paper's r* within ~11% (it is a reading of the table, checked here)."""
    table = [
        (0.71, 9.4, 4.1),
        (0.66, 8.1, 4.1),
        (0.57, 3.4, 2.6),
        (0.54, 3.1, 2.6),
        (0.51, 2.8, 2.6),
        (0.42, 1.7, 2.6),
        (0.34, 1.4, 2.6),
        (0.31, 1.2, 2.6),
    ]
    for kappa0, r_star, c in table:
        assert collapse.kappa_zero_ratio(kappa0, c) == pytest.approx(r_star, rel=0.12)


def test_soft_multiplier_matches_raw_where_positive_and_stays_positive():
    r = np.linspace(0, 30, 3001)
    raw = collapse.multiplier(r, 0.6, 2.0)
    soft = collapse.soft_multiplier(r, 0.6, 2.0)
    assert soft[0] == pytest.approx(1.0, abs=1e-15)
    where = raw > 0.5
    np.testing.assert_allclose(soft[where], raw[where], rtol=2e-3)
    assert soft.min() > 0.049
    # same ordering as the raw multiplier: monotone transform
    assert np.all(np.diff(soft)[np.diff(raw) > 0] > 0)


def test_peak_is_the_argmax_of_normalised_success():
    kappa0 = np.array([0.3, 0.5, 0.71])
    scale = np.array([1.0, 2.6, 4.1])
    r = np.linspace(0, 30, 300_001)[:, None]
    s = collapse.normalised_success(r, kappa0, scale, **PAPER)
    brute = r[np.argmax(s, axis=0), 0]
    np.testing.assert_allclose(collapse.peak_ratio(kappa0, scale), brute, atol=2e-4)
    np.testing.assert_allclose(
        collapse.peak_ratio(kappa0, scale), scale * kappa0 / (2 * (1 - kappa0))
    )
    # at fixed total data a discount below 1 never beats the pure-real baseline
    s_total = collapse.normalised_success(r, kappa0, scale, frame="fixed_total", **PAPER)
    assert np.all(s_total[1:] < 1.0)
    assert np.all(collapse.peak_ratio(kappa0, scale, frame="fixed_total") == 0.0)


def test_collapse_ratio_hits_the_threshold_past_the_peak():
    kappa0, scale = 0.57, 2.6
    r_star = collapse.collapse_ratio(kappa0, scale, **PAPER)
    assert r_star > collapse.peak_ratio(kappa0, scale)
    s = collapse.normalised_success(r_star, kappa0, scale, **PAPER)
    assert s == pytest.approx(0.95, abs=1e-9)
    # just before r* success is above the threshold, just after below
    assert collapse.normalised_success(r_star * 0.99, kappa0, scale, **PAPER) > 0.95
    assert collapse.normalised_success(r_star * 1.01, kappa0, scale, **PAPER) < 0.95
    for threshold in (0.8, 0.9, 0.99):
        r = collapse.collapse_ratio(kappa0, scale, threshold=threshold, **PAPER)
        s = collapse.normalised_success(r, kappa0, scale, **PAPER)
        assert s == pytest.approx(threshold, abs=1e-9)


def test_r_star_tends_to_kappa_zero_as_threshold_tends_to_one():
    """Under section 6's assumption (r* is where synthetic data stops adding value), r* is
    c kappa0 / (1 - kappa0): the limit of the collapse ratio as the threshold tends to 1."""
    for kappa0, c in [(0.71, 4.1), (0.51, 2.6), (0.31, 2.6)]:
        r = collapse.collapse_ratio(kappa0, c, threshold=1 - 1e-6, **STEEP)
        assert r == pytest.approx(c * kappa0 / (1 - kappa0), rel=1e-4)


def test_closed_form_matches_bisection():
    kappa0 = np.array([0.31, 0.51, 0.71])
    scale = np.array([2.6, 2.6, 4.1])
    g_star = collapse.threshold_multiplier(
        STEEP["level"], STEEP["slope"], STEEP["alpha"], STEEP["x_baseline"]
    )
    assert 0.5 < g_star < 1  # where the soft multiplier equals the raw one to 1e-3
    closed = collapse.collapse_ratio_closed_form(kappa0, scale, g_star)
    numeric = collapse.collapse_ratio(kappa0, scale, **STEEP)
    np.testing.assert_allclose(numeric, closed, rtol=2e-3)


def test_shallower_law_collapses_later_and_constant_kappa_never():
    """A shallow law needs a larger loss of effective data for a 5% drop: r* moves out."""
    steep = collapse.collapse_ratio(0.5, 2.0, level=0.8, slope=0.2, alpha=0.41, x_baseline=1.0)
    shallow = collapse.collapse_ratio(0.5, 2.0, level=0.8, slope=0.03, alpha=0.11, x_baseline=1.0)
    assert shallow > steep
    # kappa0 -> 1 with c -> infinity is a constant discount of 1: no collapse within 1e6
    assert collapse.collapse_ratio(0.999, 1e9, **STEEP) > 1e5


def test_collapse_ratio_is_vectorised_over_draws_and_methods():
    rng = np.random.default_rng(0)
    kappa0 = rng.uniform(0.2, 0.8, (3, 50, 4))
    scale = rng.uniform(0.5, 5.0, (3, 50, 4))
    alpha = rng.uniform(0.1, 0.5, (3, 50, 1))
    slope = rng.uniform(0.03, 0.2, (1, 1, 4))
    out = collapse.collapse_ratio(kappa0, scale, 0.8, slope, alpha, 2.0)
    assert out.shape == (3, 50, 4)
    for idx in [(0, 0, 0), (2, 49, 3), (1, 17, 2)]:
        one = collapse.collapse_ratio(
            kappa0[idx], scale[idx], 0.8, slope[0, 0, idx[2]], alpha[idx[0], idx[1], 0], 2.0
        )
        assert out[idx] == pytest.approx(float(one), rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    kappa0=st.floats(0.05, 0.95),
    scale=st.floats(0.2, 10.0),
    alpha=st.floats(0.05, 0.8),
    slope=st.floats(0.01, 0.5),
    threshold=st.floats(0.5, 0.99),
)
def test_collapse_ratio_properties(kappa0, scale, alpha, slope, threshold):
    law = {"level": 1.0, "slope": slope, "alpha": alpha, "x_baseline": 1.5}
    r = float(collapse.collapse_ratio(kappa0, scale, threshold=threshold, **law))
    peak = float(collapse.peak_ratio(kappa0, scale))
    if np.isfinite(r):
        assert r >= peak
        s = float(collapse.normalised_success(r, kappa0, scale, **law))
        assert s == pytest.approx(threshold, abs=1e-7)
        # a higher threshold is crossed earlier
        r_hi = float(
            collapse.collapse_ratio(kappa0, scale, threshold=min(threshold + 0.005, 0.999), **law)
        )
        assert r_hi <= r + 1e-9
    else:  # the floor keeps 5% of the data: success never drops that far
        floor_s = collapse.normalised_success_of_multiplier(
            0.05, law["level"], slope, alpha, law["x_baseline"]
        )
        assert floor_s > threshold - 1e-6


def test_logistic_collapse_crosses_095_at_r_star():
    for h in (0.5, 2.0, 8.0):
        assert collapse.logistic_collapse(3.0, 3.0, h) == pytest.approx(0.95)
    r = np.linspace(0.01, 20, 100)
    assert np.all(np.diff(collapse.logistic_collapse(r, 3.0, 2.0)) < 0)


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="threshold"):
        collapse.collapse_ratio(0.5, 2.0, threshold=1.2, **STEEP)
    with pytest.raises(ValueError, match="frame"):
        collapse.normalised_success(1.0, 0.5, 2.0, frame="fixed", **STEEP)
    with pytest.raises(ValueError, match="kappa0"):
        collapse.collapse_ratio(1.5, 2.0, **STEEP)
    with pytest.raises(ValueError, match="real counts"):
        collapse.effective_data(0.0, 10.0, 0.5, 2.0)
