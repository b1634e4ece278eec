"""The offset-power form in the model: the spec option, the PyMC model against its JAX log
density, today's model unchanged for power axes, and a seeded recovery of the knee."""

from __future__ import annotations

import numpy as np
import pytest
from testdata import KNEE_SPEC as SPEC
from testdata import TRUE_ALPHA, TRUE_KNEE, assert_jax_density_is_pymcs
from testdata import knee_curves as _simulate

from bayesscale import names
from bayesscale.core import forms
from bayesscale.data.observations import Table, prepare
from bayesscale.data.spec import SpecError, parse_spec
from bayesscale.law.model import KNEE, build_law_model
from bayesscale.sampling import configure


def test_the_form_key_is_read_and_checked() -> None:
    spec = parse_spec(SPEC.format(form='form = "offset_power"'))
    assert spec.axes[0].form == forms.OFFSET_POWER
    assert parse_spec(SPEC.format(form="")).axes[0].form == forms.POWER
    with pytest.raises(SpecError, match=r"axes #1\] form: must be one of .*'logistic'"):
        parse_spec(SPEC.format(form='form = "logistic"'))
    assert parse_spec(SPEC.format(form='form = "saturating"')).axes[0].form == forms.SATURATING


def test_power_axes_keep_todays_model_and_offset_adds_the_knees() -> None:
    """The offset form adds the per-setting knees ``k = kappa z`` and nothing else; at knees of
    (nearly) 0 its log density, less the knees' priors, is the power law's."""
    frame = _simulate()
    power = parse_spec(SPEC.format(form='form = "power"'))
    offset = parse_spec(SPEC.format(form='form = "offset_power"'))
    m_power = build_law_model(prepare(Table.from_frame(frame, power), power))
    m_offset = build_law_model(prepare(Table.from_frame(frame, offset), offset))
    assert KNEE not in m_power.named_vars
    knee_vars = {names.KNEE_SCALE, names.KNEE_Z}
    assert {v.name for v in m_offset.free_RVs} - {v.name for v in m_power.free_RVs} == knee_vars
    assert m_offset.named_vars_to_dims[KNEE] == (names.SETTING_DIM, names.KNEE_AXIS_DIM)
    point = m_power.initial_point()
    n_settings = frame["dataset"].nunique()

    def at(log_z: float) -> dict[str, np.ndarray]:
        return {
            **point,
            f"{names.KNEE_SCALE}_log__": np.array([0.0]),
            f"{names.KNEE_Z}_log__": np.full((n_settings, 1), log_z),
        }

    knee_prior = m_offset.compile_logp(vars=[m_offset[v] for v in sorted(knee_vars)])
    rest = float(m_offset.compile_logp()(at(-40.0))) - float(knee_prior(at(-40.0)))
    assert rest == pytest.approx(float(m_power.compile_logp()(point)), rel=1e-12)
    # and at knees of 1 they differ (the test can fail)
    far_rest = float(m_offset.compile_logp()(at(0.0))) - float(knee_prior(at(0.0)))
    assert abs(far_rest - float(m_power.compile_logp()(point))) > 1.0


def test_a_fit_of_one_setting_has_one_knee() -> None:
    """With one setting there is nothing to pool: the knee is ``HalfNormal(1)`` itself."""
    frame = _simulate()
    one = frame[frame["dataset"] == "d0"]
    offset = parse_spec(SPEC.format(form='form = "offset_power"'))
    model = build_law_model(prepare(Table.from_frame(one, offset), offset))
    free = {v.name for v in model.free_RVs}
    assert KNEE in free and not free & {names.KNEE_SCALE, names.KNEE_Z}
    assert model.named_vars_to_dims[KNEE] == (names.KNEE_AXIS_DIM,)


def test_offset_model_log_density_in_jax_equals_pymc() -> None:
    configure(2)
    offset = parse_spec(SPEC.format(form='form = "offset_power"'))
    model = build_law_model(prepare(Table.from_frame(_simulate(), offset), offset))
    assert_jax_density_is_pymcs(model, points=4)


@pytest.mark.slow
def test_each_settings_knee_and_the_exponent_of_an_offset_law_are_recovered() -> None:
    """Six curves, two each with the knee 0.1, 0.5 and 2 (D0 = 51, 256 and 1,024): the
    curves' knees are told apart in order (the group medians), the middle ones' interval holds
    their truth away from the power law, and the population exponent is recovered. The
    pooling draws each knee towards the others: the largest are read at about 1-1.6."""
    from bayesscale.law.inference import fit
    from bayesscale.law.posterior import read_population
    from bayesscale.sampling.config import FitConfig

    truth = (0.1, TRUE_KNEE, 2.0)
    offset = parse_spec(SPEC.format(form='form = "offset_power"'))
    frame = _simulate(knees=truth)
    tree = fit(Table.from_frame(frame, offset), offset, FitConfig(seed=5, progress=False))
    post = tree["posterior"]
    knee = post[KNEE].isel({names.KNEE_AXIS_DIM: 0})
    settings = [str(s) for s in knee[names.SETTING_DIM].to_numpy()]
    group = {s: truth[int(s[1:]) % 3] for s in settings}  # curve "d{s}" has truth[s % 3]
    medians: dict[float, list[float]] = {k: [] for k in truth}
    for s in settings:
        medians[group[s]].append(float(knee.sel({names.SETTING_DIM: s}).median()))
    assert max(medians[0.1]) < min(medians[TRUE_KNEE] + medians[2.0])
    assert np.mean(medians[TRUE_KNEE]) < np.mean(medians[2.0])
    middle = [s for s in settings if group[s] == TRUE_KNEE]
    lo, hi = np.quantile(knee.sel({names.SETTING_DIM: middle}).to_numpy(), [0.05, 0.95])
    assert lo < TRUE_KNEE < hi and lo > 0.1  # identified, away from the power law
    alpha = post[names.ALPHA_POP].to_numpy().ravel()
    lo, hi = np.quantile(alpha, [0.05, 0.95])
    assert lo < TRUE_ALPHA < hi
    # the population a new setting is drawn from rebuilds each setting from its stored z's
    pop = read_population(tree)
    assert pop.shapes_per_setting and pop.knee is None and pop.knee_scale is not None
    stacked = post.to_dataset().stack(s=(names.CHAIN_DIM, names.DRAW_DIM)).transpose("s", ...)
    for setting in settings[:2]:
        one = stacked.sel({names.SETTING_DIM: setting})
        drawn = pop.setting(
            np.zeros_like(pop.log_alpha_pop),
            np.zeros(len(pop.level_spread)),
            one[names.ALPHA_Z].to_numpy(),
            one[names.SLOPE_Z].to_numpy(),
            np.zeros(len(pop.level_spread)),
            one[names.KNEE_Z].to_numpy(),
        )
        assert drawn.knee is not None
        np.testing.assert_allclose(drawn.knee, one[KNEE].to_numpy(), rtol=1e-12)
        np.testing.assert_allclose(drawn.alpha, one[names.ALPHA].to_numpy(), rtol=1e-10)
        np.testing.assert_allclose(drawn.amplitude, one[names.AMPLITUDE].to_numpy(), rtol=1e-10)
    # a new curve, predicted end to end: each draw its own knee kappa |z|, so at the smallest
    # size (far below every knee's D0) its spread is wider than a fitted curve's
    from bayesscale.law.predict import predict

    smallest = frame[frame["size"] == frame["size"].min()]
    fitted = predict(tree, smallest[smallest["dataset"] == "d1"], observed=False)
    new = predict(tree, smallest.assign(dataset="d9").iloc[:1], new_groups="pooled", seed=2)
    assert np.isfinite(new.loss).all() and bool(new.new_setting.all())
    assert np.std(new.expected()[:, 0]) > np.std(fitted.expected()[:, 0])
    # the fit's own readers take the form: its pointwise log-likelihood (for LOO) is stored
    assert names.LOG_LIKELIHOOD_GROUP in tree.children
