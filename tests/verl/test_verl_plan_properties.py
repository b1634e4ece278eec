"""Property tests (hypothesis, derandomized) of the planning invariants."""

from __future__ import annotations

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from verl_testlib import crossed_pool

from bayesscale import names
from bayesscale.verl.plan import build_plan
from bayesscale.verl.pool import check_pool
from bayesscale.verl.sweep import parse_sweep_spec

SPEC = """
pool = "p.jsonl"
seeds = [0]
[[models]]
path = "m"
[anchors]
n_envs = {e}
n_tasks = {t}
rollouts = 2
[grid]
points = {points}
span = {span}
[alignment]
cells = {cells}
updates = {updates}
[holdout]
by = "{by}"
count = {held}
selection_seed = {seed}
"""


@st.composite
def cases(draw: st.DrawFn) -> tuple:
    e = draw(st.integers(2, 8))
    t = draw(st.integers(2, 12))
    by = draw(st.sampled_from(["task", "env", "world"]))
    held = draw(st.integers(1, 2))
    if by == "world":  # held + 2 worlds of equal size; the 2 training worlds hold >= e envs
        worlds = held + 2
        n_envs = worlds * -(-e // 2)
        n_tasks = t + draw(st.integers(0, 3))
    else:
        worlds = 2
        n_envs = e + (held if by == "env" else 0) + draw(st.integers(0, 2))
        n_tasks = t + (held if by == "task" else 0) + draw(st.integers(0, 3))
    updates = draw(st.sampled_from([1, 2, 4]))
    cells = updates * draw(st.integers(max(e, t), 3 * max(e, t)))
    points = draw(st.integers(2, 4))
    span = draw(st.sampled_from([2, 4, 8]))
    seed = draw(st.integers(0, 5))
    # drop a few cells (not crossed fully) but keep every env/task in several cells
    density = draw(st.sampled_from([1.0, 1.0, 0.9]))
    return e, t, by, held, n_envs, n_tasks, worlds, updates, cells, points, span, seed, density


@settings(
    max_examples=40, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(cases())
def test_planning_invariants(case: tuple) -> None:
    e, t, by, held, n_envs, n_tasks, worlds, updates, cells, points, span, seed, density = case
    frame = crossed_pool(n_envs, n_tasks, worlds=worlds)
    if density < 1:
        frame = frame.sample(frac=density, random_state=seed).sort_index()
    spec = parse_sweep_spec(
        SPEC.format(
            e=e,
            t=t,
            points=points,
            span=span,
            cells=cells,
            updates=updates,
            by=by,
            held=held,
            seed=seed,
        )
    )
    try:
        manifest, files, report = build_plan(spec, check_pool(frame, "p.jsonl"))
    except ValueError as exc:  # a sparse pool may not cover a point: must say so clearly
        assert "pool too" in str(exc) or "cannot cover" in str(exc)
        return
    val = files["data/val.parquet"]
    column = {"task": names.TASK_ID, "env": names.ENV_ID, "world": names.WORLD_ID}[by]
    held_units = {info[column] for info in val[names.EXTRA_INFO]}
    assert held_units == set(report["holdout"]["held_out"])
    point_sets = []
    for path, data in files.items():
        if not path.startswith("data/train"):
            continue
        infos = pd.DataFrame(list(data[names.EXTRA_INFO]))
        assert not set(infos[column]) & held_units  # no leakage
        assert len(data) == cells  # alignment: same cells everywhere
        point_sets.append((set(infos[names.ENV_ID]), set(infos[names.TASK_ID])))
    for envs_a, tasks_a in point_sets:  # nesting
        for envs_b, tasks_b in point_sets:
            if len(envs_a) <= len(envs_b):
                assert envs_a <= envs_b
            if len(tasks_a) <= len(tasks_b):
                assert tasks_a <= tasks_b
    for _, row in manifest.iterrows():  # each run trains on exactly its sizes
        data = pd.DataFrame(list(files[row[names.TRAIN_PATH]][names.EXTRA_INFO]))
        assert data[names.ENV_ID].nunique() == row[names.N_ENVS]
        assert data[names.TASK_ID].nunique() == row[names.N_TASKS]
    assert set(manifest[names.UPDATES]) == {updates}
    assert set(manifest[names.N_CELLS]) == {cells}
