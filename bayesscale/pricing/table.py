"""Pricing tables: reading and checking the runs of synthetic-data generators.

A pricing table has one row per evaluated run: ``method`` (the generator), ``axis`` (the
axis it synthesises: ``env``, ``task``, ``traj`` or a cross-axis label), ``real`` and
``synthetic`` (counts on that axis; ``r = synthetic / real``), ``seed`` and the outcome,
``successes`` + ``trials`` or a continuous ``loss``. Other columns are kept, unused.

Unusable input is left out with a ``PricingWarning`` that names it (never silently), or
refused with ``strict=True``: pure-synthetic rows (``real = 0``), methods with no pure-real
baseline (``synthetic = 0`` rows), and methods whose ratio grid is too coarse to place r*.

>>> spec = load_pricing_spec()  # doctest: +SKIP
>>> table = load_pricing("data/pricing/pricing.csv", spec)  # doctest: +SKIP
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayesscale import names
from bayesscale.data.observations import (
    check_duplicate_rows,
    check_numeric,
    column_error,
    frame_sha256,
    missing_columns,
    number_text,
    read_table,
    rows_text,
)
from bayesscale.pricing.spec import MIN_POSITIVE_RATIOS, PricingError, PricingSpec, PricingWarning

# --- pricing tables ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Exclusion:
    """Something left out of a fit: which method (or None for rows), which rows, and why."""

    reason: str
    method: str | None
    rows: tuple[int, ...]
    message: str


@dataclass(frozen=True)
class PricingTable:
    """The usable rows of a validated pricing table, and what was left out.

    ``frame`` keeps the original 0-based row position in the column ``_row``.
    """

    frame: pd.DataFrame
    source: str
    sha256: str
    exclusions: tuple[Exclusion, ...] = ()

    @property
    def methods(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.frame[names.METHOD]))


def load_pricing(path: str | Path, spec: PricingSpec, strict: bool = False) -> PricingTable:
    """Read and validate a pricing table (CSV or parquet); see :func:`validate_pricing`."""
    frame, digest = read_table(path)
    return validate_pricing(frame, spec, source=str(path), sha256=digest, strict=strict)


def validate_pricing(
    frame: pd.DataFrame,
    spec: PricingSpec,
    source: str = "<table>",
    sha256: str | None = None,
    strict: bool = False,
) -> PricingTable:
    """Check a pricing table; return its usable rows and the exclusions.

    Malformed data (missing columns, non-numbers, negative counts, successes above trials, a
    method listed under two axes, rows with no data at all) raises ``PricingError``. Usable
    tables with unusable parts leave them out with a ``PricingWarning`` naming each, or
    raise with ``strict=True``:

    * rows with ``synthetic > 0`` and ``real = 0``: the ratio is undefined (pure synthetic);
    * methods with no pure-real baseline (no row with ``synthetic = 0``);
    * methods with fewer than 3 distinct ratios ``r > 0``: too coarse to place r*.
    """
    if len(frame) == 0:
        raise PricingError(f"{source}: the table has no rows")
    frame = frame.reset_index(drop=True).copy()
    _check_malformed(frame, spec, source)

    # two runs of one method, mix and seed must agree; identical copies are kept, warned
    check_duplicate_rows(
        frame,
        [names.METHOD, names.AXIS_COLUMN, names.REAL, names.SYNTHETIC, names.SEED],
        [names.SUCCESSES, names.TRIALS] if spec.outcome == "success" else [names.LOSS],
        source,
        PricingError,
        PricingWarning,
        unit="run",
        stacklevel=2,  # the line that called validate_pricing, as its other warnings
    )

    frame, exclusions = _exclusions(frame, source)
    if exclusions:
        text = "\n  ".join(e.message for e in exclusions)
        if strict:
            raise PricingError(f"refusing to leave parts of the table out (strict):\n  {text}")
        warnings.warn(f"left out of the pricing fit:\n  {text}", PricingWarning, stacklevel=2)
    if frame.empty:
        raise PricingError(f"{source}: nothing usable is left after the exclusions above")
    digest = sha256 if sha256 is not None else frame_sha256(frame.drop(columns="_row"))
    return PricingTable(frame.reset_index(drop=True), source, digest, tuple(exclusions))


def _check_malformed(frame: pd.DataFrame, spec: PricingSpec, source: str) -> None:
    """``PricingError`` for malformed data: missing columns or labels, non-numbers, negative
    counts, successes above trials, a run with no data, a method under two axes. Labels are
    stripped and counts made integers in place."""
    hints = missing_columns(frame, spec.required_columns())
    if hints:
        raise PricingError(
            f"{source}: missing column(s) {hints} of a pricing table; "
            f"the table has {[str(c) for c in frame.columns]}"
        )
    for column in (names.METHOD, names.AXIS_COLUMN):
        values = frame[column]
        empty = frame.index[values.isna() | (values.astype(str).str.strip() == "")]
        if len(empty):
            raise _pfail(source, column, empty, "value is missing")
        frame[column] = values.astype(str).str.strip()
    numeric = [names.REAL, names.SYNTHETIC, names.SEED]
    numeric += [names.SUCCESSES, names.TRIALS] if spec.outcome == "success" else [names.LOSS]
    for column in numeric:
        frame[column] = check_numeric(frame, column, source, error=PricingError)
    for column in (names.REAL, names.SYNTHETIC, names.SEED):
        bad = frame.index[frame[column] < 0]
        if len(bad):
            raise _pfail(
                source,
                column,
                bad,
                f"counts must be >= 0, got {number_text(frame[column][bad[0]])}",
            )
    both_zero = frame.index[(frame[names.REAL] == 0) & (frame[names.SYNTHETIC] == 0)]
    if len(both_zero):
        raise _pfail(
            source, f"{names.REAL},{names.SYNTHETIC}", both_zero, "a run with no data at all"
        )
    if spec.outcome == "success":
        for column in (names.SUCCESSES, names.TRIALS, names.SEED):
            values = frame[column].to_numpy(float)
            bad = frame.index[values != np.round(values)]
            if len(bad):
                raise _pfail(source, column, bad, "counts must be whole numbers")
            frame[column] = frame[column].astype(np.int64)
        bad = frame.index[frame[names.SUCCESSES] < 0]
        if len(bad):
            raise _pfail(source, names.SUCCESSES, bad, "counts must be >= 0")
        bad = frame.index[frame[names.TRIALS] < 1]
        if len(bad):
            raise _pfail(source, names.TRIALS, bad, "trials must be >= 1")
        bad = frame.index[frame[names.SUCCESSES] > frame[names.TRIALS]]
        if len(bad):
            raise _pfail(source, names.SUCCESSES, bad, "successes exceed trials")
    else:
        bad = frame.index[frame[names.LOSS] <= 0]
        if len(bad):
            raise _pfail(source, names.LOSS, bad, "a loss must be > 0")
    axes_per_method = frame.groupby(names.METHOD)[names.AXIS_COLUMN].nunique()
    for method in axes_per_method[axes_per_method > 1].index:
        rows = frame.index[frame[names.METHOD] == method]
        found = sorted(set(frame.loc[rows, names.AXIS_COLUMN]))
        raise _pfail(
            source,
            names.AXIS_COLUMN,
            rows,
            f"method {method!r} is listed under several axes {found}; a method synthesises "
            "one axis (give a cross-axis generator its own label, e.g. 'cross')",
        )


def _exclusions(frame: pd.DataFrame, source: str) -> tuple[pd.DataFrame, list[Exclusion]]:
    """The usable rows (with their positions in the table, ``_row``) and what is left out:
    pure synthetic rows, and methods without a pure-real baseline or with too coarse a ratio
    grid."""
    frame["_row"] = np.arange(len(frame))
    exclusions: list[Exclusion] = []
    pure_synthetic = frame.index[(frame[names.REAL] == 0) & (frame[names.SYNTHETIC] > 0)]
    if len(pure_synthetic):
        methods = sorted(set(frame.loc[pure_synthetic, names.METHOD]))
        exclusions.append(
            Exclusion(
                "pure_synthetic",
                None,
                tuple(int(i) for i in pure_synthetic),
                f"{source}: column {names.REAL!r}, {rows_text(pure_synthetic, source)}: "
                f"synthetic > 0 with real = 0 (methods {methods}): the ratio synthetic/real is "
                "undefined and kappa(r) cannot place these runs; rows left out",
            )
        )
        frame = frame.drop(index=pure_synthetic)
    ratio = frame[names.SYNTHETIC] / frame[names.REAL]
    for method, rows in frame.groupby(names.METHOD, sort=False).groups.items():
        method = str(method)
        r = ratio[rows]
        positions = frame.loc[rows, "_row"].to_numpy()
        if not (r == 0).any():
            exclusions.append(
                Exclusion(
                    "no_baseline",
                    method,
                    tuple(int(i) for i in positions),
                    f"{source}: method {method!r} ({rows_text(positions, source)}): no pure-real "
                    f"baseline (no row with {names.SYNTHETIC} = 0), so success cannot be "
                    "normalised and kappa is not identified; method left out",
                )
            )
            continue
        positive = np.unique(np.round(r[r > 0].to_numpy(), 9))
        if len(positive) < MIN_POSITIVE_RATIOS:
            exclusions.append(
                Exclusion(
                    "coarse_grid",
                    method,
                    tuple(int(i) for i in positions),
                    f"{source}: method {method!r} ({rows_text(positions, source)}): ratio grid "
                    f"{[0.0, *positive.round(4).tolist()]} too coarse to place r*: kappa0, the "
                    f"collapse scale and r* need at least {MIN_POSITIVE_RATIOS} distinct ratios "
                    "> 0; method left out",
                )
            )
    dropped = {e.method for e in exclusions if e.method is not None}
    return frame[~frame[names.METHOD].isin(dropped)], exclusions


def _pfail(source: str, column: str, positions: Any, problem: str) -> ValueError:
    """A :class:`PricingError` naming the file, the column and the rows."""
    return column_error(source, column, positions, problem, PricingError)
