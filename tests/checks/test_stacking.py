"""Stacking weights against a brute-force search, the simplex's KKT conditions, and their spread."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import optimize

from bayesscale.checks.stacking import log_score, stacking_weights, weight_spread


def _random_lpd(seed: int, n: int = 60, k: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(-1.0, 0.8, (n, k)) + rng.normal(0.0, 0.3, k)


def _brute_force(lpd: np.ndarray) -> float:
    """The best log score over a grid on the simplex, each grid point's best polished by
    SLSQP from there."""
    k = lpd.shape[1]
    grid = np.linspace(0.0, 1.0, 41)
    best_w, best = None, -np.inf
    for head in itertools.product(grid, repeat=k - 1):
        if sum(head) <= 1.0 + 1e-12:
            w = np.array([*head, max(0.0, 1.0 - sum(head))])
            s = log_score(lpd, w)
            if s > best:
                best_w, best = w, s
    res = optimize.minimize(
        lambda w: -log_score(lpd, np.maximum(w, 0.0)),
        best_w,
        method="SLSQP",
        bounds=[(0.0, 1.0)] * k,
        constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1.0}],
        options={"ftol": 1e-14, "maxiter": 500},
    )
    return max(best, -float(res.fun))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_weights_reach_the_brute_force_optimum(seed: int) -> None:
    lpd = _random_lpd(seed)
    w = stacking_weights(lpd)
    assert w.min() >= 0 and w.sum() == pytest.approx(1.0, abs=1e-12)
    assert log_score(lpd, w) >= _brute_force(lpd) - 1e-8


@pytest.mark.parametrize("seed", [0, 4])
def test_weights_satisfy_the_simplex_kkt_conditions(seed: int) -> None:
    # d/dw_k of the mean log score is mean_i p_ik / mix_i: equal to 1 where w_k > 0, at most 1
    # where w_k = 0 (the multiplier of sum w = 1 is 1 at the optimum)
    lpd = _random_lpd(seed, n=200)
    w = stacking_weights(lpd)
    p = np.exp(lpd)
    grad = (p / (p @ w)[:, None]).mean(axis=0)
    inside = w > 1e-6
    np.testing.assert_allclose(grad[inside], 1.0, atol=1e-6)
    assert np.all(grad[~inside] <= 1.0 + 1e-6)


def test_each_candidate_right_on_half_the_points_shares_the_weight() -> None:
    # candidate 0 predicts the first half well and the second badly, candidate 1 the reverse:
    # only a mixture predicts all, and by symmetry the weights are one half each
    good, bad = np.log(0.8), np.log(0.05)
    lpd = np.array([[good, bad]] * 20 + [[bad, good]] * 20)
    np.testing.assert_allclose(stacking_weights(lpd), [0.5, 0.5], atol=1e-8)
    stack = weight_spread(lpd, ["a", "b"], n_boot=100, seed=1)
    assert not stack.separated
    assert stack.lower[0] < 0.5 < stack.upper[0]


def test_a_candidate_better_on_every_point_gets_all_the_weight_and_is_separated() -> None:
    rng = np.random.default_rng(3)
    base = rng.normal(-1.5, 0.3, 80)
    lpd = np.column_stack([base + 0.5, base])
    stack = weight_spread(lpd, ["offset_power", "power"], n_boot=100, seed=2)
    np.testing.assert_allclose(stack.weights, [1.0, 0.0], atol=1e-8)
    assert stack.separated
    out = stack.to_json()
    assert out["weights"] == {"offset_power": 1.0, "power": 0.0} and out["separated"] is True


def test_the_spread_is_seeded() -> None:
    lpd = _random_lpd(5, n=30, k=2)
    a = weight_spread(lpd, ["x", "y"], n_boot=30, seed=7)
    b = weight_spread(lpd, ["x", "y"], n_boot=30, seed=7)
    np.testing.assert_array_equal(a.draws, b.draws)


def test_a_point_no_candidate_can_score_is_named() -> None:
    lpd = np.zeros((4, 2))
    lpd[2, 1] = -np.inf
    with pytest.raises(ValueError, match=r"lpd\[2, 1\] = -inf"):
        stacking_weights(lpd)


def test_a_corner_without_a_clear_gap_is_not_a_separation() -> None:
    # two nested candidates predicting nearly alike: the first a little better on average,
    # with point-to-point noise far larger than the gap. The weights go to a corner, but the
    # summed gap is within two paired standard errors, so the data do not separate them.
    rng = np.random.default_rng(8)
    base = rng.normal(-5.0, 1.0, 63)
    lpd = np.column_stack([base + 0.04 + rng.normal(0.0, 0.3, 63), base])
    stack = weight_spread(lpd, ["offset_power", "power"], n_boot=100, seed=0)
    assert stack.weights[0] > 0.9  # a corner
    gap, se = stack.elpd_gap[1], stack.gap_se[1]
    assert 0 < gap < 2 * se
    assert not stack.separated
    assert stack.to_json()["elpd_below_leader"]["power"] == [round(gap, 3), round(se, 3)]


def test_a_small_gap_is_no_separation_however_steady() -> None:
    # the lab's case: one form a little better in both of two settings (a summed gap of 0.7
    # over 24 runs): the weights sit in a corner and the gap's spread over two settings is
    # tiny, but a gap below 4 is small
    rng = np.random.default_rng(2)
    base = rng.normal(-6.0, 1.0, 24)
    lpd = np.column_stack([base + 0.03, base])
    stack = weight_spread(lpd, ["power", "offset_power"], n_boot=50, groups=["w32", "w64"] * 12)
    assert stack.weights[0] == pytest.approx(1.0) and stack.elpd_gap[1] == pytest.approx(0.72)
    assert stack.gap_se[1] < 0.1 and not stack.separated
    # with the gap ten times larger the same data separate the forms
    assert weight_spread(np.column_stack([base + 0.3, base]), ["a", "b"], n_boot=50).separated
