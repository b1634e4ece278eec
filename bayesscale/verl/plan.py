"""Plan a sweep: held-out split, nested grid points, aligned training sets, the manifest.

Sets are prefixes of one seeded order, so grid points nest: with training environments
ordered e_1, e_2, … and training tasks t_1, t_2, …, the run at (E, T) trains on the cells
``{(t, e) in pool : e in {e_1..e_E}, t in {t_1..t_T}}``. A smaller run's environments and
tasks are therefore a subset of a larger run's, on every axis.

Held-out split (``[holdout] by``): ``task`` holds out whole task ids, ``env`` whole
environments, ``world`` every environment of the held-out worlds; every cell touching a
held-out unit goes to the validation set and never to training. ``task+env`` holds out a set
of task ids and a set of environment ids (each as many as ``task`` or ``env`` would hold out):
the validation cells are the held tasks in the held environments, training keeps the training
tasks in the training environments, and a cell with exactly one held unit (a held task in a
training environment, a training task in a held environment) is set aside, in neither.

What a grid point counts: the spec's grid values are how many environment and task **ids** a
run selects; ``n_envs`` and ``n_tasks`` in the manifest (and so in ingested observations) are
how many **distinct** ones they are, exactly as ``bayesscale count`` counts the pool:
environments by structural signature, tasks by near-duplicate-merged statement (the ``[count]``
table of the spec says how tasks are embedded). Each seeded order lists one id of every
distinct unit before a second id of any, so ids and distinct counts agree while the pool has
enough distinct units; where they differ the plan reports both (``env_ids``/``task_ids``).

Training-signal alignment (PAPER.md §3): every run trains on the same number of
task-environment cells C and the same number of updates U, whatever its (E, T). The run's
distinct cells are ordered (one cell per task and per environment first, so that all E
environments and T tasks are covered, then the rest in seeded order) and cycled or cut to
exactly C rows; verl gets ``data.train_max_samples=C``, ``data.train_batch_size=C/U`` and
``trainer.total_training_steps=U``. Only the rollout axis changes the number of
trajectories (C·D_τ), hence tokens.

>>> from bayesscale.verl.sweep import load_sweep_spec
>>> spec = load_sweep_spec("data/verl_example/sweep.toml")  # doctest: +SKIP
>>> result = plan_sweep(spec, "sweeps/example")  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import tomllib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayesscale import names
from bayesscale.verl import manifest as mf
from bayesscale.verl.count import CountResult, count_pool
from bayesscale.verl.pool import Pool, PoolError, read_pool
from bayesscale.verl.sweep import (
    AXIS_COLUMNS,
    TASK_ENV,
    CountSettings,
    ModelEntry,
    SpecError,
    SweepSpec,
    holdout_count,
    safe_token,
)

VAL_FILE = "data/val.parquet"
WORLD = "world"
# [holdout] by -> the pool columns whose units it holds out
HOLDOUT_COLUMNS = {
    names.TASK: (names.TASK_ID,),
    names.ENV: (names.ENV_ID,),
    WORLD: (names.WORLD_ID,),
    TASK_ENV: (names.TASK_ID, names.ENV_ID),
}
_UNIT = {names.TASK_ID: names.TASK, names.ENV_ID: names.ENV, names.WORLD_ID: WORLD}


@dataclass(frozen=True)
class Split:
    """Training cells, validation cells and the held-out unit ids (all from one pool).

    ``held_out`` lists every held-out id (``task+env``: the tasks, then the environments);
    ``held`` the same per pool column. ``set_aside`` counts the cells with exactly one held
    unit (``task+env`` only: a held task in a training environment or a training task in a
    held one), which neither train nor validate.
    """

    train: pd.DataFrame
    val: pd.DataFrame
    by: str
    held_out: tuple[str, ...]
    held: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    set_aside: int = 0


@dataclass(frozen=True)
class Orders:
    """The seeded orders whose prefixes are the nested sets."""

    envs: tuple[str, ...]
    tasks: tuple[str, ...]


@dataclass(frozen=True)
class PlanResult:
    sweep_dir: Path
    manifest: pd.DataFrame
    report: dict[str, Any]


def split_holdout(pool: Pool, spec: SweepSpec) -> Split:
    """Hold out whole tasks, environments or worlds, or tasks and environments together
    (``task+env``); held-out cells never reach training.

    Each column's held ids are a seeded choice (``selection_seed``) of
    :func:`~bayesscale.verl.sweep.holdout_count` of its ids; ``task+env`` chooses the tasks
    first, then the environments. Validation takes the cells whose every column is held,
    training the cells with none held (``max_val_cells`` then samples the validation cells).
    Raises :class:`~bayesscale.verl.pool.PoolError` when a column lacks training ids or, for
    ``task+env``, when no validation or no training cell remains."""
    frame = pool.frame
    by = spec.holdout.by
    columns = HOLDOUT_COLUMNS[by]
    rng = np.random.default_rng([spec.selection_seed, 0])
    held: dict[str, tuple[str, ...]] = {}
    for column in columns:
        if column not in frame.columns:
            raise PoolError(
                f"{pool.source}: [holdout] by = {by!r} needs column {column!r}, "
                "which the pool lacks"
            )
        units = np.array(sorted(frame[column].unique()))
        k = holdout_count(len(units), spec.holdout)
        if k >= len(units):
            raise PoolError(
                f"{pool.source}: column {column!r}: holding out {k} of {len(units)} "
                f"{_UNIT[column]} id(s) leaves nothing to train on; lower [holdout] "
                "fraction/count"
            )
        held[column] = tuple(sorted(units[rng.permutation(len(units))[:k]].tolist()))
    touched = [frame[column].isin(held[column]).to_numpy() for column in columns]
    is_val = np.logical_and.reduce(touched)
    is_train = ~np.logical_or.reduce(touched)
    if len(columns) > 1:
        _check_crossed(pool, by, held, int(is_val.sum()), int(is_train.sum()))
    val = frame[is_val]
    if spec.holdout.max_val_cells is not None and len(val) > spec.holdout.max_val_cells:
        keep = np.sort(rng.permutation(len(val))[: spec.holdout.max_val_cells])
        val = val.iloc[keep]
    return Split(
        frame[is_train].reset_index(drop=True),
        val.reset_index(drop=True),
        by,
        tuple(i for column in columns for i in held[column]),
        held,
        int((~is_val & ~is_train).sum()),
    )


def _check_crossed(
    pool: Pool, by: str, held: Mapping[str, tuple[str, ...]], n_val: int, n_train: int
) -> None:
    """Refuse a crossed held-out split without validation or training cells."""
    ids = " and ".join(
        f"{len(held[c])} held {_UNIT[c]}(s) (column {c!r}, e.g. {list(held[c][:3])})" for c in held
    )
    if not n_val:
        raise PoolError(
            f"{pool.source}: [holdout] by = {by!r}: no validation cell remains: the {ids} "
            "share no cell; hold out more (fraction/count) or choose another selection_seed"
        )
    if not n_train:
        raise PoolError(
            f"{pool.source}: [holdout] by = {by!r}: nothing is left to train on: no cell pairs "
            f"a training {' with a training '.join(_UNIT[c] for c in held)} (columns "
            f"{list(held)}) once the {ids} are held out; lower [holdout] fraction/count"
        )


def holdout_summary(holdout: Mapping[str, Any]) -> str:
    """One line on the held-out split of a plan report (``report["holdout"]``).

    >>> holdout_summary({"by": "task", "held_out": ["t1", "t2"], "val_cells": 40})
    'held out 2 task(s): 40 val cells'
    >>> ids = {"task_id": ["t1", "t2"], "env_id": ["e1"]}
    >>> print(holdout_summary({"by": "task+env", "held_ids": ids, "val_cells": 2,
    ...                        "set_aside_cells": 28}))  # doctest: +NORMALIZE_WHITESPACE
    held out 2 task(s) x 1 env(s): 2 val cells (held tasks in held envs), 28 cells set aside
    (held tasks in training envs, training tasks in held envs)
    """
    val = f"{holdout['val_cells']} val cells"
    if holdout["by"] != TASK_ENV:
        return f"held out {len(holdout['held_out'])} {holdout['by']}(s): {val}"
    ids = holdout["held_ids"]
    return (
        f"held out {len(ids[names.TASK_ID])} task(s) x {len(ids[names.ENV_ID])} env(s): "
        f"{val} (held tasks in held envs), {holdout['set_aside_cells']} cells set aside "
        "(held tasks in training envs, training tasks in held envs)"
    )


def count_units(pool: Pool, settings: CountSettings | None = None) -> CountResult:
    """``bayesscale count`` on the pool with the spec's ``[count]`` settings; tasks fall back
    to ids (with a note) when there are no embeddings."""
    settings = settings or CountSettings()
    embedder, name = None, "embedder"
    if settings.model is not None:
        from bayesscale.verl import embed

        model = embed.load_model(settings.model)
        embedder, name = model.encode, f"{model.name} in NumPy"
    return count_pool(
        pool,
        threshold=settings.threshold,
        embedder=embedder,
        embedding_column=settings.embedding_column,
        text_column=settings.text_column,
        embedder_name=name,
        tasks_by_id=True,
    )


def spread_units(ids: np.ndarray, unit: dict[str, str] | None) -> np.ndarray:
    """Reorder ``ids`` (stably) so that every unit's first id comes before any unit's second.

    >>> spread_units(np.array(["a1", "a2", "b1", "c1"]), {"a1": "a", "a2": "a"}).tolist()
    ['a1', 'b1', 'c1', 'a2']
    """
    if not unit:
        return ids
    seen: dict[str, int] = {}
    rank = []
    for i in ids.tolist():
        u = unit.get(i, i)
        rank.append(seen.get(u, 0))
        seen[u] = seen.get(u, 0) + 1
    return ids[np.lexsort((np.arange(len(ids)), np.array(rank)))]


def make_orders(train: pd.DataFrame, seed: int, units: CountResult | None = None) -> Orders:
    """Seeded permutations of the training environments and tasks, one id of every distinct
    unit (``units``: signature, merged statement) before a second id of any."""
    envs = np.array(sorted(train[names.ENV_ID].unique()))
    tasks = np.array(sorted(train[names.TASK_ID].unique()))
    envs = envs[np.random.default_rng([seed, 1]).permutation(len(envs))]
    tasks = tasks[np.random.default_rng([seed, 2]).permutation(len(tasks))]
    if units is not None:
        envs = spread_units(envs, units.env_unit)
        tasks = spread_units(tasks, units.task_unit)
    return Orders(tuple(envs.tolist()), tuple(tasks.tolist()))


def n_distinct(ids: tuple[str, ...] | list[str], unit: dict[str, str]) -> int:
    """How many distinct units a set of ids holds."""
    return len({unit.get(i, i) for i in ids})


def select_cells(
    train: pd.DataFrame,
    orders: Orders,
    n_envs: int,
    n_tasks: int,
    n_cells: int,
    seed: int,
    source: str = "<pool>",
) -> pd.DataFrame:
    """The ``n_cells`` training rows of grid point (n_envs, n_tasks), covering every one of
    its environments and tasks; raise ``PoolError`` when the pool cannot provide them."""
    if n_envs > len(orders.envs) or n_tasks > len(orders.tasks):
        raise PoolError(
            f"{source}: pool too small for the grid point env_ids={n_envs}, task_ids={n_tasks}: "
            f"after the held-out split it has {len(orders.envs)} training environment(s) "
            f"(column {names.ENV_ID!r}) and {len(orders.tasks)} training task(s) "
            f"(column {names.TASK_ID!r})"
        )
    env_set = set(orders.envs[:n_envs])
    task_set = set(orders.tasks[:n_tasks])
    cells = train[train[names.ENV_ID].isin(env_set) & train[names.TASK_ID].isin(task_set)]
    lonely_envs = sorted(env_set - set(cells[names.ENV_ID]))
    lonely_tasks = sorted(task_set - set(cells[names.TASK_ID]))
    if lonely_envs or lonely_tasks:
        raise PoolError(
            f"{source}: pool too sparse for the grid point env_ids={n_envs}, task_ids={n_tasks}: "
            f"{len(lonely_envs)} of its environments (column {names.ENV_ID!r}, e.g. "
            f"{lonely_envs[:3]}) and {len(lonely_tasks)} of its tasks (column "
            f"{names.TASK_ID!r}, e.g. {lonely_tasks[:3]}) have no cell among the others. "
            "Every selected task needs a cell in some selected environment and vice versa: "
            "give tasks cells in several environments, or sweep fewer points"
        )
    rng = np.random.default_rng([seed, 3, n_envs, n_tasks])
    cells = cells.iloc[rng.permutation(len(cells))]
    cover = ~cells[names.TASK_ID].duplicated() | ~cells[names.ENV_ID].duplicated()
    ordered = pd.concat([cells[cover.to_numpy()], cells[~cover.to_numpy()]])
    if int(cover.sum()) > n_cells:
        raise PoolError(
            f"{source}: [alignment] cells = {n_cells} cannot cover the {n_tasks} tasks and "
            f"{n_envs} environments of grid point env_ids={n_envs}, task_ids={n_tasks} "
            f"(needs at least {int(cover.sum())}); raise cells"
        )
    take = np.arange(n_cells) % len(ordered)
    return ordered.iloc[take].reset_index(drop=True)


def to_verl_rows(cells: pd.DataFrame, split: str) -> pd.DataFrame:
    """verl's RL dataset schema: prompt (chat list), data_source, reward_model, extra_info."""
    extra = cells[names.EXTRA_INFO] if names.EXTRA_INFO in cells.columns else [{}] * len(cells)
    infos = []
    worlds = cells[names.WORLD_ID] if names.WORLD_ID in cells.columns else [None] * len(cells)
    for i, (info, task, env, world) in enumerate(
        zip(extra, cells[names.TASK_ID], cells[names.ENV_ID], worlds, strict=True)
    ):
        merged = dict(info)
        merged.update({"index": i, "split": split, names.TASK_ID: task, names.ENV_ID: env})
        if world is not None:
            merged[names.WORLD_ID] = world
        infos.append(merged)
    out = pd.DataFrame(
        {
            names.DATA_SOURCE: cells[names.DATA_SOURCE].to_numpy(),
            names.PROMPT: list(cells[names.PROMPT]),
            names.REWARD_MODEL: list(cells[names.REWARD_MODEL]),
            names.EXTRA_INFO: infos,
        }
    )
    if names.AGENT_NAME in cells.columns:
        out[names.AGENT_NAME] = cells[names.AGENT_NAME].to_numpy()
    return out


def grid_runs(spec: SweepSpec) -> list[dict[str, Any]]:
    """One dict per distinct (n_envs, n_tasks, rollouts), with the sweep axes it serves; with
    ``[[grid.point]]`` entries, one per entry, in the spec's order, with its own seeds,
    models and algorithms (``None``: the spec's)."""
    if spec.explicit_points:
        return [
            {
                names.N_ENVS: p.n_envs,
                names.N_TASKS: p.n_tasks,
                names.ROLLOUTS: p.rollouts,
                names.SWEEP_AXIS: p.label,
                "seeds": p.seeds,
                "models": p.models,
                "algorithms": p.algorithms,
            }
            for p in spec.explicit_points
        ]
    points: dict[tuple[int, int, int], list[str]] = {}
    for axis in spec.axes:
        for value in spec.grid_points(axis):
            sizes = dict(spec.anchors)
            sizes[AXIS_COLUMNS[axis]] = value
            key = (sizes[names.N_ENVS], sizes[names.N_TASKS], sizes[names.ROLLOUTS])
            points.setdefault(key, []).append(axis)
    return [
        {names.N_ENVS: e, names.N_TASKS: t, names.ROLLOUTS: r, names.SWEEP_AXIS: "+".join(axes)}
        for (e, t, r), axes in sorted(points.items())
    ]


def run_id(model: str, algorithm: str, n_envs: int, n_tasks: int, rollouts: int, seed: int) -> str:
    """``<model>-<alg>-e<E>-t<T>-r<R>-s<seed>``: stable, file- and Ray-id-safe."""
    return f"{safe_token(model)}-{algorithm}-e{n_envs}-t{n_tasks}-r{rollouts}-s{seed}"


def train_file(n_envs: int, n_tasks: int) -> str:
    return f"data/train-e{n_envs}-t{n_tasks}.parquet"


def build_plan(
    spec: SweepSpec, pool: Pool
) -> tuple[pd.DataFrame, dict[str, pd.DataFrame], dict[str, Any]]:
    """Plan in memory: (manifest, {relative path: verl parquet frame}, report)."""
    units = count_units(pool, spec.count)
    split = split_holdout(pool, spec)
    orders = make_orders(split.train, spec.selection_seed, units)
    points = grid_runs(spec)
    files: dict[str, pd.DataFrame] = {VAL_FILE: to_verl_rows(split.val, "val")}
    data_points = _data_points(spec, pool, split, orders, units, points, files)
    manifest = pd.DataFrame(_manifest_rows(spec, points, data_points, len(split.val)))
    report = _plan_report(spec, pool, split, orders, units, data_points, len(manifest))
    return manifest, files, report


def _data_points(
    spec: SweepSpec,
    pool: Pool,
    split: Split,
    orders: Orders,
    units: CountResult,
    points: list[dict[str, Any]],
    files: dict[str, pd.DataFrame],
) -> dict[tuple[int, int], dict[str, Any]]:
    """Each distinct (environment ids, task ids) point's training cells, written into
    ``files`` as its verl parquet frame, and what the point counts (distinct units, worlds,
    cells, repeats)."""
    world_of = (
        split.train.drop_duplicates(names.ENV_ID).set_index(names.ENV_ID)[names.WORLD_ID]
        if pool.has_worlds
        else None
    )
    data_points: dict[tuple[int, int], dict[str, Any]] = {}
    for point in points:
        key = (point[names.N_ENVS], point[names.N_TASKS])
        if key in data_points:
            continue
        cells = select_cells(
            split.train, orders, *key, spec.cells, spec.selection_seed, pool.source
        )
        files[train_file(*key)] = to_verl_rows(cells, "train")
        distinct = cells.drop_duplicates([names.TASK_ID, names.ENV_ID])
        available = split.train[
            split.train[names.ENV_ID].isin(orders.envs[: key[0]])
            & split.train[names.TASK_ID].isin(orders.tasks[: key[1]])
        ]
        n_worlds = None
        if world_of is not None:
            n_worlds = int(world_of.loc[list(orders.envs[: key[0]])].nunique())
        data_points[key] = {
            names.ENV_IDS: key[0],
            names.TASK_IDS: key[1],
            names.N_ENVS: n_distinct(orders.envs[: key[0]], units.env_unit),
            names.N_TASKS: n_distinct(orders.tasks[: key[1]], units.task_unit),
            names.N_WORLDS: n_worlds,
            "available_cells": len(available),
            "distinct_cells": len(distinct),
            "rows": len(cells),
            "repeats": round(len(cells) / len(distinct), 3),
            "envs_covered": int(cells[names.ENV_ID].nunique()),
            "tasks_covered": int(cells[names.TASK_ID].nunique()),
        }
    return data_points


def _manifest_rows(
    spec: SweepSpec,
    points: list[dict[str, Any]],
    data_points: dict[tuple[int, int], dict[str, Any]],
    val_size: int,
) -> list[dict[str, Any]]:
    """One manifest row per (model, algorithm, grid point, seed), planned and never run."""
    rows = []
    for model in spec.models:
        for algorithm in spec.algorithms:
            for point in points:
                if model.name not in (point.get("models") or [model.name]) or algorithm not in (
                    point.get("algorithms") or [algorithm]
                ):
                    continue
                dp = data_points[(point[names.N_ENVS], point[names.N_TASKS])]
                for seed in point.get("seeds") or spec.seeds:
                    rows.append(_run_row(spec, model, algorithm, point, dp, seed, val_size))
    return rows


def _run_row(
    spec: SweepSpec,
    model: ModelEntry,
    algorithm: str,
    point: dict[str, Any],
    dp: dict[str, Any],
    seed: int,
    val_size: int,
) -> dict[str, Any]:
    """The manifest row of one run: its id, what it trains on, and its first attempt."""
    rid = run_id(
        model.name,
        algorithm,
        point[names.N_ENVS],
        point[names.N_TASKS],
        point[names.ROLLOUTS],
        seed,
    )
    return {
        names.RUN_ID: rid,
        names.SWEEP_AXIS: point[names.SWEEP_AXIS],
        names.MODEL: model.name,
        names.MODEL_PATH: model.path,
        names.PARAMS_B: model.params_b,
        names.ALGORITHM: algorithm,
        names.DOMAIN: spec.domain,
        names.REWARD: spec.reward,
        names.N_ENVS: dp[names.N_ENVS],
        names.N_TASKS: dp[names.N_TASKS],
        names.ROLLOUTS: point[names.ROLLOUTS],
        names.N_WORLDS: dp[names.N_WORLDS],
        names.ENV_IDS: dp[names.ENV_IDS],
        names.TASK_IDS: dp[names.TASK_IDS],
        names.SEED: seed,
        names.N_CELLS: spec.cells,
        names.UPDATES: spec.updates,
        names.TRAIN_BATCH_SIZE: spec.train_batch_size,
        names.VAL_SIZE: val_size,
        names.VAL_N: spec.verl.val_n,
        names.N_GPUS: spec.verl.gpus_per_run,
        names.TRAIN_PATH: train_file(point[names.N_ENVS], point[names.N_TASKS]),
        names.VAL_PATH: VAL_FILE,
        names.LOG_PATH: mf.attempt_log(rid, 1),
        names.STATUS: mf.PLANNED,
        names.ATTEMPT: 1,
        names.JOB_ID: "",
        names.MESSAGE: "",
        names.UPDATED_AT: mf.now(),
    }


def _same_unit_in_training(split: Split, units: CountResult) -> list[str]:
    """Held-out ids whose task statement / structural signature also trains, per held column
    (a world holdout's by its environments)."""
    checked = [
        names.ENV_ID if column == names.WORLD_ID else column for column in HOLDOUT_COLUMNS[split.by]
    ]
    duplicated_in_training = []
    for held_column in checked:
        held_unit = units.task_unit if held_column == names.TASK_ID else units.env_unit
        train_units = {held_unit.get(i, i) for i in split.train[held_column].unique()}
        duplicated_in_training += sorted(
            str(i) for i in split.val[held_column].unique() if held_unit.get(i, i) in train_units
        )
    return duplicated_in_training


def _plan_report(
    spec: SweepSpec,
    pool: Pool,
    split: Split,
    orders: Orders,
    units: CountResult,
    data_points: dict[tuple[int, int], dict[str, Any]],
    n_runs: int,
) -> dict[str, Any]:
    """The plan's report: the pool, the holdout, how units were counted, the grid and the
    alignment of cells, updates and batch size across runs."""
    duplicated_in_training = _same_unit_in_training(split, units)
    differ = [
        dp
        for dp in (data_points[k] for k in sorted(data_points))
        if (dp[names.ENV_IDS], dp[names.TASK_IDS]) != (dp[names.N_ENVS], dp[names.N_TASKS])
    ]
    return {
        "sweep": spec.name,
        "sweep_uid": uuid.uuid4().hex,
        "pool": {
            "source": str(pool.source),
            "cells": len(pool.frame),
            "tasks": int(pool.frame[names.TASK_ID].nunique()),
            "envs": int(pool.frame[names.ENV_ID].nunique()),
            "distinct_tasks": units.tasks,
            "distinct_envs": units.envs,
            "worlds": int(pool.frame[names.WORLD_ID].nunique()) if pool.has_worlds else None,
        },
        "holdout": {
            "by": split.by,
            "held_out": list(split.held_out),
            "held_ids": {column: list(ids) for column, ids in split.held.items()},
            "val_cells": len(split.val),
            # task+env: cells with exactly one held unit, in neither training nor validation
            "set_aside_cells": split.set_aside,
            "val_sources": {
                str(k): int(v)
                for k, v in split.val[names.DATA_SOURCE].value_counts().sort_index().items()
            },
            "train_envs": len(orders.envs),
            "train_tasks": len(orders.tasks),
            "train_distinct_envs": n_distinct(orders.envs, units.env_unit),
            "train_distinct_tasks": n_distinct(orders.tasks, units.task_unit),
            "same_unit_in_training": duplicated_in_training,
        },
        "counting": {
            names.N_ENVS: (
                "distinct structural signatures"
                if any(c in pool.frame.columns for c in (*names.SIGNATURE_FIELDS, names.SIGNATURE))
                else "env ids (the pool has no structural signature columns)"
            ),
            names.N_TASKS: (
                "task ids (no embeddings: add an 'embedding' column or [count] model)"
                if units.embedding_source == "no embeddings"
                else f"distinct statements, near-duplicates at cosine distance <= "
                f"{units.threshold:g} merged ({units.embedding_source})"
            ),
            "notes": list(units.notes),
            "ids_differ": [
                {k: dp[k] for k in (names.ENV_IDS, names.N_ENVS, names.TASK_IDS, names.N_TASKS)}
                for dp in differ
            ],
        },
        "grid": (
            {"point": [f"e{p.n_envs}-t{p.n_tasks}-r{p.rollouts}" for p in spec.explicit_points]}
            if spec.explicit_points
            else {axis: list(spec.grid_points(axis)) for axis in spec.axes}
        ),
        "anchors": dict(spec.anchors),
        "alignment": {
            "cells_per_run": spec.cells,
            "updates": spec.updates,
            "train_batch_size": spec.train_batch_size,
            "verl": {
                "data.train_max_samples": spec.cells,
                "data.train_batch_size": spec.train_batch_size,
                "trainer.total_training_steps": spec.updates,
            },
            "note": (
                "Every environment and task grid point trains on the same number of "
                "task-environment cells and updates; only the rollout axis changes the number "
                "of trajectories per cell (cells x rollouts), hence tokens. verl drops prompts "
                "longer than data.max_prompt_length (filter_overlong_prompts): check "
                "'dataset len' in each run's log if prompts are long."
            ),
            "data_points": [data_points[k] for k in sorted(data_points)],
        },
        "runs": n_runs,
    }


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _umask() -> int:
    """The process umask (read by setting it and putting it back)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def write_sweep(
    sweep_dir: str | Path,
    manifest: pd.DataFrame,
    files: dict[str, pd.DataFrame],
    report: dict[str, Any],
    spec_text: str,
    overwrite: bool = False,
) -> Path:
    """Write the sweep directory atomically: built beside it, then renamed into place.

    ``overwrite`` replaces an earlier *plan*: never a directory that holds no sweep (its
    files would be lost), nor a sweep whose runs have written anything (logs, results)."""
    target = Path(sweep_dir).resolve()
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} exists; pass --force to replace the whole sweep directory")
    if target.exists():
        _check_replaceable(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"))
    try:
        for relative, frame in files.items():
            path = tmp / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            frame.to_parquet(path, index=False)
        for rid in manifest[names.RUN_ID]:
            (tmp / "runs" / rid).mkdir(parents=True)
        (tmp / mf.SPEC_COPY).write_text(spec_text, encoding="utf-8")
        (tmp / mf.PLAN_REPORT).write_text(json.dumps(report, indent=2, default=str) + "\n")
        manifest.to_csv(tmp / mf.MANIFEST, index=False)
        tmp.chmod(0o777 & ~_umask())  # mkdtemp makes it 0700; a sweep is shared like any folder
        if target.exists():
            old = Path(
                tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".old")
            )
            os.rmdir(old)
            os.replace(target, old)
            os.replace(tmp, target)
            shutil.rmtree(old)
        else:
            os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return target


def _check_replaceable(target: Path) -> None:
    """Refuse, even with ``--force``, to replace what is not a plan that nothing ran from:
    a folder without a sweep's manifest and plan, one holding files a plan does not write,
    a sweep with runs launched (a status past ``planned``, a job id) or files under runs."""
    if not target.is_dir():
        raise FileExistsError(
            f"{target} exists and is not a sweep directory; refusing to replace it"
        )
    if not any(target.iterdir()):
        return
    refuse = "refusing to replace it, even with --force"
    if not (target / mf.MANIFEST).is_file() or not (target / mf.PLAN_REPORT).is_file():
        raise FileExistsError(
            f"{target} holds no bayesscale sweep (no {mf.MANIFEST} and {mf.PLAN_REPORT}); "
            f"{refuse}: choose another --out"
        )
    own = {mf.MANIFEST, mf.PLAN_REPORT, mf.SPEC_COPY, "data", "runs"}
    foreign = sorted(p.name for p in target.iterdir() if p.name not in own)
    if foreign:
        raise FileExistsError(
            f"{target}: holds {', '.join(foreign[:3])}, which no plan writes; {refuse}: move "
            "them out first"
        )
    runs = target / "runs"
    written = [p for p in runs.rglob("*") if p.is_file()] if runs.is_dir() else []
    if written:
        raise FileExistsError(
            f"{target}: its runs hold {len(written)} file(s) (e.g. "
            f"{written[0].relative_to(target)}); {refuse}: ingest them and move the folder "
            "away first"
        )
    manifest = mf.read_manifest(target)
    jobs = manifest.get(names.JOB_ID, pd.Series("", index=manifest.index)).astype(str)
    launched = manifest[(manifest[names.STATUS] != mf.PLANNED) | (jobs != "")]
    if len(launched):
        raise FileExistsError(
            f"{target}: {len(launched)} run(s) were launched (e.g. "
            f"{launched[names.RUN_ID].iloc[0]}, {launched[names.STATUS].iloc[0]}); {refuse}: "
            "their jobs would write into the new plan"
        )


def plan_sweep(spec: SweepSpec, sweep_dir: str | Path, overwrite: bool = False) -> PlanResult:
    """Read the spec's pool, plan every run and write the sweep directory."""
    pool = read_pool(spec.pool)
    manifest, files, report = build_plan(spec, pool)
    report["pool"]["sha256"] = _sha256(Path(spec.pool))
    target = write_sweep(
        sweep_dir, manifest, files, report, spec_copy_text(spec), overwrite=overwrite
    )
    return PlanResult(target, manifest, report)


def spec_copy_text(spec: SweepSpec) -> str:
    """The spec as the sweep directory keeps it (``sweep.toml``): its text with the pool path
    and the ``[verl] entrypoint`` (its ``./`` and ``../`` words) made absolute, as parsed from
    the spec's folder, so that ``launch`` reads the same from the sweep directory, from any
    working directory. Raises :class:`~bayesscale.verl.sweep.SpecError` when either is not
    written on one line of its own."""
    if not spec.text:
        return spec.text
    pool = str(Path(spec.pool).resolve())
    expected = tomllib.loads(spec.text)
    text = _set_key_line(spec.text, "", "pool", pool)
    expected["pool"] = pool
    verl = expected.get("verl")
    if isinstance(verl, dict) and verl.get("entrypoint", spec.verl.entrypoint) != (
        spec.verl.entrypoint
    ):
        text = _set_key_line(text, "verl", "entrypoint", spec.verl.entrypoint)
        verl["entrypoint"] = spec.verl.entrypoint
    try:
        same = tomllib.loads(text) == expected
    except tomllib.TOMLDecodeError:  # a value over several lines, cut after its first
        same = False
    if not same:
        raise SpecError(
            f"{spec.source}: cannot record the absolute pool path and [verl] entrypoint in the "
            f"sweep's copy of the spec; write each on one line of its own, as "
            'pool = "..." (before any table) and entrypoint = "..." (under [verl])'
        )
    return text


_TABLE = re.compile(r"\s*\[\s*([A-Za-z0-9_-]+)\s*\]\s*(#.*)?$")


def _set_key_line(text: str, table: str, key: str, value: str) -> str:
    """``text`` with the first line ``key = …`` of ``[table]`` (``""``: before any table)
    replaced by ``key = "value"``; unchanged where there is none."""
    lines = text.splitlines(keepends=True)
    current = ""
    assign = re.compile(rf"\s*{re.escape(key)}\s*=")
    for i, line in enumerate(lines):
        if line.lstrip().startswith("["):
            header = _TABLE.match(line)
            current = header.group(1) if header else "\0"  # [[array]] or quoted: not ours
        elif current == table and assign.match(line):
            end = line[len(line.rstrip("\r\n")) :]
            lines[i] = f"{key} = {json.dumps(value)}{end}"
            break
    return "".join(lines)
