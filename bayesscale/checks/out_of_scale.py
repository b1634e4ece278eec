"""How far beyond the sweep the law keeps its coverage: the out-of-scale check behind the
recipe's reach.

For each axis ``a`` of the law, the largest scales are left out and the law refitted to the
rest: every row with ``D_a > t_a`` (:class:`~bayesscale.checks.crossval.LeaveOut` ``COLUMN>VALUE``),
where ``t_a`` is the largest swept value at most ``D_a,max / DEPTH`` (so that the left-out rows
reach about ``DEPTH`` times beyond the refit's data), raised where needed so that the refit keeps
``MIN_KEPT`` values of the axis. The left-out rows are predicted from the refit
(:func:`bayesscale.checks.heldout.check`); each row's extrapolation ratio is

.. math::

    r = D_a / D_{a,\\max}^{\\text{refit}}

(its size over the largest value of the axis in its setting's refitted rows). Per ratio bucket
(``<=2x``, ``2-4x``, ``4-8x``, ``>8x``) the rows inside their central ``prob`` interval are
counted and tested two-sided against ``Binomial(n, prob)``
(:func:`bayesscale.checks.heldout.calibration`). The axis's **reach** is how far that coverage
holds (:mod:`bayesscale.law.reach`, which reads it from the fit). Rows of one setting share
its posterior, so the binomial test overstates the evidence (as the held-out check says).

A stacked fit (``bayesscale fit --forms ... --out-of-scale``) is checked as a stack: each form
with weight is refitted, and the left-out rows are predicted by the forms' mixture at the
stack's weights.

``bayesscale fit --out-of-scale`` stores the result in the fit file (group ``out_of_scale``) and
the recipe's headline is bounded per axis at that reach
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

from bayesscale import names
from bayesscale.checks.crossval import CrossvalError, LeaveOut, split
from bayesscale.checks.heldout import OVER_CONFIDENT, calibration, check_prediction
from bayesscale.core.intervals import DEFAULT_PROB
from bayesscale.data.extrapolation import BUCKET_EDGES, BUCKETS
from bayesscale.data.observations import Table
from bayesscale.data.spec import ModelSpec, with_form
from bayesscale.jobs import run_jobs
from bayesscale.law.predict import Prediction, mixture, predict
from bayesscale.law.reach import (
    ATTR_FORMS,
    ATTR_UNTESTED,
    AXIS,
    BUCKET,
    HOLDS,
    INSIDE,
    MAX_RATIO,
    P_VALUE,
    ROWS,
    RULE,
    VERDICT,
)
from bayesscale.sampling.config import FitConfig

DEPTH: Final = 4.0  # the left-out rows reach about this many times beyond the refit's data
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


def rules(table: Table, spec: ModelSpec) -> tuple[dict[str, str], dict[str, str]]:
    """Per axis, its leave-out rule (``n_envs>64``), and for each axis that cannot be tested,
    why (too few values; another axis's sweep run only at this axis's largest scales, as in a
    one-axis-at-a-time design anchored at the top; or another refit the law cannot fit)."""
    usable: dict[str, str] = {}
    untested: dict[str, str] = {}
    frame = table.frame
    for axis in spec.axes:
        values = frame[axis.column].to_numpy(float)
        t = threshold(values)
        if not np.isfinite(t):
            untested[axis.name] = f"{len(np.unique(values))} values of {axis.column}"
            continue
        rule = f"{axis.column}>{t:g}"
        kept = frame.loc[values <= t * (1 + 1e-12)]
        thin = [
            (b, sorted(kept[b.column].unique()))
            for b in spec.axes
            if b is not axis and kept[b.column].nunique() < MIN_KEPT
        ]
        if thin:
            b, left = thin[0]
            untested[axis.name] = (
                f"without {rule} the {b.name} axis keeps {len(left)} value(s) "
                f"({', '.join(f'{v:g}' for v in left)}): its sweep runs at the largest "
                f"{axis.column}"
            )
            continue
        try:
            split(table, spec, LeaveOut.parse(rule))
        except CrossvalError as exc:
            untested[axis.name] = str(exc)
        else:
            usable[axis.name] = rule
    return usable, untested


@dataclass(frozen=True)
class _Jobs:
    table: Table
    spec: ModelSpec
    config: FitConfig
    prob: float


def _refit_job(
    jobs: _Jobs, item: tuple[str, str, str | None], _seed: int
) -> tuple[xr.DataTree, Prediction]:
    """Refit without ``rule``'s rows (the law with ``form`` on every axis, or the spec's own
    forms) and predict them."""
    from bayesscale.law.inference import fit

    _, rule, form = item
    spec = jobs.spec if form is None else with_form(jobs.spec, form)
    table = Table.from_frame(jobs.table.frame, spec, source=jobs.table.source)
    part = split(table, spec, LeaveOut.parse(rule))
    refit = fit(part.train, spec, jobs.config)
    seed = jobs.config.seed
    return refit, predict(refit, part.held, seed=seed, source=part.held.source, observed=True)


def bucket_records(table: pd.DataFrame, axis: str, rule: str, prob: float) -> pd.DataFrame:
    """Per ratio bucket of a check table's rows along ``axis`` (rows at a ratio <= 1, inside
    the refit's range for their setting, are left out): rows, rows inside, the coverage test's
    p-value and verdict, the largest ratio."""
    ratio = table[axis + names.OVER_MAX_SUFFIX].to_numpy(float)
    beyond = ratio > 1
    index = np.searchsorted(np.asarray(BUCKET_EDGES), ratio[beyond], side="left")
    records = []
    for b, label in enumerate(BUCKETS):
        part = table.loc[beyond].loc[index == b]
        if part.empty:
            continue
        test = calibration(part, prob)
        records.append(
            {
                AXIS: axis,
                BUCKET: label,
                RULE: rule,
                ROWS: len(part),
                INSIDE: test["inside"],
                names.COVERAGE: test["inside"] / len(part),
                P_VALUE: test["p_value"],
                HOLDS: int(test["verdict"] != OVER_CONFIDENT),
                VERDICT: test["verdict"],
                MAX_RATIO: float(ratio[beyond][index == b].max()),
            }
        )
    return pd.DataFrame.from_records(records)


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
    ``prob``, the rules' parameters and the axes that cannot be tested, with why (none at all
    where every axis's sweep is anchored at the largest value of another: leaving that value
    out leaves the other axis one value). ``forms``: a stack's weights (form -> weight; ``spec``
    then names no form): each refit is the stack's, every form with weight refitted and the
    left-out rows predicted by their mixture at those weights
    (:func:`bayesscale.law.predict.mixture`)."""
    config = config or FitConfig()
    usable, untested = rules(table, spec)
    weighted = {f: w for f, w in (forms or {}).items() if w > 0}
    members: list[str | None] = list(weighted) if forms else [None]
    items = [(axis, rule, form) for axis, rule in usable.items() for form in members]
    jobs = _Jobs(table, spec, config, prob)
    refits = (
        run_jobs(
            _refit_job, items, config.seed, shared=jobs, workers=workers, ray_address=ray_address
        )
        if items
        else []
    )
    done = dict(zip(items, refits, strict=True))
    parts = []
    for axis, rule in usable.items():
        found = [done[(axis, rule, form)] for form in members]
        first_fit, first = found[0]
        pred = first
        if len(found) > 1:
            total = sum(weighted.values())
            pred = mixture([p for _, p in found], [weighted[f] / total for f in weighted])
        checked = check_prediction(first_fit, pred, prob, seed=config.seed)
        parts.append(bucket_records(checked, axis, rule, prob))
    columns = [AXIS, BUCKET, RULE, ROWS, INSIDE, names.COVERAGE, P_VALUE, HOLDS, VERDICT, MAX_RATIO]
    frame = pd.concat([pd.DataFrame(columns=columns), *parts], ignore_index=True)
    ds = xr.Dataset(
        {
            column: ((names.OUT_OF_SCALE_DIM,), frame[column].to_numpy(str))
            for column in (AXIS, BUCKET, RULE, VERDICT)
        }
        | {
            column: ((names.OUT_OF_SCALE_DIM,), frame[column].to_numpy(float))
            for column in (ROWS, INSIDE, names.COVERAGE, P_VALUE, HOLDS, MAX_RATIO)
        }
    )
    ds.attrs = {
        names.ATTR_PROB: prob,
        "depth": DEPTH,
        "min_kept": MIN_KEPT,
        "source": table.source,
        ATTR_UNTESTED: "; ".join(f"{a}: {why}" for a, why in untested.items()),
        ATTR_FORMS: json.dumps(weighted) if forms else "",
    }
    return ds
