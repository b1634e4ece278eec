"""The expected-success decision solved for every (setting, budget) at once
(:func:`bayesscale.recipe.decision.decide`): against a brute-force search over every way to
spend the budget, and against the SLSQP it replaced."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize

from bayesscale.core import allocate, laws
from bayesscale.core.geometric import Posynomial
from bayesscale.recipe.decision import decide, objective
from bayesscale.recipe.solve import _decision

PRICES = np.array([4.10, 0.18, 0.02])
POWERS = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
ALPHA = np.array([0.41, 0.26, 0.11])
AMPLITUDE = np.array([0.35, 0.30, 0.12])
REFERENCE = np.array([45.25, 1810.2, 11.31])
S, G = 200, 3
BUDGETS = np.array([3e4, 1e5])


def _law(seed: int, interaction: bool) -> allocate.PowerLaw:
    """Posterior-like draws (S, G, 1, 3), settings apart; a floor below 0 in some draws."""
    rng = np.random.default_rng(seed)
    alpha = ALPHA * np.exp(0.3 * rng.standard_normal((S, G, 1, 3)))
    coef = AMPLITUDE * REFERENCE**ALPHA * np.exp(0.3 * rng.standard_normal((S, G, 1, 3)))
    floor = np.where(rng.random((S, G, 1)) < 0.1, -0.05, 0.45)
    if not interaction:
        return allocate.PowerLaw(coef, alpha, floor)
    gamma = 0.05 * np.exp(0.2 * rng.standard_normal((S, G, 1)))
    beta = 0.1 * np.exp(0.2 * rng.standard_normal((S, 1, 1)))
    return allocate.PowerLaw(coef, alpha, floor, gamma, beta, (1, 2))


def _units(f: np.ndarray, budget: float) -> np.ndarray:
    """Units that put money shares ``f`` (..., 3) on env, task and trajectories."""
    env = f[..., 0] * budget / PRICES[0]
    task = f[..., 1] * budget / PRICES[1]
    return np.stack([env, task, f[..., 2] * budget / (PRICES[2] * task)], axis=-1)


def _brute(law: allocate.PowerLaw, budget: float, lo: np.ndarray, hi: np.ndarray) -> float:
    """The best mean success over a grid of money shares inside the box, polished by
    Nelder-Mead (no derivatives)."""

    def mean_success(u: np.ndarray) -> np.ndarray:
        """Over the draws, at units ``u`` (..., 3)."""
        return laws.success_from_loss(law.loss(u[..., None, :])).mean(axis=-1)

    grid = np.linspace(1e-4, 1 - 1e-4, 121)
    f1, f2 = np.meshgrid(grid, grid)
    pts = np.stack([f1.ravel(), f2.ravel(), 1 - f1.ravel() - f2.ravel()], axis=-1)
    pts = pts[pts[:, 2] > 1e-4]
    u = _units(pts, budget)
    pts = pts[((u >= lo) & (u <= hi)).all(axis=1)]
    p = mean_success(_units(pts, budget))
    best = pts[np.argmax(p)]

    def minus(v: np.ndarray) -> float:
        f = np.array([v[0], v[1], 1 - v[0] - v[1]])
        x = _units(f, budget)
        if (f <= 0).any() or (x < lo).any() or (x > hi).any():
            return 1.0
        return -float(mean_success(x))

    polished = optimize.minimize(
        minus, best[:2], method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-15}
    )
    return max(float(p.max()), -float(polished.fun))


@pytest.mark.parametrize(
    ("interaction", "env_cap"), [(False, np.inf), (True, np.inf), (False, 2000.0)]
)
def test_decide_matches_brute_force_and_slsqp(interaction: bool, env_cap: float) -> None:
    """Every (setting, budget): the batched Newton decision settles, spends the budget, stays
    in the box, is no worse than the best point of a brute-force search (and so no worse
    than SLSQP's), and is SLSQP's point up to the solvers' tolerance. With ``env_cap`` the
    bound on environments is active at the optimum."""
    law = _law(3, interaction)
    cost = Posynomial(PRICES, POWERS)
    kappa = np.ones((S, 3))
    lo, hi = np.ones(3), np.array([env_cap, np.inf, np.inf])
    even = np.stack([_units(np.full(3, 1 / 3), b) for b in BUDGETS])  # (B, 3) on the budget
    start = np.minimum(np.broadcast_to(even, (G, BUDGETS.size, 3)), hi)
    u, settled = decide(law, kappa, cost, BUDGETS, lo, hi, start)
    assert settled.all()
    assert (u >= lo).all() and (u <= hi).all()
    spent = cost(u)
    assert (spent <= BUDGETS * (1 + 1e-12)).all()
    np.testing.assert_allclose(spent, np.broadcast_to(BUDGETS, (G, BUDGETS.size)), rtol=1e-9)
    if np.isfinite(env_cap):
        assert np.isclose(u[..., 0], env_cap).any()  # the cap binds somewhere
    floor, gamma, beta = (np.asarray(x) for x in (law.floor, law.gamma, law.beta))
    for g in range(G):
        law_g = allocate.PowerLaw(
            law.coef[:, g, 0],
            law.alpha[:, g, 0],
            floor[:, g, 0],
            None if law.gamma is None else gamma[:, g, 0],
            None if law.beta is None else beta[:, 0, 0],
            law.pair,
        )
        for j, b in enumerate(BUDGETS):
            ours = float(laws.success_from_loss(law_g.loss(u[g, j])).mean())
            assert ours >= _brute(law_g, b, lo, hi) - 1e-9
            old, converged = _decision(law_g, np.ones(3), cost, b, lo, hi, start[g, j])
            theirs = float(laws.success_from_loss(law_g.loss(old)).mean())
            assert ours >= theirs - 1e-12
            if converged:
                np.testing.assert_allclose(u[g, j], old, rtol=1e-5)


def test_objective_derivatives_match_finite_differences() -> None:
    """``1 - F``'s gradient and Hessian in ``log u`` (with the interaction term) against
    central differences of the objective and of the gradient."""
    law = _law(5, interaction=True)
    kappa = np.exp(0.1 * np.random.default_rng(1).standard_normal((S, 3)))
    y = np.log(np.array([300.0, 2e4, 20.0])) + np.zeros((G, 1, 3))
    _, g, h = objective(law, kappa, y)
    eps = 1e-5
    for i in range(3):
        e = np.zeros(3)
        e[i] = eps
        up, down = objective(law, kappa, y + e), objective(law, kappa, y - e)
        np.testing.assert_allclose(g[..., i], (up[0] - down[0]) / (2 * eps), rtol=1e-6)
        np.testing.assert_allclose(h[..., i], (up[1] - down[1]) / (2 * eps), rtol=1e-5, atol=1e-9)


def test_a_flat_objective_is_left_to_slsqp() -> None:
    """Every draw below zero loss: success 1 everywhere, no gradient, a singular Newton
    system. Newton must not settle there (nor return NaN); the recipe then asks SLSQP."""
    law = _law(7, interaction=False)
    flat = allocate.PowerLaw(law.coef, law.alpha, np.full((S, G, 1), -100.0))
    cost = Posynomial(PRICES, POWERS)
    even = np.stack([_units(np.full(3, 1 / 3), b) for b in BUDGETS])
    start = np.broadcast_to(even, (G, BUDGETS.size, 3))
    u, settled = decide(flat, np.ones((S, 3)), cost, BUDGETS, np.ones(3), np.full(3, np.inf), start)
    assert not settled.any()
    assert np.isfinite(u).all() and (cost(u) <= BUDGETS * (1 + 1e-12)).all()
