"""Observation tables: reading, validation with clear errors, and the model's design arrays.

One row per evaluated run: setting keys (``model``, ``algorithm``, ``domain``), axis
sizes (``n_envs``, ``n_tasks``, ``rollouts``; optional ``n_worlds``), ``params_b``,
``reward`` (``sparse``/``dense``), ``seed`` and the outcome, either ``successes`` +
``trials`` or a continuous ``loss``. Which columns are required follows from the model
spec, so other axes (Chinchilla's ``params`` and ``tokens``) use the same code.

Errors name the file, the column and the rows (1-based data rows; for a CSV file read here
and unchanged since, also the file line). Nothing is dropped: a row is used or the load
fails. Suspicious but usable data (a success rate of 0 or 1, a setting with one seed) raises
a ``DataWarning``.

Example
-------
>>> from bayesscale.data.spec import load_spec
>>> obs = load_observations("data/reference/observations.csv", load_spec())  # doctest: +SKIP
>>> design = prepare(obs, load_spec())  # doctest: +SKIP
"""

from __future__ import annotations

import csv
import difflib
import hashlib
import io
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bayesscale import names
from bayesscale.atomic import write_atomically
from bayesscale.core import laws
from bayesscale.data.spec import ModelSpec

INTEGER_COLUMNS = (
    names.N_ENVS,
    names.N_TASKS,
    names.N_WORLDS,
    names.SUCCESSES,
    names.TRIALS,
    names.SEED,
)
SETTING_SEPARATOR = " | "
MIN_DISTINCT_PER_AXIS = 3  # amplitude, exponent and the shared offset
MAX_ROWS_NAMED = 8


class ObservationError(ValueError):
    """Bad observation data; the message names the file, the column and the rows."""


class DataWarning(UserWarning):
    """Usable but suspicious observation data."""


@dataclass(frozen=True)
class Table:
    """A validated observation table and where it came from."""

    frame: pd.DataFrame
    source: str
    sha256: str

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, spec: ModelSpec, source: str = "<DataFrame>") -> Table:
        """A table built in memory, validated for ``spec`` as a file would be (errors name
        ``source``, the row and the column)."""
        return cls(validate(frame, spec, source), source, frame_sha256(frame))

    def under(self, spec: ModelSpec) -> Table:
        """The same rows validated for ``spec`` (the law with other forms): the same source
        and digest, so a fit of it is a fit of this table and says so."""
        return Table(validate(self.frame, spec, self.source), self.source, self.sha256)

    def settings(self, spec: ModelSpec) -> list[str]:
        """The setting labels of the table, in order of first appearance."""
        return list(dict.fromkeys(setting_labels(self.frame, spec)))

    def subset(self, spec: ModelSpec, settings: Sequence[str]) -> Table:
        """The rows of ``settings`` only, validated again (a subset must still be fittable)
        and with its own digest, so a fit of it never passes for a fit of the whole table."""
        keep = setting_labels(self.frame, spec).isin(list(settings)).to_numpy()
        frame = self.frame[keep].reset_index(drop=True)
        return Table(validate(frame, spec, self.source), self.source, frame_sha256(frame))


@dataclass(frozen=True)
class _ReadLines:
    """Where the data rows of a CSV file began when it was read."""

    stamp: tuple[int, int]  # the file's (mtime_ns, size) when read
    starts: tuple[int, ...] | None  # each data row's first line; None: ``row + 2``


# The CSV files read (by :func:`read_table` or :func:`remember_file_lines`), by resolved
# path: the file line of each data row (the header is line 1; blank lines and quoted cells
# that span lines shift rows from ``row + 2``), kept for the last read of each path.
_READ_LINES: dict[str, _ReadLines] = {}


def _line_key(source: str | Path) -> str:
    try:
        return str(Path(source).resolve())
    except (OSError, RuntimeError):
        return str(source)


def file_stamp(path: str | Path) -> tuple[int, int] | None:
    """A file's ``(mtime_ns, size)``, to tell later whether it changed (``None``: unreadable)."""
    try:
        stat = Path(path).stat()
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size)


def file_lines(positions: Iterable[int], source: str) -> list[int] | None:
    """The CSV file line of each 0-based data row of ``source``, as :func:`read_table` read
    it: ``position + 2`` unless blank lines or multi-line cells come before it. ``None``
    where no line can be named for certain: ``source`` is not a CSV file read here (a table
    built in memory), or the file changed since it was read."""
    read = _READ_LINES.get(_line_key(source))
    if read is None or file_stamp(source) != read.stamp:
        return None
    starts = read.starts
    lines = []
    for p in (int(p) for p in positions):
        if starts is None:
            lines.append(p + 2)
        elif 0 <= p < len(starts):
            lines.append(starts[p])
        else:
            return None
    return lines


def _records(text: str) -> Iterator[tuple[int, list[str]]]:
    """``(first line, fields)`` of each record pandas reads from CSV ``text``: blank and
    whitespace-only lines are skipped, as pandas skips them; a quoted cell may span lines."""
    reader = csv.reader(io.StringIO(text, newline=""))  # "\r", "\n" and "\r\n" all end lines
    line = 1
    for record in reader:  # ``reader.line_num`` is the line a record ends on
        if record and not (len(record) == 1 and not record[0].strip()):
            yield line, record
        line = reader.line_num + 1


def remember_file_lines(path: Path, text: str, stamp: tuple[int, int] | None = None) -> None:
    """Remember where each data row of the CSV file ``path`` (read as ``text``) starts, so
    that errors can name its file lines (forgotten when Python's CSV reader cannot follow a
    file pandas read). ``stamp``: the file's (mtime_ns, size) before it was read."""
    key = _line_key(path)
    stamp = stamp if stamp is not None else file_stamp(path)
    try:
        starts = [line for line, _ in _records(text)][1:]  # the first record is the header
    except csv.Error:
        _READ_LINES.pop(key, None)
        return
    if stamp is None:
        _READ_LINES.pop(key, None)
        return
    simple = starts == list(range(2, len(starts) + 2))
    _READ_LINES[key] = _ReadLines(stamp, None if simple else tuple(starts))


def rows_text(positions: Iterable[int], source: str) -> str:
    """Name rows by 1-based data-row number (and CSV file line), at most a few of them."""
    pos = sorted(int(p) for p in positions)
    shown = pos[:MAX_ROWS_NAMED]
    rows = ", ".join(str(p + 1) for p in shown)
    more = f" and {len(pos) - len(shown)} more" if len(pos) > len(shown) else ""
    text = f"row{'s' if len(pos) > 1 else ''} {rows}{more}"
    lines = file_lines(shown, source) if source.lower().endswith(".csv") else None
    if lines is not None:
        text += f" (file line{'s' if len(pos) > 1 else ''} {', '.join(map(str, lines))})"
    return text


def number_text(value: object) -> str:
    """A number as a user wrote it: ``-2000`` not ``np.float64(-2000.0)``.

    >>> number_text(np.float64(-2000.0)), number_text(2.5), number_text("x")
    ('-2000', '2.5', "'x'")
    """
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.number):
        return repr(value)
    return f"{float(value):g}"


def values_text(values: Iterable[object], limit: int = 3) -> str:
    """A few values for an error message: ``-5, 2.5 and 3 more``."""
    items = list(values)
    shown = ", ".join(v if isinstance(v, str) else number_text(v) for v in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def column_error(
    source: str,
    column: str,
    positions: Iterable[int],
    problem: str,
    error: type[ValueError] = ObservationError,
) -> ValueError:
    """``error`` (a kind of table's own, an observation table's by default) naming the file,
    the column and the rows."""
    return error(f"{source}: column {column!r}, {rows_text(positions, source)}: {problem}")


def read_table(path: str | Path) -> tuple[pd.DataFrame, str]:
    """Read a CSV or parquet file as-is; return it with its SHA-256."""
    path = Path(path)
    if not path.exists():
        raise ObservationError(f"{path}: no such file")
    if path.is_dir():
        raise ObservationError(f"{path}: is a directory, not a table (.csv or .parquet)")
    stamp = file_stamp(path)
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            frame = pd.read_csv(io.BytesIO(raw), skipinitialspace=True)  # the bytes hashed
            text = raw.decode("utf-8-sig", errors="replace")
            _check_header(path, text)
            remember_file_lines(path, text, stamp)
            if len(frame.columns) == 1 and "\t" in str(frame.columns[0]):
                raise ObservationError(
                    f"{path}: this looks tab-separated (one column named "
                    f"{str(frame.columns[0])[:60]!r}); save it with commas, or as .parquet"
                )
        elif suffix in (".parquet", ".pq"):
            frame = pd.read_parquet(io.BytesIO(raw))
        else:
            raise ObservationError(f"{path}: unknown table format {suffix!r}; use .csv or .parquet")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, OSError, ValueError) as exc:
        if isinstance(exc, ObservationError):
            raise
        raise ObservationError(f"{path}: cannot be read as {suffix[1:]}: {exc}") from exc
    return frame, digest


def _check_header(path: Path, text: str) -> None:
    """A column named twice is an error (pandas would rename the second ``seed.1`` and the
    table would be read with the first, silently). Unnamed columns (the empty cells a
    spreadsheet leaves at the end of a header) are not names."""
    try:
        header = next((fields for _, fields in _records(text)), [])
    except csv.Error:  # pandas read it; Python's reader cannot: nothing more to check here
        return
    names_ = [c.strip() for c in header if c.strip()]
    repeated = sorted({c for c in names_ if names_.count(c) > 1})
    if repeated:
        raise ObservationError(
            f"{path}: the header names column(s) {', '.join(map(repr, repeated))} more than once"
        )


def frame_sha256(frame: pd.DataFrame) -> str:
    """SHA-256 of a table's canonical CSV text (for tables built in memory)."""
    return hashlib.sha256(frame.to_csv(index=False).encode()).hexdigest()


def load_observations(path: str | Path, spec: ModelSpec) -> Table:
    """Read and validate an observation table for ``spec``."""
    frame, digest = read_table(path)
    return Table(validate(frame, spec, source=str(path)), str(path), digest)


def outcome_columns(spec: ModelSpec) -> tuple[str, ...]:
    """The observed-outcome columns of ``spec``: successes (and seed), or loss."""
    return (names.SUCCESSES, names.SEED) if spec.outcome == "success" else (names.LOSS,)


def validate(
    frame: pd.DataFrame,
    spec: ModelSpec,
    source: str = "<table>",
    *,
    for_fitting: bool = True,
    observed: bool = True,
) -> pd.DataFrame:
    """Check every rule and return a copy with clean dtypes; raise ``ObservationError``.

    The returned frame has the same rows in the same order: none is dropped. Rows to
    *predict* (``for_fitting=False``: held-out runs) keep every per-row rule but skip the
    rules that only matter for fitting: at least three distinct sizes per axis, and the
    warnings about single seeds or success rates of 0 or 1. With ``observed=False`` the outcome
    columns (successes and seed; loss) may be absent; a success outcome still needs ``trials``
    (the predictive count).
    """
    if len(frame) == 0:
        raise ObservationError(f"{source}: the table has no rows")
    frame = frame.reset_index(drop=True).copy()
    outcome = outcome_columns(spec)
    has_outcome = observed or any(c in frame.columns for c in outcome)
    required = spec.required_columns()
    if not has_outcome:
        required = tuple(c for c in required if c not in outcome)
    _check_columns(frame, spec, source, required)

    for key in spec.setting_keys:
        _check_labels(frame, key, source)
    numeric = _clean_numeric(frame, spec, source, has_outcome)
    _check_sizes_and_counts(frame, spec, source, has_outcome, numeric)

    if names.REWARD in frame.columns:
        _check_reward(frame, source)
    if names.SPLIT in frame.columns:
        _check_labels(frame, names.SPLIT, source)
    if has_outcome:
        _check_duplicates(frame, spec, source)
    if spec.size is not None:
        _check_constant_within_setting(frame, spec, spec.size.column, source)
    if for_fitting:
        _check_axis_spread(frame, spec, source)
        _warn_suspicious(frame, spec, source)
    return frame


def _clean_numeric(
    frame: pd.DataFrame, spec: ModelSpec, source: str, has_outcome: bool
) -> list[str]:
    """Every numeric column the spec uses made numeric in place (an error names the row and
    column of a value that is not), and the optional ones (blank where unknown, > 0 where
    given); the columns the spec uses, in order."""
    numeric = [a.column for a in spec.axes] + [a.divide_by for a in spec.axes if a.divide_by]
    if spec.size is not None:
        numeric.append(spec.size.column)
    if spec.outcome == "success":
        numeric.append(names.TRIALS)
    if has_outcome:
        numeric += list(outcome_columns(spec))
    for column in dict.fromkeys(numeric):
        frame[column] = check_numeric(frame, column, source)
    # Optional columns the spec does not use may be blank (unknown), but never garbage.
    for optional in (names.N_WORLDS, names.COMPUTE, names.PARAMS_B):
        if optional in frame.columns and optional not in numeric:
            frame[optional] = check_numeric(frame, optional, source, allow_missing=True)
            bad = frame.index[frame[optional] <= 0]
            if len(bad):
                raise column_error(source, optional, bad, "must be > 0 where given")
    return numeric


def _check_sizes_and_counts(
    frame: pd.DataFrame, spec: ModelSpec, source: str, has_outcome: bool, numeric: list[str]
) -> None:
    """Sizes and trials > 0, counts >= 0 and no more successes than trials (or a loss > 0),
    and whole numbers where counts are: the integer columns cast to int64 in place."""
    for axis in spec.axes:
        for size_column in (axis.column, axis.divide_by):
            if size_column:
                _check_positive(frame, size_column, source, what="axis sizes must be > 0")
    if spec.size is not None:
        _check_positive(frame, spec.size.column, source, what="model sizes must be > 0")
    if spec.outcome == "success":
        _check_positive(frame, names.TRIALS, source, what="trials must be >= 1")
        if has_outcome:
            for column in (names.SUCCESSES, names.SEED):
                bad = frame.index[frame[column] < 0]
                if len(bad):
                    raise column_error(
                        source,
                        column,
                        bad,
                        f"counts must be >= 0, got {values_text(frame[column][bad])}",
                    )
            over = frame.index[frame[names.SUCCESSES] > frame[names.TRIALS]]
            if len(over):
                pairs = [
                    f"{number_text(k)} > {number_text(n)}"
                    for k, n in zip(
                        frame[names.SUCCESSES][over], frame[names.TRIALS][over], strict=True
                    )
                ]
                raise column_error(
                    source,
                    names.SUCCESSES,
                    over,
                    f"successes exceed trials ({values_text(pairs)})",
                )
    elif has_outcome:
        _check_positive(frame, names.LOSS, source, what="a loss must be > 0")
    for column in INTEGER_COLUMNS:
        if column in frame.columns and column in numeric:
            values = frame[column].to_numpy(float)
            bad = frame.index[values != np.round(values)]
            if len(bad):
                raise column_error(
                    source,
                    column,
                    bad,
                    f"counts must be whole numbers, got {values_text(frame[column][bad])}",
                )
            frame[column] = frame[column].astype(np.int64)


def _check_columns(
    frame: pd.DataFrame, spec: ModelSpec, source: str, required: Sequence[str]
) -> None:
    hints = missing_columns(frame, required)
    if hints:
        raise ObservationError(
            f"{source}: missing column(s) {hints} required by spec {spec.name!r}; "
            f"the table has {[str(c) for c in frame.columns]}"
        )


def missing_columns(frame: pd.DataFrame, required: Sequence[str]) -> str:
    """The required columns ``frame`` lacks, each with its closest present name as a hint
    (``"'n_tasks' (did you mean 'n_task'?)"``); empty when none is missing."""
    present = [str(c) for c in frame.columns]
    hints = []
    for column in required:
        if column not in present:
            close = difflib.get_close_matches(column, present, n=1, cutoff=0.6)
            hints.append(f"{column!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return ", ".join(hints)


def _check_labels(frame: pd.DataFrame, column: str, source: str) -> None:
    values = frame[column]
    empty = frame.index[values.isna() | (values.astype(str).str.strip() == "")]
    if len(empty):
        raise column_error(source, column, empty, "value is missing")
    frame[column] = values.astype(str).str.strip()


def check_numeric(
    frame: pd.DataFrame,
    column: str,
    source: str,
    allow_missing: bool = False,
    error: type[ObservationError] = ObservationError,
) -> pd.Series:
    """``frame[column]`` as floats; ``error`` naming the rows that are not numbers, or that
    are missing, NaN or infinite (unless ``allow_missing``: then missing is NaN)."""
    raw = frame[column]
    values = pd.to_numeric(raw, errors="coerce")
    not_number = frame.index[values.isna() & raw.notna()]
    if len(not_number):
        shown = ", ".join(repr(raw[i]) for i in not_number[:3])
        raise column_error(source, column, not_number, f"not a number ({shown})", error)
    finite = np.isfinite(values.to_numpy(float))
    missing = frame.index[(values.notna() & ~finite) if allow_missing else ~finite]
    if len(missing):
        raise column_error(source, column, missing, "value is missing, NaN or infinite", error)
    return values.astype(float)


def _check_positive(frame: pd.DataFrame, column: str, source: str, what: str) -> None:
    bad = frame.index[frame[column] <= 0]
    if len(bad):
        raise column_error(source, column, bad, f"{what}, got {number_text(frame[column][bad[0]])}")


def _check_reward(frame: pd.DataFrame, source: str) -> None:
    values = frame[names.REWARD].astype(str).str.strip().str.lower()
    values = values.where(frame[names.REWARD].notna(), "")
    bad = frame.index[~values.isin(names.REWARD_LEVELS)]
    missing = frame.index[frame[names.REWARD].isna()]
    if len(missing):
        raise column_error(
            source, names.REWARD, missing, f"value is missing; use one of {names.REWARD_LEVELS}"
        )
    if len(bad):
        raise column_error(
            source,
            names.REWARD,
            bad,
            f"unknown reward level {frame[names.REWARD][bad[0]]!r}; use one of {names.REWARD_LEVELS}",
        )
    frame[names.REWARD] = values


def _identity_columns(frame: pd.DataFrame, spec: ModelSpec) -> list[str]:
    cols = list(spec.setting_keys) + [a.column for a in spec.axes]
    cols += [a.divide_by for a in spec.axes if a.divide_by]
    extra = (names.REWARD, names.SEED, names.SPLIT)
    cols += [c for c in extra if c in frame.columns]
    if spec.size is not None:
        cols.append(spec.size.column)
    return list(dict.fromkeys(cols))


def _check_duplicates(frame: pd.DataFrame, spec: ModelSpec, source: str) -> None:
    outcome = [names.SUCCESSES, names.TRIALS] if spec.outcome == "success" else [names.LOSS]
    # the warning names the line that called validate, as this module's other warnings do
    check_duplicate_rows(frame, _identity_columns(frame, spec), outcome, source, stacklevel=3)


def check_duplicate_rows(
    frame: pd.DataFrame,
    identity: Sequence[str],
    outcome: Sequence[str],
    source: str,
    error: type[ObservationError] = ObservationError,
    warning: type[Warning] = DataWarning,
    unit: str = "observation",
    stacklevel: int = 2,
) -> None:
    """Rows alike in every ``identity`` column must agree on the ``outcome`` (``error``
    otherwise, naming them); identical copies are kept, each as its own ``unit``, with a
    ``warning`` (a run ingested twice counts twice) ``stacklevel`` frames above the caller."""
    identity, outcome = list(identity), list(outcome)
    dup = frame[frame.duplicated(identity, keep=False)]
    if dup.empty:
        return
    for _, group in dup.groupby(identity, sort=False):
        if len(group[outcome].drop_duplicates()) > 1:
            raise column_error(
                source,
                ",".join(outcome),
                group.index,
                f"conflicting duplicate rows: same {identity} but different outcomes",
                error,
            )
    warnings.warn(
        f"{source}: {rows_text(dup.index, source)} repeat another row exactly "
        f"(same {identity} and outcome); each is kept as its own {unit}. "
        "Remove the copies if they came from ingesting a run twice.",
        warning,
        stacklevel=stacklevel + 1,
    )


def _check_constant_within_setting(
    frame: pd.DataFrame, spec: ModelSpec, column: str, source: str
) -> None:
    keys = list(spec.setting_keys)
    if not keys:
        return
    spread = frame.groupby(keys)[column].transform("nunique")
    bad = frame.index[spread > 1]
    if len(bad):
        raise column_error(source, column, bad, f"must be constant within a setting {keys}")


def _check_axis_spread(frame: pd.DataFrame, spec: ModelSpec, source: str) -> None:
    sizes = axis_sizes(frame, spec)
    for j, axis in enumerate(spec.axes):
        distinct = np.unique(sizes[:, j])
        if len(distinct) < MIN_DISTINCT_PER_AXIS:
            raise ObservationError(
                f"{source}: column {axis.column!r} (axis {axis.name!r}) has {len(distinct)} distinct "
                f"value(s) {distinct.tolist()}; the law needs at least {MIN_DISTINCT_PER_AXIS} to "
                "separate an amplitude, an exponent and the floor"
            )
    if not spec.setting_keys:
        return
    labels = setting_labels(frame, spec)
    for j, axis in enumerate(spec.axes):
        counts = pd.Series(sizes[:, j]).groupby(labels.to_numpy()).nunique()
        thin = counts[counts < MIN_DISTINCT_PER_AXIS]
        if len(thin):
            warnings.warn(
                f"{source}: axis {axis.name!r} ({axis.column}) takes fewer than "
                f"{MIN_DISTINCT_PER_AXIS} distinct values in setting(s) {list(thin.index)[:5]}; "
                "their exponents rest on the population prior.",
                DataWarning,
                stacklevel=3,
            )


def _warn_suspicious(frame: pd.DataFrame, spec: ModelSpec, source: str) -> None:
    if spec.outcome != "success":
        return
    rate = frame[names.SUCCESSES] / frame[names.TRIALS]
    extreme = frame.index[(rate == 0) | (rate == 1)]
    if len(extreme):
        warnings.warn(
            f"{source}: column {names.SUCCESSES!r}, {rows_text(extreme, source)}: success rate "
            "is exactly 0 or 1; such rows say little about the law's slope.",
            DataWarning,
            stacklevel=3,
        )
    seeds = frame.groupby(list(spec.setting_keys))[names.SEED].nunique()
    single = seeds[seeds < 2]
    if len(single):
        settings = [
            SETTING_SEPARATOR.join(map(str, k if isinstance(k, tuple) else (k,)))
            for k in single.index
        ]
        warnings.warn(
            f"{source}: column {names.SEED!r}: setting(s) {settings[:5]} have a single seed; "
            "seed-to-seed spread is then learned from the other settings only.",
            DataWarning,
            stacklevel=3,
        )


# --- design arrays for the model builders ------------------------------------------------


def setting_labels(frame: pd.DataFrame, spec: ModelSpec) -> pd.Series:
    """One label per row: the setting keys joined by ``' | '`` (``'all'`` without keys)."""
    if not spec.setting_keys:
        return pd.Series(["all"] * len(frame), index=frame.index)
    # column-wise string concatenation: a row-wise ``agg(join, axis=1)`` makes the same
    # labels 40x slower (65 ms on the reference data, and a fit computes them twice)
    first, *rest = (frame[key].astype(str) for key in spec.setting_keys)
    labels = first
    for column in rest:
        labels = labels + SETTING_SEPARATOR + column
    return labels.rename(None)


def axis_sizes(frame: pd.DataFrame, spec: ModelSpec) -> np.ndarray:
    """``(rows, axes)`` array of sizes, ``column / divide_by`` where the axis says so."""
    cols = []
    for axis in spec.axes:
        values = frame[axis.column].to_numpy(float)
        if axis.divide_by:
            values = values / frame[axis.divide_by].to_numpy(float)
        cols.append(values)
    return np.column_stack(cols)


@dataclass(frozen=True)
class Design:
    """Arrays a model builder needs, with their coordinates.

    ``sizes`` are raw axis sizes (rows x axes); ``reference`` the per-axis reference
    scale; indices map rows to settings and settings to groups.
    """

    spec: ModelSpec
    settings: tuple[str, ...]
    setting_index: np.ndarray
    sizes: np.ndarray
    reference: np.ndarray
    successes: np.ndarray | None
    trials: np.ndarray | None
    loss: np.ndarray | None
    dense: np.ndarray | None
    model_size: np.ndarray | None  # per setting
    size_reference: float | None
    size_groups: tuple[str, ...]
    size_group_index: np.ndarray | None  # per setting
    exponent_groups: dict[
        str, tuple[tuple[str, ...], np.ndarray]
    ]  # key -> (labels, per-setting index)

    @property
    def n_obs(self) -> int:
        return int(self.sizes.shape[0])

    def cells(self) -> Cells:
        """The distinct (setting, sizes, reward) combinations of the rows: see :class:`Cells`."""
        return cells_of(self.setting_index, self.sizes, self.dense)

    def coords(self) -> dict[str, Sequence[str] | np.ndarray]:
        coords: dict[str, Sequence[str] | np.ndarray] = {
            names.OBS_DIM: np.arange(self.n_obs),
            names.SETTING_DIM: list(self.settings),
            names.AXIS_DIM: list(self.spec.axis_names),
        }
        if self.size_group_index is not None:
            coords[names.SIZE_GROUP_DIM] = list(self.size_groups)
        for key, (labels, _) in self.exponent_groups.items():
            coords[f"{names.EXPONENT_GROUP_DIM}_{key}"] = list(labels)
        return coords


@dataclass(frozen=True)
class Cells:
    """Rows grouped into cells: one cell per distinct setting, axis sizes and reward level
    (the seeds of one grid point share a cell, and so the law's value there).

    ``first_row[c]`` is a row of cell ``c`` (cells in order of first appearance) and
    ``index[i]`` the cell of row ``i``.

    >>> c = cells_of(np.array([0, 0, 0, 1]), np.array([[8.0], [8.0], [16.0], [8.0]]))
    >>> c.index.tolist(), c.first_row.tolist()
    ([0, 0, 1, 2], [0, 2, 3])
    """

    first_row: np.ndarray
    index: np.ndarray

    @property
    def n_cells(self) -> int:
        return int(self.first_row.size)


def cells_of(
    setting_index: np.ndarray, sizes: np.ndarray, dense: np.ndarray | None = None
) -> Cells:
    """Group rows by (setting, sizes, dense) in order of first appearance."""
    columns = [np.asarray(setting_index, dtype=float)[:, None], np.asarray(sizes, dtype=float)]
    if dense is not None:
        columns.append(np.asarray(dense, dtype=float)[:, None])
    key = np.concatenate(columns, axis=1)
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)  # cells numbered by first appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return Cells(
        first_row=first[order].astype(np.int64), index=rank[inverse.ravel()].astype(np.int64)
    )


def prepare(
    table: Table | pd.DataFrame,
    spec: ModelSpec,
    reference: np.ndarray | None = None,
    size_reference: float | None = None,
    settings: Sequence[str] | None = None,
) -> Design:
    """Turn a validated table into design arrays.

    Pass ``reference``/``size_reference``/``settings`` from a fit to lay out new rows
    (held-out data) exactly as the fit's.
    """
    frame = table.frame if isinstance(table, Table) else table
    labels = setting_labels(frame, spec)
    setting_order = tuple(settings) if settings is not None else tuple(dict.fromkeys(labels))
    index_of = {s: i for i, s in enumerate(setting_order)}
    unknown = sorted(set(labels) - set(index_of))
    if unknown:
        raise ObservationError(
            f"settings {unknown} are not among the fit's settings {list(setting_order)}"
        )
    setting_index = labels.map(index_of).to_numpy(np.int64)
    sizes = axis_sizes(frame, spec)
    if reference is None:
        reference = np.array([laws.reference_scale(sizes[:, j]) for j in range(sizes.shape[1])])

    first_row = frame.groupby(labels.to_numpy(), sort=False).head(1)
    first_row = first_row.set_axis(labels[first_row.index].to_numpy()).reindex(list(setting_order))

    model_size = size_groups_idx = None
    size_groups: tuple[str, ...] = ()
    if spec.size is not None:
        model_size = first_row[spec.size.column].to_numpy(float)
        if size_reference is None:
            size_reference = float(np.exp(np.mean(np.log(np.unique(model_size)))))
        group_labels = (
            first_row[list(spec.size.groups)].astype(str).agg(SETTING_SEPARATOR.join, axis=1)
            if spec.size.groups
            else pd.Series(["all"] * len(first_row), index=first_row.index)
        )
        size_groups = tuple(dict.fromkeys(group_labels))
        size_groups_idx = group_labels.map({g: i for i, g in enumerate(size_groups)}).to_numpy(
            np.int64
        )

    exponent_groups = {}
    for key in spec.exponent_groups:
        values = first_row[key].astype(str)
        group_names = tuple(dict.fromkeys(values))
        exponent_groups[key] = (
            group_names,
            values.map({g: i for i, g in enumerate(group_names)}).to_numpy(np.int64),
        )

    dense = None
    if spec.dense_reward is not None:
        dense = (frame[names.REWARD] == names.DENSE).to_numpy()

    success = spec.outcome == "success"
    return Design(
        spec=spec,
        settings=setting_order,
        setting_index=setting_index,
        sizes=sizes,
        reference=np.asarray(reference, dtype=float),
        successes=frame[names.SUCCESSES].to_numpy(np.int64) if success else None,
        trials=frame[names.TRIALS].to_numpy(np.int64) if success else None,
        loss=None if success else frame[names.LOSS].to_numpy(float),
        dense=dense,
        model_size=model_size,
        size_reference=size_reference,
        size_groups=size_groups,
        size_group_index=size_groups_idx,
        exponent_groups=exponent_groups,
    )


# --- writing ------------------------------------------------------------------------------


def write_table(frame: pd.DataFrame, path: str | Path, overwrite: bool = False) -> Path:
    """Write CSV or parquet atomically (temporary file, then rename).

    Refuses to replace an existing file unless ``overwrite`` is set.
    """
    path = Path(path)
    kind = path.suffix.lower()
    if kind == ".csv":
        return write_atomically(path, lambda tmp: frame.to_csv(tmp, index=False), overwrite)
    if kind in (".parquet", ".pq"):
        return write_atomically(path, lambda tmp: frame.to_parquet(tmp, index=False), overwrite)
    raise ValueError(f"{path}: unknown table format {path.suffix!r}; use .csv or .parquet")
