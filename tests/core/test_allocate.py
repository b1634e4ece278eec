"""The allocator against known answers: a brute-force scipy optimiser, KKT residuals,
finite differences of the solved allocation, and closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize

from bayesscale.core import allocate as al

PAPER_PRICES = np.array([4.10, 0.18, 0.02])
PAPER_ALPHA = np.array([0.41, 0.26, 0.11])


def _random_problem(seed: int, n: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    rng = np.random.default_rng(seed)
    coef = np.exp(rng.normal(np.log(0.5), 1.0, n))
    alpha = rng.uniform(0.05, 0.6, n)
    prices = np.exp(rng.normal(0.0, 1.5, n))
    budget = float(np.exp(rng.uniform(np.log(50.0), np.log(1e6))) * prices.mean())
    return coef, alpha, prices, budget


def _brute_force(
    law: al.PowerLaw,
    prices: np.ndarray,
    budget: float,
    lower: np.ndarray,
    upper: np.ndarray,
    seed: int,
    starts: int = 8,
) -> np.ndarray:
    """Best of several random SLSQP starts in log D (independent of the KKT code)."""
    rng = np.random.default_rng(seed + 1000)
    n = prices.size
    f0 = float(law.loss(lower))

    def f(y: np.ndarray) -> float:
        return float(law.loss(np.exp(y))) / f0

    def jac(y: np.ndarray) -> np.ndarray:
        d = np.exp(y)
        return law.gradient(d) * d / f0

    cons = {
        "type": "ineq",
        "fun": lambda y: 1.0 - float(prices @ np.exp(y)) / budget,
        "jac": lambda y: -prices * np.exp(y) / budget,
    }
    bounds = [
        (np.log(lo), np.log(hi) if np.isfinite(hi) else None)
        for lo, hi in zip(lower, upper, strict=True)
    ]
    best, best_f = None, np.inf
    for _ in range(starts):
        share = rng.dirichlet(np.ones(n))
        d0 = np.clip(share * budget / prices, lower, upper)
        d0 = np.maximum(lower, d0 * min(1.0, 0.99 * budget / float(prices @ d0)))
        res = optimize.minimize(
            f,
            np.log(d0),
            jac=jac,
            method="SLSQP",
            bounds=bounds,
            constraints=[cons],
            options={"ftol": 1e-16, "maxiter": 2000},
        )
        if res.fun < best_f:
            best, best_f = res.x, res.fun
    assert best is not None
    return np.clip(np.exp(best), lower, upper)


def _bounded_case(
    coef: np.ndarray, alpha: np.ndarray, prices: np.ndarray, budget: float
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds that bind: cap axis 0 at half its free optimum, then raise axis 1's floor above
    its optimum under that cap (a separable convex problem: that floor must then bind)."""
    free = al.solve_additive(coef, alpha, prices, budget).sizes
    lower = np.ones_like(coef)
    upper = np.full_like(coef, np.inf)
    upper[0] = 0.5 * free[0]
    capped = al.solve_additive(coef, alpha, prices, budget, lower, upper).sizes
    room = (budget - prices[0] * upper[0] - prices[2]) / prices[1]
    lower[1] = capped[1] + 0.5 * (room - capped[1])
    return lower, upper


@pytest.mark.parametrize("bounded", [False, True])
@pytest.mark.parametrize("seed", range(8))
def test_additive_matches_brute_force(seed: int, bounded: bool) -> None:
    coef, alpha, prices, budget = _random_problem(seed)
    lower, upper = np.ones(3), np.full(3, np.inf)
    if bounded:
        lower, upper = _bounded_case(coef, alpha, prices, budget)
    law = al.PowerLaw(coef, alpha)
    sol = al.solve_additive(coef, alpha, prices, budget, lower, upper)
    brute = _brute_force(law, prices, budget, lower, upper, seed)
    assert float(law.loss(sol.sizes)) <= float(law.loss(brute)) * (1 + 1e-10)
    np.testing.assert_allclose(sol.sizes, brute, rtol=1e-6)
    res = al.kkt_residuals(sol, law, prices, budget, lower, upper)
    assert res.stationarity < 1e-10
    assert res.complementarity < 1e-12
    assert res.budget < 1e-12
    assert res.bounds == 0.0
    assert abs(float(sol.spent) - budget) <= 1e-12 * budget
    if bounded:
        assert bool(sol.at_upper[0])
        assert bool(sol.at_lower[1])
        assert not bool(sol.free[0])


@pytest.mark.parametrize("seed", range(6))
def test_product_cost_matches_brute_force(seed: int) -> None:
    coef, alpha, _, _ = _random_problem(seed)
    rng = np.random.default_rng(seed)
    powers = np.array([1.0, 1.0, 2.0])
    budget = float(np.exp(rng.uniform(8.0, 30.0)))
    upper = np.array([np.inf, 50.0, np.inf])
    sol = al.solve_product(coef, alpha, budget, powers, 1.0, 1.0, upper)
    law = al.PowerLaw(coef, alpha)

    def loss(y: np.ndarray) -> float:
        return float(law.loss(np.exp(y)))

    res = optimize.minimize(
        loss,
        np.zeros(3),
        jac=lambda y: law.gradient(np.exp(y)) * np.exp(y),
        method="SLSQP",
        bounds=[(0.0, None), (0.0, np.log(50.0)), (0.0, None)],
        constraints=[
            {"type": "ineq", "fun": lambda y: np.log(budget) - powers @ y, "jac": lambda y: -powers}
        ],
        options={"ftol": 1e-16, "maxiter": 2000},
    )
    np.testing.assert_allclose(sol.sizes, np.exp(res.x), rtol=1e-6)
    assert float(law.loss(sol.sizes)) <= res.fun * (1 + 1e-10)
    np.testing.assert_allclose(float(sol.spent), budget, rtol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_interaction_matches_brute_force(seed: int) -> None:
    coef, alpha, prices, budget = _random_problem(seed)
    rng = np.random.default_rng(seed + 7)
    law = al.PowerLaw(
        coef, alpha, 0.3, float(rng.uniform(0.05, 0.3)), float(rng.uniform(0.1, 0.4)), (0, 1)
    )
    lower, upper = np.ones(3), np.full(3, np.inf)
    sol = al.solve_interaction(law, prices, budget, lower, upper)
    brute = _brute_force(law, prices, budget, lower, upper, seed)
    assert float(law.loss(sol.sizes)) <= float(law.loss(brute)) * (1 + 1e-10)
    np.testing.assert_allclose(sol.sizes, brute, rtol=1e-6)
    res = al.kkt_residuals(sol, law, prices, budget, lower, upper)
    assert res.max() < 1e-9
    separable = al.solve_additive(coef, alpha, prices, budget)
    # The interaction lowers the loss, so the solution must differ from the separable one.
    assert not np.allclose(sol.sizes, separable.sizes, rtol=1e-6)


def test_interaction_batched_matches_one_by_one() -> None:
    rng = np.random.default_rng(3)
    coef = np.exp(rng.normal(np.log(0.5), 0.5, (5, 4, 3)))
    alpha = rng.uniform(0.1, 0.5, (5, 4, 3))
    gamma = rng.uniform(0.0, 0.2, (5, 4))
    law = al.PowerLaw(coef, alpha, 0.4, gamma, 0.21, (0, 1))
    upper = np.array([384.0, np.inf, np.inf])
    sol = al.solve_interaction(law, PAPER_PRICES, 5e4, 1.0, upper)
    res = al.kkt_residuals(sol, law, PAPER_PRICES, 5e4, 1.0, upper)
    assert res.max() < 1e-8
    one = al.solve_interaction(
        al.PowerLaw(coef[2, 1], alpha[2, 1], 0.4, gamma[2, 1], 0.21, (0, 1)),
        PAPER_PRICES,
        5e4,
        1.0,
        upper,
    )
    np.testing.assert_allclose(sol.sizes[2, 1], one.sizes, rtol=1e-10)


def test_batched_equals_one_by_one_and_broadcasts() -> None:
    rng = np.random.default_rng(11)
    coef = np.exp(rng.normal(-1.0, 0.7, (7, 1, 3)))
    alpha = rng.uniform(0.05, 0.5, (7, 1, 3))
    budgets = np.geomspace(100.0, 1e7, 5)
    upper = np.array([384.0, np.inf, np.inf])
    sol = al.solve_additive(coef, alpha, PAPER_PRICES, budgets, 1.0, upper)
    assert sol.sizes.shape == (7, 5, 3)
    assert sol.multiplier.shape == (7, 5)
    for i in (0, 3, 6):
        for j in (0, 4):
            one = al.solve_additive(coef[i, 0], alpha[i, 0], PAPER_PRICES, budgets[j], 1.0, upper)
            np.testing.assert_allclose(sol.sizes[i, j], one.sizes, rtol=1e-12)
    # More budget never buys less of anything (the law is separable and convex).
    assert (np.diff(sol.sizes, axis=1) >= -1e-9 * sol.sizes[:, 1:]).all()


def test_blocks_and_threads_agree() -> None:
    rng = np.random.default_rng(5)
    coef = np.exp(rng.normal(-1.0, 0.7, (40, 21, 1, 3)))
    alpha = rng.uniform(0.05, 0.5, (40, 21, 1, 3))
    budgets = np.geomspace(1e3, 1e8, 30)
    a = al.solve_additive(
        coef, alpha, PAPER_PRICES, budgets, 1.0, [384.0, np.inf, np.inf], workers=1
    )
    b = al.solve_additive(
        coef, alpha, PAPER_PRICES, budgets, 1.0, [384.0, np.inf, np.inf], workers=3
    )
    np.testing.assert_array_equal(a.sizes, b.sizes)
    res = al.kkt_residuals(
        a, al.PowerLaw(coef, alpha), PAPER_PRICES, budgets, 1.0, [384.0, np.inf, np.inf]
    )
    assert res.max() < 1e-9


def test_budget_beyond_every_upper_bound() -> None:
    sol = al.solve_additive([0.5, 0.5], [0.3, 0.2], [1.0, 1.0], 1000.0, 1.0, [100.0, 200.0])
    np.testing.assert_array_equal(sol.sizes, [100.0, 200.0])
    assert float(sol.multiplier) == 0.0
    assert float(sol.spent) == 300.0
    np.testing.assert_array_equal(
        al.local_exponents_additive(sol, [0.3, 0.2], [1.0, 1.0]), [0.0, 0.0]
    )


def test_closed_form_two_axes() -> None:
    # Equal exponents and coefficients: lambda-optimum spends in proportion p^(-alpha/(1+alpha)).
    k, a = 2.0, 0.5
    prices = np.array([1.0, 4.0])
    sol = al.solve_additive([k, k], [a, a], prices, 300.0)
    ratio = (prices[1] / prices[0]) ** (1 / (1 + a))  # D_0 / D_1
    d1 = 300.0 / (prices[0] * ratio + prices[1])
    np.testing.assert_allclose(sol.sizes, [ratio * d1, d1], rtol=1e-13)
    lam = a * k * sol.sizes[0] ** (-a - 1) / prices[0]
    np.testing.assert_allclose(float(sol.multiplier), lam, rtol=1e-12)


# --- local exponents ---------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_local_exponents_match_finite_differences(seed: int) -> None:
    coef, alpha, prices, budget = _random_problem(seed)
    lower, upper = _bounded_case(coef, alpha, prices, budget) if seed % 2 else (1.0, np.inf)
    h = 1e-5
    sol = al.solve_additive(coef, alpha, prices, budget, lower, upper)
    up = al.solve_additive(coef, alpha, prices, budget * np.exp(h), lower, upper)
    down = al.solve_additive(coef, alpha, prices, budget * np.exp(-h), lower, upper)
    fd = (np.log(up.sizes) - np.log(down.sizes)) / (2 * h)
    closed = al.local_exponents_additive(sol, alpha, prices)
    np.testing.assert_allclose(closed, fd, rtol=1e-6, atol=1e-8)
    # Spend-weighted exponents sum to one: the budget's growth is all spent.
    share = prices * sol.sizes / float(sol.spent)
    np.testing.assert_allclose(float(share @ closed), 1.0, rtol=1e-12)
    if seed % 2:
        assert closed[0] == 0.0  # capped axis does not grow


def test_product_local_exponents_match_finite_differences() -> None:
    coef = np.array([0.3, 0.8, 0.2, 0.5])
    alpha = np.array([0.41, 0.26, 0.11, 0.30])
    h = 1e-5
    c = 1e30
    sol = al.solve_product(coef, alpha, c)
    up = al.solve_product(coef, alpha, c * np.exp(h))
    down = al.solve_product(coef, alpha, c * np.exp(-h))
    fd = (np.log(up.sizes) - np.log(down.sizes)) / (2 * h)
    np.testing.assert_allclose(al.local_exponents_product(sol, alpha), fd, rtol=1e-6)


def test_paper_recipe_exponents_are_not_what_its_cost_models_give() -> None:
    """PAPER.md section 6: computed, not assumed. The stated recipe (0.34/0.27/0.13/0.26,
    env/task/traj/N) comes out of neither the additive nor the product cost model."""
    stated = np.array([0.34, 0.27, 0.13, 0.26])
    alpha = np.array([0.41, 0.26, 0.11, 0.30])
    # Product cost (FLOPs ~ N D_E D_T D_tau), no bound active: alpha_i^-1 / sum_j alpha_j^-1.
    sol = al.solve_product(np.ones(4), alpha, 1e40)
    e_prod = al.local_exponents_product(sol, alpha)
    np.testing.assert_allclose(e_prod, [0.130, 0.206, 0.486, 0.178], atol=1e-3)
    assert np.abs(e_prod - stated).max() > 0.2
    # Additive cost: every exponent is at least min_j(1+a_j)/(1+a_i) > 0.7, far from 0.13,
    # and the exponents rise as alpha falls (largest growth on the smallest exponent).
    coef = np.array([0.2, 0.2, 0.2, 0.2])
    prices = np.array([4.10, 0.18, 0.02, 50.0])  # a made-up price per billion parameters
    for budget in np.geomspace(1e3, 1e8, 6):
        s = al.solve_additive(coef, alpha, prices, budget)
        e = al.local_exponents_additive(s, alpha, prices)
        assert e.sum() > 2.8
        assert (e > 0.7).all()
        assert np.argmax(e) == 2 and np.argmin(e) == 0
        assert np.abs(e - stated).max() > 0.4


# --- the general solver ------------------------------------------------------------------


def test_general_solver_user_cost() -> None:
    # A user cost: environments get cheaper in bulk (c D^0.8), tasks linear.
    law = al.PowerLaw(np.array([0.5, 0.3]), np.array([0.4, 0.2]))

    def cost(d: np.ndarray) -> float:
        return float(4.1 * d[0] ** 0.8 + 0.18 * d[1])

    d = al.solve_general(law.loss, cost, 1e4, [1.0, 1.0], [np.inf, np.inf], x0=[100.0, 1000.0])
    np.testing.assert_allclose(cost(d), 1e4, rtol=1e-8)
    # KKT by hand: dL/dD_i / dcost/dD_i equal across axes.
    grad_cost = np.array([4.1 * 0.8 * d[0] ** -0.2, 0.18])
    ratio = law.gradient(d) / grad_cost
    np.testing.assert_allclose(ratio[0], ratio[1], rtol=1e-5)


def test_general_solver_agrees_with_kkt_on_linear_cost() -> None:
    coef, alpha, prices, budget = _random_problem(2)
    law = al.PowerLaw(coef, alpha)
    sol = al.solve_additive(coef, alpha, prices, budget)
    d = al.solve_general(
        law.loss,
        lambda x: float(prices @ x),
        budget,
        np.ones(3),
        np.full(3, np.inf),
        loss_grad=law.gradient,
        cost_grad=lambda x: prices,
    )
    np.testing.assert_allclose(d, sol.sizes, rtol=1e-6)


# --- bad input ---------------------------------------------------------------------------


def test_budget_too_small_for_lower_bounds() -> None:
    with pytest.raises(ValueError, match="too small to buy the lower bounds"):
        al.solve_additive([1.0, 1.0], [0.3, 0.3], [4.1, 0.18], 50.0, lower=[20.0, 100.0])
    with pytest.raises(ValueError, match="too small"):
        al.solve_product([1.0, 1.0], [0.3, 0.3], 10.0, lower=[20.0, 100.0])


def test_bad_prices_bounds_and_shapes() -> None:
    with pytest.raises(ValueError, match="prices must be finite and > 0"):
        al.solve_additive([1.0, 1.0], [0.3, 0.3], [-4.1, 0.18], 100.0)
    with pytest.raises(ValueError, match="lower > upper"):
        al.solve_additive(
            [1.0, 1.0], [0.3, 0.3], [4.1, 0.18], 100.0, lower=[5.0, 1.0], upper=[2.0, 9.0]
        )
    with pytest.raises(ValueError, match="lower bounds must be finite and > 0"):
        al.solve_additive([1.0, 1.0], [0.3, 0.3], [4.1, 0.18], 100.0, lower=[0.0, 1.0])
    with pytest.raises(ValueError, match="last \\(axis\\) dimension differs"):
        al.solve_additive([1.0, 1.0, 1.0], [0.3, 0.3], [4.1, 0.18], 100.0)
    with pytest.raises(ValueError, match="budget must be finite and > 0"):
        al.solve_additive([1.0, 1.0], [0.3, 0.3], [4.1, 0.18], -1.0)
    with pytest.raises(ValueError, match="exponents"):
        al.solve_additive([1.0, 1.0], [0.0, 0.3], [4.1, 0.18], 100.0)
    with pytest.raises(ValueError, match="finite upper bound"):
        al.solve_product([1.0, 1.0], [0.3, 0.3], 1e6, powers=[1.0, 0.0])


def test_interaction_fallback_to_the_general_solver(monkeypatch: pytest.MonkeyPatch) -> None:
    """Problems the batched Newton does not certify go to SLSQP one by one."""
    coef, alpha, prices, budget = _random_problem(4)
    law = al.PowerLaw(coef, alpha, 0.3, 0.2, 0.25, (0, 1))
    fast = al.solve_interaction(law, prices, budget)
    real = al._newton_kkt

    def failing(*args, **kwargs):  # type: ignore[no-untyped-def]
        y, nu, conv = real(*args, **kwargs)
        return y * 0.9, nu, np.zeros_like(conv)

    monkeypatch.setattr(al, "_newton_kkt", failing)
    slow = al.solve_interaction(law, prices, budget)
    np.testing.assert_allclose(slow.sizes, fast.sizes, rtol=1e-6)
    np.testing.assert_allclose(float(slow.multiplier), float(fast.multiplier), rtol=1e-5)
    assert al.kkt_residuals(slow, law, prices, budget).max() < 1e-5


def test_budget_sweep_continuation_matches_independent_solves() -> None:
    """A sweep of >= 8 budgets along one dim is solved by continuation in the budget; it must
    agree with independent solves, for unsorted budgets, bounds that switch on and off along
    the sweep, and budgets that buy every upper bound (lambda = 0)."""
    rng = np.random.default_rng(8)
    coef = np.exp(rng.normal(-1.0, 0.7, (6, 1, 3)))
    alpha = rng.uniform(0.05, 0.5, (6, 1, 3))
    lower = np.array([2.0, 1.0, 4.0])
    upper = np.array([384.0, 5e5, 1e6])
    budgets = rng.permutation(np.geomspace(20.0, 1e8, 23))
    sweep = al.solve_additive(coef, alpha, PAPER_PRICES, budgets, lower, upper)
    assert sweep.sizes.shape == (6, 23, 3)
    assert (sweep.multiplier == 0).any() and (sweep.multiplier > 0).any()
    assert sweep.at_upper[..., 0].any() and (~sweep.at_upper[..., 0]).any()
    for i in range(6):
        for j in range(23):
            one = al.solve_additive(coef[i, 0], alpha[i, 0], PAPER_PRICES, budgets[j], lower, upper)
            np.testing.assert_allclose(sweep.sizes[i, j], one.sizes, rtol=1e-11)
            assert float(sweep.multiplier[i, j]) == pytest.approx(float(one.multiplier), rel=1e-9)
            np.testing.assert_array_equal(sweep.at_upper[i, j], one.at_upper)
            np.testing.assert_array_equal(sweep.at_lower[i, j], one.at_lower)
    law = al.PowerLaw(coef, alpha)
    assert al.kkt_residuals(sweep, law, PAPER_PRICES, budgets, lower, upper).max() < 1e-10
    # The sweep dim may sit anywhere: budgets first, laws after.
    first = al.solve_additive(
        np.moveaxis(coef, 0, 1),
        np.moveaxis(alpha, 0, 1),
        PAPER_PRICES,
        budgets[:, None],
        lower,
        upper,
    )
    np.testing.assert_allclose(first.sizes, np.moveaxis(sweep.sizes, 0, 1), rtol=1e-11)


@pytest.mark.parametrize("chunk", [8, 64])
def test_small_blocks_give_the_same_answers(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """Blocking (for memory and threads) must not change any answer."""
    rng = np.random.default_rng(12)
    coef = np.exp(rng.normal(-1.0, 0.7, (9, 5, 1, 3)))
    alpha = rng.uniform(0.05, 0.5, (9, 5, 1, 3))
    budgets = np.geomspace(1e3, 1e8, 12)
    upper = np.array([384.0, np.inf, np.inf])
    law = al.PowerLaw(coef, alpha, 0.4, 0.1, 0.21, (0, 1))
    ref_sweep = al.solve_additive(coef, alpha, PAPER_PRICES, budgets, 1.0, upper)
    ref_scalar = al.solve_additive(coef, alpha, PAPER_PRICES, 3e4, 1.0, upper)
    ref_inter = al.solve_interaction(law, PAPER_PRICES, budgets, 1.0, upper)
    monkeypatch.setattr(al, "_CHUNK_ROWS", chunk)
    for workers in (1, 2):
        sweep = al.solve_additive(coef, alpha, PAPER_PRICES, budgets, 1.0, upper, workers=workers)
        np.testing.assert_allclose(sweep.sizes, ref_sweep.sizes, rtol=1e-12)
        scalar = al.solve_additive(coef, alpha, PAPER_PRICES, 3e4, 1.0, upper, workers=workers)
        np.testing.assert_allclose(scalar.sizes, ref_scalar.sizes, rtol=1e-12)
    inter = al.solve_interaction(law, PAPER_PRICES, budgets, 1.0, upper)
    np.testing.assert_allclose(inter.sizes, ref_inter.sizes, rtol=1e-8)  # Newton stops at 1e-13
