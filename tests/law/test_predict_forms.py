"""Prediction reads each axis by its spec's form: the offset power against its formula."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import xarray as xr
from testdata import KNEE_SPEC
from testdata import SYNTHETIC_ROWS as ROWS

from bayesscale import names
from bayesscale.data.spec import ModelSpec, parse_spec
from bayesscale.law.posterior import Population, PosteriorError, law_draws
from bayesscale.law.predict import predict
from bayesscale.recipe.synthetic import synthetic_fit


def _offset_fit(knee: float) -> xr.DataTree:
    """The synthetic power-law fit with its task axis given the offset-power form and a
    knee that varies over the draws around ``knee``."""
    return _with_form("n_tasks", "task", "offset_power", names.KNEE, names.KNEE_AXIS_DIM,
                      lambda n: knee * np.linspace(0.5, 1.5, n))  # fmt: skip


def _with_form(column, axis, form, var, dim, values) -> xr.DataTree:
    """The synthetic power-law fit with ``axis`` (``column``) given ``form`` and its shape
    parameter ``var`` (over ``dim``) at ``values(n)`` over the ``n`` draws."""
    tree = synthetic_fit(draws=10, spread=0.02)
    spec = tree.attrs[names.ATTR_SPEC].replace(
        f'column = "{column}"\n', f'column = "{column}"\nform = "{form}"\n'
    )
    assert spec != tree.attrs[names.ATTR_SPEC]
    post = tree["posterior"].to_dataset()
    shape = (post.sizes[names.CHAIN_DIM], post.sizes[names.DRAW_DIM], 1)
    post[var] = xr.DataArray(
        values(int(np.prod(shape))).reshape(shape),
        dims=(names.CHAIN_DIM, names.DRAW_DIM, dim),
        coords={dim: [axis]},
    )
    out = xr.DataTree.from_dict(
        {"posterior": post, "constant_data": tree["constant_data"].to_dataset()}
    )
    out.attrs = {**tree.attrs, names.ATTR_SPEC: spec}
    return out


def _by_formula(tree: xr.DataTree) -> np.ndarray:
    """``L = L_inf + A_env r^-a + A_task ((D + k D_ref)/(D_ref + k D_ref))^-a + A_traj r^-a``,
    ``k`` the row's setting's knee."""
    post = tree["posterior"].to_dataset()

    def flat(name: str) -> np.ndarray:
        arr = post[name].to_numpy()
        return arr.reshape(-1, *arr.shape[2:])

    alpha, amp, floor = flat(names.ALPHA), flat(names.AMPLITUDE), flat(names.LOSS_FLOOR)
    ref = tree["constant_data"][names.REFERENCE_SCALE].to_numpy()
    setting = [0, 1, 0]
    knee = flat(names.KNEE)[..., 0]  # (S,) shared, or (S, settings)
    knee = knee[:, None] if knee.ndim == 1 else knee[:, setting]
    sizes = ROWS[["n_envs", "n_tasks", "rollouts"]].to_numpy(float)
    loss = floor[:, setting].copy()
    for a in range(3):
        d, r = sizes[:, a][None, :], ref[a]
        ratio = (d + knee * r) / (r + knee * r) if a == 1 else d / r
        loss += amp[:, setting, a] * ratio ** -alpha[:, setting, a]
    return loss


def test_predict_evaluates_the_offset_power_where_the_spec_names_it() -> None:
    tree = _offset_fit(knee=0.8)
    got = predict(tree, ROWS, observed=False).loss
    np.testing.assert_allclose(got, _by_formula(tree), rtol=1e-12)
    # the knee matters: the power law's prediction is another number
    power = predict(synthetic_fit(draws=10, spread=0.02), ROWS, observed=False).loss
    assert np.abs(got - power).max() > 1e-3


def test_each_setting_is_predicted_with_its_own_knee() -> None:
    """Knees per setting (dims setting x knee_axis, as a fit of several settings stores them):
    each row is evaluated with its own setting's knee, by the formula, and the recipe's
    reader takes each setting's own."""
    tree = _offset_fit(knee=0.8)
    post = tree["posterior"].to_dataset()
    settings = post[names.SETTING_DIM].to_numpy()
    own = np.array([0.3, 3.0])[: len(settings)]
    per_setting = post[names.KNEE] * xr.DataArray(own, dims=names.SETTING_DIM,
                                                   coords={names.SETTING_DIM: settings})  # fmt: skip
    post[names.KNEE] = per_setting.transpose(
        names.CHAIN_DIM, names.DRAW_DIM, names.SETTING_DIM, names.KNEE_AXIS_DIM
    )
    tree["posterior"] = xr.DataTree(post)
    got = predict(tree, ROWS, observed=False).loss
    np.testing.assert_allclose(got, _by_formula(tree), rtol=1e-12)
    draws = law_draws(tree, forms=True)
    assert draws.knee is not None
    flat = (
        post[names.KNEE].stack(s=(names.CHAIN_DIM, names.DRAW_DIM)).transpose("s", ...).to_numpy()
    )
    for g in range(len(settings)):
        np.testing.assert_allclose(draws.knee[:, g, 1], flat[:, g, 0])


def test_the_offset_power_at_a_zero_knee_is_the_power_law() -> None:
    got = predict(_offset_fit(knee=0.0), ROWS, observed=False).loss
    power = predict(synthetic_fit(draws=10, spread=0.02), ROWS, observed=False).loss
    np.testing.assert_allclose(got, power, rtol=1e-14)


def test_the_recipe_reader_refuses_a_form_it_cannot_solve() -> None:
    with pytest.raises(PosteriorError, match=r"'task': 'offset_power'.*recipe"):
        law_draws(_offset_fit(knee=0.8))


def test_a_new_settings_amplitude_carries_the_knee() -> None:
    # the model samples the slope at D_ref, alpha A / (1 + k): the amplitude is s (1 + k) / alpha
    power = parse_spec(KNEE_SPEC.format(form=""))
    two_power = replace(power, axes=(power.axes[0], power.axes[0]))
    offset = replace(power, axes=(power.axes[0], replace(power.axes[0], form="offset_power")))
    plain = _population(two_power)
    kneed = _population(offset, knee=np.array([[0.0, 1.5]] * 4))
    np.testing.assert_allclose(_amplitude(plain), 0.2)
    np.testing.assert_allclose(_amplitude(kneed), [[0.2, 0.5]] * 4)


def test_a_new_settings_amplitude_carries_the_midpoint() -> None:
    # on a saturating axis the slope at D_ref is b A / (1 + e^(b m)): A = s (1 + e^(b m)) / b
    power = parse_spec(KNEE_SPEC.format(form=""))
    mixed = replace(power, axes=(replace(power.axes[0], form="saturating"), power.axes[0]))
    mid = _population(mixed, midpoint=np.array([[2.0, 0.0]] * 4))
    np.testing.assert_allclose(_amplitude(mid), [[0.2 * (1 + np.e), 0.2]] * 4)


def test_a_new_setting_draws_its_own_knee_and_midpoint_from_the_population() -> None:
    """Per-setting shapes: the knee ``kappa |z|`` (``kappa`` 2, ``z`` -0.5: knee 1) and the
    midpoint ``mu + omega z`` (1 + 1 x 1 = 2), each widening the amplitude as a fitted one."""
    power = parse_spec(KNEE_SPEC.format(form=""))
    offset = replace(power, axes=(power.axes[0], replace(power.axes[0], form="offset_power")))
    kneed = _population(offset, knee_scale=np.array([[0.0, 2.0]] * 4))
    z = np.array([[0.0, -0.5]] * 4)
    np.testing.assert_allclose(kneed.setting(0.0, np.zeros(4), 0 * z, 0 * z, np.zeros(4), z).knee,
                               [[0.0, 1.0]] * 4)  # fmt: skip
    np.testing.assert_allclose(_amplitude(kneed, z), [[0.2, 0.4]] * 4)
    mixed = replace(power, axes=(replace(power.axes[0], form="saturating"), power.axes[0]))
    mid = _population(
        mixed, midpoint=np.array([[1.0, 0.0]] * 4), midpoint_spread=np.array([[1.0, 0.0]] * 4)
    )
    np.testing.assert_allclose(_amplitude(mid, np.ones((4, 2))), [[0.2 * (1 + np.e), 0.2]] * 4)
    # z = 0: the mean midpoint, 1
    np.testing.assert_allclose(_amplitude(mid), [[0.2 * (1 + np.exp(0.5)), 0.2]] * 4)


def _population(spec: ModelSpec, **shape: Any) -> Population:
    """Four samples of a two-axis population: exponents 0.5, slopes 0.1, no spreads."""
    ones = np.ones((4, 2))
    return Population(
        spec=spec, log_alpha_pop=np.log(0.5) * ones, alpha_spread=0 * ones,
        log_slope_pop=np.log(0.1) * ones, slope_spread=0 * ones, log_level_group=None,
        log_level_pop=np.zeros(4), level_spread=np.zeros(4), group_effects={},
        group_spreads={}, size_amplitude=None, **shape,
    )  # fmt: skip


def _amplitude(population: Population, z_shape: np.ndarray | None = None) -> np.ndarray:
    z = np.zeros((4, 2))
    shape = z if z_shape is None else z_shape
    return population.setting(0.0, np.zeros(4), z, z, np.zeros(4), shape).amplitude


def _saturating_fit(midpoint: float) -> xr.DataTree:
    """The synthetic power-law fit with its rollout axis given the saturating form: its
    exponent the steepness, and a midpoint that varies over the draws around ``midpoint``."""
    return _with_form("rollouts", "traj", "saturating", names.MIDPOINT, names.MIDPOINT_AXIS_DIM,
                      lambda n: midpoint + np.linspace(-0.5, 0.5, n))  # fmt: skip


def test_predict_evaluates_the_saturating_form_where_the_spec_names_it() -> None:
    """``A (1 + e^(-b m)) / (1 + (D / D_ref)^b e^(-b m))`` on the rollout axis, by hand."""
    tree = _saturating_fit(midpoint=1.0)
    post = tree["posterior"].to_dataset()

    def flat(name: str) -> np.ndarray:
        arr = post[name].to_numpy()
        return arr.reshape(-1, *arr.shape[2:])

    alpha, amp, floor = flat(names.ALPHA), flat(names.AMPLITUDE), flat(names.LOSS_FLOOR)
    m = flat(names.MIDPOINT)[:, 0][:, None]
    ref = tree["constant_data"][names.REFERENCE_SCALE].to_numpy()
    setting = [0, 1, 0]
    sizes = ROWS[["n_envs", "n_tasks", "rollouts"]].to_numpy(float)
    want = floor[:, setting].copy()
    for a in range(2):
        want += amp[:, setting, a] * (sizes[:, a][None, :] / ref[a]) ** -alpha[:, setting, a]
    b = alpha[:, setting, 2]
    ratio = sizes[:, 2][None, :] / ref[2]
    want += amp[:, setting, 2] * (1 + np.exp(-b * m)) / (1 + ratio**b * np.exp(-b * m))
    got = predict(tree, ROWS, observed=False).loss
    np.testing.assert_allclose(got, want, rtol=1e-12)
    power = predict(synthetic_fit(draws=10, spread=0.02), ROWS, observed=False).loss
    assert np.abs(got - power).max() > 1e-3


# --- the stacked prediction: draws mixed by weight ------------------------------------------


def test_draw_shares_round_to_the_total() -> None:
    from bayesscale.law.predict import draw_shares

    assert draw_shares([0.5, 0.3, 0.2], 7).tolist() == [4, 2, 1]
    assert draw_shares([1.0, 0.0], 40).tolist() == [40, 0]
    assert draw_shares([1 / 3] * 3, 100).sum() == 100
    with pytest.raises(ValueError, match="sum to 1"):
        draw_shares([0.5, 0.6], 10)


def test_a_mixture_takes_each_predictions_draws_by_weight() -> None:
    from bayesscale.law.predict import mixture

    power = predict(synthetic_fit(draws=10, spread=0.02), ROWS, observed=False)
    offset = predict(_offset_fit(knee=0.8), ROWS, observed=False)
    # all the weight on one candidate: its own draws
    np.testing.assert_array_equal(mixture([power, offset], [1.0, 0.0]).loss, power.loss)
    np.testing.assert_array_equal(mixture([power, offset], [0.0, 1.0]).loss, offset.loss)
    # a quarter: 5 of the 20 draws from the offset fit, evenly spaced, after 15 of the power's
    mixed = mixture([power, offset], [0.75, 0.25])
    assert mixed.loss.shape == power.loss.shape and (mixed.chains, mixed.draws) == (1, 20)
    np.testing.assert_array_equal(
        mixed.loss[:15], power.loss[np.linspace(0, 19, 15).round().astype(int)]
    )
    np.testing.assert_array_equal(mixed.loss[15:], offset.loss[[0, 5, 10, 14, 19]])


def test_a_draw_beyond_certain_success_is_scored_as_the_predictive_draws_it() -> None:
    # a draw whose floor dips below zero far beyond the data gives L <= 0 (p >= 1): PyMC's
    # likelihood is NaN there; the predictive (sample, the held-out scores) clips it to
    # L = MIN_LOSS, and so does the log predictive density
    from dataclasses import replace

    tree = _offset_fit(knee=0.8)
    post = tree["posterior"].to_dataset()
    post[names.CONCENTRATION] = xr.full_like(post[names.LOSS_FLOOR].isel(setting=0), 50.0)
    tree["posterior"] = xr.DataTree(post)
    rows = ROWS.assign(successes=[40, 70, 99], seed=0)
    pred = predict(tree, rows, observed=True)
    loss = pred.loss.copy()
    loss[0, 2] = -0.01
    broken = replace(pred, loss=loss)
    assert np.isnan(broken.log_likelihood()[0, 2])
    clipped = broken.log_likelihood(clip=True)
    assert np.isfinite(clipped).all()
    np.testing.assert_allclose(clipped[1:], pred.log_likelihood()[1:], rtol=1e-13)
    lpd = broken.log_predictive_density()
    assert lpd.shape == (3,) and np.isfinite(lpd).all()
