"""The sweep directory's run table (``manifest.csv``): one row per run, rewritten atomically.

Columns (names from ``bayesscale.names``): ``run_id``, ``sweep_axis``, ``model``,
``model_path``, ``params_b``, ``algorithm``, ``domain``, ``reward``, ``n_envs``,
``n_tasks``, ``rollouts``, ``n_worlds``, ``seed``, ``n_cells``, ``updates``,
``train_batch_size``, ``val_size``, ``val_n``, ``n_gpus``, ``train_path``, ``val_path``,
``log_path``, ``status``, ``attempt``, ``job_id``, ``message``, ``updated_at``.

Paths are stored relative to the sweep directory; ``absolute`` resolves them. Status is one
of ``planned``, ``pending``, ``running``, ``succeeded``, ``failed``, ``stopped``.
Each attempt of a run logs to its own file, ``runs/<run_id>/attempt-<k>/verl.jsonl``:
verl opens its log with mode "wb", so a resumed run would wipe an earlier attempt's log.

>>> m = read_manifest("sweeps/example")  # doctest: +SKIP
>>> write_manifest(m, "sweeps/example")  # doctest: +SKIP
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from pathlib import Path

import numpy as np
import pandas as pd

from bayesscale import names
from bayesscale.data.observations import (
    column_error,
    file_stamp,
    number_text,
    remember_file_lines,
    write_table,
)

MANIFEST = "manifest.csv"
SPEC_COPY = "sweep.toml"
PLAN_REPORT = "plan.json"
PLANNED, PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED = (
    "planned",
    "pending",
    "running",
    "succeeded",
    "failed",
    "stopped",
)
STATUSES = (PLANNED, PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED)
ACTIVE = (PENDING, RUNNING)
FINISHED_BAD = (FAILED, STOPPED)
LOG_NAME = "verl.jsonl"
TEXT_COLUMNS = (names.JOB_ID, names.MESSAGE, names.UPDATED_AT, names.LOG_PATH)
# what ingest copies into observation rows and launch reads: present, and whole numbers > 0
# (seeds and attempts >= 0); params_b present, > 0 where a sweep gives it
COUNT_COLUMNS = (names.N_ENVS, names.N_TASKS, names.ROLLOUTS, names.SEED, names.ATTEMPT)
SETTING_COLUMNS = (names.MODEL, names.ALGORITHM, names.DOMAIN, names.PARAMS_B)


class ManifestError(ValueError):
    """A manifest that cannot be read; names the file, row and column."""


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def attempt_log(run_id: str, attempt: int) -> str:
    """Relative log path of one attempt: ``runs/<run_id>/attempt-<k>/verl.jsonl``."""
    return f"runs/{run_id}/attempt-{attempt}/{LOG_NAME}"


def absolute(sweep_dir: str | Path, relative: str) -> Path:
    """The absolute path of a manifest path (paths are stored relative to the sweep)."""
    path = Path(relative)
    return path if path.is_absolute() else Path(sweep_dir).resolve() / path


def _check_whole(path: Path, text: str) -> None:
    """A manifest cut off mid-row (a copy or a disk that stopped part-way; launch itself writes
    it whole) is said to be truncated, naming the row, before its missing fields read as NaN.

    >>> _check_whole(Path("manifest.csv"), "run_id,status,n_envs\\nr1,planned,8\\nr2,plan")
    Traceback (most recent call last):
    ...
    bayesscale.verl.manifest.ManifestError: manifest.csv: truncated: file line 3, the last row, \
has 2 of the header's 3 fields (the file ends mid-row); restore it from a copy, or plan the \
sweep again
    """
    reader = csv.reader(io.StringIO(text))
    header = next(reader, [])
    last: list[str] = []
    line = 1
    for row in reader:
        if row:
            last, line = row, reader.line_num
    if last and len(last) < len(header):
        raise ManifestError(
            f"{path}: truncated: file line {line}, the last row, has {len(last)} of the "
            f"header's {len(header)} fields (the file ends mid-row); restore it from a copy, or "
            "plan the sweep again"
        )


def read_manifest(sweep_dir: str | Path) -> pd.DataFrame:
    """Read ``<sweep_dir>/manifest.csv`` and check its run ids and statuses."""
    path = Path(sweep_dir) / MANIFEST
    if not path.exists():
        raise ManifestError(
            f"{path}: no such file; is {sweep_dir} a sweep directory (bayesscale plan)?"
        )
    stamp = file_stamp(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
        frame = pd.read_csv(
            io.StringIO(text), dtype={c: "string" for c in TEXT_COLUMNS}, keep_default_na=True
        )
    except pd.errors.EmptyDataError:
        raise ManifestError(f"{path}: empty file (no header row)") from None
    except (UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise ManifestError(f"{path}: cannot be read as CSV: {exc}") from None
    remember_file_lines(path, text, stamp)  # errors below name file lines
    _check_whole(path, text)
    required = (names.RUN_ID, names.STATUS, names.LOG_PATH, *SETTING_COLUMNS, *COUNT_COLUMNS)
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise ManifestError(f"{path}: missing column(s) {', '.join(map(repr, missing))}")
    _check_numbers(frame, path)
    for column in TEXT_COLUMNS:
        if column in frame.columns:
            frame[column] = frame[column].astype(object).where(frame[column].notna(), "")
    dup = np.flatnonzero(frame[names.RUN_ID].duplicated(keep=False).to_numpy())
    if len(dup):
        raise column_error(str(path), names.RUN_ID, dup, "repeated run id", ManifestError)
    bad = np.flatnonzero(~frame[names.STATUS].isin(STATUSES).to_numpy())
    if len(bad):
        raise column_error(
            str(path),
            names.STATUS,
            bad[:1],
            f"unknown status {frame[names.STATUS].iloc[bad[0]]!r}; use one of {STATUSES}",
            ManifestError,
        )
    return frame


def _check_numbers(frame: pd.DataFrame, path: Path) -> None:
    """Counts are whole numbers (sizes > 0, seeds and attempts >= 0); ``params_b``, which a
    sweep spec may leave out (its cells are then empty), is > 0 where given. The first bad
    cell is named by column, data row and file line."""

    def fail(column: str, row: int, what: str) -> ValueError:
        got = number_text(frame[column].iloc[row])
        return column_error(str(path), column, [row], f"{what}, got {got}", ManifestError)

    for column in COUNT_COLUMNS:
        values = pd.to_numeric(frame[column], errors="coerce")
        floor = 0 if column in (names.SEED, names.ATTEMPT) else 1
        bad = values.isna() | (values < floor) | (values != values.round())
        if bad.any():
            raise fail(
                column, int(bad.to_numpy().nonzero()[0][0]), f"must be a whole number >= {floor}"
            )
        frame[column] = values.astype(int)
    given = frame[names.PARAMS_B].notna()
    values = pd.to_numeric(frame[names.PARAMS_B], errors="coerce")
    bad = given & ~(values > 0)
    if bad.any():
        raise fail(names.PARAMS_B, int(bad.to_numpy().nonzero()[0][0]), "must be > 0 where given")
    frame[names.PARAMS_B] = values


def write_manifest(frame: pd.DataFrame, sweep_dir: str | Path) -> Path:
    """Atomically replace ``<sweep_dir>/manifest.csv`` (temporary file, then rename)."""
    return write_table(frame, Path(sweep_dir) / MANIFEST, overwrite=True)
