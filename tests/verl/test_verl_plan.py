"""Planning: nested grid points, no held-out leakage, training-signal alignment, verl schema."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest
from verl_testlib import FAKE_VERL, REPO, SMALL_SPEC, crossed_pool, duplicated_pool, write_jsonl

from bayesscale import names
from bayesscale.verl import manifest as mf
from bayesscale.verl.launch import LocalBackend, commands_of, launch
from bayesscale.verl.plan import (
    build_plan,
    holdout_summary,
    plan_sweep,
    spec_copy_text,
    split_holdout,
)
from bayesscale.verl.pool import PoolError, check_pool
from bayesscale.verl.sweep import SpecError, SweepSpec, load_sweep_spec, parse_sweep_spec


def ids(frame: pd.DataFrame, key: str) -> set[str]:
    return {info[key] for info in frame[names.EXTRA_INFO]}


def test_small_sweep_layout(small_sweep: Path) -> None:
    manifest = mf.read_manifest(small_sweep)
    # grid: env 1,2,4,8; task 2,4,8,16; traj 1,2,4,8 around anchors (8,16,4): 10 points
    assert len(manifest) == 10 * 2 * 2
    assert manifest[names.RUN_ID].is_unique
    assert set(manifest[names.STATUS]) == {mf.PLANNED}
    assert (manifest[names.ATTEMPT] == 1).all()
    assert manifest[names.LOG_PATH].str.endswith("attempt-1/verl.jsonl").all()
    anchor = manifest[
        (manifest[names.N_ENVS] == 8)
        & (manifest[names.N_TASKS] == 16)
        & (manifest[names.ROLLOUTS] == 4)
    ]
    assert set(anchor[names.SWEEP_AXIS]) == {"env+task+traj"}
    for column in (names.TRAIN_PATH, names.VAL_PATH):
        for rel in manifest[column].unique():
            assert not Path(rel).is_absolute() and (small_sweep / rel).exists()
    report = json.loads((small_sweep / mf.PLAN_REPORT).read_text())
    assert report["alignment"]["verl"]["data.train_max_samples"] == 64
    assert (small_sweep / mf.SPEC_COPY).exists()
    assert not [p for p in small_sweep.parent.iterdir() if p.name.startswith(".")]  # no temp dirs


def test_train_parquet_is_verl_schema(small_sweep: Path) -> None:
    train = pd.read_parquet(small_sweep / "data/train-e2-t16.parquet")
    assert list(train.columns) == [
        names.DATA_SOURCE,
        names.PROMPT,
        names.REWARD_MODEL,
        names.EXTRA_INFO,
    ]
    assert len(train) == 64
    prompt = train[names.PROMPT][0]
    assert list(prompt[0].keys()) == ["role", "content"] and prompt[0]["role"] == "user"
    assert set(train[names.REWARD_MODEL][0].keys()) == {"style", "ground_truth"}
    info = train[names.EXTRA_INFO][0]
    assert info["split"] == "train" and {"index", "task_id", "env_id", "world_id"} <= set(info)
    assert train[names.DATA_SOURCE][0] == "org/bench/v2"


def test_nested_no_leak_aligned(small_sweep: Path) -> None:
    manifest = mf.read_manifest(small_sweep)
    val = pd.read_parquet(small_sweep / "data/val.parquet")
    held = ids(val, names.TASK_ID)
    assert len(held) == 3  # [holdout] count = 3 tasks
    sets = {}
    for path in manifest[names.TRAIN_PATH].unique():
        train = pd.read_parquet(small_sweep / path)
        assert len(train) == 64  # alignment: same cells at every point
        assert not ids(train, names.TASK_ID) & held  # no leakage
        row = manifest[manifest[names.TRAIN_PATH] == path].iloc[0]
        envs, tasks = ids(train, names.ENV_ID), ids(train, names.TASK_ID)
        assert (len(envs), len(tasks)) == (row[names.N_ENVS], row[names.N_TASKS])  # all covered
        sets[path] = (envs, tasks)
    for a_envs, a_tasks in sets.values():  # nested: sizes order the sets on both axes
        for b_envs, b_tasks in sets.values():
            if len(a_envs) <= len(b_envs):
                assert a_envs <= b_envs
            if len(a_tasks) <= len(b_tasks):
                assert a_tasks <= b_tasks
    assert set(manifest[names.UPDATES]) == {4} and set(manifest[names.TRAIN_BATCH_SIZE]) == {16}


def test_refuses_to_overwrite(small_spec: Path, small_sweep: Path) -> None:
    spec = load_sweep_spec(small_spec)
    before = (small_sweep / mf.MANIFEST).read_text()
    with pytest.raises(FileExistsError, match="--force"):
        plan_sweep(spec, small_sweep)
    assert (small_sweep / mf.MANIFEST).read_text() == before
    again = plan_sweep(spec, small_sweep, overwrite=True)
    assert (again.sweep_dir / mf.MANIFEST).exists()


def test_force_replaces_an_unrun_plan_only(small_spec: Path, tmp_path: Path) -> None:
    """``plan --force`` never deletes a folder that holds no sweep, nor runs' files."""
    spec = load_sweep_spec(small_spec)
    mine = tmp_path / "mine"
    (mine / "sub").mkdir(parents=True)
    (mine / "important.csv").write_text("a\n")
    with pytest.raises(FileExistsError, match="holds no bayesscale sweep"):
        plan_sweep(spec, mine, overwrite=True)
    assert (mine / "important.csv").read_text() == "a\n" and (mine / "sub").is_dir()
    sweep = plan_sweep(spec, tmp_path / "sweep").sweep_dir
    run = sorted((sweep / "runs").iterdir())[0]
    (run / "train.log").write_text("step:1\n")
    with pytest.raises(FileExistsError, match=r"its runs hold 1 file\(s\)"):
        plan_sweep(spec, sweep, overwrite=True)
    assert (run / "train.log").read_text() == "step:1\n"
    (run / "train.log").unlink()
    (sweep / "notes.md").write_text("mine\n")  # a file of the user's beside the plan
    with pytest.raises(FileExistsError, match=r"holds notes.md, which no plan writes"):
        plan_sweep(spec, sweep, overwrite=True)
    (sweep / "notes.md").unlink()
    frame = mf.read_manifest(sweep)
    frame.loc[0, names.STATUS] = mf.PENDING  # launched, its job still queued: no log yet
    mf.write_manifest(frame, sweep)
    with pytest.raises(FileExistsError, match=r"1 run\(s\) were launched"):
        plan_sweep(spec, sweep, overwrite=True)
    (tmp_path / "empty").mkdir()
    assert (plan_sweep(spec, tmp_path / "empty", overwrite=True).sweep_dir / mf.MANIFEST).exists()


def test_a_sweep_without_model_sizes_reads_back(small_spec: Path, tmp_path: Path) -> None:
    """params_b is optional in a sweep spec: the manifest's cells are empty, not refused."""
    text = small_spec.read_text().replace("params_b = 0.5\n", "")
    small_spec.write_text(text)
    sweep = plan_sweep(load_sweep_spec(small_spec), tmp_path / "sweep").sweep_dir
    assert mf.read_manifest(sweep)[names.PARAMS_B].isna().all()


def test_pool_too_small_names_columns() -> None:
    spec = parse_sweep_spec(SMALL_SPEC.format(pool="p.jsonl"))
    pool = check_pool(crossed_pool(6, 20), "p.jsonl")  # anchors need 8 training envs
    with pytest.raises(
        PoolError,
        match=r"p.jsonl: pool too small .* 6 training environment\(s\) \(column 'env_id'\)",
    ):
        build_plan(spec, pool)


def test_sparse_pool_is_explained() -> None:
    spec = parse_sweep_spec(SMALL_SPEC.format(pool="p.jsonl"))
    frame = crossed_pool(10, 20)
    # tasks t0000-t0009 only in e000-e004, the rest only in e005-e009: not crossed enough
    keep = [
        (int(t[1:]) < 10) == (int(e[1:]) < 5)
        for t, e in zip(frame.task_id, frame.env_id, strict=True)
    ]
    with pytest.raises(PoolError, match="pool too sparse for the grid point"):
        build_plan(spec, check_pool(frame[keep], "p.jsonl"))


def test_holdout_by_world() -> None:
    text = SMALL_SPEC.format(pool="p.jsonl").replace(
        'by = "task"\ncount = 3', 'by = "world"\ncount = 1'
    )
    spec = parse_sweep_spec(text)
    pool = check_pool(crossed_pool(12, 20, worlds=4), "p.jsonl")
    manifest, files, report = build_plan(spec, pool)
    held_world = report["holdout"]["held_out"]
    val_envs = ids(files["data/val.parquet"], names.ENV_ID)
    assert {info["world_id"] for info in files["data/val.parquet"][names.EXTRA_INFO]} == set(
        held_world
    )
    for path, frame in files.items():
        if path.startswith("data/train"):
            assert not ids(frame, names.ENV_ID) & val_envs
    assert manifest[names.N_WORLDS].max() == 3


def test_example_sweep_plans(tmp_path: Path) -> None:
    spec = load_sweep_spec(REPO / "data/verl_example/sweep.toml")
    result = plan_sweep(spec, tmp_path / "ex")
    manifest = result.manifest
    assert len(manifest) == 13 * 2 * 3
    assert result.report["holdout"]["val_cells"] == 15 * 20
    # make_pool.py: 20 environments (5 worlds x 4 structures) and 150 tasks, all distinct:
    # every grid point's ids are as many distinct environments and tasks, nothing is warned
    assert manifest[names.ENV_IDS].max() == 16 and manifest[names.TASK_IDS].max() == 128
    assert (manifest[names.N_ENVS] == manifest[names.ENV_IDS]).all()
    assert (manifest[names.N_TASKS] == manifest[names.TASK_IDS]).all()
    pool, holdout = result.report["pool"], result.report["holdout"]
    assert (pool["distinct_envs"], pool["distinct_tasks"]) == (20, 150)
    assert (holdout["train_distinct_envs"], holdout["train_distinct_tasks"]) == (20, 135)
    assert holdout["same_unit_in_training"] == [] and result.report["counting"]["ids_differ"] == []


def test_manifest_counts_distinct_units() -> None:
    """n_envs / n_tasks count structures and statements among the ids a run trains on."""
    spec = parse_sweep_spec(SMALL_SPEC.format(pool="p.jsonl"))
    pool = check_pool(duplicated_pool(10, 20, structures=4, statements=7), "p.jsonl")
    manifest, files, report = build_plan(spec, pool)
    assert (report["pool"]["distinct_envs"], report["pool"]["distinct_tasks"]) == (4, 7)
    held = set(report["holdout"]["held_out"])
    statements = {int(t[1:]) % 7 for t in pool.frame[names.TASK_ID] if t not in held}
    seen = set()
    for path, runs in manifest.groupby(names.TRAIN_PATH):
        envs, tasks = ids(files[str(path)], names.ENV_ID), ids(files[str(path)], names.TASK_ID)
        row = runs.iloc[0]
        assert (len(envs), len(tasks)) == (row[names.ENV_IDS], row[names.TASK_IDS])
        assert row[names.N_ENVS] == len({int(e[1:]) % 4 for e in envs})
        assert row[names.N_TASKS] == len({int(t[1:]) % 7 for t in tasks})
        # one id of every structure / statement before a second id of any
        assert row[names.N_ENVS] == min(row[names.ENV_IDS], 4)
        assert row[names.N_TASKS] == min(row[names.TASK_IDS], len(statements))
        seen.add((row[names.ENV_IDS], row[names.N_ENVS]))
    assert (8, 4) in seen and (2, 2) in seen
    differ = report["counting"]["ids_differ"]
    assert differ and all(
        (d[names.ENV_IDS], d[names.TASK_IDS]) != (d[names.N_ENVS], d[names.N_TASKS]) for d in differ
    )
    leaky = report["holdout"]["same_unit_in_training"]
    assert leaky == sorted(t for t in held if int(t[1:]) % 7 in statements)


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o755), (0o027, 0o750), (0o077, 0o700)])
def test_sweep_directory_follows_umask(
    small_spec: Path, tmp_path: Path, umask: int, mode: int
) -> None:
    spec = load_sweep_spec(small_spec)
    old = os.umask(umask)
    try:
        result = plan_sweep(spec, tmp_path / "sw")
    finally:
        os.umask(old)
    assert result.sweep_dir.stat().st_mode & 0o777 == mode
    assert (result.sweep_dir / "data").stat().st_mode & 0o777 == mode


def test_failed_write_leaves_nothing(
    small_spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = load_sweep_spec(small_spec)

    def broken(self: pd.DataFrame, *args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", broken)
    with pytest.raises(OSError, match="disk full"):
        plan_sweep(spec, tmp_path / "new")
    assert not (tmp_path / "new").exists()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".new")]


def task_env_spec(held: str = "count = 2", extra: str = "") -> SweepSpec:
    return parse_sweep_spec(
        SMALL_SPEC.format(pool="p.jsonl").replace(
            'by = "task"\ncount = 3', f'by = "task+env"\n{held}\n{extra}'
        )
    )


def test_holdout_by_task_and_env() -> None:
    """Validation is held tasks x held envs; a cell with one held unit goes nowhere."""
    pool = check_pool(crossed_pool(10, 20), "p.jsonl")
    manifest, files, report = build_plan(task_env_spec(), pool)
    hold = report["holdout"]
    tasks, envs = hold["held_ids"][names.TASK_ID], hold["held_ids"][names.ENV_ID]
    assert (len(tasks), len(envs)) == (2, 2) and hold["held_out"] == tasks + envs
    val = files["data/val.parquet"]
    assert ids(val, names.TASK_ID) == set(tasks) and ids(val, names.ENV_ID) == set(envs)
    assert hold["val_cells"] == len(val) == 2 * 2 and set(manifest[names.VAL_SIZE]) == {4}
    assert hold["set_aside_cells"] == 2 * 8 + 18 * 2  # held task x training env, and back
    assert (hold["train_tasks"], hold["train_envs"]) == (18, 8)
    for path, frame in files.items():
        if path.startswith("data/train"):
            assert not ids(frame, names.TASK_ID) & set(tasks)
            assert not ids(frame, names.ENV_ID) & set(envs)
    assert holdout_summary(hold) == (
        "held out 2 task(s) x 2 env(s): 4 val cells (held tasks in held envs), 52 cells set "
        "aside (held tasks in training envs, training tasks in held envs)"
    )
    # each column's ids by the rule of its own mode: the tasks are those `by = "task"` holds
    split = split_holdout(pool, task_env_spec())
    again = split_holdout(pool, task_env_spec())  # deterministic
    assert again.held == split.held and again.val.equals(split.val)
    assert split.set_aside == 52 and len(split.train) == 18 * 8
    by_task = parse_sweep_spec(SMALL_SPEC.format(pool="p.jsonl").replace("count = 3", "count = 2"))
    assert split_holdout(pool, by_task).held_out == tuple(tasks)
    other = split_holdout(pool, task_env_spec(extra="selection_seed = 7"))
    assert other.held != split.held
    # fraction: ceil(0.1 x 20) tasks and ceil(0.1 x 10) env; max_val_cells caps val
    split = split_holdout(pool, task_env_spec("fraction = 0.1", "max_val_cells = 1"))
    assert [len(v) for v in split.held.values()] == [2, 1] and len(split.val) == 1
    assert split.set_aside == 2 * 9 + 18 * 1 and len(split.train) == 18 * 9
    # the plan reports ids of both kinds whose statement / signature also trains
    dup = check_pool(duplicated_pool(10, 20, structures=4, statements=7), "p.jsonl")
    for seed in (0, 1):
        hold = build_plan(task_env_spec(extra=f"selection_seed = {seed}"), dup)[2]["holdout"]
        tasks, envs = hold["held_ids"][names.TASK_ID], hold["held_ids"][names.ENV_ID]
        statements = {k % 7 for k in range(20) if f"t{k:04d}" not in tasks}
        structures = {k % 4 for k in range(10) if f"e{k:03d}" not in envs}
        assert hold["same_unit_in_training"] == [
            t for t in tasks if int(t[1:]) % 7 in statements
        ] + [e for e in envs if int(e[1:]) % 4 in structures]


def test_holdout_by_task_and_env_never_leaks() -> None:
    """Over seeds and sparse pools: each cell trains, validates or is set aside, by how many
    held units it has; no training file holds a held task or env."""
    for seed in range(6):
        frame = crossed_pool(12, 24)
        if seed % 2:  # sparse: some tasks miss some environments
            frame = frame.sample(frac=0.7, random_state=seed).sort_index()
        pool = check_pool(frame, "p.jsonl")
        spec = task_env_spec("fraction = 0.25", f"selection_seed = {seed}")
        split = split_holdout(pool, spec)
        tasks, envs = set(split.held[names.TASK_ID]), set(split.held[names.ENV_ID])
        assert (len(tasks), len(envs)) == (6, 3)
        held = frame[names.TASK_ID].isin(tasks).astype(int) + frame[names.ENV_ID].isin(envs)
        assert len(split.train) == int((held == 0).sum())
        assert split.set_aside == int((held == 1).sum())
        assert len(split.val) == int((held == 2).sum()) > 0
        assert set(split.val[names.TASK_ID]) <= tasks and set(split.val[names.ENV_ID]) <= envs
        assert not set(split.train[names.TASK_ID]) & tasks
        assert not set(split.train[names.ENV_ID]) & envs
        if seed % 2 == 0:
            manifest, files, report = build_plan(spec, pool)
            assert report["holdout"]["held_ids"] == {k: list(v) for k, v in split.held.items()}
            for path in manifest[names.TRAIN_PATH].unique():
                train = pd.DataFrame(list(files[path][names.EXTRA_INFO]))
                assert not set(train[names.TASK_ID]) & tasks
                assert not set(train[names.ENV_ID]) & envs


def test_holdout_by_task_and_env_refusals() -> None:
    """No val cell (held tasks and envs never meet), nothing to train on, too many held."""
    full = crossed_pool(10, 20)
    split = split_holdout(check_pool(full, "p.jsonl"), task_env_spec())
    tasks, envs = split.held[names.TASK_ID], split.held[names.ENV_ID]
    in_tasks, in_envs = full[names.TASK_ID].isin(tasks), full[names.ENV_ID].isin(envs)
    apart = check_pool(full[~(in_tasks & in_envs)], "p.jsonl")
    with pytest.raises(
        PoolError,
        match=r"p.jsonl: \[holdout\] by = 'task\+env': no validation cell remains: the 2 held "
        r"task\(s\) \(column 'task_id'.* and 2 held env\(s\) \(column 'env_id'.* share no cell",
    ):
        split_holdout(apart, task_env_spec())
    untrained = check_pool(full[in_tasks | in_envs], "p.jsonl")
    with pytest.raises(
        PoolError,
        match=r"p.jsonl: \[holdout\] by = 'task\+env': nothing is left to train on: no cell "
        r"pairs a training task with a training env \(columns \['task_id', 'env_id'\]\)",
    ):
        split_holdout(untrained, task_env_spec())
    with pytest.raises(
        PoolError, match=r"p.jsonl: column 'env_id': holding out 10 of 10 env id\(s\)"
    ):
        split_holdout(check_pool(full, "p.jsonl"), task_env_spec("count = 10"))


def test_spec_copy_keeps_relative_entrypoint_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spec at lab/sweep.toml with entrypoint "../venv/bin/python ./train.py": the sweep's
    copy records the absolute words, and launch runs them from any working directory."""
    lab, elsewhere = tmp_path / "lab", tmp_path / "elsewhere"
    lab.mkdir()
    elsewhere.mkdir()
    (tmp_path / "venv").symlink_to(Path(sys.executable).parents[1], target_is_directory=True)
    shutil.copy(FAKE_VERL, lab / "train.py")
    write_jsonl(crossed_pool(10, 20), lab / "pool.jsonl")
    text = SMALL_SPEC.format(pool="pool.jsonl") + (
        '# the trainer\nentrypoint = "../venv/bin/python ./train.py"  # beside the spec\n'
    )
    (lab / "sweep.toml").write_text(text)
    monkeypatch.chdir(lab)
    spec = load_sweep_spec("sweep.toml")
    sweep = plan_sweep(spec, tmp_path / "sweeps" / "s").sweep_dir
    monkeypatch.chdir(elsewhere)
    real = tmp_path.resolve()
    expected = [str(real / "venv/bin/python"), str(real / "lab/train.py")]
    copy = (sweep / mf.SPEC_COPY).read_text()
    assert f'entrypoint = "{" ".join(expected)}"\n' in copy and "# the trainer\n" in copy
    assert f'pool = "{real / "lab/pool.jsonl"}"\n' in copy
    commands = commands_of(sweep)
    assert all(list(c.argv[:2]) == expected for c in commands.values())
    run = next(iter(commands))
    assert launch(sweep, LocalBackend(), runs=[run], poll_s=0).submitted
    assert mf.read_manifest(sweep).set_index(names.RUN_ID).at[run, names.STATUS] == mf.SUCCEEDED


def test_spec_copy_refuses_what_it_cannot_rewrite(tmp_path: Path) -> None:
    """An entrypoint over several lines cannot be rewritten line by line: said, not garbled."""
    write_jsonl(crossed_pool(10, 20), tmp_path / "pool.jsonl")
    text = SMALL_SPEC.format(pool="pool.jsonl") + 'entrypoint = """\npython3 ./train.py"""\n'
    (tmp_path / "sweep.toml").write_text(text)
    spec = load_sweep_spec(tmp_path / "sweep.toml")
    assert spec.verl.entrypoint == f"python3 {tmp_path.resolve() / 'train.py'}"
    with pytest.raises(SpecError, match=r"sweep.toml: cannot record .* entrypoint = "):
        spec_copy_text(spec)
    assert not (tmp_path / "sweep").exists()
    with pytest.raises(SpecError):
        plan_sweep(spec, tmp_path / "sweep")
    assert not (tmp_path / "sweep").exists()
