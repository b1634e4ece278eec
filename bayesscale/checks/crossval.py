"""Out-of-scale cross-validation: refit without a slice of the data, predict that slice.

A leave-out rule ``COLUMN=VALUE`` removes every row whose ``COLUMN`` equals ``VALUE``;
``COLUMN=max`` removes the rows at the column's largest value (the largest scale of an axis,
the largest model); ``COLUMN>VALUE`` (a numeric column) every row above ``VALUE`` (the scales
of an axis beyond it). The law is refitted to the rest and the removed rows are predicted by
:func:`bayesscale.checks.heldout.check`, so each fold reports, per setting of the held-out rows and
overall, the number of rows, the mean absolute error ``mean |k/n - median(k~/n)|``, the
coverage of the central ``prob`` predictive interval and the mean predictive percentile
(0.5 and ``prob`` when calibrated). This is the paper's extrapolation test (PAPER.md section
5: fit on the smaller models and budgets, predict the larger run) made routine.

Removing every row of a setting (its only model size) predicts that setting as a new model of
its size group (:mod:`bayesscale.law.predict`); removing a whole group (a domain) needs
``new_groups="pooled"``.

Example
-------
>>> result = crossval(table, spec, ["rollouts=max"], FitConfig(draws=300))  # doctest: +SKIP
>>> result.folds[0].check.attrs["coverage"]  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bayesscale import names
from bayesscale.checks.heldout import ATTR_SOURCE, by_setting, check, summarise_rows
from bayesscale.core.intervals import DEFAULT_PROB
from bayesscale.data.observations import (
    ObservationError,
    Table,
    frame_sha256,
    setting_labels,
    validate,
)
from bayesscale.data.spec import ModelSpec
from bayesscale.jobs import run_jobs
from bayesscale.law.predict import classify_settings, table_layout

MAX = "max"
EQUALS, ABOVE = "=", ">"  # the leave-out rules' operators


class CrossvalError(ValueError):
    """A leave-out rule that cannot be applied to the table."""


@dataclass(frozen=True)
class LeaveOut:
    """``column = value`` (``value == "max"``: the column's largest value), or with ``op``
    ``">"``: ``column > value``."""

    column: str
    value: str
    op: str = EQUALS

    @classmethod
    def parse(cls, text: str) -> LeaveOut:
        """``"n_envs=max"``, ``"params_b=14"``, ``"domain=search"``, ``"n_envs>64"``.

        >>> LeaveOut.parse("rollouts=max")
        LeaveOut(column='rollouts', value='max', op='=')
        >>> str(LeaveOut.parse("n_envs > 64"))
        'n_envs>64'
        """
        op = ABOVE if ABOVE in text and EQUALS not in text else EQUALS
        column, sep, value = text.partition(op)
        if not sep or not column.strip() or not value.strip():
            raise CrossvalError(
                f"leave-out {text!r}: expected COLUMN=VALUE, COLUMN=max or COLUMN>VALUE"
            )
        return cls(column.strip(), value.strip(), op)

    def __str__(self) -> str:
        return f"{self.column}{self.op}{self.value}"

    def mask(self, table: Table, spec: ModelSpec) -> tuple[np.ndarray, str]:
        """Boolean mask of the rows to leave out, and what it matched (``n_envs=256``)."""
        frame = table.frame
        column = self.column
        axis_column = {a.name: a.column for a in spec.axes}
        if column not in frame.columns and column in axis_column:
            column = axis_column[column]  # an axis name stands for its column
        if column not in frame.columns:
            raise CrossvalError(
                f"{table.source}: leave-out {self}: no column {column!r}; the table has "
                f"{[str(c) for c in frame.columns]} (or an axis name {list(axis_column)})"
            )
        values = frame[column]
        numeric = pd.api.types.is_numeric_dtype(values)
        if self.op == ABOVE:
            mask, matched = self._above(values, column, numeric, table.source)
        elif self.value.lower() == MAX:
            if not numeric:
                raise CrossvalError(
                    f"{table.source}: leave-out {self}: column {column!r} is not numeric; name a "
                    f"value, one of {sorted(map(str, values.unique()))[:20]}"
                )
            target = float(values.max())
            mask = np.isclose(values.to_numpy(float), target, rtol=1e-12, atol=0.0)
            matched = f"{column}={target:g}"
        elif numeric:
            try:
                target = float(self.value)
            except ValueError as exc:
                raise CrossvalError(
                    f"{table.source}: leave-out {self}: column {column!r} is numeric, got "
                    f"{self.value!r}"
                ) from exc
            mask = np.isclose(values.to_numpy(float), target, rtol=1e-9, atol=0.0)
            matched = f"{column}={target:g}"
        else:
            mask = (values.astype(str).str.strip() == self.value).to_numpy()
            matched = f"{column}={self.value}"
        if not mask.any():
            shown = sorted(map(str, values.unique()))
            raise CrossvalError(
                f"{table.source}: leave-out {self}: no row has {matched}; column {column!r} "
                f"takes {shown[:20]}{' ...' if len(shown) > 20 else ''}"
            )
        if mask.all():
            raise CrossvalError(
                f"{table.source}: leave-out {self}: every row has {matched}; nothing is left to fit"
            )
        return mask, matched

    def _above(
        self, values: pd.Series, column: str, numeric: bool, source: str
    ) -> tuple[np.ndarray, str]:
        """The rows of ``column > value`` (``mask``'s two refusals follow it)."""
        try:
            if not numeric:
                raise ValueError
            target = float(self.value)
        except ValueError as exc:
            raise CrossvalError(
                f"{source}: leave-out {self}: COLUMN>VALUE needs a numeric column and a "
                f"number; column {column!r} is {'numeric' if numeric else 'not numeric'}"
            ) from exc
        mask = values.to_numpy(float) > target * (1 + 1e-12)
        return mask, f"{column}>{target:g}"


@dataclass(frozen=True)
class Split:
    """A leave-out applied to a table: the training table (validated for fitting), the held-out
    rows, their positions in the original table, and what the rule matched (``n_envs=256``)."""

    train: Table
    held: Table
    positions: np.ndarray
    matched: str


def split(
    table: Table, spec: ModelSpec, leave_out: LeaveOut, new_groups: str | None = None
) -> Split:
    """Apply ``leave_out``. Fails before any sampling when the training rows cannot be fitted
    (an axis left with too few sizes) or a held-out setting could not be predicted from the
    refit (the error names the original rows)."""
    frame = table.frame.reset_index(drop=True)
    table = Table(frame, table.source, table.sha256)
    mask, matched = leave_out.mask(table, spec)
    train_raw = frame.loc[~mask].reset_index(drop=True)
    source = f"{table.source} without {matched}"
    try:
        train_frame = validate(train_raw, spec, source=source)
    except ObservationError as exc:
        raise CrossvalError(
            f"leaving out {matched} leaves data the law cannot be fitted to: {exc}"
        ) from exc
    train = Table(train_frame, source, frame_sha256(train_raw))
    held_frame = frame.loc[mask]  # original index: errors name the original rows
    layout = table_layout(train, spec)
    classify_settings(
        held_frame, layout, setting_labels(held_frame, spec), new_groups, table.source
    )
    held = Table(held_frame.reset_index(drop=True), table.source, table.sha256)
    return Split(train, held, np.flatnonzero(mask), matched)


@dataclass(frozen=True)
class Fold:
    """One leave-out: the rule, what it matched, the refit and the check of the left-out rows."""

    leave_out: LeaveOut
    matched: str
    train: Table
    fit: xr.DataTree
    check: pd.DataFrame

    def groups(self) -> pd.DataFrame:
        """Per held-out setting: ``n_rows``, ``mae``, ``coverage``, ``mean_percentile``."""
        return by_setting(self.check)

    def to_dict(self) -> dict[str, Any]:
        """Plain data: the rule, the training size, overall and per-setting numbers."""
        return {
            "leave_out": str(self.leave_out),
            "matched": self.matched,
            "n_train": len(self.train.frame),
            "overall": summarise_rows(self.check),
            "groups": self.groups().to_dict(orient="records"),
            "new_settings": sorted(
                set(self.check.loc[self.check[names.NEW_SETTING], names.SETTING])
            ),
        }


@dataclass(frozen=True)
class CrossvalResult:
    """Every fold of a cross-validation of the table at ``source``."""

    source: str
    prob: float
    folds: tuple[Fold, ...]

    def rows(self) -> pd.DataFrame:
        """Every fold's check table, with a ``fold`` column."""
        parts = []
        for fold in self.folds:
            part = fold.check.copy()
            part.insert(0, names.FOLD, str(fold.leave_out))
            parts.append(part)
        out = pd.concat(parts, ignore_index=True)
        out.attrs = {names.ATTR_PROB: self.prob, ATTR_SOURCE: self.source}
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready), one entry per fold."""
        return {
            "source": self.source,
            "prob": self.prob,
            "folds": [fold.to_dict() for fold in self.folds],
        }


def crossval(
    table: Table,
    spec: ModelSpec,
    leave_outs: Sequence[LeaveOut | str],
    config: Any = None,
    prob: float = DEFAULT_PROB,
    new_groups: str | None = None,
    seed: int | None = None,
) -> CrossvalResult:
    """Refit once per leave-out rule (``config``: a :class:`bayesscale.sampling.config.FitConfig`)
    and check the left-out rows against the refit; ``seed`` (default: the config's) drives the
    predictive draws."""
    rules = [r if isinstance(r, LeaveOut) else LeaveOut.parse(r) for r in leave_outs]
    if not rules:
        raise CrossvalError("give at least one leave-out rule (COLUMN=VALUE or COLUMN=max)")
    if not 0 < prob < 1:
        raise ValueError(f"prob must be in (0, 1), got {prob}")
    splits = [(rule, split(table, spec, rule, new_groups)) for rule in rules]  # before sampling
    from bayesscale.law.inference import FitConfig, fit  # PyMC and JAX: once the rules hold

    config = config or FitConfig()
    seed = config.seed if seed is None else seed
    folds = []
    for rule, part in splits:
        refit = fit(part.train, spec, config)
        result = check(
            refit, part.held, prob=prob, new_groups=new_groups, seed=seed, rows=part.positions
        )
        folds.append(Fold(rule, part.matched, part.train, refit, result))
    return CrossvalResult(table.source, prob, tuple(folds))


@dataclass(frozen=True)
class _CrossvalJobs:
    table: Any
    spec: Any
    config: Any
    prob: float
    new_groups: str | None
    seed: int | None


def _crossval_job(jobs: _CrossvalJobs, rule: str, _seed: int) -> Any:
    [fold] = crossval(
        jobs.table, jobs.spec, [rule], jobs.config, jobs.prob, jobs.new_groups, jobs.seed
    ).folds
    return fold


def crossval_jobs(
    table: Table,
    spec: ModelSpec,
    leave_outs: Sequence[LeaveOut | str],
    config: Any = None,
    prob: float | None = None,
    new_groups: str | None = None,
    seed: int | None = None,
    ray_address: str | None = None,
    workers: int | None = None,
) -> CrossvalResult:
    """:func:`crossval` with one fold per job of :func:`bayesscale.jobs.run_jobs` (serially
    or on Ray).

    Every fold of ``crossval`` refits with the same ``config`` (its seed) and checks with the
    same ``seed``, whatever the other folds are: the job seed is not used, and the result is
    the one ``crossval(table, spec, leave_outs, ...)`` returns, folds in order. Each rule is
    checked in this process first (:func:`split`), before any job starts.

    >>> result = crossval_jobs(table, spec, ["rollouts=max", "n_envs=max"], workers=2)  # doctest: +SKIP
    """
    rules = [str(r if isinstance(r, LeaveOut) else LeaveOut.parse(r)) for r in leave_outs]
    for rule in rules:  # fail before any sampling, as crossval does
        split(table, spec, LeaveOut.parse(rule), new_groups)
    prob = DEFAULT_PROB if prob is None else prob
    jobs = _CrossvalJobs(table, spec, config, prob, new_groups, seed)
    folds = run_jobs(_crossval_job, rules, 0, shared=jobs, ray_address=ray_address, workers=workers)
    return CrossvalResult(table.source, prob, tuple(folds))


def format_text(result: dict[str, Any]) -> str:
    """A terminal rendering of :meth:`bayesscale.checks.crossval.CrossvalResult.to_dict`."""
    prob = result["prob"]
    lines = [f"out-of-scale cross-validation of {result['source']} ({prob:.0%} intervals)"]
    for fold in result["folds"]:
        o = fold["overall"]
        lines += [
            "",
            f"left out {fold['matched']}: refit on {fold['n_train']} rows, predicted "
            f"{o[names.N_ROWS]} rows: coverage {o[names.COVERAGE]:.3f} (calibrated: about "
            f"{prob:.2f}), mean percentile {o[names.MEAN_PERCENTILE]:.3f} (about 0.5), "
            f"MAE {o[names.MAE]:.4f}",
        ]
        if fold["new_settings"]:
            lines.append(f"  predicted from the population: {', '.join(fold['new_settings'])}")
        width = max([len("setting"), *(len(g[names.SETTING]) for g in fold["groups"])])
        lines.append(
            f"  {'setting'.ljust(width)}  {'rows':>5}  {'coverage':>8}  {'mean pct':>8}  {'MAE':>7}"
        )
        for g in fold["groups"]:
            lines.append(
                f"  {g[names.SETTING].ljust(width)}  {g[names.N_ROWS]:>5d}  "
                f"{g[names.COVERAGE]:>8.3f}  {g[names.MEAN_PERCENTILE]:>8.3f}  {g[names.MAE]:>7.4f}"
            )
    return "\n".join(lines)
