"""The recipe of a stack: its draws are the forms' mixture, every draw's allocation is that
draw's optimum under its own form (KKT and a brute-force search), the decision is the best
for the mixture, and a stack whose other forms carry no weight is the power law's recipe."""

from __future__ import annotations

import json

import numpy as np
import pytest
from testdata import stacked_synthetic_fit

from bayesscale import names
from bayesscale.core.form_law import FormLaw
from bayesscale.data.fitfile import ATTR_FORMAT, FORMAT_VERSION, save_fit
from bayesscale.law.mixed_draws import mixture_weights, recipe_draws
from bayesscale.law.predict import draw_shares
from bayesscale.recipe.draws import RecipeError, RecipeInputs, recipe_inputs, success_of
from bayesscale.recipe.output import summarize, to_json
from bayesscale.recipe.solve import recipe

BUDGETS = [1e3, 1e4]
KNEE = 1.0  # D0 = D_ref tasks: optima near the knee, where the rounds of bounds matter


@pytest.fixture(scope="module")
def stack():
    return stacked_synthetic_fit(0.3, knee=KNEE)


def test_the_draws_are_the_mixture_of_the_forms(stack) -> None:
    draws = recipe_draws(stack)
    n_chain = np.unique(draws.chain).size
    per_chain = draws.samples // n_chain
    shares = draw_shares([0.7, 0.3], per_chain)
    n_settings = len(draws.settings)
    assert draws.knee.shape == (draws.samples, n_settings, len(draws.axes))
    knees = draws.knee.reshape(n_chain, per_chain, n_settings, -1)
    task = draws.axes.index("task")
    for c in range(n_chain):  # each chain: the power draws, then the offset draws
        assert np.count_nonzero(knees[c, :, :, task] == KNEE) == shares[1] * n_settings
        assert np.count_nonzero(knees[c] > 0) == shares[1] * n_settings  # the task axis only
    assert draws.has_forms and isinstance(draws.law(), FormLaw)
    assert mixture_weights(stack) == pytest.approx({"power": 0.7, "offset_power": 0.3})
    np.testing.assert_array_equal(draws.draw.reshape(n_chain, -1)[0], np.arange(per_chain))


def test_every_draws_allocation_is_its_own_optimum(stack) -> None:
    """A brute-force search over (env, task), rollouts from the money left, finds no lower loss
    than the recipe's allocation, for power and offset-power draws alike."""
    ds = recipe(stack, BUDGETS, decision=False, multipliers=False)
    draws = recipe_draws(stack)
    cost = _inputs(stack).cost
    alloc = ds[names.ALLOCATION].stack(s=(names.CHAIN_DIM, names.DRAW_DIM))
    sizes = alloc.transpose("s", names.SETTING_DIM, names.BUDGET_DIM, names.AXIS_DIM).to_numpy()
    # every draw's KKT conditions under its own law: -dL/dD_i = lambda dPhi/dD_i off the bounds
    lam = ds[names.SHADOW_PRICE].stack(s=(names.CHAIN_DIM, names.DRAW_DIM))
    lam = lam.transpose("s", names.SETTING_DIM, names.BUDGET_DIM).to_numpy()
    marginal = -draws.law(extra=1).gradient(sizes)
    free = sizes > 1.0 + 1e-9
    ratio = marginal / (lam[..., None] * cost.gradient(sizes))
    assert free.sum() > sizes.size / 2
    np.testing.assert_allclose(ratio[free], 1.0, atol=1e-7)
    assert np.all(ratio[~free] <= 1.0 + 1e-7)  # at the lower bound: not worth more
    offset = np.flatnonzero(draws.knee.max(axis=(1, 2)) > 0)
    power = np.flatnonzero(draws.knee.max(axis=(1, 2)) == 0)
    for s in [*offset[:2], *power[:2]]:
        for g in range(len(draws.settings)):
            one = draws.law(setting=g)
            assert isinstance(one, FormLaw)
            law = FormLaw(
                one.amplitude[s], one.alpha[s], one.reference, one.floor[s], knee=one.knee[s]
            )
            for b, budget in enumerate(BUDGETS):
                assert float(law.loss(sizes[s, g, b])) <= _brute(law, cost, budget) + 1e-12
                assert float(cost(sizes[s, g, b])) == pytest.approx(budget, rel=1e-9)


def test_the_decision_is_the_best_for_the_mixture(stack) -> None:
    """No nearby purchase on the budget has a higher expected success over the mixed draws."""
    ds = recipe(stack, [1e4], multipliers=False)
    inputs = _inputs(stack)
    rng = np.random.default_rng(0)
    for g in range(len(inputs.draws.settings)):
        law = inputs.draws.law(setting=g)
        dec = ds[names.DECISION].isel({names.SETTING_DIM: g, names.BUDGET_DIM: 0}).to_numpy()
        best = float(success_of(law, inputs.kappa * dec).mean())
        assert best == pytest.approx(
            float(ds[names.EXPECTED_SUCCESS].isel({names.SETTING_DIM: g, names.BUDGET_DIM: 0}))
        )
        for _ in range(40):  # move env and task, buy rollouts with what is left
            u = dec * np.exp(rng.normal(0.0, 0.05, 3))
            w = inputs.cost.weights
            u[2] = (1e4 - w[0] * u[0] - w[1] * u[1]) / (w[2] * u[1])
            if u[2] >= 1.0:
                assert float(success_of(law, inputs.kappa * u).mean()) <= best + 1e-9


def test_no_weight_on_the_other_forms_is_the_power_laws_recipe() -> None:
    plain = recipe(stacked_synthetic_fit(0.0), BUDGETS)
    root = recipe(stacked_synthetic_fit(0.0)["/"].copy().drop_nodes(names.STACK_GROUP), BUDGETS)
    np.testing.assert_array_equal(plain[names.ALLOCATION], root[names.ALLOCATION])
    np.testing.assert_array_equal(plain[names.DECISION], root[names.DECISION])
    assert json.loads(plain.attrs[names.ATTR_LAW_FORMS]) == {"power": 1.0}


def test_the_linearised_convention_is_refused_for_other_forms(stack) -> None:
    with pytest.raises(RecipeError, match="linearised convention is the paper's, for power laws"):
        recipe(stack, BUDGETS, cost_model="linearised")


def test_the_recipe_says_it_mixes_the_forms(stack, tmp_path, capsys) -> None:
    from bayesscale.cli import main

    summary = to_json(summarize(recipe(stack, BUDGETS, multipliers=False)))
    assert summary["law_forms"] == pytest.approx({"power": 0.7, "offset_power": 0.3})
    tree = stack.copy()
    tree.attrs[ATTR_FORMAT] = FORMAT_VERSION
    path = save_fit(tree, tmp_path / "stack.nc")
    assert main(["recipe", str(path), "--budget", "1e3", "--max-draws", "5"]) == 0
    err = capsys.readouterr().err
    assert "the law is a stack of forms (power 0.70, offset_power 0.30)" in err


def _inputs(stack) -> RecipeInputs:
    """What the recipe reads of the stack, with its defaults (paper prices, no bounds)."""
    return recipe_inputs(
        stack,
        prices=None,
        pricing=None,
        kappa=None,
        bounds=None,
        settings=None,
        max_draws=None,
        within_data=None,
        seed=0,
    )


def _brute(law: FormLaw, cost, budget: float, n: int = 600) -> float:
    w = cost.weights
    env = np.exp(np.linspace(0.0, np.log(budget / w[0]), n))
    task = np.exp(np.linspace(0.0, np.log(budget / w[1]), n))
    e, t = np.meshgrid(env, task, indexing="ij")
    tau = (budget - w[0] * e - w[1] * t) / (w[2] * t)
    ok = tau >= 1.0
    loss = law.loss(np.stack([e, t, np.where(ok, tau, 1.0)], axis=-1))
    return float(np.min(np.where(ok, loss, np.inf)))
