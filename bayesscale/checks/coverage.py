"""Coverage over redraws: the pooled law against the per-panel bootstrap baseline.

:func:`coverage_study` re-simulates a fixed truth's design ``R`` times (one seeded job of
:func:`bayesscale.jobs.run_jobs` per redraw), fits the pooled model
(:class:`~bayesscale.checks.law_sampler.CompiledLawSampler`) and the frequentist bootstrap
baseline (:func:`bayesscale.law.baseline.bootstrap_fit`) to each redraw, and counts how often
each method's 90% interval covers the true per-setting exponent and the population exponent.

Example
-------
>>> lo, hi = equal_tailed(np.arange(101.0), 0.9)
>>> round(float(lo), 6), round(float(hi), 6)
(5.0, 95.0)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from bayesscale import names
from bayesscale.checks.calibration_io import (
    BOOTSTRAP,
    COVERAGE,
    COVERAGE_SE,
    COVERED,
    DIVERGENCES,
    ESTIMATOR,
    LEVEL,
    LOWER,
    MAX_RHAT,
    MEAN_WIDTH,
    MIN_ESS,
    N_INTERVALS,
    POOLED,
    POPULATION_LEVEL,
    REDRAW,
    SECONDS,
    SETTING_LEVEL,
    TRUE_VALUE,
    UPPER,
    WIDTH,
)
from bayesscale.checks.law_sampler import CompiledLawSampler, cached_sampler, keep_sampler
from bayesscale.checks.sim_designs import design_of
from bayesscale.core.intervals import DEFAULT_PROB, ETI, interval
from bayesscale.data.observations import setting_labels
from bayesscale.data.simulate import Truth, per_axis_design, simulate
from bayesscale.data.spec import ModelSpec
from bayesscale.jobs import run_jobs
from bayesscale.law.baseline import bootstrap_fit

if TYPE_CHECKING:
    from bayesscale.law.inference import FitConfig

Array = NDArray[np.float64]

COVERAGE_VARIABLES: Final = (names.ALPHA_POP, names.ALPHA)


def equal_tailed(
    draws: ArrayLike, prob: float = DEFAULT_PROB, axis: int = 0
) -> tuple[Array, Array]:
    """``(lower, upper)``: the ``(1 - prob)/2`` and ``(1 + prob)/2`` quantiles along ``axis``."""
    lo, hi = interval(draws, prob, ETI, axis=axis)
    return lo, hi


def summarize_coverage(records: pd.DataFrame) -> pd.DataFrame:
    """Coverage and mean width per ``(method, level, axis)`` from interval records.

    ``coverage_se`` is the standard error over redraws (the sd of per-redraw coverage
    fractions over sqrt(R)), which respects the correlation of intervals within a redraw.
    """
    keys = [ESTIMATOR, LEVEL, names.AXIS_DIM]
    per_redraw = records.groupby([*keys, REDRAW])[COVERED].mean().rename("fraction").reset_index()
    grouped = records.groupby(keys)
    out = pd.DataFrame(
        {
            COVERAGE: grouped[COVERED].mean(),
            MEAN_WIDTH: grouped[WIDTH].mean(),
            N_INTERVALS: grouped[COVERED].size(),
        }
    )
    spread = per_redraw.groupby(keys)["fraction"].agg(["std", "size"])
    out[COVERAGE_SE] = spread["std"] / np.sqrt(spread["size"])
    return out.reset_index()


@dataclass
class CoverageResult:
    """Interval records (one per redraw, method, level, setting and axis) and their summary."""

    records: pd.DataFrame
    summary: pd.DataFrame
    fits: pd.DataFrame  # per redraw: pooled seconds, divergences, max R-hat, min bulk ESS
    timing: dict[str, float]
    config: dict[str, Any] = field(default_factory=dict)

    def report(self) -> str:
        """The coverage/width table, pooled and bootstrap side by side."""
        table = self.summary.pivot_table(
            index=[LEVEL, names.AXIS_DIM], columns=ESTIMATOR, values=[COVERAGE, MEAN_WIDTH]
        )
        return table.to_string(float_format=lambda v: f"{v:.3f}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "timing": self.timing,
            "summary": self.summary.to_dict(orient="records"),
            "pooled_fits": self.fits.to_dict(orient="records"),
        }


def _record(
    redraw: int,
    method: str,
    level: str,
    setting: str,
    axis: str,
    truth: float,
    lo: float,
    hi: float,
) -> dict[str, Any]:
    return {
        REDRAW: redraw,
        ESTIMATOR: method,
        LEVEL: level,
        names.SETTING_DIM: setting,
        names.AXIS_DIM: axis,
        TRUE_VALUE: truth,
        LOWER: lo,
        UPPER: hi,
        COVERED: bool(lo <= truth <= hi),
        WIDTH: hi - lo,
    }


@dataclass(frozen=True)
class CoverageJobs:
    """What every coverage redraw shares (sent to each Ray worker once)."""

    truth: Truth
    spec: ModelSpec
    frame: pd.DataFrame
    config: FitConfig
    var_names: tuple[str, ...]
    n_boot: int
    prob: float


def coverage_job(jobs: CoverageJobs, redraw: int, seed: int) -> dict[str, Any]:
    """One redraw of :func:`coverage_study`: simulate (seeded by ``seed``), fit the pooled law
    and the bootstrap, and record every interval; ``{"records": [...], "fit": {...},
    "pooled_s": s, "bootstrap_s": s}``."""
    truth, spec, prob = jobs.truth, jobs.spec, jobs.prob
    data_seed, fit_seed, boot_seed = np.random.SeedSequence(seed).generate_state(3)
    truth_labels = list(setting_labels(pd.DataFrame(truth.settings), spec))
    axes = list(truth.axes)
    true_alpha = np.asarray(truth.alpha)
    frame = simulate(truth, jobs.frame, seed=int(data_seed))
    source = f"<coverage redraw {redraw}>"
    design_r = design_of(frame, spec, source)
    sampler = cached_sampler(design_r, jobs.config, jobs.var_names)
    if not sampler.same_layout(design_r):
        raise ValueError(f"{source}: the sampler was compiled for another design layout")
    row_of = {label: truth_labels.index(label) for label in design_r.settings}
    if design_r.successes is None:
        raise ValueError(f"{source}: coverage needs a success-count outcome")
    records: list[dict[str, Any]] = []
    fit = sampler.fit(design_r.successes, seed=int(fit_seed))
    fit_row = {
        REDRAW: redraw,
        SECONDS: fit.seconds,
        DIVERGENCES: fit.divergences,
        **fit.convergence(),
    }
    alpha = fit.posterior[names.ALPHA].stack(sample=(names.CHAIN_DIM, names.DRAW_DIM))
    lo, hi = equal_tailed(alpha.transpose("sample", ...).values, prob)
    for s, label in enumerate(alpha[names.SETTING_DIM].values.tolist()):
        for a, axis in enumerate(alpha[names.AXIS_DIM].values.tolist()):
            t = float(true_alpha[row_of[label], axes.index(axis)])
            records.append(
                _record(redraw, POOLED, SETTING_LEVEL, label, axis, t, lo[s, a], hi[s, a])
            )
    pop = fit.posterior[names.ALPHA_POP].stack(sample=(names.CHAIN_DIM, names.DRAW_DIM))
    plo, phi = equal_tailed(pop.transpose("sample", ...).values, prob)
    for a, axis in enumerate(pop[names.AXIS_DIM].values.tolist()):
        t = float(truth.alpha_pop[axes.index(axis)])
        records.append(_record(redraw, POOLED, POPULATION_LEVEL, "", axis, t, plo[a], phi[a]))
    start = time.perf_counter()
    boot = bootstrap_fit(frame, spec, n_boot=jobs.n_boot, prob=prob, seed=int(boot_seed))
    boot_s = time.perf_counter() - start
    for row in boot.exponents.itertuples(index=False):
        t = float(true_alpha[row_of[str(row.setting)], axes.index(str(row.axis))])
        records.append(
            _record(
                redraw, BOOTSTRAP, SETTING_LEVEL, str(row.setting), str(row.axis), t,
                float(row.lower), float(row.upper),
            )
        )  # fmt: skip
    medians = boot.replicates.groupby(["axis", "replicate"])["alpha"].median()
    for axis, values in medians.groupby(level="axis"):
        blo, bhi = equal_tailed(values.to_numpy(), prob)
        t = float(truth.alpha_pop[axes.index(str(axis))])
        records.append(
            _record(redraw, BOOTSTRAP, POPULATION_LEVEL, "", str(axis), t, float(blo), float(bhi))
        )
    return {"records": records, "fit": fit_row, "pooled_s": fit.seconds, "bootstrap_s": boot_s}


def coverage_study(
    truth: Truth,
    spec: ModelSpec,
    n_redraws: int,
    config: FitConfig,
    seed: int = 0,
    n_boot: int = 500,
    prob: float = DEFAULT_PROB,
    design_frame: pd.DataFrame | None = None,
    progress: Callable[[str], None] | None = None,
    sampler: CompiledLawSampler | None = None,
    ray_address: str | None = None,
    workers: int | None = None,
) -> CoverageResult:
    """Redraw ``truth``'s design (rows without outcomes; default
    :func:`bayesscale.data.simulate.per_axis_design`) ``n_redraws`` times; fit the pooled law
    (one compiled sampler per process for every redraw) and the bootstrap baseline to each,
    and record whether each ``prob`` interval covers the truth.

    Population intervals: the pooled model's ``alpha_pop``; for the baseline, the bootstrap
    distribution of the median over settings of the per-setting exponents (``alpha_pop`` is
    the population median), which ignores between-setting sampling variability. Pass
    ``sampler`` (returning ``alpha`` and ``alpha_pop``) to reuse one compiled for this layout.
    Each redraw is a job of :func:`bayesscale.jobs.run_jobs` (:func:`coverage_job`,
    seeded by ``(seed, redraw)``), serially or on Ray (``ray_address``, ``workers``) with the
    same records either way; ``progress`` gets one line per redraw at the end.
    """
    if n_redraws < 1:
        raise ValueError(f"n_redraws must be >= 1, got {n_redraws}")
    frame0 = per_axis_design(truth) if design_frame is None else design_frame
    var_names: tuple[str, ...] = COVERAGE_VARIABLES
    if sampler is not None:
        keep_sampler(sampler)  # refuses a sampler without a design
        config, var_names = sampler.config, tuple(sampler.var_names)
    jobs = CoverageJobs(truth, spec, frame0, config, var_names, n_boot, prob)
    done = run_jobs(
        coverage_job, list(range(n_redraws)), seed, shared=jobs, ray_address=ray_address,
        workers=workers,
    )  # fmt: skip
    records = [x for d in done for x in d["records"]]
    fits = [d["fit"] for d in done]
    timing = {
        "pooled_s": float(sum(d["pooled_s"] for d in done)),
        "bootstrap_s": float(sum(d["bootstrap_s"] for d in done)),
        "compile_s": float(sampler.compile_seconds or 0.0) if sampler is not None else 0.0,
    }
    frame_records = pd.DataFrame(records)
    if progress is not None:
        for r, fit in enumerate(fits):
            part = frame_records[frame_records[REDRAW] == r]
            text = ", ".join(
                f"{m} {lvl} {g[COVERED].mean():.2f}"
                for (m, lvl), g in part.groupby([ESTIMATOR, LEVEL])
            )
            progress(
                f"redraw {r + 1}/{n_redraws}: pooled {fit[SECONDS]:.1f} s, {fit[DIVERGENCES]} "
                f"divergences, max R-hat {fit[MAX_RHAT]:.3f}, min bulk ESS {fit[MIN_ESS]:.0f}; "
                f"coverage {text}"
            )
    return CoverageResult(
        records=frame_records,
        summary=summarize_coverage(frame_records),
        fits=pd.DataFrame(fits),
        timing=timing,
        config={
            "n_redraws": n_redraws,
            "settings": len(truth.settings),
            "rows": len(frame0),
            "chains": config.chains,
            "tune": config.tune,
            "draws": config.draws,
            "target_accept": config.accept,
            "n_boot": n_boot,
            "prob": prob,
            "seed": seed,
        },
    )
