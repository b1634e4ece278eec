"""The saturating form in the model (logistic in log size: a plateau below the midpoint, a
power law of exponent ``beta`` far above it): the model against its JAX log density, and a
seeded recovery of the steepness and the midpoint from curves simulated with that form, which
the fit's readers then predict (test_predict_forms checks them against the formula)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from testdata import KNEE_SPEC, assert_jax_density_is_pymcs, form_curves

from bayesscale import names
from bayesscale.core import forms
from bayesscale.data.observations import Table, prepare
from bayesscale.data.spec import parse_spec
from bayesscale.law.model import MIDPOINT, build_law_model
from bayesscale.sampling import configure

SPEC = parse_spec(KNEE_SPEC.format(form='form = "saturating"'))
TRUE_STEEPNESS, TRUE_MIDPOINT = 0.6, 1.0  # D_mid = e D_ref: a plateau over the lower sweep
MIDPOINTS = (0.5, 1.5)  # the curves' own midpoints, alternating, about TRUE_MIDPOINT


def _simulate(seed: int = 0, settings: int = 6, seeds: int = 3) -> pd.DataFrame:
    """Curves whose loss has the saturating term: steepness near ``TRUE_STEEPNESS``, midpoints
    alternately 0.5 and 1.5 (mean ``TRUE_MIDPOINT``)."""
    return form_curves(
        forms.SATURATING, "steepness", TRUE_STEEPNESS, {"midpoint": TRUE_MIDPOINT}, (0.4, 0.8),
        seed, settings, seeds, per_curve={"midpoint": MIDPOINTS},
    )  # fmt: skip


def test_the_saturating_model_adds_midpoints_and_its_density_in_jax_equals_pymc() -> None:
    configure(2)
    model = build_law_model(prepare(Table.from_frame(_simulate(), SPEC), SPEC))
    power = parse_spec(KNEE_SPEC.format(form=""))
    m_power = build_law_model(prepare(Table.from_frame(_simulate(), power), power))
    added = {v.name for v in model.free_RVs} - {v.name for v in m_power.free_RVs}
    assert added == {names.MIDPOINT_POP, names.MIDPOINT_SPREAD, names.MIDPOINT_Z}
    assert model.named_vars_to_dims[MIDPOINT] == (names.SETTING_DIM, names.MIDPOINT_AXIS_DIM)
    assert_jax_density_is_pymcs(model, points=4)
    one = _simulate(settings=1)
    single = build_law_model(prepare(Table.from_frame(one, SPEC), SPEC))
    assert MIDPOINT in {v.name for v in single.free_RVs}  # one setting: one midpoint


@pytest.mark.slow
def test_the_steepness_and_each_settings_midpoint_of_a_saturating_law_are_recovered() -> None:
    from bayesscale.law.inference import fit
    from bayesscale.law.predict import predict
    from bayesscale.sampling.config import FitConfig

    table = Table.from_frame(_simulate(), SPEC)
    tree = fit(table, SPEC, FitConfig(seed=5, progress=False))
    post = tree["posterior"]
    mean = post[names.MIDPOINT_POP].to_numpy().ravel()
    steepness = post[names.ALPHA_POP].to_numpy().ravel()
    # inside the central 95%, and identified: far narrower than the priors' (midpoint
    # Normal(0, 2): width 7.8; steepness LogNormal(log 0.3, 0.75): a ratio of 19 end to end)
    lo, hi = np.quantile(mean, [0.025, 0.975])
    assert lo < TRUE_MIDPOINT < hi and hi - lo < 2.0
    # each curve's midpoint, drawn towards the others by the pooling: the groups told apart on
    # average (per curve the midpoint trades off against the curve's steepness and amplitude)
    midpoint = post[MIDPOINT].isel({names.MIDPOINT_AXIS_DIM: 0})
    medians: dict[float, list[float]] = {m: [] for m in MIDPOINTS}
    for setting in midpoint[names.SETTING_DIM].to_numpy():
        truth = MIDPOINTS[int(str(setting)[1:]) % 2]  # curve "d{s}" has MIDPOINTS[s % 2]
        medians[truth].append(float(midpoint.sel({names.SETTING_DIM: setting}).median()))
    assert np.mean(medians[0.5]) + 0.2 < np.mean(medians[1.5])
    lo, hi = np.quantile(steepness, [0.025, 0.975])
    assert lo < TRUE_STEEPNESS < hi and hi / lo < 2.5
    # the fit's readers take the form: prediction, and the stored log-likelihood for LOO
    assert names.LOG_LIKELIHOOD_GROUP in tree.children
    pred = predict(tree, table)
    rate = table.frame[names.SUCCESSES] / table.frame["trials"]
    assert np.median(np.abs(np.exp(-np.median(pred.loss, axis=0)) - rate)) < 0.03
