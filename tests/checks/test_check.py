"""bayesscale.checks.heldout and ``bayesscale check``: held-out posterior-predictive checks.

Known answers: data/reference/heldout.csv is simulated from the same truth as the fitted
observations, so the reference fit's 90% predictive intervals cover about 90% of it (measured:
0.937 of 315 rows, mean percentile 0.49), while the same fit with every exponent doubled
covers about half (measured 0.47, mean percentile 0.10). On a point-mass posterior the
predictive distribution is exactly one beta-binomial, whose quantiles and CDF scipy gives.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy import stats
from testdata import REFERENCE

from bayesscale import names
from bayesscale.checks.heldout import (
    by_setting,
    calibration,
    calibration_note,
    check,
    load_heldout,
    summary,
)
from bayesscale.cli import main
from bayesscale.core import laws
from bayesscale.data.fitfile import ATTR_FORMAT, save_fit
from bayesscale.data.observations import ObservationError
from bayesscale.recipe.synthetic import synthetic_fit

HELDOUT = REFERENCE / "heldout.csv"
ROW_COLUMNS = [
    names.ROW,
    names.LINE,
    names.SETTING,
    names.N_ENVS,
    names.N_TASKS,
    names.ROLLOUTS,
    names.PARAMS_B,
    names.SEED,
    names.OBSERVED,
    names.PREDICTED,
    names.LOWER,
    names.UPPER,
    names.MEAN_LOWER,
    names.MEAN_UPPER,
    names.PERCENTILE,
    names.COVERED,
]


@pytest.fixture(scope="module")
def reference_check(law_fit) -> pd.DataFrame:
    return check(law_fit, load_heldout(HELDOUT, law_fit), prob=0.9, seed=0)


def _heldout_frame() -> pd.DataFrame:
    return pd.read_csv(HELDOUT)


def _scaled_exponents(fit: xr.DataTree, factor: float) -> xr.DataTree:
    posterior = fit["posterior"].to_dataset()
    posterior[names.ALPHA] = posterior[names.ALPHA] * factor
    tree = fit.copy()
    tree["posterior"] = xr.DataTree(posterior)
    return tree


def test_reference_heldout_is_covered_at_about_the_nominal_rate(reference_check):
    table = reference_check
    assert len(table) == 315
    assert 0.75 <= table.attrs[names.ATTR_COVERAGE] <= 0.99
    assert 0.35 <= table[names.PERCENTILE].mean() <= 0.65
    # the percentiles spread over (0, 1): no tenth of the range holds more than twice its share
    counts = np.histogram(table[names.PERCENTILE], bins=10, range=(0, 1))[0]
    assert counts.max() <= 2 * len(table) / 10
    assert table.attrs[names.ATTR_MAE] < 0.03


def test_doubled_exponents_fail_the_same_check(law_fit, reference_check):
    wrong = check(_scaled_exponents(law_fit, 2.0), _heldout_frame(), source=str(HELDOUT), seed=0)
    assert wrong.attrs[names.ATTR_COVERAGE] < 0.75
    assert wrong[names.PERCENTILE].mean() < 0.3  # the wrong law predicts too much success
    assert wrong.attrs[names.ATTR_MAE] > 2 * reference_check.attrs[names.ATTR_MAE]


def _rows(inside: int, above: int, below: int) -> pd.DataFrame:
    observed = [0.5] * inside + [0.9] * above + [0.1] * below
    frame = pd.DataFrame({names.OBSERVED: observed, names.LOWER: 0.3, names.UPPER: 0.7})
    frame[names.COVERED] = (frame[names.LOWER] <= frame[names.OBSERVED]) & (
        frame[names.OBSERVED] <= frame[names.UPPER]
    )
    return frame


@pytest.mark.parametrize(
    ("inside", "above", "below", "verdict"),
    [
        (90, 6, 4, "within chance of the nominal 0.90"),
        (300, 0, 0, "above the nominal 0.90 beyond chance"),
        (240, 50, 10, "below the nominal 0.90 beyond chance"),
    ],
)
def test_calibration_tests_coverage_against_the_nominal_level(inside, above, below, verdict):
    """The binomial test of the count inside, against scipy's; the misses by side."""
    result = calibration(_rows(inside, above, below), 0.9)
    n = inside + above + below
    assert result["p_value"] == pytest.approx(stats.binomtest(inside, n, 0.9).pvalue)
    assert (result["inside"], result["above"], result["below"]) == (inside, above, below)
    assert verdict in result["note"]
    kinds = {"within": "within chance", "above": "conservative", "below": "over-confident"}
    assert result["verdict"] == next(k for w, k in kinds.items() if w in verdict)
    assert f"{above} above it, {below} below" in result["note"]
    note = calibration_note(result)  # a warning only for intervals too narrow
    assert (note is None) == ("below the nominal" not in verdict)
    if note is not None:
        assert note.startswith("warning: held-out coverage")


def test_a_wrong_law_fails_the_calibration_test(law_fit):
    wrong = check(_scaled_exponents(law_fit, 2.0), _heldout_frame(), source=str(HELDOUT), seed=0)
    result = summary(wrong)["calibration"]
    assert result["p_value"] < 1e-6 and "over-confident" in result["note"]
    assert calibration_note(result) == f"warning: held-out {result['note']}"


def test_columns_rows_lines_and_attrs(reference_check):
    table = reference_check
    assert all(c in table.columns for c in ROW_COLUMNS)
    raw = _heldout_frame()
    assert table[names.ROW].tolist() == list(range(1, 316))  # 1-based, as errors name rows
    assert table[names.LINE].tolist() == list(range(2, 317))
    np.testing.assert_array_equal(table[names.N_ENVS], raw[names.N_ENVS])
    np.testing.assert_array_equal(table[names.SEED], raw[names.SEED])
    np.testing.assert_allclose(table[names.OBSERVED], raw[names.SUCCESSES] / raw[names.TRIALS])
    assert table[names.SETTING].iloc[0] == "Qwen3-4B | grpo | math+code"
    assert table.attrs[names.ATTR_PROB] == 0.9
    assert table.attrs[names.ATTR_COVERAGE] == table[names.COVERED].mean()
    covered = (table[names.LOWER] <= table[names.OBSERVED]) & (
        table[names.OBSERVED] <= table[names.UPPER]
    )
    assert (covered == table[names.COVERED]).all()
    # the law-only interval is narrower than the predictive one, which adds seeds and tasks
    predictive = table[names.UPPER] - table[names.LOWER]
    law = table[names.MEAN_UPPER] - table[names.MEAN_LOWER]
    assert (predictive > law).all()
    assert ((table[names.PERCENTILE] > 0) & (table[names.PERCENTILE] < 1)).all()
    assert not table[names.NEW_SETTING].any()


def test_per_setting_summary_matches_rows(reference_check):
    groups = by_setting(reference_check)
    assert len(groups) == 21 and (groups[names.N_ROWS] == 15).all()
    part = reference_check[reference_check[names.SETTING] == "Qwen3-8B | grpo | search"]
    row = groups.set_index(names.SETTING).loc["Qwen3-8B | grpo | search"]
    assert row[names.COVERAGE] == part[names.COVERED].mean()
    assert row[names.MAE] == pytest.approx(
        np.mean(np.abs(part[names.OBSERVED] - part[names.PREDICTED]))
    )
    result = summary(reference_check)
    assert result["overall"][names.N_ROWS] == 315
    assert result["overall"][names.COVERAGE] == reference_check.attrs[names.ATTR_COVERAGE]


def test_point_mass_posterior_gives_the_beta_binomial_exactly():
    """Zero posterior spread: the predictive is BetaBinomial(n, p phi, (1 - p) phi)."""
    phi, n = 300.0, 2000
    fit = synthetic_fit(draws=2000, chains=2, spread=0.0)
    posterior = fit["posterior"].to_dataset()
    posterior[names.CONCENTRATION] = xr.full_like(posterior[names.ALPHA_POP].isel(axis=0), phi)
    fit["posterior"] = xr.DataTree(posterior)
    rows = pd.DataFrame(
        {
            names.MODEL: "S0",
            names.ALGORITHM: "grpo",
            names.DOMAIN: "math",
            names.N_ENVS: [64, 512],
            names.N_TASKS: [2560, 40960],
            names.ROLLOUTS: [8, 32],
            names.SEED: 0,
            names.SUCCESSES: [520, 700],
            names.TRIALS: n,
        }
    )
    table = check(fit, rows, prob=0.8, seed=1, replicates=4)
    sizes = rows[[names.N_ENVS, names.N_TASKS, names.ROLLOUTS]].to_numpy(float)
    loss = 0.45 + laws.power_terms(
        sizes, [0.35, 0.30, 0.12], [0.41, 0.26, 0.11], [45.25, 1810.2, 11.31]
    )
    p = laws.success_from_loss(loss)
    dist = stats.betabinom(n, p * phi, (1 - p) * phi)
    np.testing.assert_allclose(table[names.MEAN_LOWER], p, rtol=1e-12)
    np.testing.assert_allclose(table[names.MEAN_UPPER], p, rtol=1e-12)
    for column, q in ((names.LOWER, 0.1), (names.PREDICTED, 0.5), (names.UPPER, 0.9)):
        np.testing.assert_allclose(table[column], dist.ppf(q) / n, atol=3 / n)
    k = rows[names.SUCCESSES].to_numpy()
    mid = dist.cdf(k - 1) + 0.5 * dist.pmf(k)
    np.testing.assert_allclose(table[names.PERCENTILE], mid, atol=0.02)
    assert table[names.LINE].isna().all()  # an in-memory table has no file lines


def test_bad_heldout_names_file_row_and_column(law_fit, tmp_path):
    raw = _heldout_frame()
    raw.loc[6, names.TRIALS] = 0
    path = tmp_path / "bad.csv"
    raw.to_csv(path, index=False)
    with pytest.raises(ObservationError, match=r"bad.csv: column 'trials', row 7 \(file line 8\)"):
        load_heldout(path, law_fit)


# --- the command line ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_fit_path(law_fit, tmp_path_factory) -> str:
    """The reference fit thinned to 2 x 50 draws (quick to save and to read)."""
    path = tmp_path_factory.mktemp("check") / "fit.nc"
    save_fit(law_fit.isel(draw=slice(0, 500, 10)).isel(chain=[0, 1]), path)
    return str(path)


def test_cli_text_json_and_table(small_fit_path, tmp_path, capsys):
    assert main(["check", small_fit_path, str(HELDOUT)]) == 0
    text = capsys.readouterr().out
    assert "held-out check of 315 rows" in text and "90% predictive coverage" in text
    assert "Qwen3-8B | grpo | search" in text
    out = tmp_path / "rows.csv"
    assert (
        main(["check", small_fit_path, str(HELDOUT), "--json", "--prob", "0.8", "--out", str(out)])
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["prob"] == 0.8 and result["overall"][names.N_ROWS] == 315
    written = pd.read_csv(out)
    assert all(c in written.columns for c in ROW_COLUMNS)
    assert written[names.COVERED].mean() == pytest.approx(result["overall"][names.COVERAGE])
    # never overwrite without --force
    assert main(["check", small_fit_path, str(HELDOUT), "--out", str(out)]) == 2
    assert "exists; pass --force" in capsys.readouterr().err
    assert main(["check", small_fit_path, str(HELDOUT), "--out", str(out), "--force"]) == 0


def test_cli_reports_bad_inputs_cleanly(law_fit, small_fit_path, tmp_path, capsys):
    old = tmp_path / "old.nc"
    tree = law_fit.isel(draw=slice(0, 5), chain=[0])
    tree.attrs = {**tree.attrs, ATTR_FORMAT: 0, names.ATTR_VERSION: "0.0.1"}
    save_fit(tree, old)
    assert main(["check", str(old), str(HELDOUT)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bayesscale check: error:") and "fit format 0" in err
    assert "Refit with this version" in err and "Traceback" not in err

    raw = _heldout_frame()
    raw.loc[3, names.DOMAIN] = "robotics"
    bad = tmp_path / "heldout.csv"
    raw.to_csv(bad, index=False)
    assert main(["check", small_fit_path, str(bad)]) == 2
    err = capsys.readouterr().err
    assert "column 'domain', row 4 (file line 5)" in err and "--new-groups pooled" in err
    assert main(["check", small_fit_path, str(bad), "--new-groups", "pooled", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["new_settings"] == ["Qwen3-4B | grpo | robotics"]

    assert main(["check", small_fit_path, str(HELDOUT), "--prob", "1.5"]) == 2
    assert "--prob must be in (0, 1)" in capsys.readouterr().err


def test_loss_outcome_point_mass_gives_the_student_t_exactly():
    """A Chinchilla-style fit (loss outcome) with a point-mass posterior: the predictive of
    log y is StudentT(nu, log L, sigma), so quantiles and percentiles are scipy's."""
    from bayesscale.data.spec import load_spec

    spec = load_spec("chinchilla")
    chains, draws, sigma = 2, 3000, 0.05
    dims = ("chain", "draw")

    def const(value, extra=()):
        shape = (chains, draws, *(len(c) for _, c in extra))
        return (dims + tuple(d for d, _ in extra), np.full(shape, value, dtype=float))

    settings = [("setting", ["all"])]
    posterior = xr.Dataset(
        {
            names.ALPHA: (
                ("chain", "draw", "setting", "axis"),
                np.broadcast_to([0.34, 0.28], (chains, draws, 1, 2)).copy(),
            ),
            names.AMPLITUDE: (
                ("chain", "draw", "setting", "axis"),
                np.broadcast_to([0.4, 0.5], (chains, draws, 1, 2)).copy(),
            ),
            names.LOSS_FLOOR: const(1.7, settings),
            names.LOG_LOSS_SIGMA: const(sigma),
        },
        coords={"setting": ["all"], "axis": ["N", "D"]},
    )
    reference = np.array([1e9, 2e10])
    tree = xr.DataTree.from_dict(
        {
            "posterior": posterior,
            "constant_data": xr.Dataset(
                {names.REFERENCE_SCALE: (("axis",), reference)}, coords={"axis": ["N", "D"]}
            ),
        }
    )
    tree.attrs = {names.ATTR_KIND: names.KIND_LAW_FIT, names.ATTR_SPEC: spec.text}
    rows = pd.DataFrame({"params": [4e8, 1.6e10], "tokens": [8e9, 3.2e11], "loss": [2.6, 2.0]})
    table = check(tree, rows, prob=0.9, seed=2, replicates=4)
    sizes = rows[["params", "tokens"]].to_numpy()
    loss = 1.7 + laws.power_terms(sizes, [0.4, 0.5], [0.34, 0.28], reference)
    t = stats.t(spec.student_nu)
    np.testing.assert_allclose(table[names.MEAN_LOWER], loss, rtol=1e-12)
    np.testing.assert_allclose(table[names.OBSERVED], rows["loss"])
    for column, q in ((names.LOWER, 0.05), (names.PREDICTED, 0.5), (names.UPPER, 0.95)):
        np.testing.assert_allclose(table[column], loss * np.exp(sigma * t.ppf(q)), rtol=0.01)
    pit = t.cdf((np.log(rows["loss"]) - np.log(loss)) / sigma)
    np.testing.assert_allclose(table[names.PERCENTILE], pit, atol=0.015)
    assert table.attrs["outcome"] == "loss"


def test_each_row_says_how_far_beyond_its_settings_swept_range(law_fit, reference_check):
    from bayesscale.data.extrapolation import SweptRange

    swept = SweptRange.from_fit(law_fit)
    table = reference_check
    columns = {"env": names.N_ENVS, "task": names.N_TASKS, "traj": names.ROLLOUTS}
    g = [swept.settings.index(s) for s in table[names.SETTING]]
    outside = np.ones(len(table))
    for axis, column in columns.items():
        i = swept.axes.index(axis)
        size = table[column].to_numpy(float)
        np.testing.assert_allclose(table[axis + names.OVER_MAX_SUFFIX], size / swept.hi[g, i])
        outside = np.maximum(outside, np.maximum(size / swept.hi[g, i], swept.lo[g, i] / size))
    np.testing.assert_allclose(table[names.OUTSIDE_SWEPT], outside)
    assert table[names.OUTSIDE_SWEPT].max() > 1  # the held-out rows are larger-scale runs
    extent = summary(table, warn_factor=3.0)["extrapolation"]
    beyond = table[names.OUTSIDE_SWEPT] > 3.0
    assert 0 < beyond.sum() < len(table)
    assert extent["beyond"][names.N_ROWS] == beyond.sum()
    assert extent["within"][names.COVERAGE] == pytest.approx(table[~beyond][names.COVERED].mean())


def test_cli_strict_and_the_extrapolation_note(small_fit_path, tmp_path, capsys):
    out = tmp_path / "rows.csv"
    assert main(["check", small_fit_path, str(HELDOUT), "--warn-beyond", "1.5"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("DIAGNOSTICS FAILED")  # 2 x 50 draws
    assert "largest size over the largest swept value" in captured.out
    assert "held-out rows lie more than 1.5x outside the swept range" in captured.err
    assert main(["check", small_fit_path, str(HELDOUT), "--strict", "--out", str(out)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and small_fit_path in err[0] and "DIAGNOSTICS FAILED" in err[0]
    assert not out.exists()


def test_cli_checks_with_the_fits_drift_and_without_it_on_request(law_fit, tmp_path, capsys):
    """A fit that stores a drift beyond the sweep is checked with it: the held-out runs, all
    past the sweep on some axis, get wider intervals; ``--no-drift`` checks the law's own
    posterior predictive (rows inside the sweep: tests/law/test_drift.py)."""
    tree = law_fit.isel(draw=slice(0, 500, 10)).isel(chain=[0, 1])
    path = tmp_path / "drift.nc"
    save_fit(tree, tmp_path / "plain.nc")
    drift = {"tau": {"env": 1.0, "task": 1.0, "traj": 1.0}, "pooled": 1.0}
    tree[names.OUT_OF_SCALE_GROUP] = xr.DataTree(
        xr.Dataset(attrs={names.ATTR_DRIFT: json.dumps(drift)})
    )
    save_fit(tree, path)
    tables = {}
    for name, fit_path, extra in (
        ("plain", tmp_path / "plain.nc", []),
        ("drift", path, []),
        ("no drift", path, ["--no-drift"]),
    ):
        out = tmp_path / f"{name}.csv"
        assert main(["check", str(fit_path), str(HELDOUT), "--out", str(out), *extra]) == 0
        capsys.readouterr()
        tables[name] = pd.read_csv(out)
    width = {k: t[names.UPPER] - t[names.LOWER] for k, t in tables.items()}
    over = tables["plain"][[f"{a}{names.OVER_MAX_SUFFIX}" for a in ("env", "task", "traj")]]
    assert (over.max(axis=1) > 1).all()
    assert width["drift"].mean() > 1.5 * width["plain"].mean()
    assert tables["no drift"].equals(tables["plain"])
