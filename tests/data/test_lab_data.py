"""The lab's bundled observations (docs/lab.md): what lab/sweep.toml and lab/heldout.toml
planned, ingested, in the format the law reads."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from bayesscale import names
from bayesscale.data.observations import DataWarning, load_observations
from bayesscale.data.spec import load_spec
from bayesscale.verl.sweep import AXIS_COLUMNS, load_sweep_spec

REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "data" / "lab"


def test_the_observations_are_the_planned_sweep() -> None:
    spec = load_sweep_spec(REPO / "lab" / "sweep.toml")
    table = load_observations(LAB / "observations.csv", load_spec()).frame
    assert len(table) == 90
    assert set(table[names.MODEL]) == {m.name for m in spec.models}
    assert set(table[names.SEED]) == set(spec.seeds)
    assert (table[names.TRIALS] == 600).all()  # every held task in every held environment
    for axis in spec.axes:
        assert set(spec.grid_points(axis)) <= set(table[AXIS_COLUMNS[axis]]), axis
    params = {m.name: m.params_b for m in spec.models}
    assert (table[names.PARAMS_B] == table[names.MODEL].map(params)).all()
    keys = [names.MODEL, names.N_ENVS, names.N_TASKS, names.ROLLOUTS, names.SEED]
    assert not table.duplicated(keys).any()


def test_the_heldout_runs_lie_2x_to_4x_beyond_the_sweep() -> None:
    sweep = load_observations(LAB / "observations.csv", load_spec()).frame
    held = load_observations(LAB / "heldout.csv", load_spec()).frame
    spec = load_sweep_spec(REPO / "lab" / "heldout.toml")
    assert len(held) == len(spec.explicit_points) * len(spec.models) * len(spec.seeds) == 48
    columns = [names.N_ENVS, names.N_TASKS, names.ROLLOUTS]
    beyond = (held[columns] / sweep[columns].max()).max(axis=1)
    assert set(beyond.round(6)) == {2.0, 4.0}
    rate = held[names.SUCCESSES] / held[names.TRIALS]
    assert rate.between(0.05, 0.95).all()  # neither floor nor ceiling: a useful range
    assert pd.Series(sweep[names.SUCCESSES] / sweep[names.TRIALS]).between(0.05, 0.95).all()


def test_the_recipe_runs_are_the_decision_and_its_baselines_at_equal_money() -> None:
    """data/lab/recipe.csv: the recipe's decision at 944.32 USD (lab/prices.toml, twice the
    anchor's cost) and its two baselines, 6 seeds each per width, labelled by sweep_axis."""
    from bayesscale.core.prices import load_prices, money_cost

    with pytest.warns(DataWarning, match="fewer than 3 distinct values"):  # three arms
        runs = load_observations(LAB / "recipe.csv", load_spec()).frame
    arms = {"recipe:944.32", "traj_heavy:944.32", "chinchilla:944.32"}
    assert set(runs[names.SWEEP_AXIS]) == arms and len(runs) == 36
    cost = money_cost(
        ["env", "task", "traj"],
        [names.N_ENVS, names.N_TASKS, names.ROLLOUTS],
        load_prices(REPO / "lab" / "prices.toml"),
    )
    for (model, arm), group in runs.groupby([names.MODEL, names.SWEEP_AXIS]):
        assert sorted(group[names.SEED]) == [3, 4, 5, 6, 7, 8], (model, arm)
        sizes = group[[names.N_ENVS, names.N_TASKS, names.ROLLOUTS]].drop_duplicates()
        assert len(sizes) == 1, (model, arm)
        # equal money up to rounding the sizes to whole units (one rollout is 40.96 USD)
        assert abs(float(cost(sizes.iloc[0].to_numpy(float))) - 944.32) < 0.02 * 944.32
    assert (runs[names.TRIALS] == 600).all()
