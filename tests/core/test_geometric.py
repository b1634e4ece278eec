"""The posynomial-cost allocator (a geometric program) against known answers: the linear cost's
clip-and-bisect solver, a brute-force optimiser on random problems, finite differences for the
local exponents, and the KKT residuals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize

from bayesscale.core import allocate
from bayesscale.core.allocate import PowerLaw
from bayesscale.core.geometric import (
    Posynomial,
    kkt_residuals_posynomial,
    local_exponents_posynomial,
    solve_posynomial,
)
from bayesscale.core.prices import default_prices, load_prices, money_cost, parse_prices

AXES = ["env", "task", "traj"]
COLUMNS = ["n_envs", "n_tasks", "rollouts"]
MONEY = money_cost(AXES, COLUMNS, default_prices())
CROSSED = money_cost(AXES, COLUMNS, parse_prices('[cost]\ntrajectories = "cells"'))


def _random_problems(rng: np.random.Generator, n: int) -> tuple[PowerLaw, np.ndarray]:
    """Laws around the paper's exponents, amplitudes over two decades, budgets over six."""
    alpha = np.array([0.41, 0.26, 0.11]) * np.exp(0.4 * rng.standard_normal((n, 3)))
    coef = np.exp(rng.normal(0.0, 1.0, (n, 3))) * np.array([2.0, 5.0, 1.0])
    budgets = np.exp(rng.uniform(np.log(30.0), np.log(3e7), n))
    return PowerLaw(coef, alpha, 0.1), budgets


def _brute_force(law: PowerLaw, cost: Posynomial, budget: float, lo, hi, seed: int) -> float:
    """The best loss over many starts of SLSQP in log D, each polished to 1e-15."""
    rng = np.random.default_rng(seed)
    lo = np.broadcast_to(np.asarray(lo, dtype=float), (3,))
    hi = np.broadcast_to(np.asarray(hi, dtype=float), (3,))
    best = np.inf
    # no axis can exceed what its own monomial alone would buy with the whole budget
    top = np.minimum(np.log(hi), np.log(budget / cost.weights))
    for _ in range(12):
        y0 = rng.uniform(np.log(lo), top)
        y0 = y0 - max(0.0, float(np.log(cost(np.exp(y0)) / budget))) / 3.0
        res = optimize.minimize(
            lambda y: float(law.loss(np.exp(y))),
            np.clip(y0, np.log(lo), top),
            method="SLSQP",
            bounds=list(zip(np.log(lo), top, strict=True)),
            constraints=[
                {"type": "ineq", "fun": lambda y: float(np.log(budget) - np.log(cost(np.exp(y))))}
            ],
            options={"ftol": 1e-15, "maxiter": 2000},
        )
        d = np.exp(res.x)
        if cost(d) <= budget * (1 + 1e-9) and np.all(d >= lo * (1 - 1e-9)):
            best = min(best, float(law.loss(d)))
    return best


def test_posynomial_evaluates_money() -> None:
    # 10 envs, 100 tasks, 8 rollouts per task: 41 + 18 + 0.02 x 800 trajectories
    assert float(MONEY(np.array([10.0, 100.0, 8.0]))) == pytest.approx(75.0)
    # crossed: every task in every environment, 8,000 trajectories
    assert float(CROSSED(np.array([10.0, 100.0, 8.0]))) == pytest.approx(41 + 18 + 160)
    d = np.array([10.0, 100.0, 8.0])
    h = 1e-6
    fd = [(MONEY(d + h * np.eye(3)[i]) - MONEY(d - h * np.eye(3)[i])) / (2 * h) for i in range(3)]
    np.testing.assert_allclose(MONEY.gradient(d), fd, rtol=1e-7)


def test_money_cost_reads_the_prices_file() -> None:
    prices = load_prices("models/prices.toml")
    assert prices.trajectories == "tasks"
    assert MONEY.powers.tolist() == [[1, 0, 0], [0, 1, 0], [0, 1, 1]]
    assert CROSSED.powers.tolist() == [[1, 0, 0], [0, 1, 0], [1, 1, 1]]
    with pytest.raises(ValueError, match=r"<string>: \[cost\] trajectories: must be one of"):
        parse_prices('[cost]\ntrajectories = "worlds"')
    with pytest.raises(ValueError, match=r"\[cost\]: unknown key\(s\) \['rollouts'\]"):
        parse_prices("[cost]\nrollouts = 1")
    # an axis set without a task axis stays linear
    assert money_cost(
        ["env", "traj"], ["n_envs", "rollouts"], default_prices()
    ).powers.tolist() == [
        [1, 0],
        [0, 1],
    ]


def test_linear_cost_matches_clip_and_bisect() -> None:
    rng = np.random.default_rng(0)
    law, budgets = _random_problems(rng, 400)
    prices = np.array([4.1, 0.18, 0.02])
    upper = np.array([384.0, np.inf, np.inf])
    ref = allocate.solve_additive(law.coef, law.alpha, prices, budgets, 1.0, upper)
    got = solve_posynomial(law, Posynomial.linear(prices), budgets, 1.0, upper)
    np.testing.assert_allclose(got.sizes, ref.sizes, rtol=1e-8)
    np.testing.assert_allclose(got.multiplier, ref.multiplier, rtol=1e-7)
    assert (got.at_upper == ref.at_upper).all() and (got.at_lower == ref.at_lower).all()


@pytest.mark.parametrize("cost", [MONEY, CROSSED], ids=["tasks", "cells"])
@pytest.mark.parametrize("upper", [np.inf, 384.0], ids=["free", "env<=384"])
def test_exact_against_brute_force(cost: Posynomial, upper: float) -> None:
    rng = np.random.default_rng(11)
    law, budgets = _random_problems(rng, 40)
    hi = np.array([upper, np.inf, 256.0])
    lo = np.array([1.0, 1.0, 1.0])
    floor = float(cost(lo))
    budgets = np.maximum(budgets, 2 * floor)
    sol = solve_posynomial(law, cost, budgets, lo, hi)
    assert sol.fallbacks == 0
    res = kkt_residuals_posynomial(sol, law, cost, budgets, lo, hi)
    assert res.max() < 1e-8
    gaps = []
    for i in range(budgets.size):
        row = PowerLaw(law.coef[i], law.alpha[i], 0.1)
        best = _brute_force(row, cost, float(budgets[i]), lo, hi, seed=i)
        mine = float(row.loss(sol.sizes[i]))
        gaps.append((mine - best) / abs(best))
    # never worse than the brute force by more than 1e-6 of the loss (it is a global optimum)
    assert max(gaps) <= 1e-6, max(gaps)
    np.testing.assert_allclose(cost(sol.sizes)[sol.multiplier > 0], budgets[sol.multiplier > 0])


def test_one_free_axis_between_two_bounds_needs_no_fallback() -> None:
    # The bounded recipe's typical corner: env and traj at their upper bounds, the budget buys
    # tasks. Newton's method starts with traj free and must move the active set; the new
    # start re-binds the budget and re-estimates the multiplier (the one carried over used to
    # shrink to zero, and SLSQP took over).
    law = PowerLaw(np.array([0.94636, 17.31783, 0.31161]), np.array([0.4549, 0.77514, 0.09323]))
    lo, hi = np.ones(3), np.array([1024.0, 40960.0, 256.0])
    sol = solve_posynomial(law, MONEY, 1e5, lo, hi, workers=1)
    assert sol.fallbacks == 0
    # what the budget buys once env and traj sit at their bounds: 4.1 env + (0.18 + 0.02 traj) task
    task = (1e5 - 4.1 * 1024) / (0.18 + 0.02 * 256)
    np.testing.assert_allclose(sol.sizes, [1024.0, task, 256.0], rtol=1e-12)
    assert sol.at_upper.tolist() == [True, False, True]
    assert kkt_residuals_posynomial(sol, law, MONEY, 1e5, lo, hi).max() < 1e-8
    best = _brute_force(law, MONEY, 1e5, lo, hi, seed=0)
    assert float(law.loss(sol.sizes)) <= best * (1 + 1e-9)


def test_negative_control_the_linear_price_is_not_the_optimum() -> None:
    """Pricing rollouts per task linearly (the old convention) gives an allocation that the
    exact money cost cannot afford: the test above would catch a solver that did that."""
    law = PowerLaw(np.array([2.0, 5.0, 1.0]), np.array([0.41, 0.26, 0.11]), 0.1)
    wrong = allocate.solve_additive(law.coef, law.alpha, [4.1, 0.18, 0.02], 1e4)
    assert float(MONEY(wrong.sizes)) > 10 * 1e4
    right = solve_posynomial(law, MONEY, 1e4)
    assert float(MONEY(right.sizes)) == pytest.approx(1e4, rel=1e-9)


def test_interaction_law_is_solved_exactly() -> None:
    rng = np.random.default_rng(5)
    law, budgets = _random_problems(rng, 30)
    law = PowerLaw(law.coef, law.alpha, 0.5, 0.05, 0.2, (0, 1))
    sol = solve_posynomial(law, MONEY, budgets)
    res = kkt_residuals_posynomial(sol, law, MONEY, budgets)
    assert res.max() < 1e-8
    for i in range(10):
        row = PowerLaw(law.coef[i], law.alpha[i], 0.5, 0.05, 0.2, (0, 1))
        best = _brute_force(row, MONEY, float(budgets[i]), 1.0, np.inf, seed=100 + i)
        assert float(row.loss(sol.sizes[i])) <= best + 1e-6 * abs(best)


def test_local_exponents_match_finite_differences() -> None:
    rng = np.random.default_rng(2)
    law, budgets = _random_problems(rng, 50)
    hi = np.array([384.0, np.inf, np.inf])
    sol = solve_posynomial(law, MONEY, budgets, 1.0, hi)
    e = local_exponents_posynomial(sol, law, MONEY, budgets)
    h = 1e-5
    up = solve_posynomial(law, MONEY, budgets * np.exp(h), 1.0, hi)
    down = solve_posynomial(law, MONEY, budgets * np.exp(-h), 1.0, hi)
    fd = (np.log(up.sizes) - np.log(down.sizes)) / (2 * h)
    same_set = (up.free == down.free).all(axis=-1) & (up.free == sol.free).all(axis=-1)
    np.testing.assert_allclose(e[same_set], fd[same_set], atol=1e-6)
    # a 1% larger budget buys 1% more money: sum_m s_m (a_m . e) = 1 where the budget binds
    shares = MONEY.terms(sol.sizes) / budgets[:, None]
    total = np.sum(shares * (e @ MONEY.powers.T), axis=-1)
    np.testing.assert_allclose(total[sol.free.any(axis=-1)], 1.0, rtol=1e-9)


def test_saturated_and_infeasible_budgets() -> None:
    law = PowerLaw(np.array([1.0, 1.0, 1.0]), np.array([0.4, 0.3, 0.1]))
    hi = np.array([10.0, 10.0, 10.0])
    sol = solve_posynomial(law, MONEY, 1e6, 1.0, hi)
    np.testing.assert_array_equal(sol.sizes, hi)
    assert float(sol.multiplier) == 0.0
    with pytest.raises(ValueError, match="too small to buy the lower bounds"):
        solve_posynomial(law, MONEY, 1.0, 1.0, hi)
    with pytest.raises(ValueError, match="weights must be finite and > 0"):
        Posynomial(np.array([1.0, -1.0]), np.eye(2))


def test_budget_sweep_continuation_matches_the_whole_system() -> None:
    """A budget sweep (laws x budgets) takes the chain path with continuation; it must give
    what the whole-system Newton gives problem by problem, saturated budgets included."""
    rng = np.random.default_rng(21)
    law, _ = _random_problems(rng, 60)
    law = PowerLaw(law.coef[:, None, :], law.alpha[:, None, :], 0.1)
    budgets = np.geomspace(50.0, 1e9, 24)  # the top budgets buy every upper bound
    hi = np.array([384.0, 1e5, 256.0])
    swept = solve_posynomial(law, MONEY, budgets, 1.0, hi)
    plain = solve_posynomial(law, MONEY, budgets, 1.0, hi, method="newton")
    blocks = solve_posynomial(law, MONEY, budgets, 1.0, hi, sweep=False)  # chain, no sweep
    np.testing.assert_allclose(blocks.sizes, plain.sizes, rtol=1e-8)
    assert swept.sizes.shape == (60, 24, 3)
    np.testing.assert_allclose(swept.sizes, plain.sizes, rtol=1e-8)
    # The multiplier is a marginal loss over a marginal price, each only as exact as the
    # solvers' stopping rules make the sizes (1e-8): measured on one CPU the two agree to 2e-11,
    # on another one of the 1,440 differed by 1e-5 relative. The KKT residuals of both
    # solutions, each at its own multiplier, are what pins it down to the solvers' tolerance.
    np.testing.assert_allclose(swept.multiplier, plain.multiplier, rtol=1e-4, atol=1e-300)
    assert kkt_residuals_posynomial(plain, law, MONEY, budgets, 1.0, hi).max() < 1e-8
    assert (swept.at_upper == plain.at_upper).all() and (swept.at_lower == plain.at_lower).all()
    np.testing.assert_allclose(swept.spent, plain.spent, rtol=1e-10)
    assert (swept.multiplier[:, -1] == 0).all()  # 1e9 buys every upper bound
    res = kkt_residuals_posynomial(swept, law, MONEY, budgets, 1.0, hi)
    assert res.max() < 1e-8
    for i in range(3):
        row = PowerLaw(law.coef[i, 0], law.alpha[i, 0], 0.1)
        for j in (0, 10, 18):
            best = _brute_force(row, MONEY, float(budgets[j]), 1.0, hi, seed=7 * i + j)
            assert float(row.loss(swept.sizes[i, j])) <= best + 1e-6 * abs(best)
    with pytest.raises(ValueError, match="too small to buy the lower bounds"):
        solve_posynomial(law, MONEY, np.geomspace(1.0, 1e4, 10), 1.0, hi)


def test_the_linearised_convention_is_a_fixed_point_that_spends_the_budget() -> None:
    """The paper's convention: linear prices equal to each monomial's marginal price at the
    optimum (rollouts per task at c_traj D_T*). At the fixed point the additive optimum under
    those prices spends exactly the money, and is not the exact optimum."""
    from bayesscale.recipe.solve import linearised_allocation

    rng = np.random.default_rng(8)
    law, budgets = _random_problems(rng, 50)
    budgets = np.maximum(budgets, 1e3)
    ones, inf = np.ones(3), np.full(3, np.inf)
    sol, prices = linearised_allocation(law, MONEY, budgets, ones, inf, np.full(3, 10.0))
    d = sol.sizes
    np.testing.assert_allclose(prices[:, 0], 4.1)
    np.testing.assert_allclose(prices[:, 1], 0.18)
    np.testing.assert_allclose(prices[:, 2], 0.02 * d[:, 1], rtol=1e-9)  # c_traj D_T*
    np.testing.assert_allclose(MONEY(d), budgets, rtol=1e-9)
    again = allocate.solve_additive(law.coef, law.alpha, prices, budgets)
    np.testing.assert_allclose(again.sizes, d, rtol=1e-9)
    exact = solve_posynomial(law, MONEY, budgets)
    assert (law.loss(exact.sizes) <= law.loss(d) + 1e-12).all()
    assert (law.loss(exact.sizes) < law.loss(d) - 1e-9).mean() > 0.5  # not the optimum
