"""The headline is what the data vouch for (bayesscale.recipe.vouched): rows whose decision asks
for more than the warning factor times the largest swept value are the recipe bounded there;
every other row is the unbounded recipe, its draws untouched by any cap."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

from bayesscale import names
from bayesscale.recipe.output import to_json
from bayesscale.recipe.solve import recipe
from bayesscale.recipe.synthetic import synthetic_fit
from bayesscale.recipe.vouched import headline_json, rows_beyond, vouched_recipe

BUDGETS = [20.0, 1e3, 1e6]  # below the swept range, inside it, far above it


@pytest.fixture(scope="module")
def fit() -> xr.DataTree:
    return synthetic_fit(draws=30, chains=2, spread=0.05, seed=2)


def test_rows_are_bounded_only_where_the_decision_asks_for_more_than_the_cap(fit) -> None:
    head, unbounded = vouched_recipe(fit, BUDGETS, warn_beyond=4.0)
    assert unbounded is not None
    plain = recipe(fit, BUDGETS)
    capped = recipe(fit, BUDGETS, within_data=4.0)
    over = plain[names.DECISION_EXTRAPOLATION].max(names.AXIS_DIM)
    expected = over > 4.0
    np.testing.assert_array_equal(head[names.BEYOND_DATA], expected)
    assert expected.sel({names.BUDGET_DIM: 1e6}).all()
    assert not expected.sel({names.BUDGET_DIM: [20.0, 1e3]}).any()
    # the smallest budget lies below the swept range on some axis: flagged, but no cap helps
    low = to_json(plain.sel({names.BUDGET_DIM: [20.0]}), warn_factor=4.0)
    assert all(r["extrapolation"]["beyond"] for r in low["results"])
    for var in (names.ALLOCATION, names.SUCCESS_OPTIMUM, names.DECISION, names.SPEND_SHARE):
        inside = {names.BUDGET_DIM: [20.0, 1e3]}
        xr.testing.assert_identical(
            head[var].sel(inside).drop_vars(names.BEYOND_DATA, errors="ignore"),
            plain[var].sel(inside),
        )
        far = {names.BUDGET_DIM: [1e6]}
        xr.testing.assert_identical(head[var].sel(far), capped[var].sel(far))
    np.testing.assert_array_equal(rows_beyond(unbounded, 4.0), expected)


def test_headline_json_marks_rows_and_keeps_the_unbounded_one(fit) -> None:
    head, unbounded = vouched_recipe(fit, BUDGETS, warn_beyond=4.0)
    assert unbounded is not None
    summary = headline_json(
        to_json(head, warn_factor=4.0),
        to_json(unbounded, warn_factor=4.0),
        4.0,
        head[names.BEYOND_DATA],
    )
    assert summary["headline"] == "bounded to the data"
    rows = {r["budget"]: r for r in summary["results"]}
    # above the data: bounded, with the unbounded row and what to sweep
    top = rows[1e6]
    assert top["within_data"] is False and top["extrapolation"]["beyond"] == []
    assert top["extrapolation_recipe"]["extrapolation"]["beyond"]
    assert top["sweep_further"].startswith("env to >= ")
    # inside: within the data; below: not within, and nothing a cap could do
    assert rows[1e3]["within_data"] is True and "extrapolation_recipe" not in rows[1e3]
    assert rows[20.0]["within_data"] is False and "extrapolation_recipe" not in rows[20.0]


def test_a_cap_of_ones_own_is_used_as_given(fit) -> None:
    head, unbounded = vouched_recipe(fit, BUDGETS, warn_beyond=4.0, within_data=2.0)
    assert unbounded is None
    xr.testing.assert_identical(
        head[names.ALLOCATION], recipe(fit, BUDGETS, within_data=2.0)[names.ALLOCATION]
    )


def test_a_reach_per_axis_bounds_each_axis_at_its_own_factor(fit) -> None:
    """With a reach per axis (the out-of-scale check's), a row is bounded where the decision
    passes the reach of any axis, and the bounded recipe caps each axis at its own reach."""
    reach = {"env": 1.0, "task": 4.0, "traj": 4.0}
    budgets = [*BUDGETS, 4e3]  # 4e3 buys about twice the swept environments
    head, unbounded = vouched_recipe(fit, budgets, reach=reach)
    assert unbounded is not None
    plain = recipe(fit, budgets)
    over = plain[names.DECISION_EXTRAPOLATION]
    limit = xr.DataArray(
        [1.0, 4.0, 4.0], dims=names.AXIS_DIM, coords={names.AXIS_DIM: ["env", "task", "traj"]}
    )
    expected = (over > limit * (1 + 1e-9)).any(names.AXIS_DIM)
    np.testing.assert_array_equal(head[names.BEYOND_DATA], expected)
    # 4e3 buys more environments than were swept: bounded under a 1x env reach, not under 4x
    assert bool(expected.sel({names.BUDGET_DIM: 4e3}).all())
    assert not bool(rows_beyond(plain, 4.0).sel({names.BUDGET_DIM: 4e3}).any())
    capped = head[names.DECISION].where(head[names.BEYOND_DATA])
    ratio = capped / head[names.SWEPT_MAX]
    assert float(ratio.sel({names.AXIS_DIM: "env"}).max()) <= 1.0 + 1e-9
    assert float(ratio.sel({names.AXIS_DIM: ["task", "traj"]}).max()) <= 4.0 + 1e-9
    assert json.loads(head.attrs["within_data"]) == reach
    summary = headline_json(to_json(head), to_json(unbounded), reach, head[names.BEYOND_DATA])
    bounded = [r for r in summary["results"] if r["within_data"] is False]
    assert bounded and all("env to >=" in r["sweep_further"] for r in bounded if r["budget"] == 4e3)
