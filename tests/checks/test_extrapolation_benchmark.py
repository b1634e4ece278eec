"""The extrapolation benchmark's machinery: LCDB rows as observations, the per-curve baselines
(known answers), the bucket scores (hand-computed toys), and a small run of the whole study on
real curves (no accuracy or timing thresholds)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from testdata import EXTERNAL, ROOT

from bayesscale import names
from bayesscale.checks import curve_baselines as cb
from bayesscale.checks import extrapolation_score as es
from bayesscale.checks.lcdb_study import LAW, STACK, STACK_DRIFT, with_ratios
from bayesscale.data import lcdb
from bayesscale.data.observations import ObservationError
from bayesscale.law.drift import TAU_MAX

LCDB_FILE = EXTERNAL / "lcdb" / lcdb.DEV_FILE


# --- baselines: known answers -------------------------------------------------------------------

SIZES = np.array([16.0, 23, 32, 45, 64, 91, 128, 181, 256, 362, 512])


@pytest.mark.parametrize(
    "params", [(0.9, 2.0, 0.5, 20.0), (0.8, 5.0, 0.8, 0.0), (0.95, 1.0, 0.3, 100.0)]
)
def test_pow4_recovers_a_noiseless_curve(params: tuple[float, ...]) -> None:
    got = cb.fit_pow4(SIZES, cb.pow4(SIZES, *params))
    np.testing.assert_allclose(got, params, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(
    "params", [(0.2, 50.0, 0.9, 1.0), (0.5, 1000.0, 0.95, 1.5), (0.1, 5.0, 0.7, 0.5)]
)
def test_mmf4_recovers_a_noiseless_curve(params: tuple[float, ...]) -> None:
    got = cb.fit_mmf4(SIZES, cb.mmf4(SIZES, *params))
    np.testing.assert_allclose(got, params, rtol=1e-4)


def test_baselines_predict_and_spread_as_documented() -> None:
    x = np.repeat([16.0, 32.0, 64.0, 128.0, 256.0], 3)
    rng = np.random.default_rng(0)
    y = cb.pow4(x, 0.9, 2.0, 0.5, 20.0) + rng.normal(0, 0.01, len(x))
    fits = cb.fit_baselines(x, y, min_sigma=1e-3)
    last = y[x == 256.0]
    assert float(fits[cb.LAST_VALUE].mean(1000.0)) == pytest.approx(last.mean())
    assert fits[cb.LAST_VALUE].sigma == pytest.approx(np.std(last, ddof=1) * np.sqrt(4 / 3))
    for name in (cb.POW4, cb.MMF4):
        resid = y - fits[name].mean(x)
        assert fits[name].sigma == pytest.approx(np.sqrt(np.sum(resid**2) / (len(y) - 4)))
        assert 0.005 < fits[name].sigma < 0.02  # the noise's 0.01, from 15 runs
    # seeds that agree exactly keep the floor as their spread
    flat = cb.fit_baselines([16, 16, 32, 32, 64, 64], [0.5, 0.5, 0.6, 0.6, 0.7, 0.7], 0.004)
    assert flat[cb.LAST_VALUE].sigma == 0.004


# --- buckets and scores: hand-computed toys -----------------------------------------------------


def test_bucket_edges_belong_to_the_lower_bucket() -> None:
    ratios = [1.01, 2.0, 2.0001, 4.0, 4.5, 8.0, 8.0001, 100.0]
    assert es.bucket(ratios).tolist() == [
        "<=2x", "<=2x", "2-4x", "2-4x", "4-8x", "4-8x", ">8x", ">8x",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="> 1"):
        es.bucket([1.0])


def test_normal_count_logpmf_is_the_rounded_normal() -> None:
    n, mean, sd = 20, 0.3, 0.1
    k = np.arange(n + 1)
    p = np.exp(es.normal_count_logpmf(k, n, mean, sd))
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    hand = stats.norm.cdf((6.5 / 20 - 0.3) / 0.1) - stats.norm.cdf((5.5 / 20 - 0.3) / 0.1)
    assert p[6] == pytest.approx(hand, rel=1e-12)
    assert p[0] == pytest.approx(stats.norm.cdf((0.5 / 20 - 0.3) / 0.1), rel=1e-12)
    # far in either tail it stays finite (no log of zero)
    far = es.normal_count_logpmf([0, 20], 20, [0.999, 0.001], 1e-4)
    assert np.all(np.isfinite(far)) and np.all(far < -1e3)


def test_scores_and_bucket_table_on_a_toy() -> None:
    rows = pd.DataFrame(
        {
            "curve": ["a"] * 4 + ["b"] * 2,
            "size": [32.0, 32.0, 64.0, 64.0, 300.0, 300.0],
            "ratio": [2.0, 2.0, 4.0, 4.0, 10.0, 10.0],
            "successes": [50, 60, 70, 72, 80, 90],
            "trials": 100,
        }
    )
    mean = np.array([0.5, 0.5, 0.6, 0.6, 0.9, 0.9])
    scores = es.gaussian_scores(mean, np.full(6, 0.05), rows["successes"], rows["trials"], 0.9)
    frame = es.score_frame("m", rows, scores)
    table = es.bucket_table(frame).set_index("bucket")
    # cells: (a, 32): |0.5 - 0.55| = 0.05; (a, 64): |0.6 - 0.71| = 0.11; (b, 300): |0.9 - 0.85|
    assert table.loc["<=2x", "mae"] == pytest.approx(0.05)
    assert table.loc["2-4x", "mae"] == pytest.approx(0.11)
    assert table.loc[">8x", "mae"] == pytest.approx(0.05)
    assert table.loc["all", "mae"] == pytest.approx(0.07)
    assert "4-8x" not in table.index
    # intervals mean -/+ 1.645 x 0.05: [0.418, 0.582] holds 0.5, not 0.6; [0.518, 0.682] holds
    # neither 0.70 nor 0.72; [0.818, 0.982] holds 0.9, not 0.8
    assert table.loc["<=2x", "coverage"] == pytest.approx(0.5)
    assert table.loc["2-4x", "coverage"] == pytest.approx(0.0)
    assert table.loc[">8x", "coverage"] == pytest.approx(0.5)
    assert table.loc["all", "coverage"] == pytest.approx(1 / 3)
    assert table.loc["all", "runs"] == 6 and table.loc["all", "cells"] == 3
    assert es.pooled_mae(frame)["m"] == pytest.approx(0.11)


def test_draw_scores_take_median_interval_and_log_mean_density() -> None:
    p = np.array([[0.2], [0.4], [0.6]])
    counts = np.array([[1.0], [4.0], [9.0]])
    loglik = np.log(np.array([[0.1], [0.2], [0.3]]))
    s = es.draw_scores(p, counts, loglik, [4], [10], prob=0.5)
    assert s["predicted"][0] == pytest.approx(0.4)
    assert s["lower"][0] == pytest.approx(0.25) and s["upper"][0] == pytest.approx(0.65)
    assert bool(s["covered"][0])
    assert s["log_density"][0] == pytest.approx(np.log(0.2))


# --- LCDB rows -----------------------------------------------------------------------------------


def _raw() -> pd.DataFrame:
    rows = []
    for curve, largest in (("1", 4096), ("2", 2048)):
        for size in (16, 32, 64, 128, 256, 512, 1024, largest):
            for seed in (0, 1):
                acc = 0.9 - 0.5 * size**-0.3 + 0.001 * seed
                rows.append((int(curve), "svm", size, 400, seed, acc))
    return pd.DataFrame(rows, columns=list(lcdb.COLUMNS))


def test_observations_split_and_ratios() -> None:
    obs = lcdb.to_observations(_raw())
    assert obs[names.TRIALS].eq(400).all()
    np.testing.assert_array_equal(
        obs[names.SUCCESSES], np.rint(_raw()[lcdb.ACCURACY] * 400).astype(int)
    )
    fitted, held = lcdb.split_at(obs, 1 / 8)
    # curve 1: sizes <= 512 fitted; curve 2: sizes <= 256
    assert sorted(fitted.groupby(lcdb.OPENMLID)[lcdb.SIZE_TRAIN].max().tolist()) == [256, 512]
    held = with_ratios(fitted, held)
    one = held[held[lcdb.OPENMLID] == "1"].drop_duplicates(lcdb.SIZE_TRAIN)
    assert one["ratio"].tolist() == [2.0, 8.0]
    two = held[held[lcdb.OPENMLID] == "2"].drop_duplicates(lcdb.SIZE_TRAIN)
    assert two["ratio"].tolist() == [2.0, 4.0, 8.0]
    curves = lcdb.eligible_curves(_raw(), min_largest=4096, min_sizes=8)
    assert curves[lcdb.OPENMLID].tolist() == [1]


def test_missing_data_and_bad_rows_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BAYESSCALE_EXTERNAL", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="shared/external/lcdb"):
        lcdb.lcdb_dir()
    bad = _raw()
    bad.loc[3, lcdb.ACCURACY] = 1.5
    path = tmp_path / "bad.csv"
    bad.to_csv(path, index=False)
    with pytest.raises(ObservationError, match=r"bad\.csv.*'accuracy'"):
        lcdb.read_lcdb(path)


# --- the whole study, small ---------------------------------------------------------------------


def _benchmark() -> ModuleType:
    path = ROOT / "benchmarks" / "extrapolation.py"
    spec = importlib.util.spec_from_file_location("extrapolation_benchmark", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_small_study_on_real_curves(tmp_path: Path) -> None:
    if not LCDB_FILE.is_file():
        pytest.fail(f"{LCDB_FILE} is missing: CI has LCDB's development half there")
    bench = _benchmark()
    out = tmp_path / "study"
    argv = ["--curves", "3", "--seed", "1", "--lcdb", str(LCDB_FILE), "--out", str(out)]
    argv += ["--chains", "2", "--tune", "100", "--draws", "100", "--ess-target", "0"]
    bench.main(argv)
    scores = pd.read_csv(out / "scores.csv")
    study = json.loads((out / "study.json").read_text())
    assert study["curves"] == 3 and len(study["fits"]) == 2
    assert [round(1 / h["cutoff"]) for h in study["headline"]] == [8, 32]
    # every method scores every held-out run of every cutoff, once
    counts = scores.groupby(["cutoff", "method"]).size().unstack()
    assert set(counts.columns) == {LAW, *cb.BASELINES}
    assert (counts.nunique(axis=1) == 1).all()
    raw = lcdb.read_lcdb(LCDB_FILE)
    chosen = lcdb.sample_curves(lcdb.eligible_curves(raw), 3, seed=1)
    obs = lcdb.to_observations(lcdb.select(raw, chosen))
    for cutoff, row in counts.iterrows():
        assert row[LAW] == len(lcdb.split_at(obs, float(cutoff))[1])
    assert scores["ratio"].gt(1).all() and scores["log_density"].lt(0).all()
    assert scores["lower"].le(scores["upper"]).all()
    buckets = pd.read_csv(out / "buckets.csv")
    assert buckets["coverage"].between(0, 1).all() and buckets["mae"].ge(0).all()


@pytest.mark.slow
def test_small_stack_on_real_curves(tmp_path: Path) -> None:
    """Both forms fitted and refitted out of scale, their stacking weights, the drift's
    refit, and every method scored on every held-out run once (no accuracy thresholds: the machinery, not the result)."""
    if not LCDB_FILE.is_file():
        pytest.fail(f"{LCDB_FILE} is missing: CI has LCDB's development half there")
    bench = _benchmark()
    out = tmp_path / "stack"
    argv = ["--curves", "3", "--seed", "1", "--lcdb", str(LCDB_FILE), "--out", str(out)]
    argv += ["--cutoffs", "32", "--stack", "power,offset_power"]
    argv += ["--chains", "2", "--tune", "60", "--draws", "60", "--ess-target", "0"]
    bench.main(argv)
    scores = pd.read_csv(out / "scores.csv")
    study = json.loads((out / "study.json").read_text())
    counts = scores.groupby("method").size()
    methods = {LAW, f"{LAW} (offset_power)", STACK, STACK_DRIFT, *cb.BASELINES}
    assert set(counts.index) == methods
    assert counts.nunique() == 1  # every method scores every held-out run once
    (job,) = study["fits"]
    assert 0.0 <= job["drift_tau"] <= TAU_MAX
    weights = job["stack"]["weights"]
    assert set(weights) == {"power", "offset_power"}
    assert sum(weights.values()) == pytest.approx(1.0, abs=1e-5)
    for name, (lo, hi) in job["stack"]["interval"].items():
        assert 0.0 <= lo <= hi <= 1.0 and lo - 1e-6 <= weights[name] <= hi + 1e-6
    assert job["out_of_scale_rows"] > 0 and study["headline"][0]["lead"] == STACK_DRIFT
