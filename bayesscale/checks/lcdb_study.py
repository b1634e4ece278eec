"""The extrapolation study on LCDB learning curves: the law and the per-curve baselines.

For a seeded sample of curves (:mod:`bayesscale.data.lcdb`) and a cutoff ``f`` (1/8, 1/32),
every curve's runs at sizes up to ``f`` times its largest are fitted and every larger size is
predicted, ``r = x / max fitted x`` beyond (:func:`bayesscale.data.lcdb.split_at`). Methods:

* ``law``: the package's pooled fit (:func:`bayesscale.law.inference.fit`) of
  ``bayesscale.data.lcdb.LCDB_SPEC``, one fit per cutoff and group of curves (all curves
  in one group by default), the groups fanned out with
  :func:`bayesscale.jobs.run_jobs` (serially, ``workers`` local Ray workers, or a Ray
  cluster at ``ray_address``), each fit seeded by its job seed;
* ``stack`` (:meth:`LcdbStudy.stack`): every form of a list (``power``, ``offset_power``)
  fitted, and refitted on each curve's sizes up to ``OUT_OF_SCALE_FRACTION`` of its largest
  fitted size to score the larger fitted sizes (the out-of-scale scores); the stacking weights
  on those scores (:mod:`bayesscale.checks.stacking`) mix the forms' draws
  (:func:`bayesscale.law.predict.mixture`), and each form is scored too;
* ``stack + drift``: the stack with the drift beyond the sweep (:mod:`bayesscale.law.drift`),
  calibrated as ``bayesscale fit`` calibrates it on its out-of-scale check: every form with
  weight refitted on each curve's sizes up to ``DRIFT_FRACTION`` (1/4) of its largest fitted
  size, the larger fitted sizes predicted by the refits' mixture;
* the per-curve baselines of :mod:`bayesscale.checks.curve_baselines` (last value, POW4,
  MMF4), fitted here.

Every method is scored per run and per cell by
:mod:`bayesscale.checks.extrapolation_score`.

Example
-------
>>> study = LcdbStudy.sample(read_lcdb(), curves=40, seed=0)  # doctest: +SKIP
>>> scores = study.run([1 / 8], FitSettings())  # doctest: +SKIP
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike

from bayesscale import names
from bayesscale.checks import extrapolation_score as es
from bayesscale.checks.curve_baselines import BASELINES, fit_baselines
from bayesscale.checks.out_of_scale import DEPTH
from bayesscale.checks.stacking import weight_spread
from bayesscale.data import lcdb
from bayesscale.data.observations import DataWarning, Table, setting_labels
from bayesscale.jobs import run_jobs
from bayesscale.law.drift import calibrate, drifted
from bayesscale.law.predict import Prediction, mixture, predict
from bayesscale.sampling.config import FitConfig

LAW = "law"
STACK = "stack"
STACK_DRIFT = "stack + drift"  # the stack with its drift beyond the sweep (bayesscale.law.drift)
# the out-of-scale split the stacking weights are scored on: each curve refitted on its sizes up
# to this fraction of its largest fitted size, the larger fitted sizes predicted
OUT_OF_SCALE_FRACTION = 0.5
# the drift's refit (bayesscale.law.drift), as the package's out-of-scale check leaves out: each
# curve refitted on its sizes up to 1/DEPTH of its largest fitted size
DRIFT_FRACTION = 1.0 / DEPTH
MAX_SCORED_DRAWS = 4000  # posterior draws a law fit is scored on (evenly thinned)


@dataclass(frozen=True)
class FitSettings:
    """The law fits' sampler settings (:class:`bayesscale.sampling.config.FitConfig`; the
    package's defaults unless given) and the predictive interval's mass."""

    chains: int | None = None
    draws: int | None = None
    tune: int | None = None
    ess_target: float | None = None
    max_draws: int | None = None
    prob: float = 0.9

    def config(self, seed: int) -> Any:
        given: dict[str, Any] = {
            k: v
            for k, v in (
                ("chains", self.chains),
                ("draws", self.draws),
                ("tune", self.tune),
                ("ess_target", self.ess_target),
                ("max_draws", self.max_draws),
            )
            if v is not None
        }
        return FitConfig(seed=seed, progress=False, **given)


def with_ratios(fitted: pd.DataFrame, held_out: pd.DataFrame) -> pd.DataFrame:
    """``held_out`` with ``ratio``: each row's size over the largest fitted size of its curve
    (a held-out curve without fitted rows is an error)."""
    largest = fitted.groupby(list(lcdb.CURVE))[lcdb.SIZE_TRAIN].max().rename("_largest")
    out = held_out.join(largest, on=list(lcdb.CURVE))
    if out["_largest"].isna().any():
        raise ValueError("held-out rows of a curve with no fitted rows")
    out[es.RATIO] = out[lcdb.SIZE_TRAIN] / out.pop("_largest")
    return out


def _curve_label(frame: pd.DataFrame) -> pd.Series:
    return frame[lcdb.OPENMLID].astype(str) + " | " + frame[lcdb.LEARNER].astype(str)


def baseline_scores(fitted: pd.DataFrame, held_out: pd.DataFrame, prob: float) -> pd.DataFrame:
    """The per-curve baselines' score frames, all methods stacked (``held_out`` has
    ``ratio``)."""
    rate = fitted[names.SUCCESSES] / fitted[names.TRIALS]
    fitted = fitted.assign(_rate=rate, _curve=_curve_label(fitted))
    held_out = held_out.assign(_curve=_curve_label(held_out))
    parts: dict[str, list[pd.DataFrame]] = {b: [] for b in BASELINES}
    for curve, rows in held_out.groupby("_curve", sort=False):
        train = fitted[fitted["_curve"] == curve]
        min_sigma = 1.0 / float(train[names.TRIALS].min())
        fits = fit_baselines(train[lcdb.SIZE_TRAIN], train["_rate"], min_sigma)
        for name, base in fits.items():
            x = rows[lcdb.SIZE_TRAIN].to_numpy(float)
            mean = base.mean(x)
            scores = es.gaussian_scores(
                mean, np.full(len(x), base.sigma), rows[names.SUCCESSES], rows[names.TRIALS], prob
            )
            parts[name].append(
                es.score_frame(name, rows, scores, curve="_curve", size=lcdb.SIZE_TRAIN)
            )
    return pd.concat([p for b in BASELINES for p in parts[b]], ignore_index=True)


def thinned(fit: xr.DataTree, max_draws: int = MAX_SCORED_DRAWS) -> xr.DataTree:
    """The posterior and constant data of ``fit``, draws evenly thinned to at most
    ``max_draws`` in all (what a prediction reads)."""
    post = fit["posterior"].to_dataset()
    total = post.sizes[names.CHAIN_DIM] * post.sizes[names.DRAW_DIM]
    step = max(1, math.ceil(total / max_draws))
    tree = xr.DataTree.from_dict(
        {
            "posterior": post.isel({names.DRAW_DIM: slice(None, None, step)}),
            "constant_data": fit["constant_data"].to_dataset(),
        }
    )
    tree.attrs = dict(fit.attrs)
    return tree


def law_scores(
    fit: xr.DataTree, held_out: pd.DataFrame, prob: float, seed: int, method: str = LAW
) -> pd.DataFrame:
    """The law's score frame on ``held_out`` (with ``ratio``), from ``fit``'s draws."""
    pred = predict(thinned(fit), held_out, source="held-out LCDB rows", observed=True)
    return prediction_scores(pred, held_out, prob, seed, method)


def prediction_scores(
    pred: Prediction, held_out: pd.DataFrame, prob: float, seed: int, method: str
) -> pd.DataFrame:
    """The score frame of a prediction of ``held_out``'s rows (a law's, or a stack's)."""
    counts = pred.sample(np.random.default_rng([seed, 1]))
    scores = es.draw_scores(
        pred.expected(), counts, pred.log_likelihood(clip=True), held_out[names.SUCCESSES],
        held_out[names.TRIALS], prob,
    )  # fmt: skip
    rows = held_out.assign(_curve=_curve_label(held_out))
    return es.score_frame(method, rows, scores, curve="_curve", size=lcdb.SIZE_TRAIN)


@dataclass(frozen=True)
class _LawJobs:
    observations: pd.DataFrame
    settings: FitSettings
    form: str = "power"
    concentration_spread: float = 0.0


def _law_job(jobs: _LawJobs, item: tuple[float, tuple[str, ...]], seed: int) -> dict[str, Any]:
    """Fit the law on one group of curves at one cutoff; its scores and how the fit went."""
    from bayesscale.law.inference import fit

    fraction, curves = item
    spec = lcdb.lcdb_spec(jobs.form, jobs.concentration_spread)
    frame = jobs.observations
    frame = frame[_curve_label(frame).isin(curves)].reset_index(drop=True)
    fitted, held_out = lcdb.split_at(frame, fraction)
    held_out = with_ratios(fitted, held_out)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DataWarning)
        table = Table.from_frame(fitted, spec, source=f"LCDB, sizes up to {fraction:g} x largest")
    start = time.perf_counter()
    tree = fit(table, spec, jobs.settings.config(seed))
    seconds = time.perf_counter() - start
    stats = tree["sample_stats"].to_dataset()
    method = LAW if jobs.form == "power" else f"{LAW} ({jobs.form})"
    scores = law_scores(tree, held_out, jobs.settings.prob, seed, method)
    scores.insert(1, "cutoff", fraction)
    return {
        "scores": scores,
        "seconds": seconds,
        "curves": len(setting_labels(fitted, spec).unique()),
        "rows": len(fitted),
        "draws": int(stats.sizes[names.CHAIN_DIM] * stats.sizes[names.DRAW_DIM]),
        "divergences": int(stats["diverging"].sum()) if "diverging" in stats else None,
        "data_warnings": [str(w.message)[:200] for w in caught],
    }


@dataclass(frozen=True)
class _StackJobs:
    observations: pd.DataFrame
    settings: FitSettings
    forms: tuple[str, ...]
    concentration_spread: float = 0.0


def _stack_job(jobs: _StackJobs, item: tuple[float, tuple[str, ...]], seed: int) -> dict[str, Any]:
    """Every form fitted on one group of curves at one cutoff, and refitted on each curve's
    sizes up to ``OUT_OF_SCALE_FRACTION`` of its largest fitted one to score the larger
    (the out-of-scale scores); the stacking weights on those scores; each form's and the
    stack's scores on the held-out sizes."""
    from bayesscale.law.inference import fit

    fraction, curves = item
    frame = jobs.observations
    frame = frame[_curve_label(frame).isin(curves)].reset_index(drop=True)
    fitted, held_out = lcdb.split_at(frame, fraction)
    held_out = with_ratios(fitted, held_out)
    inner, beyond = lcdb.split_at(fitted, OUT_OF_SCALE_FRACTION)
    preds, inner_preds, seconds, parts, divergences = [], [], 0.0, [], 0
    deep, deep_beyond = lcdb.split_at(fitted, DRIFT_FRACTION)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DataWarning)
        tables = {
            form: (
                Table.from_frame(fitted, spec, source=f"LCDB, sizes up to {fraction:g} x largest"),
                Table.from_frame(inner, spec, source="LCDB, the out-of-scale refit's sizes"),
                Table.from_frame(deep, spec, source="LCDB, the drift's refit's sizes"),
            )
            for form, spec in (
                (f, lcdb.lcdb_spec(f, jobs.concentration_spread)) for f in jobs.forms
            )
        }
    for form in jobs.forms:
        spec = lcdb.lcdb_spec(form, jobs.concentration_spread)
        start = time.perf_counter()
        tree = fit(tables[form][0], spec, jobs.settings.config(seed))
        refit = fit(tables[form][1], spec, jobs.settings.config(seed))
        seconds += time.perf_counter() - start
        for t in (tree, refit):
            stats = t["sample_stats"].to_dataset()
            divergences += int(stats["diverging"].sum()) if "diverging" in stats else 0
        source = "held-out LCDB rows"
        inner_preds.append(predict(thinned(refit), beyond, source=source, observed=True))
        pred = predict(thinned(tree), held_out, source=source, observed=True)
        preds.append(pred)
        method = LAW if form == "power" else f"{LAW} ({form})"
        parts.append(prediction_scores(pred, held_out, jobs.settings.prob, seed, method))
    # the runs of one curve share its posterior: bootstrap and judge gaps by curve
    lpd = np.column_stack([p.log_predictive_density() for p in inner_preds])
    stack = weight_spread(lpd, jobs.forms, seed=seed, groups=_curve_label(beyond).to_numpy())
    stacked = mixture(preds, stack.weights)
    parts.append(prediction_scores(stacked, held_out, jobs.settings.prob, seed, STACK))
    tau, drift_seconds, drift_divergences = _drift(
        jobs, tables, deep, deep_beyond, stack.weights, seed
    )
    seconds += drift_seconds
    divergences += drift_divergences
    moved = drifted(stacked, held_out[es.RATIO].to_numpy(float), tau, seed)
    parts.append(prediction_scores(moved, held_out, jobs.settings.prob, seed, STACK_DRIFT))
    scores = pd.concat(parts, ignore_index=True)
    scores.insert(1, "cutoff", fraction)
    return {
        "scores": scores,
        "seconds": seconds,
        "curves": len(curves),
        "rows": len(fitted),
        "out_of_scale_rows": len(beyond),
        "divergences": divergences,
        "data_warnings": sorted({str(w.message)[:200] for w in caught}),
        "stack": stack.to_json(),
        "drift_tau": tau,
    }


def _drift(
    jobs: _StackJobs,
    tables: Mapping[str, tuple[Table, ...]],
    deep: pd.DataFrame,
    beyond: pd.DataFrame,
    weights: ArrayLike,
    seed: int,
) -> tuple[float, float, int]:
    """The drift beyond the sweep (:mod:`bayesscale.law.drift`) as ``bayesscale fit``
    calibrates it on its out-of-scale check: every form with weight refitted on ``deep`` (each
    curve's sizes up to ``DRIFT_FRACTION`` of its largest fitted one; ``tables[form][2]``), the
    larger fitted sizes ``beyond`` of the curves it holds predicted by the refits' mixture at
    the stack's weights; ``tau``, the refits' seconds and their divergences."""
    from bayesscale.law.inference import fit

    beyond = beyond[_curve_label(beyond).isin(set(_curve_label(deep)))].reset_index(drop=True)
    if beyond.empty:
        return 0.0, 0.0, 0
    preds, shares, seconds, divergences = [], [], 0.0, 0
    for form, weight in zip(jobs.forms, np.asarray(weights, dtype=float), strict=True):
        if weight <= 0:
            continue
        spec = lcdb.lcdb_spec(form, jobs.concentration_spread)
        start = time.perf_counter()
        refit = fit(tables[form][2], spec, jobs.settings.config(seed))
        seconds += time.perf_counter() - start
        stats = refit["sample_stats"].to_dataset()
        divergences += int(stats["diverging"].sum()) if "diverging" in stats else 0
        preds.append(predict(thinned(refit), beyond, source="LCDB rows", observed=True))
        shares.append(weight)
    ratio = with_ratios(deep, beyond)[es.RATIO].to_numpy(float)
    total = float(np.sum(shares))
    tau = calibrate([(mixture(preds, [w / total for w in shares]), ratio)], seed=seed)
    return tau, seconds, divergences


@dataclass(frozen=True)
class LcdbStudy:
    """The sampled curves' observation rows (:func:`bayesscale.data.lcdb.to_observations`)
    and the curves' labels in sample order."""

    observations: pd.DataFrame
    curves: tuple[str, ...]
    jobs_info: list[dict[str, Any]] = field(default_factory=list, compare=False)

    @classmethod
    def sample(
        cls, raw: pd.DataFrame, curves: int, seed: int = 0,
        min_largest: int = lcdb.MIN_LARGEST, min_sizes: int = lcdb.MIN_SIZES,
    ) -> LcdbStudy:  # fmt: skip
        """``curves`` curves of ``raw`` (LCDB rows) drawn by ``seed`` among the eligible."""
        chosen = lcdb.sample_curves(lcdb.eligible_curves(raw, min_largest, min_sizes), curves, seed)
        obs = lcdb.to_observations(lcdb.select(raw, chosen))
        labels = tuple(_curve_label(chosen.assign(openmlid=chosen[lcdb.OPENMLID].astype(str))))
        return cls(obs, labels)

    def groups(self, group_size: int | None) -> list[tuple[str, ...]]:
        """The curves in groups of ``group_size`` in sample order (one group: ``None``/0)."""
        if not group_size:
            return [self.curves]
        return [self.curves[i : i + group_size] for i in range(0, len(self.curves), group_size)]

    def baselines(self, fraction: float, prob: float = 0.9) -> pd.DataFrame:
        """The baselines' score frame at cutoff ``fraction``."""
        fitted, held_out = lcdb.split_at(self.observations, fraction)
        scores = baseline_scores(fitted, with_ratios(fitted, held_out), prob)
        scores.insert(1, "cutoff", fraction)
        return scores

    def law(
        self, fractions: Sequence[float], settings: FitSettings, group_size: int | None = None,
        seed: int = 0, ray_address: str | None = None, workers: int | None = None,
        form: str = "power", progress: Callable[[int, int], None] | None = None,
        concentration_spread: float = 0.0,
    ) -> pd.DataFrame:  # fmt: skip
        """The law's score frame at every cutoff: one fit per (cutoff, group), fanned out;
        ``form`` is the axis's (:mod:`bayesscale.core.forms`), method ``law`` for the power
        law and ``law (FORM)`` for another; ``progress(done, total)`` as fits finish;
        ``concentration_spread`` > 0 gives each curve its own concentration."""
        items = [(f, g) for f in fractions for g in self.groups(group_size)]
        jobs = _LawJobs(self.observations, settings, form, concentration_spread)
        out = run_jobs(_law_job, items, seed, shared=jobs, ray_address=ray_address, workers=workers)
        self.jobs_info.clear()
        for (fraction, group), result in zip(items, out, strict=True):
            info = {k: v for k, v in result.items() if k != "scores"}
            self.jobs_info.append({"cutoff": fraction, "group_curves": len(group), **info})
        return pd.concat([r["scores"] for r in out], ignore_index=True)

    def stack(
        self, fractions: Sequence[float], settings: FitSettings,
        forms: Sequence[str] = ("power", "offset_power"), group_size: int | None = None,
        seed: int = 0, ray_address: str | None = None, workers: int | None = None,
        concentration_spread: float = 0.0,
    ) -> pd.DataFrame:  # fmt: skip
        """Each form's and the stack's score frame at every cutoff (methods ``law``, ``law
        (FORM)``, ``stack``): per (cutoff, group) one job fitting every form twice (the fit
        and its out-of-scale refit), fanned out; the weights are in ``jobs_info``;
        ``concentration_spread`` as for :meth:`law`."""
        items = [(f, g) for f in fractions for g in self.groups(group_size)]
        jobs = _StackJobs(self.observations, settings, tuple(forms), concentration_spread)
        out = run_jobs(
            _stack_job, items, seed, shared=jobs, ray_address=ray_address, workers=workers
        )
        self.jobs_info.clear()
        for (fraction, group), result in zip(items, out, strict=True):
            info = {k: v for k, v in result.items() if k != "scores"}
            self.jobs_info.append({"cutoff": fraction, "group_curves": len(group), **info})
        return pd.concat([r["scores"] for r in out], ignore_index=True)
