"""How far beyond the sweep the law keeps its coverage: the out-of-scale check behind the
recipe's reach.

For each axis ``a`` of the law, the largest scales are left out and the law refitted to the
rest: every row with ``D_a > t_a`` (:class:`~bayesscale.checks.crossval.LeaveOut` ``COLUMN>VALUE``),
where ``t_a`` is the largest swept value at most ``D_a,max / DEPTH`` (so that the left-out rows
reach about ``DEPTH`` times beyond the refit's data), raised where needed so that the refit keeps
``MIN_KEPT`` values of the axis. Where that would leave another axis one value (a
one-axis-at-a-time design whose other sweeps run at this axis's largest value), the axis is
checked on its own sweep alone, refitted with the law of that axis alone (:func:`rules`). The
left-out rows are predicted from the refit (:func:`bayesscale.checks.heldout.check_prediction`);
each row's extrapolation ratio is

.. math::

    r = D_a / D_{a,\\max}^{\\text{refit}}

(its size over the largest value of the axis in its setting's refitted rows). Per ratio bucket
(``<=2x``, ``2-4x``, ``4-8x``, ``>8x``) the rows inside their central ``prob`` interval are
counted and tested two-sided against ``Binomial(n, prob)``
(:func:`bayesscale.checks.heldout.calibration`); coverage below ``prob`` at ``p < 0.05`` does
not hold, and where the count's own Monte Carlo error (:mod:`bayesscale.checks.coverage_noise`)
could move it across that line the bucket is *borderline* and does not hold either
(:func:`bucket_verdict`). The axis's **reach** is how far that coverage
holds (:mod:`bayesscale.law.reach`, which reads it from the fit). Rows of one setting share
its posterior, so the binomial test overstates the evidence (as the held-out check says).

A stacked fit (``bayesscale fit --forms ...``) is checked as a stack: each form
with weight is refitted, and the left-out rows are predicted by the forms' mixture at the
stack's weights.

``bayesscale fit`` (unless given ``--no-out-of-scale``) stores the result in the fit file
(group ``out_of_scale``) and the recipe's headline is bounded per axis at that reach
(:meth:`bayesscale.fits.law.LawFit.reach`). Each refit is one job of
:func:`bayesscale.jobs.run_jobs` (serially, on local Ray workers or on a Ray cluster), seeded
by the fit configuration's seed.

Example
-------
>>> evidence = out_of_scale(table, spec, FitConfig(seed=1))  # doctest: +SKIP
>>> reach(evidence)  # bayesscale.law.reach  # doctest: +SKIP
{'env': 4.0, 'task': 4.0, 'traj': 2.0}
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike, NDArray

from bayesscale import names
from bayesscale.checks.coverage_noise import count_mcse
from bayesscale.checks.crossval import CrossvalError, LeaveOut, Split, split
from bayesscale.checks.heldout import (
    CALIBRATION_ALPHA,
    DEFAULT_REPLICATES,
    binomial_p_value,
    calibration,
    check_prediction,
    check_seed,
    predictive_rates,
)
from bayesscale.core.intervals import DEFAULT_PROB
from bayesscale.data.extrapolation import BUCKET_EDGES, BUCKETS
from bayesscale.data.observations import ObservationError, Table
from bayesscale.data.spec import ModelSpec, SpecError, with_axes, with_form
from bayesscale.jobs import run_jobs
from bayesscale.law.drift import best_tau, beyond_moments, drift_attr
from bayesscale.law.predict import Prediction, draw_shares, mixture, predict
from bayesscale.law.reach import (
    ATTR_FORMS,
    ATTR_UNTESTED,
    AXIS,
    BUCKET,
    HOLDS,
    INSIDE,
    INSIDE_MCSE,
    MAX_RATIO,
    P_VALUE,
    ROWS,
    RULE,
    VERDICT,
)
from bayesscale.law.sensitivity import BORDERLINE_Z
from bayesscale.sampling.config import FitConfig

Array = NDArray[np.float64]

DEPTH: Final = 4.0  # the left-out rows reach about this many times beyond the refit's data
BORDERLINE: Final = "borderline"  # a bucket whose verdict its Monte Carlo error can flip
MIN_KEPT: Final = 3  # values of the axis the refit keeps (a power law with a floor needs 3)


def threshold(values: Sequence[float], depth: float = DEPTH, min_kept: int = MIN_KEPT) -> float:
    """The largest value the refit keeps: the largest of ``values`` at most ``max / depth``,
    at least the ``min_kept``-th smallest; ``nan`` when fewer than ``min_kept + 1`` distinct
    values leave nothing to leave out.

    >>> threshold([8, 16, 32, 64, 128, 256])
    64.0
    >>> threshold([6, 8, 10, 14, 18, 24])  # 24 / 4 = 6 would keep one value
    10.0
    >>> threshold([1, 2, 4])
    nan
    """
    distinct = np.unique(np.asarray(values, dtype=float))
    if distinct.size <= min_kept:
        return float("nan")
    below = distinct[distinct <= distinct[-1] / depth * (1 + 1e-12)]
    top = float(below[-1]) if below.size else float(distinct[0])
    return max(top, float(distinct[min_kept - 1]))


@dataclass(frozen=True)
class Rule:
    """One axis's leave-out: ``leave_out`` (``n_envs>64``) over the whole table, or, with
    ``sweep`` (the other axes' columns and values), over the axis's own sweep alone, the law
    refitted with that axis alone (:func:`bayesscale.data.spec.with_axes`)."""

    axis: str
    leave_out: str
    sweep: tuple[tuple[str, float], ...] = ()

    def __str__(self) -> str:
        if not self.sweep:
            return self.leave_out
        held = ", ".join(f"{c}={v:g}" for c, v in self.sweep)
        return f"{self.leave_out} in its own sweep ({held})"

    def rows(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The rows the refit and its check use: every row, or the axis's own sweep."""
        mask = np.ones(len(frame), dtype=bool)
        for column, value in self.sweep:
            mask &= np.isclose(frame[column].to_numpy(float), value, rtol=1e-12, atol=0.0)
        return frame.loc[mask].reset_index(drop=True)

    def spec(self, spec: ModelSpec) -> ModelSpec:
        """The law the refit fits: ``spec``, or the axis alone on its own sweep."""
        return with_axes(spec, [self.axis]) if self.sweep else spec


def own_sweep(frame: pd.DataFrame, spec: ModelSpec, axis: str) -> tuple[tuple[str, float], ...]:
    """The other axes' values under which ``axis`` takes the most distinct values: where a
    one-axis-at-a-time design sweeps it."""
    column = spec.axes[spec.axis_names.index(axis)].column
    others = [a.column for a in spec.axes if a.name != axis]
    if not others:
        return ()
    counts = frame.groupby(others)[column].nunique()
    best = counts.idxmax()
    values = best if isinstance(best, tuple) else (best,)
    return tuple((c, float(v)) for c, v in zip(others, values, strict=True))


def rules(table: Table, spec: ModelSpec) -> tuple[dict[str, Rule], dict[str, str]]:
    """Per axis, its leave-out (:class:`Rule`), and for each axis that cannot be tested, why.

    The largest scales of the axis are left out of the whole table where the refit keeps at
    least ``MIN_KEPT`` values of every other axis. In a one-axis-at-a-time design whose other
    sweeps run at this axis's largest value that leaves another axis one value; then the
    check uses the axis's own sweep alone (the rows at the other axes' anchor), refitting the
    law with that axis alone. An axis is untested where neither can be refitted (too few
    values, a term of the left-out axes in the spec, or a refit the law cannot fit)."""
    usable: dict[str, Rule] = {}
    untested: dict[str, str] = {}
    frame = table.frame
    for axis in spec.axes:
        rule = _whole_table_rule(frame, spec, axis.name)
        if rule is None:
            sweep = own_sweep(frame, spec, axis.name)
            values = Rule(axis.name, "", sweep).rows(frame)[axis.column].to_numpy(float)
            t = threshold(values)
            if not np.isfinite(t):
                untested[axis.name] = (
                    f"{len(np.unique(values))} values of {axis.column} in its own sweep"
                )
                continue
            rule = Rule(axis.name, f"{axis.column}>{t:g}", sweep)
        try:
            part_spec = rule.spec(spec)
            part = Table.from_frame(rule.rows(frame), part_spec, source=table.source)
            split(part, part_spec, LeaveOut.parse(rule.leave_out))
        except (CrossvalError, SpecError, ObservationError) as exc:
            untested[axis.name] = f"{rule}: {exc}"
        else:
            usable[axis.name] = rule
    return usable, untested


def _whole_table_rule(frame: pd.DataFrame, spec: ModelSpec, axis: str) -> Rule | None:
    """The leave-out over the whole table, where it keeps ``MIN_KEPT`` values of every
    other axis; else ``None``."""
    column = spec.axes[spec.axis_names.index(axis)].column
    values = frame[column].to_numpy(float)
    t = threshold(values)
    if not np.isfinite(t):
        return None
    kept = frame.loc[values <= t * (1 + 1e-12)]
    if any(kept[b.column].nunique() < MIN_KEPT for b in spec.axes if b.name != axis):
        return None
    return Rule(axis, f"{column}>{t:g}")


@dataclass(frozen=True)
class _Jobs:
    table: Table
    spec: ModelSpec
    config: FitConfig
    prob: float


def refit_without(
    rule: Rule, form: str | None, table: Table, spec: ModelSpec, config: FitConfig
) -> tuple[xr.DataTree, Split]:
    """The law (with ``form`` on every axis, or ``spec``'s own forms) refitted to ``table``
    without ``rule``'s rows, and the split whose held rows it left out."""
    from bayesscale.law.inference import fit

    spec = rule.spec(spec)
    spec = spec if form is None else with_form(spec, form)
    rows = Table.from_frame(rule.rows(table.frame), spec, source=table.source)
    part = split(rows, spec, LeaveOut.parse(rule.leave_out))
    return fit(part.train, spec, config), part


def _refit_job(
    jobs: _Jobs, item: tuple[Rule, str | None], _seed: int
) -> tuple[xr.DataTree, Prediction]:
    """Refit without ``rule``'s rows (:func:`refit_without`) and predict them."""
    rule, form = item
    refit, part = refit_without(rule, form, jobs.table, jobs.spec, jobs.config)
    seed = jobs.config.seed
    return refit, predict(refit, part.held, seed=seed, source=part.held.source, observed=True)


def bucket_verdict(
    inside: int, rows: int, prob: float, mcse: float, verdict: str | None
) -> tuple[bool, str]:
    """Whether a bucket's coverage holds, and its verdict. A count ``k`` of ``n`` holds unless
    it is below ``prob n`` at a two-sided binomial ``p < CALIBRATION_ALPHA`` (the held-out
    check's *over-confident*, :func:`bayesscale.checks.heldout.calibration`). The count
    carries the refit's Monte Carlo error ``mcse`` (:mod:`bayesscale.checks.coverage_noise`):
    where the rule decides differently at ``k - BORDERLINE_Z mcse`` and ``k + BORDERLINE_Z
    mcse``, rounded outward to whole rows (so any error above 0 moves the count at least one
    row; within ``0 .. n``), the bucket is ``"borderline"`` and does not hold either (reach is
    vouched for only where the check decides it). Refits of the reference data have given 52
    and 51 of 63 at the rollouts' 4x (p = 0.057 and 0.032), with errors of 0.2-0.5 rows;
    rounded outward, 52 reaches 51, so the bucket is borderline with each.

    >>> bucket_verdict(52, 63, 0.9, 1.0, "within chance")
    (False, 'borderline')
    >>> bucket_verdict(52, 63, 0.9, 0.0, "within chance")
    (True, 'within chance')
    >>> bucket_verdict(59, 63, 0.9, 1.0, "within chance")
    (True, 'within chance')
    """

    def holds(k: int) -> bool:
        return not (k < prob * rows and binomial_p_value(k, rows, prob) < CALIBRATION_ALPHA)

    low = max(0, int(np.floor(inside - BORDERLINE_Z * mcse)))
    high = min(rows, int(np.ceil(inside + BORDERLINE_Z * mcse)))
    if holds(low) != holds(high):
        return False, BORDERLINE
    return holds(inside), str(verdict)


def bucket_index(table: pd.DataFrame, axis: str) -> NDArray[np.int64]:
    """Each check-table row's ratio bucket along ``axis`` (a position in ``BUCKETS``), -1 for
    a row inside the refit's range for its setting (ratio <= 1)."""
    ratio = table[axis + names.OVER_MAX_SUFFIX].to_numpy(float)
    index = np.searchsorted(np.asarray(BUCKET_EDGES), ratio, side="left")
    return np.where(ratio > 1, index, -1).astype(np.int64)


def bucket_records(
    table: pd.DataFrame, axis: str, rule: str, prob: float, mcse: ArrayLike | None = None
) -> pd.DataFrame:
    """Per ratio bucket of a check table's rows along ``axis`` (rows at a ratio <= 1, inside
    the refit's range for their setting, are left out): rows, rows inside with that count's
    Monte Carlo error (``mcse``, per bucket of ``BUCKETS``; 0 where not given), the coverage
    test's p-value, whether it holds and its verdict (:func:`bucket_verdict`), the largest
    ratio."""
    ratio = table[axis + names.OVER_MAX_SUFFIX].to_numpy(float)
    index = bucket_index(table, axis)
    errors = np.zeros(len(BUCKETS)) if mcse is None else np.asarray(mcse, dtype=float)
    records = []
    for b, label in enumerate(BUCKETS):
        part = table.loc[index == b]
        if part.empty:
            continue
        test = calibration(part, prob)
        error = float(errors[b])
        holds, verdict = bucket_verdict(test["inside"], len(part), prob, error, test["verdict"])
        records.append(
            {
                AXIS: axis,
                BUCKET: label,
                RULE: rule,
                ROWS: len(part),
                INSIDE: test["inside"],
                INSIDE_MCSE: error,
                names.COVERAGE: test["inside"] / len(part),
                P_VALUE: test["p_value"],
                HOLDS: int(holds),
                VERDICT: verdict,
                MAX_RATIO: float(ratio[index == b].max()),
            }
        )
    return pd.DataFrame.from_records(records)


def _count_mcse(
    pred: Prediction,
    table: pd.DataFrame,
    axis: str,
    prob: float,
    seed: int,
    segments: Sequence[int],
) -> Array:
    """Per bucket of ``BUCKETS``, the Monte Carlo error of the count of rows inside, from the
    check's own predictive draws (:func:`bayesscale.checks.heldout.predictive_rates`),
    resampled within ``segments`` (chains, or a mixture's forms)."""
    rng = np.random.default_rng(check_seed(seed))
    _, rates, observed = predictive_rates(pred, rng, DEFAULT_REPLICATES)
    return count_mcse(
        rates,
        observed,
        bucket_index(table, axis),
        len(BUCKETS),
        prob,
        seed=[seed, 2],
        per_draw=DEFAULT_REPLICATES,
        segments=segments,
    )


def out_of_scale(
    table: Table,
    spec: ModelSpec,
    config: FitConfig | None = None,
    prob: float = DEFAULT_PROB,
    workers: int | None = None,
    ray_address: str | None = None,
    forms: Mapping[str, float] | None = None,
) -> xr.Dataset:
    """The out-of-scale check of every axis that can be tested (module docstring), as the
    Dataset a fit stores: one entry per (axis, bucket) along ``names.OUT_OF_SCALE_DIM``; attrs
    ``prob``, the rules' parameters and the axes that cannot be tested, with why
    (:func:`rules`). ``forms``: a stack's weights (form -> weight; ``spec``
    then names no form): each refit is the stack's, every form with weight refitted and the
    left-out rows predicted by their mixture at those weights
    (:func:`bayesscale.law.predict.mixture`)."""
    config = config or FitConfig()
    usable, untested = rules(table, spec)
    weighted = {f: w for f, w in (forms or {}).items() if w > 0}
    members: list[str | None] = list(weighted) if forms else [None]
    items = [(rule, form) for rule in usable.values() for form in members]
    jobs = _Jobs(table, spec, config, prob)
    refits = (
        run_jobs(
            _refit_job, items, config.seed, shared=jobs, workers=workers, ray_address=ray_address
        )
        if items
        else []
    )
    done = dict(zip(items, refits, strict=True))
    parts, drift_parts = [], {}
    for axis, rule in usable.items():
        found = [done[(rule, form)] for form in members]
        first_fit, first = found[0]
        pred, segments = first, [first.draws] * first.chains
        if len(found) > 1:
            total = sum(weighted.values())
            shares = [weighted[f] / total for f in weighted]
            pred = mixture([p for _, p in found], shares)
            segments = [int(n) for n in draw_shares(shares, pred.draws) if n]  # one per form
        checked = check_prediction(first_fit, pred, prob, seed=config.seed)
        mcse = _count_mcse(pred, checked, axis, prob, config.seed, segments)
        parts.append(bucket_records(checked, axis, str(rule), prob, mcse))
        drift_parts[axis] = (pred, checked[axis + names.OVER_MAX_SUFFIX].to_numpy(float))
    columns = [AXIS, BUCKET, RULE, ROWS, INSIDE, INSIDE_MCSE, names.COVERAGE, P_VALUE, HOLDS]
    columns += [VERDICT, MAX_RATIO]
    frame = pd.concat([pd.DataFrame(columns=columns), *parts], ignore_index=True)
    ds = xr.Dataset(
        {
            column: ((names.OUT_OF_SCALE_DIM,), frame[column].to_numpy(str))
            for column in (AXIS, BUCKET, RULE, VERDICT)
        }
        | {
            column: ((names.OUT_OF_SCALE_DIM,), frame[column].to_numpy(float))
            for column in (ROWS, INSIDE, INSIDE_MCSE, names.COVERAGE, P_VALUE, HOLDS, MAX_RATIO)
        }
    )
    ds.attrs = {
        names.ATTR_PROB: prob,
        "depth": DEPTH,
        "min_kept": MIN_KEPT,
        "source": table.source,
        ATTR_UNTESTED: "; ".join(f"{a}: {why}" for a, why in untested.items()),
        ATTR_FORMS: json.dumps(weighted) if forms else "",
        names.ATTR_DRIFT: _drift(drift_parts, config.seed),
    }
    return ds


def _drift(parts: Mapping[str, tuple[Prediction, Array]], seed: int) -> str:
    """The drift beyond the sweep calibrated on each tested axis's left-out rows beyond the
    refit's range, and on all of them pooled (:func:`bayesscale.law.drift.best_tau`; each
    axis's predictive moments drawn once), as the attr a fit stores (an axis without such rows
    takes the pooled one); ``""`` where no axis was tested."""
    moments = {axis: beyond_moments(pred, ratio, seed) for axis, (pred, ratio) in parts.items()}
    found = {axis: m for axis, m in moments.items() if m is not None}
    if not found:
        return ""
    per_axis = {axis: best_tau([m]) for axis, m in found.items()}
    rows = {axis: 0 if m is None else len(m[3]) for axis, m in moments.items()}
    return drift_attr(per_axis, best_tau(list(found.values())), rows)
