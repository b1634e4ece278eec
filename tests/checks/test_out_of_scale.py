"""The out-of-scale check (bayesscale.checks.out_of_scale): which axes a design lets it test,
its per-bucket coverage test, and the fit that stores it (``bayesscale fit``, by default):
the reach it reads back, the summary that shows it, the recipe bounded there."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from testdata import REFERENCE, small_reference_frame

import bayesscale as bs
from bayesscale import names
from bayesscale.checks.crossval import CrossvalError, LeaveOut
from bayesscale.checks.out_of_scale import bucket_records, rules, threshold
from bayesscale.cli import main
from bayesscale.data.observations import Table, load_observations
from bayesscale.data.spec import load_spec
from bayesscale.law.drift import stored_drift
from bayesscale.law.reach import HOLDS, INSIDE, MAX_RATIO, ROWS, reach, records
from bayesscale.recipe.notes import REACH_ASSUMED
from bayesscale.report.recipe_text import format_recipe


def test_a_leave_out_above_a_value_removes_the_larger_scales() -> None:
    spec = load_spec()
    table = load_observations(REFERENCE / "observations.csv", spec)
    mask, matched = LeaveOut.parse("rollouts>16").mask(table, spec)
    np.testing.assert_array_equal(mask, table.frame["rollouts"].to_numpy() > 16)
    assert matched == "rollouts>16" and 0 < mask.sum() < mask.size
    with pytest.raises(CrossvalError, match="COLUMN>VALUE needs a numeric column"):
        LeaveOut.parse("domain>swe").mask(table, spec)
    with pytest.raises(CrossvalError, match="no row has rollouts>64"):
        LeaveOut.parse("rollouts>64").mask(table, spec)


def test_the_threshold_keeps_enough_values_and_leaves_about_four_times_out() -> None:
    assert threshold([8, 16, 32, 64, 128, 256]) == 64.0  # 256 / 4
    assert threshold([2, 4, 8, 16, 32, 64]) == 16.0
    assert threshold([6, 8, 10, 14, 18, 24]) == 10.0  # 24 / 4 = 6 keeps one: three are kept
    assert np.isnan(threshold([10, 20, 40]))  # nothing left to leave out


def test_an_axis_whose_top_anchors_another_sweep_is_tested_on_its_own_sweep() -> None:
    """The reference sweeps one axis at a time, the env sweep at the largest task count and the
    task sweep at the largest env count: leaving either's top out of the whole table leaves the
    other one value, so each is tested on its own sweep alone (the law of that axis alone).
    The rollout sweep runs at 8 rollouts, inside the range: its top leaves the whole table."""
    spec = load_spec()
    table = load_observations(REFERENCE / "observations.csv", spec)
    usable, untested = rules(table, spec)
    assert untested == {}
    assert {a: str(r) for a, r in usable.items()} == {
        "env": "n_envs>64 in its own sweep (n_tasks=10240, rollouts=8)",
        "task": "n_tasks>2560 in its own sweep (n_envs=256, rollouts=8)",
        "traj": "rollouts>16",
    }
    env = usable["env"]
    assert env.spec(spec).axis_names == ("env",)
    sweep = env.rows(table.frame)
    assert set(sweep["n_tasks"]) == {10240} and set(sweep["rollouts"]) == {8}
    assert sorted(sweep["n_envs"].unique()) == [8, 16, 32, 64, 128, 256]
    # an axis with too few values in its own sweep is not tested, and the reason says so
    few = table.frame[~table.frame["n_envs"].isin([8, 16, 32])]
    usable, untested = rules(Table(few.reset_index(drop=True), "few", "x"), spec)
    assert "env" not in usable
    assert untested["env"] == "3 values of n_envs in its own sweep"


def test_bucket_records_count_the_rows_inside_per_ratio_bucket() -> None:
    ratio = [1.0, 1.5, 2.0, 2.0, 3.0, 4.0, 4.0, 6.0]
    covered = [False, True, True, False, True, True, True, True]
    check = pd.DataFrame(
        {
            "traj" + names.OVER_MAX_SUFFIX: ratio,
            names.COVERED: covered,
            names.OBSERVED: 0.5,
            names.LOWER: 0.4,
            names.UPPER: 0.6,
        }
    )
    frame = bucket_records(check, "traj", "rollouts>16", 0.9)
    assert frame["bucket"].tolist() == ["<=2x", "2-4x", "4-8x"]  # the row at 1x is inside
    assert frame[ROWS].tolist() == [3, 3, 1]
    assert frame[INSIDE].tolist() == [2, 3, 1]
    assert frame[MAX_RATIO].tolist() == [2.0, 4.0, 6.0]
    # 2 of 3 is within chance of 90% (two-sided binomial, p = 0.27), 3 of 3 and 1 of 1 too
    assert frame[HOLDS].tolist() == [1, 1, 1]
    # 52 of 63 is below nominal at p = 0.057: it holds as counted, but with a Monte Carlo
    # error of one row, two errors below is 50 (p = 0.010): borderline, and it does not hold
    many = check.iloc[[1] * 63].assign(**{names.COVERED: [True] * 52 + [False] * 11})
    (held,) = bucket_records(many, "traj", "r", 0.9).itertuples(index=False)
    assert (held.inside, held.holds, held.verdict, held.inside_mcse) == (52, 1, "within chance", 0)
    (noisy,) = bucket_records(many, "traj", "r", 0.9, [1.0] * 4).itertuples(index=False)
    assert (noisy.holds, noisy.verdict, noisy.inside_mcse) == (0, "borderline", 1.0)
    # 45 of 63 (p < 1e-4) is over-confident whatever a row or two of noise does
    worse = many.assign(**{names.COVERED: [True] * 45 + [False] * 18})
    (off,) = bucket_records(worse, "traj", "r", 0.9, [1.0] * 4).itertuples(index=False)
    assert (off.holds, off.verdict) == (0, "over-confident")


def test_a_fit_stores_its_out_of_scale_check_and_the_recipe_is_bounded_at_its_reach(
    tmp_path, capsys
) -> None:
    obs = tmp_path / "obs.csv"
    small_reference_frame().to_csv(obs, index=False)
    path = tmp_path / "law.nc"
    args = ["fit", str(obs), "--out", str(path), "--quiet", "--forms", "power"]  # the check
    # is the default
    args += ["--draws", "200", "--tune", "200", "--chains", "2", "--seed", "3"]
    main(args)
    err = capsys.readouterr().err
    assert "out-of-scale check" in err and "traj: reach" in err and "env: reach" in err
    fit = bs.load(path)
    evidence = fit.out_of_scale
    assert evidence is not None
    frame = records(evidence)
    # every left-out row is counted in one bucket: rollouts > 16 over the whole table; env
    # above 64 in its own sweep (the rows at 10,240 tasks and 8 rollouts)
    small = small_reference_frame()
    by_axis = frame.groupby("axis")[ROWS].sum().to_dict()
    assert by_axis["traj"] == int((small["rollouts"] > 16).sum())
    env_sweep = (small["n_tasks"] == 10240) & (small["rollouts"] == 8)
    assert by_axis["env"] == int((env_sweep & (small["n_envs"] > 64)).sum())
    ones = {"env": 1.0, "task": 1.0, "traj": 1.0}  # 6 rows a bucket: too few to vouch
    assert fit.reach == reach(evidence) == ones
    assert "Out of scale" in fit.summary_text() and "traj: reach 1x" in fit.summary_text()
    assert fit.summary()["out_of_scale"]["reach"] == ones
    # the drift beyond the sweep is calibrated on the same left-out rows, per tested axis
    stored = json.loads(evidence.attrs[names.ATTR_DRIFT])
    assert stored["rows"] == by_axis and set(stored["tau"]) == set(by_axis)
    assert stored_drift(fit.tree) == stored["tau"]
    assert "drift beyond the sweep" in fit.summary_text()
    # the recipe's headline is bounded at the measured reach
    result = fit.recipe_result([1e5], max_draws=20)
    assert result.reach == ones
    assert "out-of-scale check measured" in result.reach_source
    assert "could not be tested" not in result.reach_source
    summary = result.to_json()
    assert summary["reach"]["factor"] == ones
    assert summary["reach"]["measured"] is True
    assert "headline: what the data vouch for." in format_recipe(summary)
    # the same fit without its check: an assumed reach, not called vouched
    plain = bs.LawFit(fit.tree.copy(), table=fit.table)
    del plain.tree[names.OUT_OF_SCALE_GROUP]
    assert stored_drift(plain.tree) is None
    assumed = plain.recipe_result([1e5], max_draws=20).to_json()
    assert assumed["reach"] == {
        "factor": 4.0, "source": REACH_ASSUMED, "measured": False,
    }  # fmt: skip
    assert "headline: within an assumed reach." in format_recipe(assumed)
    head = result.ds
    swept = head[names.SWEPT_MAX].sel({names.AXIS_DIM: "traj"})
    bounded = head[names.BEYOND_DATA]
    traj = head[names.DECISION].sel({names.AXIS_DIM: "traj"}).where(bounded)
    assert bool(bounded.any()) and float((traj / swept).max()) <= 1.0 + 1e-9
    assert "its reach (env 1x, task 1x, traj 1x)" in result.notes[0]
