"""The one reader of a law fit (bayesscale.law.posterior): what it refuses to read."""

from __future__ import annotations

import pandas as pd
import pytest

from bayesscale import names
from bayesscale.law.posterior import PosteriorError, axis_columns, law_draws, law_layout
from bayesscale.law.predict import predict
from bayesscale.recipe.solve import recipe
from bayesscale.recipe.synthetic import synthetic_fit


def test_a_fit_of_another_form_is_read_by_its_form_or_refused_not_misread() -> None:
    """Prediction and the recipe read an offset-power axis by its form (and need the knee);
    the power-law reading refuses the fit, so nothing reads it wrong."""
    fit = synthetic_fit(draws=4, spread=0.0)
    spec = fit.attrs[names.ATTR_SPEC].replace(
        'name = "task"\n', 'name = "task"\nform = "offset_power"\n'
    )
    assert spec != fit.attrs[names.ATTR_SPEC]
    fit.attrs[names.ATTR_SPEC] = spec
    assert law_layout(fit)[0] == ("env", "task", "traj")
    with pytest.raises(PosteriorError, match=r"other forms than a power law \({'task'.*forms=True"):
        law_draws(fit)
    rows = pd.DataFrame(
        {"model": ["S0"], "algorithm": ["grpo"], "domain": ["math"], "n_envs": [8],
         "n_tasks": [100], "rollouts": [4], "trials": [10]}
    )  # fmt: skip
    for read in (lambda f: predict(f, rows), lambda f: recipe(f, [1e4])):
        with pytest.raises(PosteriorError, match="posterior has no 'knee'"):
            read(fit)


def test_the_one_axis_column_rule() -> None:
    """The spec's columns; the paper's columns for the paper's axes without a spec; the model
    size counts params_b; any other axis its own name."""
    fit = synthetic_fit(draws=2, spread=0.0)
    assert axis_columns(fit, ["env", "task", "traj", "params_b"]) == {
        "env": "n_envs",
        "task": "n_tasks",
        "traj": "rollouts",
        "params_b": "params_b",
    }
    del fit.attrs[names.ATTR_SPEC]
    assert axis_columns(fit, ["env", "N"]) == {"env": "n_envs", "N": "N"}
