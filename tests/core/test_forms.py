"""Law forms of bayesscale.core.forms: derivatives, monotonicity, the power law inside the
offset form, and the KKT/Newton allocation on a sum of terms against brute force."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from bayesscale.core import forms, laws
from bayesscale.core.form_allocation import solve_forms
from bayesscale.core.form_law import FormLaw
from bayesscale.core.forms import FORMS, evaluate_term
from bayesscale.core.geometric import Posynomial

# a few parameter sets per form, from gentle to sharp
PARAMS = {
    forms.POWER: [
        {"amplitude": 0.2, "alpha": 0.3},
        {"amplitude": 1.5, "alpha": 1.2},
        {"amplitude": 0.01, "alpha": 0.05},
    ],
    forms.OFFSET_POWER: [
        {"amplitude": 0.2, "alpha": 0.3, "knee": 0.5},
        {"amplitude": 1.5, "alpha": 1.2, "knee": 8.0},
        {"amplitude": 0.05, "alpha": 0.6, "knee": 1e-3},
        {"amplitude": 0.3, "alpha": 0.4, "knee": 0.0},
    ],
    forms.SATURATING: [
        {"amplitude": 0.2, "steepness": 0.5, "midpoint": 0.0},
        {"amplitude": 0.8, "steepness": 2.0, "midpoint": 1.5},
        {"amplitude": 0.1, "steepness": 0.2, "midpoint": -3.0},
    ],
}
CASES = [(name, p) for name, ps in PARAMS.items() for p in ps]
X = np.linspace(-8.0, 8.0, 81)  # sizes from D_ref / 3000 to 3000 D_ref


@pytest.mark.parametrize(("name", "params"), CASES)
def test_derivatives_match_finite_differences(name: str, params: dict[str, float]) -> None:
    form = FORMS[name]
    h = 1e-5
    t, d1, d2 = form.curve(X, **params)
    fd1 = (form.term(X + h, **params) - form.term(X - h, **params)) / (2 * h)
    fd2 = (form.d1(X + h, **params) - form.d1(X - h, **params)) / (2 * h)
    scale = np.maximum(np.abs(t), 1e-300)
    np.testing.assert_allclose(d1 / scale, fd1 / scale, atol=1e-7)
    np.testing.assert_allclose(d2 / scale, fd2 / scale, atol=1e-6)
    # the second derivative also against the term itself, from three points
    fd2t = (form.term(X + 1e-3, **params) - 2 * t + form.term(X - 1e-3, **params)) / 1e-6
    np.testing.assert_allclose(d2 / scale, fd2t / scale, atol=1e-4)


@pytest.mark.parametrize(("name", "params"), CASES)
def test_terms_are_positive_non_increasing_and_equal_their_amplitude_at_the_reference(
    name: str, params: dict[str, float]
) -> None:
    form = FORMS[name]
    wide = np.linspace(np.log(1e-6), np.log(1e6), 2001)
    t, d1, _ = form.curve(wide, **params)
    assert np.all(t > 0) and np.all(np.isfinite(t))
    assert np.all(d1 <= 0)
    assert np.all(np.diff(t) <= 1e-15 * t[:-1])
    assert form.term(0.0, **params) == pytest.approx(params["amplitude"], rel=1e-13)


def test_offset_power_is_the_power_law_at_zero_knee_and_far_above_the_knee() -> None:
    power, offset = FORMS[forms.POWER], FORMS[forms.OFFSET_POWER]
    for a, alpha in ((0.2, 0.3), (1.5, 1.2), (0.01, 0.05)):
        p = power.curve(X, amplitude=a, alpha=alpha)
        o = offset.curve(X, amplitude=a, alpha=alpha, knee=0.0)
        for u, v in zip(p, o, strict=True):
            np.testing.assert_allclose(u, v, rtol=1e-15)
        # a tiny knee is the power law above it: relative gap ~ alpha k e^-x
        near = offset.term(X, amplitude=a, alpha=alpha, knee=1e-9)
        np.testing.assert_allclose(near, p[0], rtol=1e-9 * alpha * np.exp(8.0) * 1.01)
        # far above a knee k: A (1 + k)^alpha (D/D_ref)^-alpha; far below: flat, A (k/(1+k))^-alpha
        k = 2.0
        big = np.log(1e7)
        assert offset.term(big, amplitude=a, alpha=alpha, knee=k) == pytest.approx(
            a * (1 + k) ** alpha * np.exp(-alpha * big), rel=1e-6
        )
        assert offset.term(-20.0, amplitude=a, alpha=alpha, knee=k) == pytest.approx(
            a * (k / (1 + k)) ** -alpha, rel=1e-6
        )


def test_saturating_has_two_plateaus_and_is_mmf4_in_loss_space() -> None:
    sat = FORMS[forms.SATURATING]
    a, beta, m = 0.3, 1.5, 0.7
    height = a * (1 + np.exp(-beta * m))
    assert sat.term(-40.0, amplitude=a, steepness=beta, midpoint=m) == pytest.approx(height)
    assert sat.term(40.0, amplitude=a, steepness=beta, midpoint=m) < 1e-20
    # MMF4 y = (a b + c x^d) / (b + x^d) is c - (c - a) / (1 + x^d / b)
    x = np.exp(X)
    mmf = 0.9 - (0.9 - 0.2) / (1 + x**beta / np.exp(beta * m))
    np.testing.assert_allclose(
        sat.term(X, amplitude=(0.9 - 0.2) / height * a, steepness=beta, midpoint=m),
        0.9 - mmf,  # cancels digits where mmf is near 0.9
        rtol=1e-9,
    )


def test_evaluate_term_broadcasts_draws_against_rows_and_matches_the_power_law() -> None:
    rng = np.random.default_rng(0)
    amp, alpha = rng.uniform(0.05, 0.5, (7, 1)), rng.uniform(0.1, 1.0, (7, 1))
    sizes = np.array([16.0, 64.0, 1000.0])
    got = evaluate_term(forms.POWER, sizes, 64.0, {"amplitude": amp, "alpha": alpha})
    assert got.shape == (7, 3)
    want = laws.power_terms(sizes[None, :, None], amp[:, :, None], alpha[:, :, None], 64.0)
    np.testing.assert_allclose(got, want, rtol=1e-14)


def test_bad_names_and_parameters_are_named() -> None:
    with pytest.raises(ValueError, match="unknown law form 'logistic'"):
        forms.form("logistic")
    with pytest.raises(TypeError, match=r"takes parameters \['amplitude', 'alpha', 'knee'\]"):
        FORMS[forms.OFFSET_POWER].term(0.0, amplitude=1.0, alpha=0.5)
    with pytest.raises(ValueError, match="knee"):
        FORMS[forms.OFFSET_POWER].term(0.0, amplitude=1.0, alpha=0.5, knee=-1.0)


Terms = Sequence[tuple[str, Mapping[str, float]]]


def _loss(terms: Terms, sizes: Sequence[np.ndarray], reference: np.ndarray) -> np.ndarray:
    """``sum_a T_a(D_a)`` of the terms at each column of sizes."""
    parts = [
        evaluate_term(name, d, ref, params)
        for (name, params), d, ref in zip(terms, sizes, reference, strict=True)
    ]
    return np.sum(parts, axis=0)


def _brute_force_2d(
    terms: Terms, prices: np.ndarray, budget: float, reference: np.ndarray, points: int = 200_001
) -> tuple[np.ndarray, float]:
    """Every split of the budget between two axes on a fine log grid of the first's share."""
    share = np.exp(np.linspace(np.log(1e-6), np.log(1 - 1e-6), points))
    d1, d2 = share * budget / prices[0], (1 - share) * budget / prices[1]
    loss = _loss(terms, [d1, d2], reference)
    i = int(np.argmin(loss))
    return np.array([d1[i], d2[i]]), float(loss[i])


def _solve(terms: Terms, prices: np.ndarray, budget: float, reference: np.ndarray) -> np.ndarray:
    """The allocation of a sum of terms under a linear budget, no box to speak of
    (:func:`~bayesscale.core.form_allocation.solve_forms`; a power term is the offset power
    without a knee, a saturating term's steepness its ``alpha``)."""
    n = len(terms)
    amplitude, alpha, knee, midpoint = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    saturating = np.zeros(n, dtype=bool)
    for i, (name, p) in enumerate(terms):
        amplitude[i] = p["amplitude"]
        alpha[i] = p.get("alpha", p.get("steepness", 0.0))
        knee[i] = p.get("knee", 0.0)
        midpoint[i] = p.get("midpoint", 0.0)
        saturating[i] = name == forms.SATURATING
    law = FormLaw(amplitude, alpha, reference, 0.0, knee, midpoint, saturating)
    return solve_forms(law, Posynomial.linear(prices), budget, lower=1e-9).sizes


TWO_AXES = [
    [(forms.POWER, PARAMS[forms.POWER][0]), (forms.POWER, PARAMS[forms.POWER][1])],
    [(forms.OFFSET_POWER, PARAMS[forms.OFFSET_POWER][1]), (forms.POWER, PARAMS[forms.POWER][0])],
    [
        (forms.OFFSET_POWER, PARAMS[forms.OFFSET_POWER][0]),
        (forms.SATURATING, PARAMS[forms.SATURATING][0]),
    ],
    [(forms.SATURATING, PARAMS[forms.SATURATING][1]), (forms.POWER, PARAMS[forms.POWER][0])],
]


@pytest.mark.parametrize("terms", TWO_AXES)
@pytest.mark.parametrize("budget", [50.0, 400.0, 5000.0])
def test_the_allocation_finds_the_brute_force_optimum(terms: Terms, budget: float) -> None:
    prices, reference = np.array([1.0, 3.0]), np.array([20.0, 5.0])
    sizes = _solve(terms, prices, budget, reference)
    assert float(prices @ sizes) == pytest.approx(budget, rel=1e-12)
    best, best_loss = _brute_force_2d(terms, prices, budget, reference)
    loss = float(_loss(terms, list(sizes), reference))
    assert loss <= best_loss + 1e-12  # never worse than the grid's best
    np.testing.assert_allclose(sizes, best, rtol=2e-4)


def test_the_allocation_on_three_axes_matches_a_brute_force_grid() -> None:
    terms: Terms = [
        (forms.POWER, {"amplitude": 0.3, "alpha": 0.4}),
        (forms.OFFSET_POWER, {"amplitude": 0.2, "alpha": 0.8, "knee": 2.0}),
        (forms.SATURATING, {"amplitude": 0.15, "steepness": 0.6, "midpoint": 0.5}),
    ]
    prices, reference, budget = np.array([1.0, 0.5, 2.0]), np.array([10.0, 30.0, 8.0]), 600.0
    sizes = _solve(terms, prices, budget, reference)
    shares = np.linspace(1e-4, 1 - 1e-4, 1500)
    s1, s2 = np.meshgrid(shares, shares, indexing="ij")
    ok = s1 + s2 < 1
    d = [s1[ok] * budget / prices[0], s2[ok] * budget / prices[1]]
    d.append((1 - s1[ok] - s2[ok]) * budget / prices[2])
    loss = _loss(terms, d, reference)
    i = int(np.argmin(loss))
    mine = float(_loss(terms, list(sizes), reference))
    assert mine <= float(loss[i]) + 1e-12
    np.testing.assert_allclose(sizes, [d[0][i], d[1][i], d[2][i]], rtol=5e-3)
