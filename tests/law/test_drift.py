"""The drift beyond the sweep (bayesscale.law.drift): calibrated by maximum predictive
density it recovers a known drift from rows simulated with one, finds none where there is
none, and a fit that stores it widens its predictions past the sweep only."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import xarray as xr
from scipy import special

from bayesscale import names
from bayesscale.law.drift import calibrate, curve_with_drift, stored_drift
from bayesscale.law.predict import Prediction, predict
from bayesscale.recipe.synthetic import synthetic_fit

TRIALS = 4000


def _law_at_even_odds(observed: np.ndarray, draws: int = 200) -> Prediction:
    """A law that predicts p = 1/2 at every row with no doubt (one loss for every draw) and
    next to no seed noise: all the spread of the observed rates is the drift's."""
    rows = len(observed)
    return Prediction(
        frame=pd.DataFrame(index=range(rows)),
        source="rows.csv",
        outcome="success",
        chains=1,
        draws=draws,
        setting=tuple(f"s{i}" for i in range(rows)),
        new_setting=np.zeros(rows, dtype=bool),
        loss=np.full((draws, rows), np.log(2.0)),
        trials=np.full(rows, TRIALS),
        concentration=np.full(draws, 1e6),
        log_loss_sigma=None,
        student_nu=4.0,
        observed=observed,
    )


def _simulated(tau: float, ratio: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    logit = tau * np.log(ratio) * rng.standard_normal(len(ratio))
    return rng.binomial(TRIALS, special.expit(logit)).astype(float)


def test_calibration_recovers_a_known_drift_and_finds_none_where_there_is_none() -> None:
    ratio = np.tile([2.0, 4.0, 8.0, 16.0], 100)
    found = calibrate([(_law_at_even_odds(_simulated(0.4, ratio, seed=1)), ratio)])
    assert abs(found - 0.4) < 0.06  # 400 rows: the estimate's sd is about 0.015
    none = calibrate([(_law_at_even_odds(_simulated(0.0, ratio, seed=2)), ratio)])
    assert none < 0.02
    # rows inside their refit's range carry no information about the drift
    inside = np.full(len(ratio), 0.5)
    assert calibrate([(_law_at_even_odds(_simulated(0.4, ratio, seed=1)), inside)]) == 0.0


def _with_stored_drift(tree: xr.DataTree, tau: dict[str, float], pooled: float) -> xr.DataTree:
    out = tree.copy()
    group = xr.Dataset(attrs={names.ATTR_DRIFT: json.dumps({"tau": tau, "pooled": pooled})})
    out[names.OUT_OF_SCALE_GROUP] = xr.DataTree(group)
    return out


def test_a_stored_drift_widens_predictions_past_the_sweep_and_nowhere_else() -> None:
    plain = synthetic_fit(draws=400, chains=1, spread=0.0)
    fit = _with_stored_drift(plain, {"env": 0.3, "task": 0.0}, pooled=0.1)
    assert stored_drift(fit) == {"env": 0.3, "task": 0.0, "traj": 0.1}  # traj untested: pooled
    setting = {"model": "S0", "algorithm": "grpo", "domain": "math", "trials": 2000}
    rows = pd.DataFrame(
        [
            {**setting, "n_envs": 128, "n_tasks": 5120, "rollouts": 8},  # inside the sweep
            {**setting, "n_envs": 1024, "n_tasks": 5120, "rollouts": 8},  # env 4x beyond
            {**setting, "n_envs": 4096, "n_tasks": 5120, "rollouts": 8},  # env 16x beyond
            {**setting, "n_envs": 128, "n_tasks": 5120, "rollouts": 512},  # traj 8x beyond
        ]
    )
    before = predict(plain, rows, seed=3)
    after = predict(fit, rows, seed=3)
    assert np.array_equal(before.loss[:, 0], after.loss[:, 0])
    shift = special.logit(after.expected()) - special.logit(before.expected())
    assert np.allclose(shift[:, 0], 0.0)
    # one draw's deviation is shared by a setting's sizes: proportional to ln r
    assert np.allclose(shift[:, 2], shift[:, 1] * np.log(16) / np.log(4))
    sd = shift.std(axis=0)
    assert abs(sd[1] / (0.3 * np.log(4)) - 1) < 0.15  # 400 draws: sd within ~7% (2 se)
    assert abs(sd[3] / (0.1 * np.log(8)) - 1) < 0.15
    # seeded: the same seed gives the same draws
    assert np.array_equal(predict(fit, rows, seed=3).loss, after.loss)
    # a drift of 0 everywhere leaves the fit's predictions as they are
    zero = _with_stored_drift(plain, {"env": 0.0, "task": 0.0, "traj": 0.0}, pooled=0.0)
    assert np.array_equal(predict(zero, rows, seed=3).loss, before.loss)


def test_a_law_curve_past_the_sweep_takes_the_drift_of_its_axis() -> None:
    plain = synthetic_fit(draws=400, chains=1, spread=0.0)
    fit = _with_stored_drift(plain, {"env": 0.3, "task": 0.0, "traj": 0.0}, pooled=0.0)
    grid = np.array([128.0, 256.0, 512.0, 1024.0])  # the sweep ends at 256 environments
    loss = np.full((400, grid.size), 0.7)
    moved = curve_with_drift(fit, loss, "S0 | grpo | math", "env", grid, seed=1)
    assert np.array_equal(moved[:, :2], loss[:, :2])
    shift = special.logit(np.exp(-moved)) - special.logit(np.exp(-loss))
    assert np.allclose(shift[:, 3], shift[:, 2] * 2)  # ln 4 = 2 ln 2: one deviation per draw
    assert abs(shift[:, 3].std() / (0.3 * np.log(4)) - 1) < 0.15
    # an axis without drift, or a fit without one, leaves the curve as it is
    assert np.array_equal(curve_with_drift(fit, loss, "S0 | grpo | math", "task", grid), loss)
    assert np.array_equal(curve_with_drift(plain, loss, "S0 | grpo | math", "env", grid), loss)


def test_a_settings_drift_is_its_own_whatever_else_is_predicted_with_it() -> None:
    plain = synthetic_fit(draws=400, chains=1, spread=0.05)
    fit = _with_stored_drift(plain, {"env": 0.3, "task": 0.3, "traj": 0.3}, pooled=0.3)
    far = {"n_envs": 1024, "n_tasks": 5120, "rollouts": 8, "trials": 2000}
    rows = pd.DataFrame(
        [
            {"model": "S0", "algorithm": "grpo", "domain": "math", **far},
            {"model": "S1", "algorithm": "grpo", "domain": "math", **far},
        ]
    )
    both = predict(fit, rows, seed=4)
    alone = predict(fit, rows.iloc[[1]].reset_index(drop=True), seed=4)
    assert np.array_equal(both.loss[:, 1], alone.loss[:, 0])
    shift = special.logit(both.expected()) - special.logit(
        predict(fit, rows, seed=4, drift=False).expected()
    )
    assert abs(np.corrcoef(shift[:, 0], shift[:, 1])[0, 1]) < 0.2  # 400 draws: sd 0.05


def test_a_row_whose_predictive_draws_all_agree_does_not_hide_the_drift() -> None:
    """A law that predicts every run at 0 successes with no doubt (predictive variance 0 on
    the link scale) beside rows that need a drift: the calibration still finds it."""
    ratio = np.tile([2.0, 4.0, 8.0, 16.0], 50)
    pred = _law_at_even_odds(_simulated(0.4, ratio, seed=3))
    certain = replace(
        pred,
        loss=np.concatenate([pred.loss, np.full((pred.loss.shape[0], 1), 50.0)], axis=1),
        frame=pd.DataFrame(index=range(len(ratio) + 1)),
        setting=(*pred.setting, "zero"),
        new_setting=np.zeros(len(ratio) + 1, dtype=bool),
        trials=np.append(pred.trials, TRIALS),
        observed=np.append(pred.observed, 0.0),
    )
    assert calibrate([(certain, np.append(ratio, 4.0))]) > 0.3
