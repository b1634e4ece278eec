"""The swept range of a fit and extrapolation factors."""

from __future__ import annotations

import numpy as np
import pytest

from bayesscale import names
from bayesscale.data.extrapolation import SweptRange, check_threshold, describe


def test_of_rows_takes_min_and_max_per_setting_and_axis() -> None:
    sizes = np.array([[8.0, 320.0], [256.0, 320.0], [16.0, 10240.0], [4.0, 50.0]])
    index = np.array([0, 0, 0, 1])
    r = SweptRange.of_rows(("env", "task"), ("a", "b"), index, sizes)
    assert r.lo.tolist() == [[8.0, 320.0], [4.0, 50.0]]
    assert r.hi.tolist() == [[256.0, 10240.0], [4.0, 50.0]]


def test_factor_and_outside_on_both_sides() -> None:
    r = SweptRange(("env", "traj"), ("s",), np.array([[8.0, 2.0]]), np.array([[256.0, 64.0]]))
    values = np.array([[[1024.0, 32.0]], [[2.0, 0.5]]])  # (budget, setting, axis)
    assert r.factor(values).tolist() == [[[4.0, 0.5]], [[2.0 / 256, 0.5 / 64]]]
    assert r.outside(values).tolist() == [[[4.0, 1.0]], [[4.0, 4.0]]]


def test_describe_and_threshold() -> None:
    assert describe(1.0) == "inside the swept range"
    assert describe(7600.0) == "7,600x beyond the swept range"
    with pytest.raises(ValueError, match=">= 1"):
        check_threshold(0.5)


def test_a_fit_stores_its_swept_range(law_fit, reference_frame) -> None:
    r = SweptRange.from_fit(law_fit)
    assert r is not None
    keys = ["model", "algorithm", "domain"]
    label = reference_frame[keys].astype(str).agg(" | ".join, axis=1)
    columns = {"env": "n_envs", "task": "n_tasks", "traj": "rollouts"}
    for g, setting in enumerate(r.settings):
        rows = reference_frame[label == setting]
        for i, axis in enumerate(r.axes):
            if axis == names.PARAMS_B:
                assert r.hi[g, i] == reference_frame["params_b"].max()
                continue
            assert r.lo[g, i] == rows[columns[axis]].min()
            assert r.hi[g, i] == rows[columns[axis]].max()


def test_the_recipe_warns_in_one_line_only_beyond_the_threshold() -> None:
    from bayesscale.recipe.notes import extrapolation_warning
    from bayesscale.recipe.output import to_json
    from bayesscale.recipe.solve import recipe
    from bayesscale.recipe.synthetic import synthetic_fit

    fit = synthetic_fit(draws=20, spread=0.0)
    assert extrapolation_warning(to_json(recipe(fit, [1e2])), None) is None
    far = to_json(recipe(fit, [1e2, 1e9]))
    line = extrapolation_warning(far, None)
    assert line is not None and line.startswith("warning: 2 of 4 (setting, budget) rows")
    assert "--within-data 4, or within_data=4 in Python, keeps the recipe within 4x" in line
    assert "what remains lies below" in str(extrapolation_warning(far, 4.0))
    old = fit.copy()
    old["constant_data"] = (
        old["constant_data"].to_dataset().drop_vars([names.SWEPT_MIN, names.SWEPT_MAX])
    )
    note = extrapolation_warning(to_json(recipe(old, [1e2])), None)
    assert note is not None and note.startswith("note: this fit stores no swept range")
