"""The compute-cost recipe of laws of other forms and of a stack: the power law's answer where
every term is a power law, a brute-force search along the budget's surface otherwise, and a
stack's recipe read from the mixture of its forms."""

from __future__ import annotations

import numpy as np
import pytest
from testdata import stacked_synthetic_fit

from bayesscale import names
from bayesscale.cli import main
from bayesscale.core import allocate
from bayesscale.core.form_law import FormLaw
from bayesscale.data.fitfile import ATTR_FORMAT, FORMAT_VERSION, save_fit
from bayesscale.law.mixed_draws import recipe_draws
from bayesscale.recipe.compute import compute_recipe, solve_forms_product

POWERS = np.array([0.0, 1.0, 1.5])  # the first axis costs no compute: at its upper bound
LO, HI = np.ones(3), np.array([500.0, np.inf, np.inf])


def _random_laws(n: int, seed: int, forms: bool) -> FormLaw:
    rng = np.random.default_rng(seed)
    saturating = np.zeros((n, 3), dtype=bool)
    if forms:
        saturating[:, 2] = rng.uniform(size=n) < 0.5
    return FormLaw(
        amplitude=rng.uniform(0.05, 0.5, (n, 3)),
        alpha=rng.uniform(0.2, 1.2, (n, 3)),
        reference=np.array([50.0, 1000.0, 10.0]),
        floor=rng.uniform(0.1, 0.5, n),
        knee=rng.uniform(0.0, 4.0, (n, 3)) if forms else np.zeros((n, 3)),
        midpoint=rng.uniform(-1.0, 3.0, (n, 3)),
        saturating=saturating,
    )


def test_power_terms_give_the_product_solvers_answer() -> None:
    law = _random_laws(40, 0, forms=False)
    coef = law.amplitude * law.reference**law.alpha  # K = A D_ref^alpha
    budgets = np.array([1e5, 1e8])
    exact = allocate.solve_product(
        coef[:, None, :], law.alpha[:, None, :], budgets, POWERS, 3.0, LO, HI
    )
    batched = FormLaw(
        law.amplitude[:, None, :], law.alpha[:, None, :], law.reference, law.floor[:, None],
        knee=law.knee[:, None, :],
    )  # fmt: skip
    sol, expo = solve_forms_product(batched, POWERS, 3.0, budgets, LO, HI)
    np.testing.assert_allclose(sol.sizes, exact.sizes, rtol=1e-8)
    np.testing.assert_allclose(sol.multiplier, exact.multiplier, rtol=1e-7)
    exponents = allocate.local_exponents_product(exact, law.alpha[:, None, :], POWERS)
    np.testing.assert_allclose(expo, exponents, atol=1e-6)
    assert sol.sizes[..., 0] == pytest.approx(500.0) and (expo[..., 0] == 0).all()


def test_no_point_on_the_budgets_surface_beats_the_solver() -> None:
    """On the active budget ``3 D_1 D_2^1.5 = C`` (every form's loss falls with each size, so
    the budget binds), a grid of 4,000 points in ``log D_1`` never has a lower loss."""
    law = _random_laws(24, 1, forms=True)
    budget = 1e7
    sol, _ = solve_forms_product(law, POWERS, 3.0, np.array(budget), LO, HI)
    assert sol.fallbacks == 0
    d1 = np.geomspace(1.0, budget / 3.0, 4000)
    d2 = (budget / (3.0 * d1)) ** (1 / 1.5)
    keep = d2 >= 1.0
    grid = np.stack([np.full(keep.sum(), 500.0), d1[keep], d2[keep]], axis=-1)
    for i in range(24):
        one = FormLaw(law.amplitude[i], law.alpha[i], law.reference, law.floor[i],
                      law.knee[i], law.midpoint[i], law.saturating[i])  # fmt: skip
        assert float(one.loss(sol.sizes[i])) <= one.loss(grid).min() + 1e-12
        assert 3.0 * sol.sizes[i, 1] * sol.sizes[i, 2] ** 1.5 == pytest.approx(budget, rel=1e-8)


def test_a_stacks_compute_recipe_is_its_mixtures(tmp_path, capsys) -> None:
    stack = stacked_synthetic_fit(0.5, knee=2.0)
    bounds = {"env": (1.0, 500.0)}
    ds = compute_recipe(stack, [1e9], powers={"env": 0}, bounds=bounds)
    draws = recipe_draws(stack)
    law = draws.law(extra=1)
    assert isinstance(law, FormLaw)
    sol, _ = solve_forms_product(
        law, np.array([0.0, 1.0, 1.0]), 1.0, np.array([1e9]), LO, np.array([500.0, np.inf, np.inf])
    )
    purchased = ds[names.PURCHASED].transpose(names.CHAIN_DIM, names.DRAW_DIM, ...).to_numpy()
    np.testing.assert_allclose(purchased.reshape(sol.sizes.shape), sol.sizes, rtol=1e-12)
    alone = compute_recipe(stacked_synthetic_fit(0.0, knee=2.0), [1e9], powers={"env": 0},
                           bounds=bounds)  # fmt: skip
    task = {names.AXIS_DIM: "task"}
    moved = ds[names.PURCHASED].sel(task).median() / alone[names.PURCHASED].sel(task).median()
    assert float(moved) > 1.1  # the knee's draws buy more tasks: the mixture is not the power law

    stack.attrs[ATTR_FORMAT] = FORMAT_VERSION
    save_fit(stack, tmp_path / "stack.nc")
    argv = ["recipe", str(tmp_path / "stack.nc"), "--cost", "compute", "--budget", "1e9",
            "--powers", "env=0", "--bounds", "env=1:500"]  # fmt: skip
    assert main(argv) == 0
    out = " ".join(capsys.readouterr().err.split())  # the notes go to stderr
    assert "the law is a stack of forms (power 0.50, offset_power 0.50)" in out
