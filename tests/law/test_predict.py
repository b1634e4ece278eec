"""bayesscale.law.predict: the NumPy law and likelihood against PyMC's, new settings, bad rows.

Known answers: PyMC's own pointwise log-likelihood of the same draws (``pm.compute_log_likelihood``)
on the reference fit and on prior draws of models with every optional term (exponent groups,
interaction, dense reward; a loss outcome); the model's stored deterministics rebuilt from its
free variables; the size term's exact per-draw difference between two model sizes.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pymc as pm
import pytest
import xarray as xr
from testdata import REFERENCE

from bayesscale import names
from bayesscale.core import laws
from bayesscale.data.observations import (
    ObservationError,
    Table,
    frame_sha256,
    prepare,
    read_table,
    validate,
)
from bayesscale.data.spec import load_spec, parse_spec
from bayesscale.law.model import build_law_model
from bayesscale.law.posterior import fit_layout, read_population
from bayesscale.law.predict import (
    PredictError,
    beta_binomial_logpmf,
    pointwise_log_likelihood,
    predict,
    student_t_logpdf,
)
from bayesscale.names import (
    ALPHA_Z,
    LEVEL,
    LEVEL_SPREAD,
    LOG_LEVEL_GROUP,
    LOG_LEVEL_POP,
    SLOPE_Z,
    group_effect_name,
)

SPEC = load_spec()
HELDOUT = REFERENCE / "heldout.csv"

EXTRAS = """
[pooling]
exponent_groups = ["algorithm"]
group_spread = 0.2

[interaction]
axes = ["env", "task"]
units = "raw"
weight_beta = [2.0, 8.0]

[dense_reward]
axis = "traj"
multiplier = { median = 1.7, log_sd = 0.2 }
"""


def _observations() -> Table:
    frame = pd.read_csv(REFERENCE / "observations.csv")
    return Table(validate(frame, SPEC, "observations.csv"), "observations.csv", "x")


def _heldout() -> pd.DataFrame:
    return pd.read_csv(HELDOUT)


def _pymc_log_likelihood(tree: xr.DataTree, model: pm.Model) -> np.ndarray:
    ll = pm.compute_log_likelihood(
        tree, model=model, extend_inferencedata=False, progressbar=False, backend="jax"
    )
    return np.asarray(ll[names.OUTCOME].transpose("chain", "draw", names.OBS_DIM).values)


def _constant_data(design, frame: pd.DataFrame) -> xr.Dataset:
    """What inference.fit stores as constant_data, for a tree built from prior draws."""
    data: dict[str, tuple] = {names.REFERENCE_SCALE: ((names.AXIS_DIM,), design.reference)}
    labels = frame[list(design.spec.setting_keys)].astype(str).agg(" | ".join, axis=1)
    first = frame.groupby(labels.to_numpy(), sort=False).head(1)
    first = first.set_axis(labels[first.index].to_numpy()).reindex(list(design.settings))
    for key in design.spec.setting_keys:
        data[key] = ((names.SETTING_DIM,), first[key].astype(str).to_numpy())
    if design.model_size is not None:
        data[names.PARAMS_B] = ((names.SETTING_DIM,), design.model_size)
        data[names.SIZE_REFERENCE] = ((), design.size_reference)
    coords = {
        names.AXIS_DIM: list(design.spec.axis_names),
        names.SETTING_DIM: list(design.settings),
    }
    return xr.Dataset(data, coords=coords)


def _prior_tree(spec, frame: pd.DataFrame, draws: int, seed: int):
    """Prior draws of ``spec``'s model on ``frame``, laid out like a saved fit."""
    table = Table(validate(frame, spec, "synthetic"), "synthetic", frame_sha256(frame))
    design = prepare(table, spec)
    model = build_law_model(design)
    with warnings.catch_warnings():
        # PyMC says that prior predictive sampling ignores the floor's soft-wall Potential
        warnings.filterwarnings("ignore", message=".*Potential.*", category=UserWarning)
        latent = [v.name for v in (*model.free_RVs, *model.deterministics)]
        prior = pm.sample_prior_predictive(
            draws=draws, model=model, random_seed=seed, var_names=latent
        )
    tree = xr.DataTree.from_dict(
        {"posterior": prior["prior"].to_dataset(), "constant_data": _constant_data(design, frame)}
    )
    tree.attrs = {names.ATTR_KIND: names.KIND_LAW_FIT, names.ATTR_SPEC: spec.text}
    return tree, model, table


# --- the law against PyMC -----------------------------------------------------------------------


def test_log_likelihood_equals_pymc_on_reference_fit(law_fit):
    """In-sample rows of the reference data: numpy beta-binomial log-likelihood per row and
    draw equals PyMC's for the same draws, so the numpy loss is the model's loss."""
    spec = fit_layout(law_fit).spec
    table = _observations()
    sub = law_fit.isel(chain=[0, -1], draw=[0, 137, 499])
    model = build_law_model(prepare(table, spec))
    theirs = _pymc_log_likelihood(sub, model)
    ours = pointwise_log_likelihood(sub, table).values
    assert ours.shape == theirs.shape == (2, 3, 1008)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-8)


def test_every_optional_term_matches_pymc_on_prior_draws():
    """Exponent groups, interaction and dense reward: prior draws through both codes."""
    spec = parse_spec(SPEC.text + EXTRAS, "with-extras")
    frame = pd.read_csv(REFERENCE / "observations.csv")
    frame = frame[frame[names.DOMAIN] == "math+code"].reset_index(drop=True)
    frame[names.REWARD] = np.where(frame[names.SEED] == 1, "dense", "sparse")
    tree, model, table = _prior_tree(spec, frame, draws=40, seed=3)
    theirs = _pymc_log_likelihood(tree, model)
    ours = pointwise_log_likelihood(tree, table).values
    finite = np.isfinite(theirs).all(axis=-1)  # prior draws with a negative floor give NaN
    assert finite.sum() >= 10
    np.testing.assert_allclose(ours[finite], theirs[finite], rtol=0, atol=1e-8)
    # the dense rows do differ from what the sparse law would give them
    sparse = frame.assign(**{names.REWARD: "sparse"})
    moved = predict(tree, Table(validate(sparse, spec, "s"), "s", "y")).loss
    dense = (frame[names.REWARD] == "dense").to_numpy()
    loss = predict(tree, table).loss
    assert np.all(loss[:, ~dense] == moved[:, ~dense])
    assert np.all(loss[:, dense] < moved[:, dense])


def test_loss_outcome_matches_pymc_on_prior_draws():
    spec = load_spec("chinchilla")
    rng = np.random.default_rng(0)
    params = np.repeat([1e8, 4e8, 1.6e9, 6.4e9], 4)
    tokens = np.tile([2e9, 8e9, 3.2e10, 1.28e11], 4)
    loss = 1.8 + 400 / params**0.34 + 400 / tokens**0.28
    frame = pd.DataFrame(
        {"params": params, "tokens": tokens, "loss": loss * np.exp(0.02 * rng.standard_normal(16))}
    )
    tree, model, table = _prior_tree(spec, frame, draws=30, seed=4)
    theirs = _pymc_log_likelihood(tree, model)
    ours = pointwise_log_likelihood(tree, table).values
    finite = np.isfinite(theirs).all(axis=-1)
    assert finite.sum() >= 10
    np.testing.assert_allclose(ours[finite], theirs[finite], rtol=0, atol=1e-8)


def _level_z(stack: xr.Dataset, layout, i: int, log_level_base: np.ndarray) -> np.ndarray:
    """The standardised level deviation of setting ``i``: the model samples its level at the
    reference point, ``c = E ((N/N_ref)^-alpha_N - 1) + exp(log l_group + sigma z)``."""
    level = stack[LEVEL].isel(setting=i).values
    ratio = layout.model_size[layout.settings[i]] / layout.size_reference
    shift = stack[names.SIZE_AMPLITUDE].values * np.expm1(
        -stack[names.ALPHA_SIZE].values * np.log(ratio)
    )
    return (np.log(level - shift) - log_level_base) / stack[LEVEL_SPREAD].values


def test_deterministics_rebuilt_from_free_variables(law_fit):
    """The population path composes settings exactly as the model: with each known setting's
    stored z's it gives back the stored alpha, amplitude and loss_floor."""
    post = law_fit["posterior"].to_dataset()
    pop = read_population(law_fit)
    layout = fit_layout(law_fit)
    stack = post.stack(s=("chain", "draw")).transpose("s", ...)
    for i, setting in enumerate(layout.settings):
        group = layout.size_groups.index(
            " | ".join(
                layout.key_values[k][i]
                for k in layout.spec.size.groups  # algorithm | domain
            )
        )
        drawn = pop.setting(
            np.zeros_like(pop.log_alpha_pop),
            pop.log_level_group[:, group],
            stack[ALPHA_Z].isel(setting=i).values,
            stack[SLOPE_Z].isel(setting=i).values,
            _level_z(stack, layout, i, pop.log_level_group[:, group]),
        )
        s = stack.sel(setting=setting)
        alpha, amplitude, floor = drawn.alpha, drawn.amplitude, drawn.floor
        assert drawn.knee is None and drawn.midpoint is None  # a power-law fit
        np.testing.assert_allclose(alpha, s[names.ALPHA].values, rtol=1e-10)
        np.testing.assert_allclose(amplitude, s[names.AMPLITUDE].values, rtol=1e-10)
        np.testing.assert_allclose(floor, s[names.LOSS_FLOOR].values, rtol=1e-9, atol=1e-12)


def test_deterministics_rebuilt_with_exponent_groups():
    spec = parse_spec(SPEC.text + EXTRAS, "with-extras")
    frame = pd.read_csv(REFERENCE / "observations.csv")
    frame = frame[frame[names.DOMAIN] == "swe"].reset_index(drop=True)
    frame[names.REWARD] = "sparse"
    tree, _, _ = _prior_tree(spec, frame, draws=20, seed=5)
    pop = read_population(tree)
    layout = fit_layout(tree)
    stack = tree["posterior"].to_dataset().stack(s=("chain", "draw")).transpose("s", ...)
    key = names.ALGORITHM
    effects = pop.group_effects[key]
    for i, setting in enumerate(layout.settings):
        g = layout.exponent_groups[key].index(layout.key_values[key][i])
        size_group = layout.size_groups.index(f"{layout.key_values[key][i]} | swe")
        drawn = pop.setting(
            effects[:, g],
            pop.log_level_group[:, size_group],
            stack[ALPHA_Z].isel(setting=i).values,
            stack[SLOPE_Z].isel(setting=i).values,
            _level_z(stack, layout, i, pop.log_level_group[:, size_group]),
        )
        s = stack.sel(setting=setting)
        alpha, amplitude, floor = drawn.alpha, drawn.amplitude, drawn.floor
        assert drawn.knee is None and drawn.midpoint is None  # a power-law fit
        np.testing.assert_allclose(alpha, s[names.ALPHA].values, rtol=1e-10)
        np.testing.assert_allclose(amplitude, s[names.AMPLITUDE].values, rtol=1e-10)
        np.testing.assert_allclose(floor, s[names.LOSS_FLOOR].values, rtol=1e-9, atol=1e-10)
    assert group_effect_name(key) in tree["posterior"]
    assert LOG_LEVEL_GROUP in tree["posterior"] and LOG_LEVEL_POP not in tree["posterior"]


def test_numpy_densities_match_scipy():
    from scipy import stats

    k, n, a, b = np.array([0, 3, 700]), np.array([5, 10, 2000]), 2.5, np.array([1.5, 8.0, 500.0])
    np.testing.assert_allclose(
        beta_binomial_logpmf(k, n, a, b), stats.betabinom.logpmf(k, n, a, b), rtol=1e-12
    )
    x, mu, sigma = np.array([-1.0, 0.2, 3.0]), 0.1, np.array([0.5, 1.0, 2.0])
    np.testing.assert_allclose(
        student_t_logpdf(x, 4.0, mu, sigma), stats.t.logpdf(x, 4.0, mu, sigma), rtol=1e-12
    )


# --- new settings -----------------------------------------------------------------------------


def _renamed(frame: pd.DataFrame, old: str, new: str, **changes) -> pd.DataFrame:
    out = frame.copy()
    rows = out[names.MODEL] == old
    out.loc[rows, names.MODEL] = new
    for column, value in changes.items():
        out.loc[rows, column] = value
    return out


def test_new_model_size_is_drawn_from_the_population(law_fit):
    """Qwen3-14B rows relabelled as an unknown model of the same size: predicted from the
    population of its (algorithm, domain) group, wider than the setting's own posterior, and
    still covering its held-out observations."""
    frame = _heldout()
    frame = frame[frame[names.DOMAIN] == "math+code"].reset_index(drop=True)
    known = predict(law_fit, frame)
    new = predict(law_fit, _renamed(frame, "Qwen3-14B", "Qwen3-14B-new"), seed=1)
    rows = (frame[names.MODEL] == "Qwen3-14B").to_numpy()
    assert new.new_setting.tolist() == rows.tolist()
    assert not known.new_setting.any()
    np.testing.assert_array_equal(new.loss[:, ~rows], known.loss[:, ~rows])
    p_known, p_new = known.expected()[:, rows], new.expected()[:, rows]
    width = lambda p: np.quantile(p, 0.95, axis=0) - np.quantile(p, 0.05, axis=0)  # noqa: E731
    assert np.all(width(p_new) > 1.5 * width(p_known))
    k = new.sample(seed=2, replicates=2)[:, rows]
    lo, hi = np.quantile(k, [0.05, 0.95], axis=0)
    observed = frame.loc[rows, names.SUCCESSES].to_numpy()
    assert np.mean((lo <= observed) & (observed <= hi)) >= 0.8


def test_a_new_setting_that_cannot_be_drawn_names_its_rows(law_fit, monkeypatch):
    """When no draw of a new setting clears the floor's wall, the error says which rows."""
    import bayesscale.law.predict as predict_module
    from bayesscale.data.observations import Table

    frame = _heldout()
    frame = frame[frame[names.DOMAIN] == "math+code"].reset_index(drop=True)
    renamed = _renamed(frame, "Qwen3-14B", "Qwen3-14B-new")
    rows = np.flatnonzero((frame[names.MODEL] == "Qwen3-14B").to_numpy())
    monkeypatch.setattr(predict_module, "MAX_WALL_TRIES", 0)  # every draw fails the wall
    with pytest.raises(PredictError, match=rf"h.csv: column\(s\) model, .*row[s]? {rows[0] + 1}"):
        predict(law_fit, Table(renamed, "h.csv", "-"), seed=1)


def test_new_model_size_enters_the_size_term_exactly(law_fit):
    """Same seed, same new setting at two model sizes: the per-draw loss differs by exactly
    E ((32/N_ref)^-alpha_N - (14/N_ref)^-alpha_N)."""
    frame = _heldout().iloc[:15]  # Qwen3-4B | grpo | math+code
    small = predict(law_fit, _renamed(frame, "Qwen3-4B", "Qwen3-X", params_b=14.0), seed=7)
    large = predict(law_fit, _renamed(frame, "Qwen3-4B", "Qwen3-X", params_b=32.0), seed=7)
    post = law_fit["posterior"]
    e = post[names.SIZE_AMPLITUDE].values.ravel()
    a_n = post[names.ALPHA_SIZE].values.ravel()
    n_ref = float(law_fit["constant_data"][names.SIZE_REFERENCE])
    expected = laws.size_term(32.0, e, a_n, n_ref) - laws.size_term(14.0, e, a_n, n_ref)
    np.testing.assert_allclose(
        large.loss - small.loss, expected[:, None] * np.ones((1, 15)), atol=1e-12
    )
    assert np.all(large.loss < small.loss)


def _as_read(frame: pd.DataFrame, folder: Path) -> tuple[pd.DataFrame, str]:
    """``frame`` written to ``folder/heldout.csv`` with a blank line after its third row, and
    read back as a file is read (so that errors can name file lines)."""
    path = folder / "heldout.csv"
    lines = frame.to_csv(index=False).splitlines()
    path.write_text("\n".join([*lines[:4], "", *lines[4:]]) + "\n")
    return read_table(path)[0], str(path)


def test_unknown_setting_is_an_error_naming_file_row_column_and_values(law_fit, tmp_path):
    frame = _heldout()
    frame.loc[[4, 9], names.DOMAIN] = "robotics"
    read, source = _as_read(frame, tmp_path)
    with pytest.raises(ObservationError) as err:
        predict(law_fit, read, source=source)
    text = str(err.value)
    assert "heldout.csv: column 'domain'" in text
    assert "rows 5, 10 (file lines 7, 12)" in text  # past the header and the blank line
    assert "'robotics'" in text and "['math+code', 'search', 'swe', 'web']" in text
    assert "new_groups='pooled'" in text


def test_unknown_group_combination_is_an_error(law_fit):
    frame = _heldout().iloc[:3].copy()
    frame[names.MODEL], frame[names.ALGORITHM], frame[names.DOMAIN] = "Qwen3-8B", "ppo", "search"
    with pytest.raises(
        ObservationError, match=r"column 'algorithm,domain', rows 1, 2, 3: .*'ppo \| search'"
    ):
        predict(law_fit, frame, source="heldout.csv")


def test_known_setting_with_another_model_size_is_an_error(law_fit):
    frame = _heldout().iloc[:6].copy()
    frame.loc[5, names.PARAMS_B] = 4.5
    with pytest.raises(ObservationError, match=r"column 'params_b'"):
        predict(law_fit, frame, source="heldout.csv")
    frame[names.PARAMS_B] = 4.5
    with pytest.raises(
        ObservationError, match=r"column 'params_b', rows 1, 2, .* fitted with params_b = 4"
    ):
        predict(law_fit, frame, source="heldout.csv")


def test_pooled_new_groups(law_fit):
    """A new domain is drawn from the spreads (and its level from the level prior): wider
    than the same rows predicted in a known domain, and the same draws for every setting in
    that new group."""
    frame = _heldout()
    frame = frame[frame[names.DOMAIN] == "web"].reset_index(drop=True)
    moved = frame.assign(**{names.DOMAIN: "robotics"})
    with pytest.raises(ValueError, match="new_groups must be one of"):
        predict(law_fit, moved, new_groups="everything")
    known = predict(law_fit, frame)
    pooled = predict(law_fit, moved, new_groups=names.NEW_GROUPS_POOLED, seed=3)
    assert pooled.new_setting.all()
    assert np.isfinite(pooled.loss).all() and (pooled.loss > 0).mean() > 0.999
    spread_known = np.std(np.log(known.loss), axis=0)
    spread_new = np.std(np.log(pooled.loss), axis=0)
    assert np.all(spread_new > 2 * spread_known)


def test_single_setting_fit_cannot_draw_new_settings():
    spec = parse_spec(SPEC.text.split("[size]")[0], "no-size")
    frame = pd.read_csv(REFERENCE / "observations.csv")
    frame = frame[frame[names.MODEL].eq("Qwen3-8B") & frame[names.DOMAIN].eq("web")]
    frame = frame[frame[names.ALGORITHM] == "grpo"].reset_index(drop=True)
    tree, _, _ = _prior_tree(spec, frame, draws=5, seed=0)
    other = frame.assign(**{names.MODEL: "Qwen3-4B"})
    with pytest.raises(ObservationError, match="no size term"):
        predict(tree, other)
    with pytest.raises(PredictError, match="single setting has no population spread"):
        predict(tree, other, new_groups=names.NEW_GROUPS_POOLED)


# --- rows ------------------------------------------------------------------------------------


def test_rows_are_validated_with_file_row_and_column(law_fit, tmp_path):
    frame = _heldout().iloc[:5].copy()
    frame.loc[2, names.N_ENVS] = -3
    with pytest.raises(ObservationError, match=r"heldout.csv: column 'n_envs', row 3: axis"):
        predict(law_fit, frame, source="heldout.csv")  # in memory: no file lines
    read, source = _as_read(frame, tmp_path)
    with pytest.raises(
        ObservationError, match=r"heldout.csv: column 'n_envs', row 3 \(file line 4\)"
    ):
        predict(law_fit, read, source=source)
    frame = (
        _heldout().iloc[:5].drop(columns=[names.N_TASKS]).rename(columns={"rollouts": "rollout"})
    )
    with pytest.raises(
        ObservationError, match=r"'n_tasks', 'rollouts' \(did you mean 'rollout'\?\)"
    ):
        predict(law_fit, frame, source="heldout.csv")
    frame = _heldout().iloc[:2].copy()
    frame.loc[1, names.SUCCESSES] = 2001
    with pytest.raises(ObservationError, match="successes exceed trials"):
        predict(law_fit, frame, source="heldout.csv")


def test_one_row_without_outcome_is_predictable(law_fit):
    """A single planned run (one size per axis, no outcome yet) is a valid row to predict."""
    row = _heldout().iloc[[0]].drop(columns=[names.SUCCESSES, names.SEED])
    pred = predict(law_fit, row)
    samples = law_fit["posterior"].sizes["chain"] * law_fit["posterior"].sizes["draw"]
    assert pred.observed is None and pred.loss.shape == (samples, 1)
    with pytest.raises(PredictError, match="no observed outcome"):
        pred.log_likelihood()
    k = pred.sample(seed=0)
    n = int(row[names.TRIALS].iloc[0])
    assert k.shape == (samples, 1) and np.all((k >= 0) & (k <= n))
    # the predictive mean of k/n is the posterior mean of p (law of total expectation)
    assert abs(k.mean() / n - pred.expected().mean()) < 4 * k.std() / n / np.sqrt(samples)


def test_a_success_probability_that_underflows_predicts_no_successes() -> None:
    """A draw whose loss is huge (a law with an exponent of 1e7 below its reference: a
    preview's far tails) has p = exp(-L) = 0 in floating point; the beta-binomial is then a
    point mass at no successes, as its limit, instead of an error from the beta sampler."""
    from bayesscale.law.predict import Prediction

    loss = np.array([[np.inf, 0.5], [800.0, 0.5]])  # exp(-800) underflows to 0
    pred = Prediction(
        frame=pd.DataFrame(index=range(2)),
        source="rows.csv",
        outcome="success",
        chains=1,
        draws=2,
        setting=("a", "a"),
        new_setting=np.zeros(2, dtype=bool),
        loss=loss,
        trials=np.array([50, 50]),
        concentration=np.array([100.0, 100.0]),
        log_loss_sigma=None,
        student_nu=4.0,
    )
    k = pred.sample(seed=1, replicates=200)
    assert k.shape == (400, 2) and np.all(k[:, 0] == 0)
    assert abs(k[:, 1].mean() / 50 - np.exp(-0.5)) < 0.03
