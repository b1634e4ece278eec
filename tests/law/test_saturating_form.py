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


def _simulate(seed: int = 0, settings: int = 6, seeds: int = 3) -> pd.DataFrame:
    """Curves whose loss has the saturating term: steepness near ``TRUE_STEEPNESS``, midpoint
    ``TRUE_MIDPOINT`` shared."""
    return form_curves(
        forms.SATURATING, "steepness", TRUE_STEEPNESS, {"midpoint": TRUE_MIDPOINT}, (0.4, 0.8),
        seed, settings, seeds,
    )  # fmt: skip


def test_the_saturating_model_adds_a_midpoint_and_its_density_in_jax_equals_pymc() -> None:
    configure(2)
    model = build_law_model(prepare(Table.from_frame(_simulate(), SPEC), SPEC))
    power = parse_spec(KNEE_SPEC.format(form=""))
    m_power = build_law_model(prepare(Table.from_frame(_simulate(), power), power))
    assert {v.name for v in model.free_RVs} - {v.name for v in m_power.free_RVs} == {MIDPOINT}
    assert_jax_density_is_pymcs(model, points=4)


@pytest.mark.slow
def test_the_steepness_and_midpoint_of_a_saturating_law_are_recovered() -> None:
    from bayesscale.law.inference import fit
    from bayesscale.law.predict import predict
    from bayesscale.sampling.config import FitConfig

    table = Table.from_frame(_simulate(), SPEC)
    tree = fit(table, SPEC, FitConfig(seed=5, progress=False))
    post = tree["posterior"]
    midpoint = post[MIDPOINT].to_numpy().ravel()
    steepness = post[names.ALPHA_POP].to_numpy().ravel()
    # inside the central 95%, and identified: far narrower than the priors' (midpoint
    # Normal(0, 2): width 7.8; steepness LogNormal(log 0.3, 0.75): a ratio of 19 end to end)
    lo, hi = np.quantile(midpoint, [0.025, 0.975])
    assert lo < TRUE_MIDPOINT < hi and hi - lo < 1.0
    lo, hi = np.quantile(steepness, [0.025, 0.975])
    assert lo < TRUE_STEEPNESS < hi and hi / lo < 2.5
    # the fit's readers take the form: prediction, and the stored log-likelihood for LOO
    assert names.LOG_LIKELIHOOD_GROUP in tree.children
    pred = predict(tree, table)
    rate = table.frame[names.SUCCESSES] / table.frame["trials"]
    assert np.median(np.abs(np.exp(-np.median(pred.loss, axis=0)) - rate)) < 0.03
