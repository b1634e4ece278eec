"""The sweep spec: a TOML file saying what to sweep, around which anchors, how often.

Per-axis sweeps (PAPER.md §3): the two other axes sit at saturated anchors
(D_E, D_T, D_τ) = (256, 10,240, 8); the target axis takes ``points`` nested grid points
spanning a factor of ``span`` (default 6 over 32×), geometric:

    D_k = lo · span^(k/(points-1)),   lo = anchor/span   (lo = 1, top = span when anchor/span < 1)

so envs 8…256, tasks 320…10,240 and rollouts 1…32 by default. Every grid point of every
axis is crossed with ``seeds`` × ``algorithms`` × ``models``.

Example spec::

    name = "math-code"
    pool = "pool.jsonl"            # relative to this file
    domain = "math+code"
    reward = "sparse"
    seeds = [0, 1, 2]
    algorithms = ["grpo", "ppo"]

    [[models]]
    name = "qwen3-8b"
    path = "Qwen/Qwen3-8B"
    params_b = 8.0

    [anchors]                      # defaults 256 / 10240 / 8
    n_envs = 256
    n_tasks = 10240
    rollouts = 8

    [grid]                         # default: all three axes, 6 points over 32x
    axes = ["env", "task", "traj"]
    points = 6
    span = 32
    # env = [8, 16, 32, 64, 128, 256]   # explicit points override

    # Or, instead of per-axis sweeps, an explicit list of grid points (what `bayesscale next`
    # writes); each is crossed with its own seeds, models and algorithms (default: the
    # spec's), and `label` becomes the manifest's sweep_axis:
    # [[grid.point]]
    # n_envs = 512
    # n_tasks = 10240
    # rollouts = 8
    # seeds = [3, 4]
    # models = ["qwen3-8b"]
    # algorithms = ["grpo"]
    # label = "next:env"

    [alignment]                    # same cells and updates at every grid point
    cells = 256000
    updates = 1000

    [holdout]
    by = "task"                    # task | env | world | task+env
    fraction = 0.1                 # or: count = 50
    selection_seed = 0

    [count]                        # how n_envs / n_tasks count distinct units (as `count`)
    model = "all-MiniLM-L6-v2"     # or a model folder/zip; default: the pool's embedding column
    threshold = 0.15               # near-duplicate tasks: cosine distance <= threshold
    # embedding_column = "embedding"; text_column = "question"

    [verl]
    n_gpus_per_node = 8
    nnodes = 1
    test_freq = 100
    rollout_name = "vllm"
    val_n = 1
    ppo_mini_batch_size = 256
    entrypoint = "python3 -m verl.trainer.main_ppo"   # ./ and ../ words: relative to this file
    extra_overrides = ["data.max_prompt_length=2048"]

>>> spec = load_sweep_spec("data/verl_example/sweep.toml")  # doctest: +SKIP
>>> spec.grid_points("env")  # doctest: +SKIP
(1, 2, 4, 8, 16, 32)
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bayesscale import names
from bayesscale.tomlfile import non_finite, read_toml, type_name
from bayesscale.verl.count import DEFAULT_THRESHOLD
from bayesscale.verl.embed import MINILM

AXIS_COLUMNS = {names.ENV: names.N_ENVS, names.TASK: names.N_TASKS, names.TRAJ: names.ROLLOUTS}
DEFAULT_ANCHORS = {names.N_ENVS: 256, names.N_TASKS: 10_240, names.ROLLOUTS: 8}
DEFAULT_POINTS = 6
DEFAULT_SPAN = 32
DEFAULT_CELLS = 256_000
DEFAULT_UPDATES = 1_000
ALGORITHMS = {"grpo": "grpo", "ppo": "gae"}  # our name -> verl algorithm.adv_estimator
TASK_ENV = f"{names.TASK}+{names.ENV}"  # held tasks x held environments
HOLDOUT_BY = (names.TASK, names.ENV, "world", TASK_ENV)
DEFAULT_ENTRYPOINT = "python3 -m verl.trainer.main_ppo"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


class SpecError(ValueError):
    """A sweep spec that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class ModelEntry:
    name: str
    path: str
    params_b: float | None = None


@dataclass(frozen=True)
class Holdout:
    by: str = names.TASK
    fraction: float | None = 0.1
    count: int | None = None
    max_val_cells: int | None = None


@dataclass(frozen=True)
class CountSettings:
    """How the plan counts distinct tasks (``bayesscale count``'s options).

    With neither ``model`` nor ``embedding_column`` the pool's ``embedding`` column is used
    when it has one; otherwise tasks are counted by id and the plan says so.
    """

    model: str | None = None
    embedding_column: str | None = None
    text_column: str | None = None
    threshold: float = DEFAULT_THRESHOLD


@dataclass(frozen=True)
class VerlSettings:
    n_gpus_per_node: int = 8
    nnodes: int = 1
    test_freq: int = 100
    rollout_name: str = "vllm"
    val_n: int = 1
    ppo_mini_batch_size: int = 256
    entrypoint: str = DEFAULT_ENTRYPOINT
    project_name: str | None = None
    extra_overrides: tuple[str, ...] = ()

    @property
    def gpus_per_run(self) -> int:
        return self.n_gpus_per_node * self.nnodes


@dataclass(frozen=True)
class GridPoint:
    """One explicit grid point (``[[grid.point]]``): its sizes (ids selected), and the seeds,
    models and algorithms it runs with (``None``: the spec's)."""

    n_envs: int
    n_tasks: int
    rollouts: int
    seeds: tuple[int, ...] | None = None
    models: tuple[str, ...] | None = None
    algorithms: tuple[str, ...] | None = None
    label: str = "point"


@dataclass(frozen=True)
class SweepSpec:
    """A parsed, checked sweep spec; ``source`` is the file it came from."""

    name: str
    pool: Path
    models: tuple[ModelEntry, ...]
    domain: str = "default"
    reward: str = "sparse"
    seeds: tuple[int, ...] = (0, 1, 2)
    algorithms: tuple[str, ...] = ("grpo",)
    anchors: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_ANCHORS))
    axes: tuple[str, ...] = (names.ENV, names.TASK, names.TRAJ)
    points: int = DEFAULT_POINTS
    span: float = DEFAULT_SPAN
    explicit_grid: dict[str, tuple[int, ...]] = field(default_factory=dict)
    explicit_points: tuple[GridPoint, ...] = ()
    cells: int = DEFAULT_CELLS
    updates: int = DEFAULT_UPDATES
    holdout: Holdout = field(default_factory=Holdout)
    selection_seed: int = 0
    count: CountSettings = field(default_factory=CountSettings)
    verl: VerlSettings = field(default_factory=VerlSettings)
    source: str = "<spec>"
    text: str = ""

    def grid_points(self, axis: str) -> tuple[int, ...]:
        """The nested grid of one axis (sorted, distinct, integer)."""
        if axis in self.explicit_grid:
            return self.explicit_grid[axis]
        return geometric_grid(self.anchors[AXIS_COLUMNS[axis]], self.points, self.span)

    @property
    def train_batch_size(self) -> int:
        return self.cells // self.updates


def geometric_grid(anchor: int, points: int, span: float) -> tuple[int, ...]:
    """``points`` geometric sizes spanning ``span``x, ending at ``anchor`` (or 1..span).

    >>> geometric_grid(256, 6, 32)
    (8, 16, 32, 64, 128, 256)
    >>> geometric_grid(8, 6, 32)
    (1, 2, 4, 8, 16, 32)
    """
    lo = anchor / span
    if lo < 1:
        lo = 1.0
    values = [round(lo * span ** (k / (points - 1))) for k in range(points)]
    return tuple(sorted(set(int(v) for v in values)))


def safe_token(text: str) -> str:
    """A file- and job-id-safe version of a label (``Qwen/Qwen3-8B`` -> ``Qwen_Qwen3-8B``)."""
    return _SAFE.sub("_", text).strip("_") or "x"


def _take(
    table: dict[str, Any], key: str, kinds: type | tuple[type, ...], where: str, default: Any
) -> Any:
    if key not in table:
        return default
    value = table.pop(key)
    if isinstance(value, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)):
        raise SpecError(f"{where}: key {key!r} must be {type_name(kinds)}, got {value!r}")
    if not isinstance(value, kinds):
        raise SpecError(f"{where}: key {key!r} must be {type_name(kinds)}, got {value!r}")
    if non_finite(value):
        raise SpecError(f"{where}: key {key!r} must be a finite number, got {value!r}")
    return value


def _no_leftovers(table: dict[str, Any], where: str, allowed: list[str]) -> None:
    if table:
        raise SpecError(f"{where}: unknown key(s) {sorted(table)}; allowed: {sorted(allowed)}")


def _positive_int(value: Any, where: str, key: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise SpecError(f"{where}: key {key!r} must be a positive integer, got {value!r}")
    return value


def parse_sweep_spec(text: str, source: str = "<spec>", base: Path | None = None) -> SweepSpec:
    """Parse and check spec text; paths are relative to ``base`` (the spec's folder)."""
    raw = read_toml(text, source, SpecError)
    base = base or Path(".")
    top = dict(raw)
    allowed_top = [
        "name", "pool", "domain", "reward", "seeds", "algorithms", "models",
        "anchors", "grid", "alignment", "holdout", "count", "verl",
    ]  # fmt: skip
    name = _take(top, "name", str, source, "sweep")
    pool = _take(top, "pool", str, source, None)
    if pool is None:
        raise SpecError(f"{source}: key 'pool' is required (path of the task pool)")
    domain = _take(top, "domain", str, source, "default")
    reward = _take(top, "reward", str, source, "sparse")
    if reward not in names.REWARD_LEVELS:
        raise SpecError(
            f"{source}: key 'reward' must be one of {names.REWARD_LEVELS}, got {reward!r}"
        )
    seeds = _take(top, "seeds", list, source, [0, 1, 2])
    if not seeds or any(not isinstance(s, int) or isinstance(s, bool) or s < 0 for s in seeds):
        raise SpecError(f"{source}: key 'seeds' must be a non-empty list of integers >= 0")
    if len(set(seeds)) != len(seeds):
        raise SpecError(f"{source}: key 'seeds' repeats a seed: {seeds}")
    algorithms = _take(top, "algorithms", list, source, ["grpo"])
    bad = [a for a in algorithms if a not in ALGORITHMS]
    if not algorithms or bad:
        raise SpecError(f"{source}: key 'algorithms': unknown {bad}; use {sorted(ALGORITHMS)}")

    models = _models(top, source)

    anchors = dict(DEFAULT_ANCHORS)
    table = dict(_take(top, "anchors", dict, source, {}))
    for column in list(anchors):
        if column in table:
            anchors[column] = _positive_int(table.pop(column), f"{source}: [anchors]", column)
    _no_leftovers(table, f"{source}: [anchors]", list(DEFAULT_ANCHORS))

    grid = dict(_take(top, "grid", dict, source, {}))
    where = f"{source}: [grid]"
    given = sorted(k for k in grid if k != "point")
    axes = tuple(_take(grid, "axes", list, where, list(AXIS_COLUMNS)))
    bad = [a for a in axes if a not in AXIS_COLUMNS]
    if not axes or bad:
        raise SpecError(f"{where}: key 'axes': unknown {bad}; use {list(AXIS_COLUMNS)}")
    points = _positive_int(_take(grid, "points", int, where, DEFAULT_POINTS), where, "points")
    if points < 2:
        raise SpecError(f"{where}: key 'points' must be >= 2")
    span = _take(grid, "span", (int, float), where, DEFAULT_SPAN)
    if span <= 1:
        raise SpecError(f"{where}: key 'span' must be > 1")
    explicit = {}
    for axis in AXIS_COLUMNS:
        if axis in grid:
            values = grid.pop(axis)
            if not isinstance(values, list) or not values:
                raise SpecError(f"{where}: key {axis!r} must be a list of positive integers")
            explicit[axis] = tuple(sorted({_positive_int(v, where, axis) for v in values}))
    point_list = _grid_point_list(grid, where, given, seeds, algorithms, models)
    if point_list:
        axes = ()
    _no_leftovers(grid, where, ["axes", "points", "span", "point", *AXIS_COLUMNS])

    cells, updates = _alignment(top, source)

    holdout, selection_seed = _holdout(top, source)

    count_settings = _count_settings(top, source, base)

    verl = _verl_settings(top, source, base)
    _no_leftovers(top, source, allowed_top)

    pool_path = Path(pool)
    if not pool_path.is_absolute():
        pool_path = base / pool_path
    return SweepSpec(
        name=name,
        pool=pool_path,
        models=tuple(models),
        domain=domain,
        reward=reward,
        seeds=tuple(seeds),
        algorithms=tuple(algorithms),
        anchors=anchors,
        axes=axes,
        points=points,
        span=float(span),
        explicit_grid=explicit,
        explicit_points=point_list,
        cells=cells,
        updates=updates,
        holdout=holdout,
        selection_seed=selection_seed,
        count=count_settings,
        verl=verl,
        source=source,
        text=text,
    )


def _models(top: dict[str, Any], source: str) -> list[ModelEntry]:
    """The ``[[models]]`` entries: name, path for verl, size in billions."""
    models = []
    for i, entry in enumerate(_take(top, "models", list, source, [])):
        where = f"{source}: [[models]] #{i + 1}"
        if not isinstance(entry, dict):
            raise SpecError(f"{where}: expected a table")
        entry = dict(entry)
        path = _take(entry, "path", str, where, None)
        if path is None:
            raise SpecError(f"{where}: key 'path' is required (model path for verl)")
        mname = _take(entry, "name", str, where, path.rstrip("/").split("/")[-1])
        params = _take(entry, "params_b", (int, float), where, None)
        if params is not None and params <= 0:
            raise SpecError(f"{where}: key 'params_b' must be > 0")
        _no_leftovers(entry, where, ["name", "path", "params_b"])
        models.append(ModelEntry(mname, path, None if params is None else float(params)))
    if not models:
        raise SpecError(
            f"{source}: at least one [[models]] entry (name, path, params_b) is required"
        )
    if len({m.name for m in models}) != len(models):
        raise SpecError(f"{source}: [[models]] names must be distinct")
    return models


def _alignment(top: dict[str, Any], source: str) -> tuple[int, int]:
    """``[alignment]``: the cells and updates every run trains on."""
    align = dict(_take(top, "alignment", dict, source, {}))
    where = f"{source}: [alignment]"
    cells = _positive_int(_take(align, "cells", int, where, DEFAULT_CELLS), where, "cells")
    updates = _positive_int(_take(align, "updates", int, where, DEFAULT_UPDATES), where, "updates")
    _no_leftovers(align, where, ["cells", "updates"])
    if cells % updates:
        raise SpecError(
            f"{where}: cells ({cells}) must be a multiple of updates ({updates}): "
            "each update takes cells/updates task-environment cells (verl's data.train_batch_size)"
        )
    return cells, updates


def _holdout(top: dict[str, Any], source: str) -> tuple[Holdout, int]:
    """``[holdout]``: the held-out split and the seed of its selection."""
    hold = dict(_take(top, "holdout", dict, source, {}))
    where = f"{source}: [holdout]"
    by = _take(hold, "by", str, where, names.TASK)
    if by not in HOLDOUT_BY:
        raise SpecError(f"{where}: key 'by' must be one of {HOLDOUT_BY}, got {by!r}")
    fraction = _take(hold, "fraction", (int, float), where, None)
    count = _take(hold, "count", int, where, None)
    if fraction is not None and count is not None:
        raise SpecError(f"{where}: give 'fraction' or 'count', not both")
    if fraction is None and count is None:
        fraction = 0.1
    if fraction is not None and not 0 < fraction < 1:
        raise SpecError(f"{where}: key 'fraction' must lie in (0, 1), got {fraction!r}")
    if count is not None:
        _positive_int(count, where, "count")
    max_val = _take(hold, "max_val_cells", int, where, None)
    if max_val is not None:
        _positive_int(max_val, where, "max_val_cells")
    selection_seed = _take(hold, "selection_seed", int, where, 0)
    _no_leftovers(hold, where, ["by", "fraction", "count", "max_val_cells", "selection_seed"])
    return Holdout(by=by, fraction=fraction, count=count, max_val_cells=max_val), selection_seed


def _count_settings(top: dict[str, Any], source: str, base: Path) -> CountSettings:
    """``[count]``: how tasks are embedded and merged when counting distinct units."""
    ct = dict(_take(top, "count", dict, source, {}))
    where = f"{source}: [count]"
    model = _take(ct, "model", str, where, None)
    if model is not None and model != MINILM and not Path(model).is_absolute():
        model = str(base / model)
    threshold = _take(ct, "threshold", (int, float), where, DEFAULT_THRESHOLD)
    if not 0 <= threshold < 2:
        raise SpecError(
            f"{where}: key 'threshold' is a cosine distance in [0, 2), got {threshold!r}"
        )
    count_settings = CountSettings(
        model=model,
        embedding_column=_take(ct, "embedding_column", str, where, None),
        text_column=_take(ct, "text_column", str, where, None),
        threshold=float(threshold),
    )
    if count_settings.model is not None and count_settings.embedding_column is not None:
        raise SpecError(f"{where}: give 'model' or 'embedding_column', not both")
    _no_leftovers(ct, where, ["model", "embedding_column", "text_column", "threshold"])
    return count_settings


def _verl_settings(top: dict[str, Any], source: str, base: Path) -> VerlSettings:
    """``[verl]``: the trainer settings every run shares (``entrypoint`` words that start
    with ``./`` or ``../`` made absolute against ``base``)."""
    vt = dict(_take(top, "verl", dict, source, {}))
    where = f"{source}: [verl]"
    default = VerlSettings()
    extra = _take(vt, "extra_overrides", list, where, [])
    if any(not isinstance(o, str) or "=" not in o for o in extra):
        raise SpecError(f"{where}: key 'extra_overrides' must be a list of 'key=value' strings")
    verl = VerlSettings(
        n_gpus_per_node=_positive_int(
            _take(vt, "n_gpus_per_node", int, where, default.n_gpus_per_node),
            where,
            "n_gpus_per_node",
        ),
        nnodes=_positive_int(_take(vt, "nnodes", int, where, default.nnodes), where, "nnodes"),
        test_freq=_positive_int(
            _take(vt, "test_freq", int, where, default.test_freq), where, "test_freq"
        ),
        rollout_name=_take(vt, "rollout_name", str, where, default.rollout_name),
        val_n=_positive_int(_take(vt, "val_n", int, where, default.val_n), where, "val_n"),
        ppo_mini_batch_size=_positive_int(
            _take(vt, "ppo_mini_batch_size", int, where, default.ppo_mini_batch_size),
            where,
            "ppo_mini_batch_size",
        ),
        entrypoint=resolve_entrypoint(
            _take(vt, "entrypoint", str, where, default.entrypoint), base, where
        ),
        project_name=_take(vt, "project_name", str, where, None),
        extra_overrides=tuple(extra),
    )
    _no_leftovers(
        vt,
        where,
        [
            "n_gpus_per_node", "nnodes", "test_freq", "rollout_name", "val_n",
            "ppo_mini_batch_size", "entrypoint", "project_name", "extra_overrides",
        ],
    )  # fmt: skip
    return verl


def resolve_entrypoint(entrypoint: str, base: Path, where: str = "[verl]") -> str:
    """The command line with every word that starts with ``./`` or ``../`` made absolute
    against ``base`` (the spec's folder, its links followed; the word's own path is kept, so
    a virtual environment's ``bin/python`` link stays the one named); other words as given.
    Unchanged when no word is relative; raises :class:`SpecError` for a line ``shlex`` cannot
    split or one without a word.

    >>> resolve_entrypoint("../venv/bin/python ./train.py -m x", Path("/lab/specs"))
    '/lab/venv/bin/python /lab/specs/train.py -m x'
    """
    try:
        words = shlex.split(entrypoint)
    except ValueError as exc:
        raise SpecError(
            f"{where}: key 'entrypoint' is not a command line ({exc}): {entrypoint!r}"
        ) from None
    if not words:
        raise SpecError(f"{where}: key 'entrypoint' is empty; name the command that trains")
    resolved = [_from_base(w, base) if w.startswith(("./", "../")) else w for w in words]
    return entrypoint if resolved == words else shlex.join(resolved)


def _from_base(word: str, base: Path) -> str:
    """``word`` (``./…`` or ``../…``) as an absolute path from ``base``: its leading ``.``
    and ``..`` parts walk from the real folder, the rest is appended as written."""
    here = base.resolve()
    parts = word.split("/")
    while parts and parts[0] in (".", ".."):
        if parts.pop(0) == "..":
            here = here.parent
    rest = "/".join(parts)
    return str(here / rest) if rest else str(here)


def _grid_point_list(
    grid: dict[str, Any],
    where: str,
    given: list[str],
    seeds: list[int],
    algorithms: list[str],
    models: list[ModelEntry],
) -> tuple[GridPoint, ...]:
    """``[[grid.point]]`` entries, checked; they replace the per-axis sweeps, so the per-axis
    keys may not accompany them."""
    if "point" not in grid:
        return ()
    raw = grid.pop("point")
    if not isinstance(raw, list) or not raw or not all(isinstance(e, dict) for e in raw):
        raise SpecError(f"{where}: [[grid.point]] must be a non-empty list of tables")
    if given:
        raise SpecError(
            f"{where}: [[grid.point]] lists the grid points explicitly; remove {given} "
            "(per-axis sweep keys)"
        )
    model_names = [m.name for m in models]
    out = []
    seen: set[tuple[str, str, int, int, int, int]] = set()
    for i, entry in enumerate(raw):
        at = f"{where}: [[grid.point]] #{i + 1}"
        entry = dict(entry)
        sizes = []
        for column in (names.N_ENVS, names.N_TASKS, names.ROLLOUTS):
            if column not in entry:
                raise SpecError(f"{at}: key {column!r} is required")
            sizes.append(_positive_int(entry.pop(column), at, column))
        own_seeds = _take(entry, "seeds", list, at, None)
        if own_seeds is not None and (
            not own_seeds
            or any(not isinstance(s, int) or isinstance(s, bool) or s < 0 for s in own_seeds)
            or len(set(own_seeds)) != len(own_seeds)
        ):
            raise SpecError(f"{at}: key 'seeds' must be a non-empty list of distinct integers >= 0")
        own_models = _take(entry, "models", list, at, None)
        if own_models is not None and (not own_models or set(own_models) - set(model_names)):
            raise SpecError(
                f"{at}: key 'models' must name [[models]] entries {model_names}, got {own_models}"
            )
        own_algs = _take(entry, "algorithms", list, at, None)
        if own_algs is not None and (not own_algs or set(own_algs) - set(algorithms)):
            raise SpecError(
                f"{at}: key 'algorithms' must be among the spec's algorithms {algorithms}, "
                f"got {own_algs}"
            )
        label = _take(entry, "label", str, at, "point")
        _no_leftovers(
            entry,
            at,
            [names.N_ENVS, names.N_TASKS, names.ROLLOUTS, "seeds", "models", "algorithms", "label"],
        )
        point = GridPoint(
            n_envs=sizes[0],
            n_tasks=sizes[1],
            rollouts=sizes[2],
            seeds=None if own_seeds is None else tuple(own_seeds),
            models=None if own_models is None else tuple(own_models),
            algorithms=None if own_algs is None else tuple(own_algs),
            label=label,
        )
        for m in point.models or model_names:
            for a in point.algorithms or algorithms:
                for s in point.seeds or seeds:
                    key = (m, a, sizes[0], sizes[1], sizes[2], s)
                    if key in seen:
                        raise SpecError(
                            f"{at}: run {m} {a} n_envs={sizes[0]} n_tasks={sizes[1]} "
                            f"rollouts={sizes[2]} seed {s} is listed twice"
                        )
                    seen.add(key)
        out.append(point)
    return tuple(out)


def load_sweep_spec(path: str | Path) -> SweepSpec:
    """Read a sweep spec TOML file (relative paths in it are relative to the file)."""
    path = Path(path)
    if not path.exists():
        raise SpecError(f"{path}: no such file")
    return parse_sweep_spec(path.read_text(encoding="utf-8"), source=str(path), base=path.parent)


def holdout_count(total: int, holdout: Holdout) -> int:
    """Number of held-out units: ``count``, or ``ceil(fraction * total)`` (at least 1)."""
    if holdout.count is not None:
        return holdout.count
    fraction = holdout.fraction if holdout.fraction is not None else 0.1
    return max(1, math.ceil(fraction * total))
