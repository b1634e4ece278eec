"""The chosen batch as a sweep file that ``bayesscale plan`` accepts.

The new file copies a base sweep spec (pool, models, algorithms, alignment, held-out split,
counting, verl settings) and replaces its ``[grid]`` with one ``[[grid.point]]`` per chosen
(setting, sizes), restricted to the setting's model and algorithm, with the seeds of its runs
(:mod:`bayesscale.verl.sweep`). Seeds start after the base spec's largest seed (its
``[[grid.point]]`` seeds included), so the new runs' ids never collide with the old sweep's when
ingested into the same observation table. Paths in the base spec (the pool, a ``[count] model``
folder, the ``./`` and ``../`` words of the ``[verl] entrypoint``) are made absolute.
``bayesscale recipe --sweep-out`` writes its decision with the same pieces
(``bayesscale.design.decision_sweep``).

Example
-------
>>> text = toml_text({"name": "x", "grid": {"point": [{"n_envs": 2, "seeds": [3]}]}})
>>> print(text)
name = "x"
<BLANKLINE>
[[grid.point]]
n_envs = 2
seeds = [3]
<BLANKLINE>
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bayesscale import names
from bayesscale.design.results import ChosenRun, DesignError
from bayesscale.verl.embed import MINILM
from bayesscale.verl.sweep import AXIS_COLUMNS, SweepSpec

RUNNABLE = tuple(AXIS_COLUMNS.values())


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def toml_text(data: Mapping[str, Any], prefix: str = "") -> str:
    """A small TOML writer for sweep specs: scalars, lists of scalars, tables and arrays of
    tables (what :func:`bayesscale.verl.sweep.parse_sweep_spec` reads)."""
    lines = []
    tables = []
    for key, v in data.items():
        if isinstance(v, dict) or (isinstance(v, list) and v and not _plain(v)):
            tables.append((key, v))
        else:
            lines.append(f"{key} = {_value(v)}")
    out = "\n".join(lines) + ("\n" if lines else "")
    for key, v in tables:
        name = f"{prefix}{key}"
        if isinstance(v, dict):
            inner = toml_text(v, prefix=f"{name}.")
            scalars = {k: x for k, x in v.items() if not isinstance(x, dict | list) or _plain(x)}
            if scalars or not inner:
                out += f"\n[{name}]\n"
            out += inner
        else:
            for entry in v:
                out += f"\n[[{name}]]\n" + toml_text(entry, prefix=f"{name}.")
    return out


def _plain(x: Any) -> bool:
    return isinstance(x, list) and not (x and all(isinstance(e, dict) for e in x))


def sweep_points(
    chosen: Sequence[ChosenRun],
    axes: Sequence[str],
    columns: Mapping[str, str],
    setting_keys: Mapping[str, Mapping[str, Any]],
    spec: SweepSpec,
) -> list[dict[str, Any]]:
    """``[[grid.point]]`` tables for the chosen runs (one per setting and size, seeds
    ``first_seed(spec) + repeat``); raises
    :class:`~bayesscale.design.results.DesignError` for a run the base spec
    cannot launch (an axis plan does not sweep, or a setting outside its models, algorithms
    and domain)."""
    check_axes(axes, columns)
    first = first_seed(spec)
    points: dict[tuple[str, tuple[int, ...]], dict[str, Any]] = {}
    for run in chosen:
        c = run.candidate
        if (c.setting, c.sizes) not in points:
            sizes = {columns[a]: int(s) for a, s in zip(axes, c.sizes, strict=True)}
            points[(c.setting, c.sizes)] = grid_point(
                c.setting, sizes, setting_keys[c.setting], spec, [], f"next:{c.axis}"
            )
        points[(c.setting, c.sizes)]["seeds"].append(first + run.repeat)
    return list(points.values())


def check_axes(axes: Sequence[str], columns: Mapping[str, str]) -> None:
    """Raise unless every axis counts a column ``plan`` sweeps (``n_envs``, ``n_tasks``,
    ``rollouts``)."""
    missing = [a for a in axes if columns[a] not in RUNNABLE]
    if missing:
        raise DesignError(
            f"axis/axes {missing} are not columns plan can sweep ({list(RUNNABLE)}): "
            "the runs cannot be written as a sweep file"
        )


def first_seed(spec: SweepSpec) -> int:
    """The seed after every seed the base spec runs (its ``seeds`` and those of its
    ``[[grid.point]]`` entries), so new runs' ids never collide with its runs'."""
    own = [s for p in spec.explicit_points for s in p.seeds or ()]
    return max([*spec.seeds, *own]) + 1


def grid_point(
    setting: str,
    sizes: Mapping[str, int],
    keys: Mapping[str, Any],
    spec: SweepSpec,
    seeds: Sequence[int],
    label: str,
) -> dict[str, Any]:
    """One ``[[grid.point]]`` table: ``sizes`` (column -> whole number), ``seeds``, the
    setting's model and algorithm, ``label`` (the manifest's sweep_axis); raises
    :class:`~bayesscale.design.results.DesignError` unless the base spec runs the
    setting (:func:`check_runnable`)."""
    check_runnable(setting, keys, spec)
    return {
        **{column: int(n) for column, n in sizes.items()},
        "seeds": list(seeds),
        "models": [str(keys.get(names.MODEL))],
        "algorithms": [str(keys.get(names.ALGORITHM))],
        "label": label,
    }


def pool_caps(spec: SweepSpec) -> dict[str, int]:
    """How many distinct environments (``n_envs``) and tasks (``n_tasks``) the base spec's pool
    holds for training (after its held-out split), counted as ``plan`` counts them (the spec's
    ``[count]``: structural signatures, near-duplicate-merged statements): the largest sizes a
    run of it can have. ``plan`` selects ids one of every distinct unit before a second of any,
    so a size within these caps, written as a ``[[grid.point]]``, is the ``n_envs`` /
    ``n_tasks`` it realises; more ids than that add copies, not units. Per axis
    (``max_sizes`` of :func:`~bayesscale.design.next_runs.next_runs`):
    ``{a: caps[c] for a, c in columns.items() if c in caps}``."""
    from bayesscale.verl.plan import count_units, split_holdout
    from bayesscale.verl.pool import read_pool

    pool = read_pool(spec.pool)
    return train_caps(split_holdout(pool, spec), count_units(pool, spec.count))


def train_caps(split: Any, units: Any) -> dict[str, int]:
    """The distinct environments and tasks of a pool's training split (``split.train``, from
    :func:`~bayesscale.verl.plan.split_holdout`; ``units`` from
    :func:`~bayesscale.verl.plan.count_units` on the same pool), by column: what
    :func:`pool_caps` returns."""
    from bayesscale.verl.plan import n_distinct

    return {
        names.N_ENVS: n_distinct(split.train[names.ENV_ID].unique().tolist(), units.env_unit),
        names.N_TASKS: n_distinct(split.train[names.TASK_ID].unique().tolist(), units.task_unit),
    }


def check_runnable(setting: str, keys: Mapping[str, Any], spec: SweepSpec) -> None:
    """Raise unless the base sweep spec has the setting's model, algorithm and domain."""
    model, algorithm = keys.get(names.MODEL), keys.get(names.ALGORITHM)
    domain = keys.get(names.DOMAIN)
    problems = []
    if model not in [m.name for m in spec.models]:
        problems.append(
            f"model {model!r} is not among its [[models]] {[m.name for m in spec.models]}"
        )
    if algorithm not in spec.algorithms:
        problems.append(f"algorithm {algorithm!r} is not among {list(spec.algorithms)}")
    if domain is not None and domain != spec.domain:
        problems.append(f"domain {domain!r} is not its domain {spec.domain!r}")
    if problems:
        raise DesignError(f"{spec.source}: cannot run setting {setting!r}: " + "; ".join(problems))


def runnable_settings(
    settings: Sequence[str], setting_keys: Mapping[str, Mapping[str, Any]], spec: SweepSpec
) -> list[str]:
    """The settings the base sweep spec can launch."""
    out = []
    for s in settings:
        try:
            check_runnable(s, setting_keys[s], spec)
        except DesignError:
            continue
        out.append(s)
    return out


def next_sweep_text(
    spec: SweepSpec, points: list[dict[str, Any]], note: str = "", suffix: str = "next"
) -> str:
    """The base spec with its grid replaced by ``points`` (``[[grid.point]]``), as TOML,
    named ``<base name>-<suffix>``, ``note`` as comment lines at the top."""
    raw = tomllib.loads(spec.text)
    raw["name"] = f"{spec.name}-{suffix}"
    raw["pool"] = str(Path(spec.pool).resolve())
    if spec.count.model is not None and spec.count.model != MINILM:
        raw.setdefault("count", {})["model"] = str(Path(spec.count.model).resolve())
    if "entrypoint" in raw.get("verl", {}):  # its ./ and ../ words, made absolute
        raw["verl"]["entrypoint"] = spec.verl.entrypoint
    raw["grid"] = {"point": points}
    head = "".join(f"# {line}\n" for line in note.splitlines()) if note else ""
    return head + toml_text(raw)
