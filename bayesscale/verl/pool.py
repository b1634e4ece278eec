"""Task pools: one row per task-environment cell, in verl's RL dataset vocabulary.

A pool is a parquet or JSONL file with the columns

=================  ========  ==========================================================
column             required  meaning
=================  ========  ==========================================================
``task_id``        yes       the task statement's id (a task may appear in many envs)
``env_id``         yes       the environment the task runs in
``world_id``       no        the world (repository, app, corpus) of the environment
``prompt``         yes       chat list ``[{"role": ..., "content": ...}]`` or a string
``data_source``    yes       verl's reward-function key and metric prefix
``reward_model``   yes*      ``{"style": "rule", "ground_truth": ...}``
``ground_truth``   yes*      instead of ``reward_model`` (style defaults to ``rule``)
``extra_info``     no        dict passed through to verl
``agent_name``     no        verl multi-turn agent loop name, passed through
signature fields   no        ``tools``, ``state_schema``, ``transition``, ``verifier``
                             (or one ``signature`` object): the environment's structure
``embedding``      no        a sentence embedding of the task statement
=================  ========  ==========================================================

Rows are cells: the pair (``task_id``, ``env_id``) must be unique. Errors name the file,
the 1-based row (for JSONL the file line) and the column.

Example
-------
>>> pool = read_pool("data/verl_example/pool.jsonl")  # doctest: +SKIP
>>> pool.frame[names.TASK_ID].nunique()  # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from bayesscale import names

REQUIRED = (names.TASK_ID, names.ENV_ID, names.PROMPT, names.DATA_SOURCE)
DEFAULT_REWARD_STYLE = "rule"
MAX_NAMED = 5


class PoolError(ValueError):
    """A task pool that cannot be used; the message names the file, row and column."""


@dataclass(frozen=True)
class Pool:
    """A checked task pool: ``frame`` has normalised ``prompt``/``reward_model`` columns."""

    frame: pd.DataFrame
    source: str
    lines: tuple[int, ...] | None = None  # the file line of each row (JSONL), else None

    @property
    def has_worlds(self) -> bool:
        return names.WORLD_ID in self.frame.columns

    def rows_text(self, positions: list[int]) -> str:
        """``rows 2, 5`` (``lines 3, 7`` for JSONL) for 0-based positions in the frame."""
        return _row_text(self.source, positions, self.lines)

    def error(self, column: str, positions: list[int], problem: str) -> PoolError:
        """An error naming this pool's file, the column and the rows (file lines, for JSONL)."""
        return pool_error(self.source, column, positions, problem, self.lines)


def _row_text(source: str, positions: list[int], lines: tuple[int, ...] | None = None) -> str:
    numbers = [lines[p] if lines is not None else p + 1 for p in positions]
    shown = ", ".join(str(n) for n in numbers[:MAX_NAMED])
    more = f" and {len(positions) - MAX_NAMED} more" if len(positions) > MAX_NAMED else ""
    what = "line" if lines is not None or source.endswith(".jsonl") else "row"
    return f"{what}{'s' if len(positions) > 1 else ''} {shown}{more}"


def pool_error(
    source: str,
    column: str,
    positions: list[int],
    problem: str,
    lines: tuple[int, ...] | None = None,
) -> PoolError:
    """An error naming the pool file, the column and the rows: 0-based ``positions`` in the
    frame, shown 1-based, or as file lines where ``lines`` maps positions to them (JSONL)."""
    return PoolError(
        f"{source}: column {column!r}, {_row_text(source, positions, lines)}: {problem}"
    )


def read_records(path: str | Path) -> tuple[pd.DataFrame, tuple[int, ...] | None]:
    """Read a parquet or JSONL file into a frame, with the file line of each row for JSONL
    (blank lines are skipped, so rows and lines differ) and ``None`` for parquet. JSONL
    errors name the line."""
    path = Path(path)
    if not path.exists():
        raise PoolError(f"{path}: no such file")
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        try:
            return pd.read_parquet(path), None
        except (OSError, ValueError) as exc:
            raise PoolError(f"{path}: cannot be read as parquet: {exc}") from exc
    if suffix in (".jsonl", ".json"):
        rows = []
        lines = []
        with path.open(encoding="utf-8-sig") as fh:  # a byte-order mark is read, as for CSV
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise PoolError(f"{path}: line {lineno}: not valid JSON ({exc.msg})") from exc
                if not isinstance(record, dict):
                    raise PoolError(f"{path}: line {lineno}: expected a JSON object")
                rows.append(record)
                lines.append(lineno)
        if not rows:
            raise PoolError(f"{path}: the pool has no rows")
        return pd.DataFrame.from_records(rows), tuple(lines)
    raise PoolError(f"{path}: unknown pool format {suffix!r}; use .parquet or .jsonl")


def _missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def _as_dict(value: Any) -> Any:
    """Parquet hands back dicts as dicts, JSON strings stay strings: accept both."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def normalise_prompt(value: Any) -> list[dict[str, str]] | None:
    """A chat list ``[{"role", "content"}]``; a plain string becomes one user turn."""
    value = _as_dict(value) if isinstance(value, str) and value.lstrip().startswith("[") else value
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, list) and value:
        turns = []
        for turn in value:
            if not isinstance(turn, dict) or "role" not in turn or "content" not in turn:
                return None
            turns.append({"role": str(turn["role"]), "content": str(turn["content"])})
        return turns
    return None


def check_pool(
    frame: pd.DataFrame, source: str = "<pool>", lines: tuple[int, ...] | None = None
) -> Pool:
    """Check a pool frame and normalise it; raise ``PoolError`` naming file/row/column.
    ``lines`` gives each row's file line (as :func:`read_records` returns them for JSONL);
    without them errors count rows from 1."""
    if len(frame) == 0:
        raise PoolError(f"{source}: the pool has no rows")
    if lines is not None and len(lines) != len(frame):
        raise ValueError(f"{source}: {len(lines)} line numbers for {len(frame)} rows")
    frame = frame.reset_index(drop=True).copy()

    def error(column: str, positions: list[int], problem: str) -> PoolError:
        return pool_error(source, column, positions, problem, lines)

    present = [str(c) for c in frame.columns]
    missing = [c for c in REQUIRED if c not in present]
    if names.REWARD_MODEL not in present and names.GROUND_TRUTH not in present:
        missing.append(f"{names.REWARD_MODEL} (or {names.GROUND_TRUTH})")
    if missing:
        raise PoolError(f"{source}: missing column(s) {missing}; the pool has {present}")

    for column in (names.TASK_ID, names.ENV_ID, names.DATA_SOURCE, names.WORLD_ID):
        if column not in frame.columns:
            continue
        bad = [i for i, v in enumerate(frame[column]) if _missing(v)]
        if bad:
            raise error(column, bad, "value is missing")
        frame[column] = frame[column].astype(str).str.strip()

    prompts = [normalise_prompt(v) for v in frame[names.PROMPT]]
    bad = [i for i, p in enumerate(prompts) if p is None]
    if bad:
        raise error(
            names.PROMPT,
            bad,
            'expected a non-empty string or a chat list [{"role": ..., "content": ...}]',
        )
    frame[names.PROMPT] = prompts

    frame[names.REWARD_MODEL] = _reward_models(frame, error)
    if names.EXTRA_INFO in frame.columns:
        infos = [_as_dict(v) for v in frame[names.EXTRA_INFO]]
        bad = [i for i, v in enumerate(infos) if not (_missing(v) or isinstance(v, dict))]
        if bad:
            raise error(names.EXTRA_INFO, bad, "expected a JSON object (dict)")
        frame[names.EXTRA_INFO] = [{} if _missing(v) else dict(v) for v in infos]

    dup = frame.duplicated([names.TASK_ID, names.ENV_ID], keep=False)
    if dup.any():
        positions = [int(i) for i in frame.index[dup]]
        raise PoolError(
            f"{source}: columns ({names.TASK_ID!r}, {names.ENV_ID!r}), "
            f"{_row_text(source, positions, lines)}: the same task-environment cell appears twice"
        )
    if names.WORLD_ID in frame.columns:
        worlds = frame.groupby(names.ENV_ID)[names.WORLD_ID].nunique()
        split = worlds[worlds > 1]
        if len(split):
            env = split.index[0]
            rows = [int(i) for i in frame.index[frame[names.ENV_ID] == env]]
            raise error(
                names.WORLD_ID,
                rows,
                f"environment {env!r} belongs to more than one world",
            )
    return Pool(frame, source, lines)


def _reward_models(
    frame: pd.DataFrame, error: Callable[[str, list[int], str], PoolError]
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    bad: list[int] = []
    column = names.REWARD_MODEL if names.REWARD_MODEL in frame.columns else names.GROUND_TRUTH
    for i, value in enumerate(frame[column]):
        if column == names.GROUND_TRUTH:
            value = {names.GROUND_TRUTH: value}
        value = _as_dict(value)
        if not isinstance(value, dict) or _missing(value.get(names.GROUND_TRUTH)):
            bad.append(i)
            continue
        truth = value[names.GROUND_TRUTH]
        if hasattr(truth, "tolist"):
            truth = truth.tolist()
        style = value.get(names.REWARD_STYLE) or DEFAULT_REWARD_STYLE
        out.append({names.REWARD_STYLE: str(style), names.GROUND_TRUTH: truth})
    if bad:
        raise error(
            column,
            bad,
            f'expected {{"{names.REWARD_STYLE}": ..., "{names.GROUND_TRUTH}": ...}} '
            "with a ground truth",
        )
    return out


def read_pool(path: str | Path) -> Pool:
    """Read and check a task pool (parquet or JSONL)."""
    frame, lines = read_records(path)
    return check_pool(frame, source=str(path), lines=lines)
