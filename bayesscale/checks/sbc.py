"""Simulation-based calibration (SBC; Talts et al. 2018, arXiv:1804.06788) of the law model.

For ``n = 1..N``: draw ``theta_n`` from the model's prior (:func:`~bayesscale.checks.prior_draws.prior_datasets`),
simulate ``y_n ~ p(y | theta_n)`` from the model's own likelihood, fit, and rank the true
value of each scalar quantity among ``L`` roughly independent posterior draws
(:mod:`~bayesscale.checks.ranks`). If the sampler draws from the exact posterior the
normalised ranks are ``U(0, 1)``; they are tested with chi-square and Kolmogorov-Smirnov tests
and with the ECDF against simultaneous bands (:mod:`~bayesscale.checks.ecdf_bands`), which
also say where the ranks depart from uniformity. Besides the parameters, the default
quantities include the data's log-likelihood ``log p(y_n | theta)`` ranked at the truth among
its values at the draws (``LOG_LIKELIHOOD``; Modrák et al. 2023). Each dataset's fit is a
seeded job of :func:`bayesscale.jobs.run_jobs`, run serially or as Ray tasks with the same
ranks.

Example
-------
>>> result = simulation_based_calibration(design, 25, FitConfig(chains=2, draws=200))  # doctest: +SKIP
>>> result.min_p > 0.001, result.ecdf_inside  # doctest: +SKIP
(True, True)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import NDArray

from bayesscale import names
from bayesscale.checks.calibration_io import (
    DATASET,
    DIVERGENCES,
    ESS_BULK,
    LOG_LIKELIHOOD,
    NORMALIZED_RANK,
    QUANTITY,
    RANK,
    RANK_DRAWS,
    SECONDS,
    TRUE_VALUE,
)
from bayesscale.checks.ecdf_bands import (
    DEFAULT_BAND_PROB,
    EcdfBand,
    EcdfVerdict,
    ecdf_band,
    ecdf_verdict,
)
from bayesscale.checks.law_sampler import CompiledLawSampler, cached_sampler, keep_sampler
from bayesscale.checks.prior_draws import Perturbation, PriorDatasets, prior_datasets
from bayesscale.checks.ranks import (
    Uniformity,
    normalized_ranks,
    rank_of,
    text_histogram,
    thin,
    uniformity,
)
from bayesscale.data.observations import Design
from bayesscale.jobs import last_run, run_jobs

if TYPE_CHECKING:
    from bayesscale.law.inference import FitConfig

Array = NDArray[np.float64]

DEFAULT_MAX_RANK_DRAWS = 100
MIN_RANK_DRAWS = 10


@dataclass(frozen=True)
class Quantity:
    """A scalar of the model: a variable and a label on each of its dimensions."""

    variable: str
    selection: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        if not self.selection:
            return self.variable
        return f"{self.variable}[{','.join(v for _, v in self.selection)}]"

    def select(self, data: xr.DataArray) -> xr.DataArray:
        return data.sel({dim: value for dim, value in self.selection}) if self.selection else data


def default_quantities(design: Design, log_likelihood: bool = True) -> list[Quantity]:
    """``alpha_pop`` per axis, the first setting's exponents (with more than one setting),
    the concentration (success outcomes; the settings' median ``concentration_pop`` where each
    setting has its own), the first setting's loss floor and (with
    ``log_likelihood``) the data's log-likelihood ``LOG_LIKELIHOOD``, ranked at the truth
    among its values at the draws (Modrák et al. 2023: a quantity that depends on the data)."""
    axes = design.spec.axis_names
    first = design.settings[0]
    out = [Quantity(names.ALPHA_POP, ((names.AXIS_DIM, a),)) for a in axes]
    if len(design.settings) > 1:
        out += [
            Quantity(names.ALPHA, ((names.SETTING_DIM, first), (names.AXIS_DIM, a))) for a in axes
        ]
    if design.spec.outcome == "success":
        per_setting = design.spec.concentration_spread > 0 and len(design.settings) > 1
        out.append(Quantity(names.CONCENTRATION_POP if per_setting else names.CONCENTRATION))
    out.append(Quantity(names.LOSS_FLOOR, ((names.SETTING_DIM, first),)))
    if log_likelihood:
        out.append(Quantity(LOG_LIKELIHOOD))
    return out


@dataclass
class SBCResult:
    """Ranks of the truth (one row per dataset and quantity), uniformity tests and the ECDF
    band verdicts (:func:`~bayesscale.checks.ecdf_bands.ecdf_verdict`) per quantity."""

    ranks: pd.DataFrame
    tests: dict[str, Uniformity]
    acceptance: float
    timing: dict[str, float]
    config: dict[str, Any] = field(default_factory=dict)
    ecdf: dict[str, EcdfVerdict] = field(default_factory=dict)
    band: EcdfBand | None = None

    @property
    def min_p(self) -> float:
        """The smallest p-value over quantities and both tests."""
        return min(t.min_p for t in self.tests.values())

    @property
    def ecdf_inside(self) -> bool:
        """Whether every quantity's ECDF stays inside its simultaneous band."""
        return all(v.inside for v in self.ecdf.values())

    def normalized(self) -> dict[str, Array]:
        """Each quantity's normalised ranks, in dataset order."""
        return {
            q: self.ranks.loc[self.ranks[QUANTITY] == q]
            .sort_values(DATASET)[NORMALIZED_RANK]
            .to_numpy(float)
            for q in self.tests
        }

    def table(self) -> pd.DataFrame:
        """One row per quantity: chi-square and KS statistics and p-values, and whether the
        ECDF leaves its band (and where)."""
        rows = []
        for q, t in self.tests.items():
            row: dict[str, Any] = {
                QUANTITY: q,
                "n": t.n,
                "bins": t.bins,
                "chi2": t.chi2,
                "chi2_p": t.chi2_p,
                "ks": t.ks,
                "ks_p": t.ks_p,
            }
            if q in self.ecdf:
                row["ecdf_inside"] = self.ecdf[q].inside
                row["ecdf_outside"] = self.ecdf[q].where()
                row["ecdf_max_excess"] = self.ecdf[q].max_excess
            rows.append(row)
        return pd.DataFrame(rows)

    def report(self) -> str:
        """Text rank histograms, p-values and ECDF band verdicts."""
        lines = []
        for q, t in self.tests.items():
            verdict = self.ecdf.get(q)
            band = f"; ECDF {verdict.where()}" if verdict is not None else ""
            lines.append(
                f"{q}: chi2 = {t.chi2:.2f} (p = {t.chi2_p:.3g}), KS = {t.ks:.3f} "
                f"(p = {t.ks_p:.3g}){band}"
            )
            lines += text_histogram(t.counts)
        if self.band is not None:
            lines.append(
                f"ECDF bands: simultaneous {self.band.prob:.0%} over {self.band.z.size} points, "
                f"{self.band.n_sim} simulations (seed {self.band.seed}), per-point level "
                f"{self.band.gamma:.4f}"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "acceptance": self.acceptance,
            "timing": self.timing,
            "tests": self.table().to_dict(orient="records"),
            "histograms": {q: list(t.counts) for q, t in self.tests.items()},
            "ecdf": {
                q: {
                    "inside": v.inside,
                    "outside": [list(r) for r in v.outside],
                    "max_excess": v.max_excess,
                }
                for q, v in self.ecdf.items()
            },
            "ecdf_band": None
            if self.band is None
            else {
                "prob": self.band.prob,
                "points": int(self.band.z.size),
                "gamma": self.band.gamma,
                "n_sim": self.band.n_sim,
                "seed": self.band.seed,
            },
            "divergent_fits": int((self.ranks.groupby(DATASET)[DIVERGENCES].first() > 0).sum()),
            "min_ess_bulk": float(self.ranks[ESS_BULK].min()),
        }


@dataclass(frozen=True)
class SBCJobs:
    """What every SBC job shares: the design, the sampler's configuration and variables,
    the quantities and the rank-draw cap (sent to each Ray worker once)."""

    design: Design
    config: FitConfig
    var_names: tuple[str, ...]
    quantities: tuple[Quantity, ...]
    max_rank_draws: int


@dataclass(frozen=True)
class SBCDataset:
    """One SBC job: dataset ``index``, its simulated ``outcome``, each quantity's true value
    (by label) and the true free random variables (for the log-likelihood)."""

    index: int
    outcome: np.ndarray
    truth: dict[str, float]
    free: dict[str, np.ndarray]


def sbc_job(jobs: SBCJobs, item: SBCDataset, seed: int) -> list[dict[str, Any]]:
    """Fit one SBC dataset and rank each quantity's truth (rows of ``SBCResult.ranks``).

    Everything random comes from ``seed``: the sampler's seed and the jitter ``v`` of the
    normalised ranks, so the rows depend on ``(jobs, item, seed)`` only, in any process.
    """
    import arviz as az

    sampler = cached_sampler(jobs.design, jobs.config, jobs.var_names)
    rng = np.random.default_rng(seed)
    fit = sampler.fit(item.outcome, seed=int(rng.integers(2**31 - 1)))
    rows = []
    for q in jobs.quantities:
        draws = q.select(fit.posterior[q.variable]).values
        if q.variable == LOG_LIKELIHOOD:
            truth = sampler.log_likelihood(item.free, item.outcome)
        else:
            truth = item.truth[q.label]
        ess = float(az.ess(draws, method="bulk"))
        usable = math.floor(ess) if np.isfinite(ess) else MIN_RANK_DRAWS
        keep = int(min(jobs.max_rank_draws, max(MIN_RANK_DRAWS, usable)))
        thinned = thin(draws, keep)
        rank = rank_of(truth, thinned)
        rows.append(
            {
                DATASET: item.index,
                QUANTITY: q.label,
                TRUE_VALUE: truth,
                RANK: rank,
                RANK_DRAWS: thinned.size,
                NORMALIZED_RANK: float(normalized_ranks([rank], [thinned.size], rng)[0]),
                ESS_BULK: ess,
                DIVERGENCES: fit.divergences,
                SECONDS: fit.seconds,
            }
        )
    return rows


def simulation_based_calibration(
    design: Design,
    n_datasets: int,
    config: FitConfig,
    seed: int = 0,
    quantities: Sequence[Quantity] | None = None,
    perturb: Perturbation | None = None,
    max_rank_draws: int = DEFAULT_MAX_RANK_DRAWS,
    bins: int | None = None,
    sampler: CompiledLawSampler | None = None,
    ray_address: str | None = None,
    workers: int | None = None,
    band_prob: float = DEFAULT_BAND_PROB,
    progress: Callable[[int, int], None] | None = None,
    time_limit: float | None = None,
) -> SBCResult:
    """SBC of the law model of ``design.spec`` on ``design``'s rows.

    Each quantity's truth is ranked among ``L = min(max_rank_draws, ESS_bulk)`` posterior
    draws spaced evenly over the chains (Talts et al.: thin to about independent draws).
    Pass ``sampler`` (from
    :meth:`~bayesscale.checks.law_sampler.CompiledLawSampler.for_design` on this design) to
    reuse a compiled one; its configuration then replaces ``config``.

    The prior datasets are drawn here (seeded by ``seed``); each dataset's fit is a job of
    :func:`bayesscale.jobs.run_jobs` seeded by ``(seed, dataset)`` only
    (:func:`sbc_job`), run serially or on Ray (``ray_address``, ``workers``) with the same
    ranks either way. Uniformity is judged by chi-square and KS tests and by the ECDF of the
    normalised ranks against a simultaneous ``band_prob`` band
    (:func:`~bayesscale.checks.ecdf_bands.ecdf_band`, seeded by ``seed``). With
    ``time_limit`` (seconds of fitting) the study stops starting fits after that long and
    judges the first ``k`` datasets fitted: exactly the first ``k`` of the full study
    (``config["n_datasets"]`` says how many, ``"n_datasets_asked"`` how many were asked).

    >>> result = simulation_based_calibration(design, 25, FitConfig(chains=2, draws=200))  # doctest: +SKIP
    >>> result.min_p > 0.001, result.ecdf_inside  # doctest: +SKIP
    (True, True)
    """
    if max_rank_draws < MIN_RANK_DRAWS:
        raise ValueError(f"max_rank_draws must be >= {MIN_RANK_DRAWS}")
    quantities = list(quantities or default_quantities(design))
    variables = sorted({q.variable for q in quantities})
    start = time.perf_counter()
    sampler = _study_sampler(design, config, variables, sampler)
    setup_seconds = time.perf_counter() - start
    model_vars = [v for v in variables if v != LOG_LIKELIHOOD]
    prior = prior_datasets(
        sampler.model, n_datasets, int(np.random.SeedSequence(seed).generate_state(1)[0]),
        model_vars, perturb,
    )  # fmt: skip
    prior_seconds = time.perf_counter() - start - setup_seconds
    items = _datasets(prior, quantities, [rv.name for rv in sampler.model.free_RVs])
    jobs = SBCJobs(
        design, sampler.config, tuple(sampler.var_names), tuple(quantities), max_rank_draws
    )
    fanned = time.perf_counter()
    rows = run_jobs(
        sbc_job, items, seed, shared=jobs, ray_address=ray_address, workers=workers,
        progress=progress, time_limit=time_limit,
    )  # fmt: skip
    if not rows:
        raise RuntimeError("no SBC dataset was fitted within the time limit")
    jobs_seconds = time.perf_counter() - fanned
    ranks = pd.DataFrame([r for part in rows for r in part])
    sampling = ranks.groupby(DATASET)[SECONDS].first().to_numpy(float)
    normalized = {
        q.label: ranks.loc[ranks[QUANTITY] == q.label, NORMALIZED_RANK].to_numpy(float)
        for q in quantities
    }
    band = ecdf_band(len(rows), band_prob, seed=seed) if len(rows) >= 2 else None
    return SBCResult(
        ranks=ranks,
        tests={label: uniformity(u, bins) for label, u in normalized.items()},
        acceptance=prior.acceptance,
        ecdf=(
            {label: ecdf_verdict(u, band, label) for label, u in normalized.items()}
            if band is not None
            else {}
        ),
        band=band,
        timing={
            "setup_s": setup_seconds,
            "compile_s": float(sampler.compile_seconds or 0.0),
            "prior_draws_s": prior_seconds,
            "sampling_s_per_dataset": float(np.mean(sampling)),
            "sampling_s_total": float(np.sum(sampling)),
            "jobs_wall_s": jobs_seconds,
        },
        config=_study_config(
            design, sampler.config, len(rows), n_datasets, max_rank_draws, seed, perturb
        ),
    )


def _study_sampler(
    design: Design, config: FitConfig, variables: Sequence[str], sampler: CompiledLawSampler | None
) -> CompiledLawSampler:
    """The sampler an SBC study fits with: ``sampler`` if given (checked against the design
    and the variables, and kept for this process's serial jobs), else this process's cached
    one for ``design``, ``config`` and ``variables``."""
    if sampler is None:
        sampler = cached_sampler(design, config, variables)
    elif not sampler.same_layout(design):
        raise ValueError("the sampler was compiled for another design (settings, sizes or trials)")
    else:  # serial jobs in this process use it
        keep_sampler(sampler)
    missing = set(variables) - set(sampler.var_names)
    if missing:
        raise ValueError(f"the sampler does not return {sorted(missing)}")
    return sampler


def _datasets(
    prior: PriorDatasets, quantities: Sequence[Quantity], free: Sequence[str]
) -> list[SBCDataset]:
    """One job per prior dataset: its outcome, each quantity's true value and the true free
    random variables."""
    items = []
    for i in range(prior.truth.sizes[DATASET]):
        row = prior.truth.isel({DATASET: i})
        truth = {
            q.label: float(q.select(row[q.variable]).values)
            for q in quantities
            if q.variable != LOG_LIKELIHOOD
        }
        items.append(
            SBCDataset(
                index=i,
                outcome=np.asarray(prior.outcomes[i]),
                truth=truth,
                free={v: np.asarray(row[v].values) for v in free},
            )
        )
    return items


def _study_config(
    design: Design,
    config: FitConfig,
    n_datasets: int,
    asked: int,
    max_rank_draws: int,
    seed: int,
    perturb: Perturbation | None,
) -> dict[str, Any]:
    """What an SBC study ran: its size, the sampler's settings and how the jobs ran."""
    info = last_run()
    return {
        "n_datasets": n_datasets,
        "n_datasets_asked": asked,
        "rows": design.n_obs,
        "settings": len(design.settings),
        "chains": config.chains,
        "tune": config.tune,
        "draws": config.draws,
        "target_accept": config.accept,
        "kernel": config.kernel,
        "max_rank_draws": max_rank_draws,
        "seed": seed,
        "perturbed": perturb is not None,
        "mode": info.mode if info is not None else "serial",
        "ray_address": info.address if info is not None else None,
        "workers": info.workers if info is not None else 1,
    }
