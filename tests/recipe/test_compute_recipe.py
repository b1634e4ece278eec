"""The recipe under a compute (product) budget, against a general-purpose optimiser."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_recipe import _save

from bayesscale import names
from bayesscale.cli import main
from bayesscale.core import allocate
from bayesscale.law.posterior import PosteriorError, law_draws
from bayesscale.recipe.compute import compute_recipe
from bayesscale.recipe.draws import RecipeError
from bayesscale.recipe.output import summarize
from bayesscale.recipe.synthetic import synthetic_fit

BUDGETS = np.array([1e8, 1e10, 1e12])


@pytest.fixture(scope="module")
def wide_fit():
    return synthetic_fit(draws=30, chains=2, spread=0.15, seed=7)


@pytest.mark.parametrize(
    ("powers", "bounds"),
    [(None, None), ({"env": 0.0}, {"env": (1.0, 384.0)}), ({"traj": 2.0}, {"task": (1.0, 5e3)})],
)
def test_each_draw_is_the_optimum_of_a_general_solver(wide_fit, powers, bounds) -> None:
    ds = compute_recipe(wide_fit, BUDGETS, powers=powers, bounds=bounds, unit_cost=3.0)
    draws = law_draws(wide_fit)
    m = np.array([(powers or {}).get(a, 1.0) for a in draws.axes])
    lo = np.ones(3)
    hi = np.array([(bounds or {}).get(a, (1.0, np.inf))[1] for a in draws.axes])
    sizes = ds[names.ALLOCATION].stack(s=(names.CHAIN_DIM, names.DRAW_DIM)).transpose("s", ...)
    rng = np.random.default_rng(0)
    for d in rng.choice(draws.samples, 4, replace=False):
        for g in range(len(draws.settings)):
            coef, alpha = draws.coef[d, g], draws.alpha[d, g]
            for j, budget in enumerate(BUDGETS):
                got = sizes.isel(s=d, setting=g, budget=j).to_numpy()
                np.testing.assert_allclose(3.0 * np.prod(got**m), budget, rtol=1e-9)
                brute = allocate.solve_general(
                    lambda x, k=coef, a=alpha: float(np.sum(k * x ** (-a))),
                    lambda x: float(3.0 * np.prod(x**m)),
                    float(budget),
                    lo,
                    hi,
                    x0=np.where(np.isfinite(hi), hi / 2, got * 1.5),
                )
                np.testing.assert_allclose(got, brute, rtol=1e-5)
    expo = ds[names.RECIPE_EXPONENT]
    # the exponents of the costly free axes spend the whole budget's growth: sum_i m_i e_i = 1
    np.testing.assert_allclose((expo * xr_powers(m, ds)).sum(names.AXIS_DIM), 1.0, rtol=1e-9)


def xr_powers(m: np.ndarray, ds):
    import xarray as xr

    return xr.DataArray(m, dims=names.AXIS_DIM, coords={names.AXIS_DIM: ds[names.AXIS_DIM]})


def test_exponents_agree_with_finite_differences(wide_fit) -> None:
    h = 1e-4
    budgets = np.array([1e10, 1e10 * np.exp(h)])
    s = compute_recipe(wide_fit, budgets)
    d = np.log(s[names.ALLOCATION])
    fd = (d.isel(budget=1) - d.isel(budget=0)) / h
    np.testing.assert_allclose(fd, s[names.RECIPE_EXPONENT].isel(budget=0), atol=1e-4)


def test_bad_input_is_a_clear_error(wide_fit) -> None:
    with pytest.raises(RecipeError, match="not an axis of the fit"):
        compute_recipe(wide_fit, [1e9], powers={"worlds": 1.0})
    with pytest.raises(RecipeError, match="finite and >= 0"):
        compute_recipe(wide_fit, [1e9], powers={"env": -1.0})
    with pytest.raises(RecipeError, match="need a finite upper bound"):
        compute_recipe(wide_fit, [1e9], powers={"env": 0.0})
    with pytest.raises(RecipeError, match="too small to buy the lower bounds"):
        compute_recipe(wide_fit, [10.0], bounds={"env": (8.0, None), "task": (8.0, None)})
    with pytest.raises(PosteriorError, match="interaction"):
        compute_recipe(synthetic_fit(draws=10, interaction=(0.2, 0.3)), [1e9])


def test_cli_compute_cost(tmp_path: Path, capsys: pytest.CaptureFixture[str], wide_fit) -> None:
    fit = _save(wide_fit, tmp_path / "fit.nc")
    out = tmp_path / "compute.nc"
    args = ["recipe", str(fit), "--cost", "compute", "--budget", "1e8:1e12:3"]
    assert (
        main([*args, "--powers", "env=0", "--bounds", "env=1:384", "--json", "--out", str(out)])
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["cost_powers"] == {"env": 0.0, "task": 1.0, "traj": 1.0}
    assert sorted({r["budget"] for r in summary["results"]}) == pytest.approx([1e8, 1e10, 1e12])
    medians = summarize(
        compute_recipe(wide_fit, [1e8], powers={"env": 0}, bounds={"env": (1, 384)})
    )
    first = summary["results"][0]["allocation"]["task"]["median"]
    assert first == pytest.approx(
        float(medians[names.PURCHASED].sel(quantile=0.5, axis="task")[0, 0])
    )
    assert out.exists()
    # never overwrite silently
    assert main([*args, "--out", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main([*args, "--prices", str(tmp_path / "p.toml")]) == 2
    assert "apply to the money cost only" in capsys.readouterr().err
    assert main(["recipe", str(fit), "--budget", "1e5", "--powers", "env=1"]) == 2
    assert "--cost compute only" in capsys.readouterr().err
    assert main([*args]) == 0
    assert "cost powers: env 1, task 1, traj 1" in capsys.readouterr().out
