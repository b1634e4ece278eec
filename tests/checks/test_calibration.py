"""Calibration of the method: the rank/uniformity/coverage arithmetic on known answers, and a
small simulation-based calibration of the default law that passes on the model and fails on a
deliberately broken simulator (so the check can fail).

The SBC tests share one compiled sampler (one setting of the reference truth, the paper's
per-axis grids, 3 seeds: 48 rows; 2 chains x 200 draws after 200 warm-up draws).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pymc as pm
import pytest
from scipy import stats
from testdata import REFERENCE

from bayesscale import names
from bayesscale.checks.calibration_io import (
    BOOTSTRAP,
    COVERAGE,
    COVERAGE_SE,
    COVERED,
    ESTIMATOR,
    LEVEL,
    LOG_LIKELIHOOD,
    LOWER,
    MEAN_WIDTH,
    N_INTERVALS,
    POOLED,
    RANK,
    RANK_DRAWS,
    SETTING_LEVEL,
    TRUE_VALUE,
    UPPER,
    WIDTH,
    write_json,
)
from bayesscale.checks.coverage import _record, coverage_study, equal_tailed, summarize_coverage
from bayesscale.checks.law_sampler import CompiledLawSampler
from bayesscale.checks.prior_draws import (
    POTENTIAL_WARNING,
    prior_datasets,
    scale_exponents,
    scale_variable,
)
from bayesscale.checks.ranks import (
    default_bins,
    normalized_ranks,
    rank_of,
    text_histogram,
    thin,
    uniformity,
)
from bayesscale.checks.sbc import default_quantities, simulation_based_calibration
from bayesscale.checks.sim_designs import sbc_design, truth_subset
from bayesscale.data.simulate import Truth, per_axis_design
from bayesscale.data.spec import load_spec
from bayesscale.law.inference import FitConfig

SBC_CONFIG = FitConfig(chains=2, draws=200, tune=200, seed=0, progress=False)
SBC_SETTING = 1  # Qwen3-8B | grpo | math+code
STRICT = 1e-3


# --- pure arithmetic ---------------------------------------------------------------------------


def test_rank_counts_draws_strictly_below_the_truth() -> None:
    assert rank_of(0.5, [0.1, 0.7, 0.3, 0.5]) == 2
    assert rank_of(-1.0, [0.0, 1.0]) == 0
    assert rank_of(2.0, [0.0, 1.0]) == 2


def test_thin_keeps_evenly_spaced_draws_over_chains() -> None:
    draws = np.arange(20.0).reshape(2, 10)  # chain 0: 0..9, chain 1: 10..19
    assert thin(draws, 4).tolist() == [0.0, 6.0, 13.0, 19.0]
    assert thin(draws, 100).size == 20


def test_normalized_ranks_are_uniform_exactly_when_ranks_are() -> None:
    rng = np.random.default_rng(1)
    n_draws = rng.integers(5, 60, size=4000)
    uniform_ranks = rng.integers(0, n_draws + 1)
    u = normalized_ranks(uniform_ranks, n_draws, np.random.default_rng(2))
    assert stats.kstest(u, "uniform").pvalue > 0.05
    assert np.all((u >= 0) & (u < 1))
    # ranks piled at the bottom (truth below every draw) give u below 1 / (L + 1)
    low = normalized_ranks(np.zeros(50, int), np.full(50, 9), np.random.default_rng(3))
    assert np.all(low < 0.1)
    with pytest.raises(ValueError, match=r"0\.\.n_draws"):
        normalized_ranks([11], [10], rng)


def test_uniformity_statistics_on_known_counts() -> None:
    # counts (3, 1) in 2 bins: chi2 = ((3-2)^2 + (1-2)^2) / 2 = 1 on 1 dof, p = 0.3173
    result = uniformity([0.1, 0.2, 0.3, 0.9], bins=2)
    assert result.counts == (3, 1)
    assert result.chi2 == pytest.approx(1.0)
    assert result.chi2_p == pytest.approx(0.31731, abs=1e-5)
    # KS statistic of {0.1, 0.2, 0.3, 0.9}: max_i max(i/n - u_i, u_i - (i-1)/n) = 0.45 at 0.3
    assert result.ks == pytest.approx(0.45)
    rng = np.random.default_rng(4)
    assert uniformity(rng.uniform(size=500)).min_p > 0.01
    skewed = uniformity(rng.beta(1.0, 2.0, size=500))
    assert skewed.chi2_p < 1e-6 and skewed.ks_p < 1e-6
    assert default_bins(25) == 5
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        uniformity([0.5, 1.5])


def test_text_histogram_marks_the_uniform_expectation() -> None:
    lines = text_histogram([4, 0], width=8)
    assert lines[0].endswith("####|####")
    assert lines[1].endswith("    |")


def test_coverage_summary_on_known_intervals() -> None:
    rows = []
    # redraw 0: 2 of 2 settings covered (width 0.2); redraw 1: 0 of 2 (width 0.4)
    for redraw, lo, hi in [(0, 0.2, 0.4), (1, 0.5, 0.9)]:
        for setting in ("a", "b"):
            rows.append(_record(redraw, POOLED, SETTING_LEVEL, setting, "env", 0.3, lo, hi))
    summary = summarize_coverage(pd.DataFrame(rows))
    row = summary.iloc[0]
    assert row[COVERAGE] == pytest.approx(0.5)
    assert row[MEAN_WIDTH] == pytest.approx(0.3)
    assert row[N_INTERVALS] == 4
    # per-redraw fractions 1 and 0: sd 0.7071 / sqrt(2) = 0.5
    assert row[COVERAGE_SE] == pytest.approx(0.5)
    lo, hi = equal_tailed(np.arange(101.0), prob=0.9)
    assert (float(lo), float(hi)) == pytest.approx((5.0, 95.0))


def test_write_json_is_atomic_and_refuses_to_overwrite(tmp_path) -> None:
    path = tmp_path / "out" / "calibration.json"
    write_json({"p": np.float64(0.5), "counts": np.array([1, 2])}, path)
    assert json.loads(path.read_text()) == {"p": 0.5, "counts": [1, 2]}
    with pytest.raises(FileExistsError, match="--force"):
        write_json({"p": 1}, path)
    assert json.loads(path.read_text())["p"] == 0.5
    write_json({"p": 1}, path, overwrite=True)
    assert json.loads(path.read_text()) == {"p": 1}
    assert [p.name for p in path.parent.iterdir()] == ["calibration.json"]


def test_perturbations_change_only_the_named_variable() -> None:
    values = {"log_alpha_pop": np.log([0.2, 0.4]), "concentration": np.array(100.0)}
    out = scale_exponents(1.5)(values)
    assert np.exp(out["log_alpha_pop"]) == pytest.approx([0.3, 0.6])
    assert out["concentration"] == 100.0 and values["log_alpha_pop"][0] == np.log(0.2)
    assert float(scale_variable("concentration", 4.0)(values)["concentration"]) == 400.0
    with pytest.raises(KeyError, match="free random variable"):
        scale_variable("nope", 2.0)(values)


# --- the law model: exact prior draws, SBC, coverage ------------------------------------------


@pytest.fixture(scope="module")
def truth() -> Truth:
    return Truth.from_json(REFERENCE / "truth.json")


@pytest.fixture(scope="module")
def sbc_sampler(truth: Truth) -> CompiledLawSampler:
    design = sbc_design(load_spec(), truth, [SBC_SETTING], seeds=(0, 1, 2))
    variables = sorted({q.variable for q in default_quantities(design)} | {names.ALPHA})
    return CompiledLawSampler.for_design(design, SBC_CONFIG, variables)


def test_sbc_design_has_the_paper_grids(truth: Truth) -> None:
    design = sbc_design(load_spec(), truth, [SBC_SETTING], seeds=(0, 1, 2))
    assert design.settings == ("Qwen3-8B | grpo | math+code",)
    assert design.n_obs == 16 * 3  # 3 axes x 6 values, the shared anchor point once
    assert [len(np.unique(design.sizes[:, j])) for j in range(3)] == [6, 6, 6]


def test_prior_draws_follow_the_floor_wall(sbc_sampler: CompiledLawSampler) -> None:
    """Kept draws are the wall-weighted prior: floors far below zero (where the wall's
    acceptance sigmoid(floor / 0.02) is < 1e-4) never survive, though the raw prior has them;
    outcomes are valid counts."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=POTENTIAL_WARNING, category=UserWarning)
        raw = pm.sample_prior_predictive(
            1000, model=sbc_sampler.model, var_names=[names.LOSS_FLOOR], random_seed=1
        )["prior"][names.LOSS_FLOOR].values
    assert np.mean(raw < -0.2) > 0.2  # the random variables alone often break the wall
    prior = prior_datasets(sbc_sampler.model, 150, seed=5, variables=[names.LOSS_FLOOR])
    floor = prior.truth[names.LOSS_FLOOR].values
    assert floor.min() > -0.2
    assert prior.acceptance < 0.9  # the wall rejected a share of the raw draws
    trials = sbc_sampler.design.trials if sbc_sampler.design is not None else None
    assert prior.outcomes.shape == (150, 48)
    assert np.all((prior.outcomes >= 0) & (prior.outcomes <= trials))
    # the share of kept floors below 0 matches the wall: among raw draws within 0.1 of zero,
    # acceptance is sigmoid(floor / 0.02); a few, but not many, negative floors survive
    assert 0 < np.mean(floor < 0) < 0.1


def test_sbc_ranks_are_uniform_for_the_model(sbc_sampler: CompiledLawSampler) -> None:
    design = sbc_sampler.design
    assert design is not None
    result = simulation_based_calibration(
        design, 24, SBC_CONFIG, seed=7, sampler=sbc_sampler, max_rank_draws=50, bins=4
    )
    assert set(result.tests) == {q.label for q in default_quantities(design)}
    assert LOG_LIKELIHOOD in result.tests and set(result.ecdf) == set(result.tests)
    assert {"ecdf_inside", "ecdf_outside"} <= set(result.table().columns)
    assert result.ranks[RANK].between(0, result.ranks[RANK_DRAWS]).all()
    assert len(result.ranks) == 24 * len(result.tests)
    # not rejected at a strict level, for every quantity and both tests
    assert result.min_p > STRICT, result.report()


def test_sbc_rejects_a_broken_simulator(sbc_sampler: CompiledLawSampler) -> None:
    """Data simulated with 4x the seed-to-seed concentration the truth records (a likelihood
    that misstates the noise): the truth ranks at the bottom of the posterior."""
    design = sbc_sampler.design
    assert design is not None
    result = simulation_based_calibration(
        design,
        12,
        SBC_CONFIG,
        seed=8,
        sampler=sbc_sampler,
        max_rank_draws=50,
        bins=4,
        perturb=scale_variable(names.CONCENTRATION, 4.0),
    )
    broken = result.tests[names.CONCENTRATION]
    assert broken.ks_p < STRICT and broken.chi2_p < STRICT, result.report()
    assert broken.counts[0] > broken.n / 2
    # the ECDF leaves its simultaneous band, above it (too many low ranks) from low z on
    verdict = result.ecdf[names.CONCENTRATION]
    assert not verdict.inside and verdict.outside[0][2] == "above"
    assert verdict.outside[0][0] < 0.5, verdict.where()


def test_coverage_study_records_both_methods(truth: Truth, sbc_sampler: CompiledLawSampler) -> None:
    """Two redraws of one setting's sweep (the sampler's layout): every interval recorded,
    and most of the pooled model's per-setting intervals cover the true exponents."""
    one = truth_subset(truth, [SBC_SETTING])
    result = coverage_study(
        one,
        load_spec(),
        n_redraws=2,
        config=SBC_CONFIG,
        seed=3,
        n_boot=40,
        design_frame=per_axis_design(one),
        sampler=sbc_sampler,
    )
    records = result.records
    assert len(records) == 2 * 2 * (3 + 3)  # redraws x methods x (settings x axes + axes)
    assert set(records[ESTIMATOR]) == {POOLED, BOOTSTRAP}
    assert (records[WIDTH] > 0).all()
    assert records[COVERED].equals(
        (records[LOWER] <= records[TRUE_VALUE]) & (records[TRUE_VALUE] <= records[UPPER])
    )
    pooled = records[(records[ESTIMATOR] == POOLED) & (records[LEVEL] == "setting")]
    assert pooled[COVERED].sum() >= 4
    assert set(result.summary[names.AXIS_DIM]) == {"env", "task", "traj"}


def test_sampler_refuses_another_layout(truth: Truth, sbc_sampler: CompiledLawSampler) -> None:
    other = sbc_design(load_spec(), truth, [SBC_SETTING], seeds=(0, 1))
    assert not sbc_sampler.same_layout(other)
    with pytest.raises(ValueError, match="another design"):
        simulation_based_calibration(other, 2, SBC_CONFIG, sampler=sbc_sampler)
    with pytest.raises(ValueError, match="48 rows"):
        sbc_sampler.fit(np.zeros(47, int), seed=0)
