"""Seeded jobs serially and on Ray (:mod:`bayesscale.jobs`): the same results either way.

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
from testdata import REFERENCE

from bayesscale import jobs
from bayesscale.checks.calibration_io import (
    DATASET,
    DIVERGENCES,
    ESS_BULK,
    LOG_LIKELIHOOD,
    NORMALIZED_RANK,
    QUANTITY,
    RANK,
    RANK_DRAWS,
    TRUE_VALUE,
)
from bayesscale.checks.coverage import coverage_study
from bayesscale.checks.crossval import crossval_jobs
from bayesscale.checks.sbc import default_quantities, simulation_based_calibration
from bayesscale.checks.sim_designs import SMALL_ANCHORS, SMALL_GRIDS, sbc_design, truth_subset
from bayesscale.data.observations import Table
from bayesscale.data.simulate import Truth, per_axis_design, simulate
from bayesscale.data.spec import load_spec
from bayesscale.law.inference import FitConfig

TINY_CONFIG = FitConfig(chains=2, draws=50, tune=50, seed=0, progress=False)


def _job(shared: int, item: int, seed: int) -> tuple[int, int]:
    return shared * item, seed


def test_job_seeds_depend_on_the_study_seed_and_index_only() -> None:
    seeds = [jobs.job_seed(3, i) for i in range(5)]
    assert len(set(seeds)) == 5
    assert seeds == [jobs.job_seed(3, i) for i in range(5)]
    assert jobs.job_seed(4, 0) != seeds[0]
    assert seeds[0] == int(np.random.SeedSequence([3, 0]).generate_state(1)[0])
    with pytest.raises(ValueError, match=">= 0"):
        jobs.job_seed(-1, 0)


def test_serial_jobs_in_order_with_their_seeds() -> None:
    out = jobs.run_jobs(_job, [1, 2, 3], seed=3, shared=10)
    assert out == [(10 * k, jobs.job_seed(3, k - 1)) for k in (1, 2, 3)]
    info = jobs.last_run()
    assert info is not None and info.mode == "serial" and info.jobs == 3
    # a time limit already spent: no job starts, an empty prefix comes back
    assert jobs.run_jobs(_job, [1, 2], seed=3, shared=1, time_limit=-1.0) == []


# --- a tiny SBC, serially and on a real local Ray instance ------------------------------------


def test_tiny_studies_give_the_same_results_serially_and_on_ray(monkeypatch) -> None:
    """Each study serially first, then all three in one Ray session (one start, not three)."""
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    truth = Truth.from_json(REFERENCE / "truth.json")
    spec = load_spec()
    # SBC: each dataset a job, seeded by (seed, dataset)
    design = sbc_design(spec, truth, [1], grids=SMALL_GRIDS, anchors=SMALL_ANCHORS, seeds=(0, 1))
    sbc: dict[str, Any] = dict(n_datasets=3, config=TINY_CONFIG, seed=11, max_rank_draws=20)
    serial = simulation_based_calibration(design, **sbc)
    quantities = {q.label for q in default_quantities(design)}
    assert LOG_LIKELIHOOD in quantities and set(serial.tests) == quantities
    assert set(serial.ecdf) == quantities and serial.band is not None
    assert serial.config["mode"] == "serial"
    loglik = serial.ranks[serial.ranks[QUANTITY] == LOG_LIKELIHOOD]
    assert np.isfinite(loglik[TRUE_VALUE]).all()

    # coverage over redraws: each redraw a job, seeded by (seed, redraw)
    one = truth_subset(truth, [1])
    frame = per_axis_design(one, grids=SMALL_GRIDS, anchors=SMALL_ANCHORS, seeds=(0, 1))
    study: dict[str, Any] = dict(
        n_redraws=2, config=TINY_CONFIG, seed=4, n_boot=20, design_frame=frame
    )
    coverage = coverage_study(one, spec, **study)
    assert len(coverage.records) == 2 * 2 * (3 + 3)

    # out-of-scale cross-validation: each leave-out fold a job, the full fit inside
    full = per_axis_design(one, seeds=(0, 1))  # the paper's grids: an axis keeps 3+ sizes
    table = Table.from_frame(simulate(one, full, seed=5), spec)
    rules = ["rollouts=max", "n_envs=8"]  # the largest rollouts, the fewest environments
    folds = crossval_jobs(table, spec, rules, TINY_CONFIG)
    assert jobs.last_run().mode == "serial"  # type: ignore[union-attr]
    assert len(folds.rows()) > 0

    with jobs.ray_session(None, workers=2):
        on_ray = simulation_based_calibration(design, **sbc, workers=2)
        coverage_ray = coverage_study(one, spec, **study, workers=2)
        assert jobs.last_run().mode == "ray"  # type: ignore[union-attr]
        folds_ray = crossval_jobs(table, spec, rules, TINY_CONFIG, workers=2)
        assert jobs.last_run().mode == "ray"  # type: ignore[union-attr]
    assert on_ray.config["mode"] == "ray" and on_ray.config["workers"] == 2
    columns = [DATASET, QUANTITY, TRUE_VALUE, RANK, RANK_DRAWS]
    columns += [NORMALIZED_RANK, ESS_BULK, DIVERGENCES]
    assert serial.ranks[columns].equals(on_ray.ranks[columns])
    pd.testing.assert_frame_equal(coverage.records, coverage_ray.records)
    assert [f.matched for f in folds.folds] == [f.matched for f in folds_ray.folds]
    pd.testing.assert_frame_equal(folds.rows(), folds_ray.rows(), rtol=1e-6)
