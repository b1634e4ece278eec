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


def test_power_axes_keep_todays_model_and_offset_adds_the_knee() -> None:
    frame = _simulate()
    power = parse_spec(SPEC.format(form='form = "power"'))
    offset = parse_spec(SPEC.format(form='form = "offset_power"'))
    m_power = build_law_model(prepare(Table.from_frame(frame, power), power))
    m_offset = build_law_model(prepare(Table.from_frame(frame, offset), offset))
    assert KNEE not in m_power.named_vars
    assert {v.name for v in m_offset.free_RVs} - {v.name for v in m_power.free_RVs} == {KNEE}
    # at a knee of (nearly) 0 the two models' log densities agree
    point = m_power.initial_point()
    with_knee = {**point, f"{KNEE}_log__": np.array([-40.0])}
    knee_prior = m_offset.compile_logp(vars=[m_offset[KNEE]])(with_knee)
    rest = float(m_offset.compile_logp()(with_knee)) - float(knee_prior)
    assert rest == pytest.approx(float(m_power.compile_logp()(point)), rel=1e-12)
    # and at a knee of 1 they differ (the test can fail)
    far = {**point, f"{KNEE}_log__": np.array([0.0])}
    far_rest = float(m_offset.compile_logp()(far)) - float(
        m_offset.compile_logp(vars=[m_offset[KNEE]])(far)
    )
    assert abs(far_rest - float(m_power.compile_logp()(point))) > 1.0


def test_offset_model_log_density_in_jax_equals_pymc() -> None:
    configure(2)
    offset = parse_spec(SPEC.format(form='form = "offset_power"'))
    model = build_law_model(prepare(Table.from_frame(_simulate(), offset), offset))
    assert_jax_density_is_pymcs(model, points=4)


@pytest.mark.slow
def test_the_knee_and_exponent_of_an_offset_law_are_recovered() -> None:
    from bayesscale.law.inference import fit
    from bayesscale.sampling.config import FitConfig

    offset = parse_spec(SPEC.format(form='form = "offset_power"'))
    tree = fit(Table.from_frame(_simulate(), offset), offset, FitConfig(seed=5, progress=False))
    post = tree["posterior"]
    knee = post[KNEE].to_numpy().ravel()
    alpha = post[names.ALPHA_POP].to_numpy().ravel()
    lo, hi = np.quantile(knee, [0.05, 0.95])
    assert lo < TRUE_KNEE < hi and lo > 0.1  # identified, away from the power law
    lo, hi = np.quantile(alpha, [0.05, 0.95])
    assert lo < TRUE_ALPHA < hi
    # the fit's own readers take the form: its pointwise log-likelihood (for LOO) is stored
    assert names.LOG_LIKELIHOOD_GROUP in tree.children
