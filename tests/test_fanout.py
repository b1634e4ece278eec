"""Seeded jobs serially and on Ray (:mod:`bayesscale.checks.fanout`), and the ECDF bands of
simulation-based calibration on known answers.

The Ray test starts its own throwaway local instance (``address="local"``, loopback, its own
temporary folder; never a cluster already running on the machine) and runs three tiny studies
serially and as Ray tasks on 2 workers: an SBC (the same ranks), a coverage study (the same
records) and an out-of-scale cross-validation (the same folds; the full fit's figures agree to
the last bits only with one BLAS thread, so they are compared to 1e-6 relative).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from testdata import REFERENCE

from bayesscale.checks import calibration as cal
from bayesscale.checks import fanout
from bayesscale.data.observations import Table
from bayesscale.data.simulate import Truth, per_axis_design, simulate
from bayesscale.data.spec import load_spec
from bayesscale.law.inference import FitConfig

TINY_CONFIG = FitConfig(chains=2, draws=50, tune=50, seed=0, progress=False)


def _job(shared: int, item: int, seed: int) -> tuple[int, int]:
    return shared * item, seed


def test_job_seeds_depend_on_the_study_seed_and_index_only() -> None:
    seeds = [fanout.job_seed(3, i) for i in range(5)]
    assert len(set(seeds)) == 5
    assert seeds == [fanout.job_seed(3, i) for i in range(5)]
    assert fanout.job_seed(4, 0) != seeds[0]
    assert seeds[0] == int(np.random.SeedSequence([3, 0]).generate_state(1)[0])
    with pytest.raises(ValueError, match=">= 0"):
        fanout.job_seed(-1, 0)


def test_serial_jobs_in_order_with_their_seeds() -> None:
    out = fanout.run_jobs(_job, [1, 2, 3], seed=3, shared=10)
    assert out == [(10 * k, fanout.job_seed(3, k - 1)) for k in (1, 2, 3)]
    info = fanout.last_run()
    assert info is not None and info.mode == "serial" and info.jobs == 3
    # a time limit already spent: no job starts, an empty prefix comes back
    assert fanout.run_jobs(_job, [1, 2], seed=3, shared=1, time_limit=-1.0) == []


# --- ECDF bands on known answers ----------------------------------------------------------------


def test_ecdf_band_brackets_the_uniform_expectation() -> None:
    band = cal.ecdf_band(100, prob=0.95, n_sim=2000, seed=1)
    assert band.z.size == 99 and 0 < band.gamma < 0.05
    assert np.all(band.lower <= 100 * band.z) and np.all(100 * band.z <= band.upper)
    # the simultaneous band is wider than the pointwise 95% one
    assert np.all(band.upper >= stats.binom.ppf(0.975, 100, band.z))
    same = cal.ecdf_band(100, prob=0.95, n_sim=2000, seed=1)
    assert np.array_equal(band.upper, same.upper)  # seeded


def test_uniform_ranks_stay_inside_at_the_nominal_rate() -> None:
    """300 seeded samples of 100 uniform normalised ranks against one 95% band: the share
    outside is 0.05 up to Monte Carlo error (sd 0.013) and the discreteness of the counts."""
    band = cal.ecdf_band(100, prob=0.95, n_sim=4000, seed=2)
    rng = np.random.default_rng(3)
    outside = [not cal.ecdf_verdict(rng.uniform(size=100), band).inside for _ in range(300)]
    assert 0.01 <= np.mean(outside) <= 0.10, np.mean(outside)


def test_too_narrow_and_too_wide_posteriors_leave_the_band() -> None:
    """The truth drawn from N(0, 1), ranked among 99 draws of a 'posterior' N(0, s^2): with
    s = 0.5 (too narrow) ranks pile at both ends, the ECDF rises above the band low and falls
    below it high; with s = 2 (too wide) the reverse."""
    rng = np.random.default_rng(4)
    n, draws = 200, 99
    band = cal.ecdf_band(n, n_sim=2000, seed=5)
    for scale, first, last in ((0.5, "above", "below"), (2.0, "below", "above")):
        truth = rng.normal(size=n)
        ranks = np.array([cal.rank_of(t, rng.normal(scale=scale, size=draws)) for t in truth])
        u = cal.normalized_ranks(ranks, np.full(n, draws), rng)
        verdict = cal.ecdf_verdict(u, band, "theta")
        assert not verdict.inside, scale
        assert verdict.outside[0][2] == first and verdict.outside[0][1] < 0.5
        assert verdict.outside[-1][2] == last and verdict.outside[-1][0] > 0.5
        assert verdict.max_excess > 0
    # the same draws from the right posterior (the prior: no data) stay inside
    truth = rng.normal(size=n)
    ranks = np.array([cal.rank_of(t, rng.normal(size=draws)) for t in truth])
    assert cal.ecdf_verdict(cal.normalized_ranks(ranks, np.full(n, draws), rng), band).inside


def test_ecdf_verdict_reports_where_and_refuses_another_size(tmp_path) -> None:
    band = cal.ecdf_band(40, points=8, n_sim=500)
    verdict = cal.ecdf_verdict(np.full(40, 0.02), band, "q")
    assert verdict.outside == ((0.125, 0.875, "above"),)
    assert verdict.where() == "above 0.12-0.88"
    with pytest.raises(ValueError, match="40 values"):
        cal.ecdf_verdict(np.full(39, 0.5), band)
    path = cal.plot_ecdf_difference(
        {"q": np.full(40, 0.02), "r": np.linspace(0.01, 0.99, 40)}, tmp_path / "ecdf.png"
    )
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- a tiny SBC, serially and on a real local Ray instance ------------------------------------


def test_tiny_studies_give_the_same_results_serially_and_on_ray(monkeypatch) -> None:
    """Each study serially first, then all three in one Ray session (one start, not three)."""
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    truth = Truth.from_json(REFERENCE / "truth.json")
    spec = load_spec()
    # SBC: each dataset a job, seeded by (seed, dataset)
    design = cal.sbc_design(
        spec, truth, [1], grids=cal.SMALL_GRIDS, anchors=cal.SMALL_ANCHORS, seeds=(0, 1)
    )
    sbc: dict[str, Any] = dict(n_datasets=3, config=TINY_CONFIG, seed=11, max_rank_draws=20)
    serial = cal.simulation_based_calibration(design, **sbc)
    quantities = {q.label for q in cal.default_quantities(design)}
    assert cal.LOG_LIKELIHOOD in quantities and set(serial.tests) == quantities
    assert set(serial.ecdf) == quantities and serial.band is not None
    assert serial.config["mode"] == "serial"
    loglik = serial.ranks[serial.ranks[cal.QUANTITY] == cal.LOG_LIKELIHOOD]
    assert np.isfinite(loglik[cal.TRUE_VALUE]).all()

    # coverage over redraws: each redraw a job, seeded by (seed, redraw)
    one = cal.truth_subset(truth, [1])
    frame = per_axis_design(one, grids=cal.SMALL_GRIDS, anchors=cal.SMALL_ANCHORS, seeds=(0, 1))
    study: dict[str, Any] = dict(
        n_redraws=2, config=TINY_CONFIG, seed=4, n_boot=20, design_frame=frame
    )
    coverage = cal.coverage_study(one, spec, **study)
    assert len(coverage.records) == 2 * 2 * (3 + 3)

    # out-of-scale cross-validation: each leave-out fold a job, the full fit inside
    full = per_axis_design(one, seeds=(0, 1))  # the paper's grids: an axis keeps 3+ sizes
    table = Table.from_frame(simulate(one, full, seed=5), spec)
    rules = ["rollouts=max", "n_envs=8"]  # the largest rollouts, the fewest environments
    folds = fanout.crossval_jobs(table, spec, rules, TINY_CONFIG)
    assert fanout.last_run().mode == "serial"  # type: ignore[union-attr]
    assert len(folds.rows()) > 0

    with fanout.ray_session(None, workers=2):
        on_ray = cal.simulation_based_calibration(design, **sbc, workers=2)
        coverage_ray = cal.coverage_study(one, spec, **study, workers=2)
        assert fanout.last_run().mode == "ray"  # type: ignore[union-attr]
        folds_ray = fanout.crossval_jobs(table, spec, rules, TINY_CONFIG, workers=2)
        assert fanout.last_run().mode == "ray"  # type: ignore[union-attr]
    assert on_ray.config["mode"] == "ray" and on_ray.config["workers"] == 2
    columns = [cal.DATASET, cal.QUANTITY, cal.TRUE_VALUE, cal.RANK, cal.RANK_DRAWS]
    columns += [cal.NORMALIZED_RANK, cal.ESS_BULK, cal.DIVERGENCES]
    assert serial.ranks[columns].equals(on_ray.ranks[columns])
    pd.testing.assert_frame_equal(coverage.records, coverage_ray.records)
    assert [f.matched for f in folds.folds] == [f.matched for f in folds_ray.folds]
    pd.testing.assert_frame_equal(folds.rows(), folds_ray.rows(), rtol=1e-6)
