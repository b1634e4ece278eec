from __future__ import annotations

import numpy as np
from scipy.special import logit

from bayesscale.core import laws


def test_logit_form_matches_direct_logit_where_that_is_accurate():
    loss = np.geomspace(1e-3, 20, 200)
    np.testing.assert_allclose(
        laws.logit_from_loss(loss), logit(np.exp(-loss)), rtol=1e-9, atol=1e-9
    )


def test_logit_form_is_finite_at_extremes():
    out = laws.logit_from_loss(np.array([1e-12, 700.0]))
    assert np.all(np.isfinite(out)) and out[0] > 25 and out[1] < -600


def test_reference_amplitude_and_amplitude_at_one_describe_the_same_curve():
    rng = np.random.default_rng(0)
    d = rng.uniform(1, 1e4, 50)
    amplitude, alpha, reference = 0.3, 0.37, 45.0
    k = laws.amplitude_at_one(amplitude, alpha, reference)
    np.testing.assert_allclose(
        laws.power_terms(d[:, None], [amplitude], [alpha], [reference]), k * d**-alpha, rtol=1e-12
    )


def test_power_terms_broadcast_over_leading_dimensions():
    sizes = np.array([[8.0, 320.0, 2.0], [256.0, 10240.0, 64.0]])  # (rows, axes)
    amplitude = np.ones((5, 1, 3))  # (draws, 1, axes)
    out = laws.power_terms(sizes, amplitude, np.full(3, 0.5), np.array([8.0, 320.0, 2.0]))
    assert out.shape == (5, 2)
    np.testing.assert_allclose(out[:, 0], 3.0)
    np.testing.assert_allclose(out[:, 1], 32**-0.5 * 3)


def test_interaction_is_bounded_by_gamma_for_raw_counts():
    n = np.array([1.0, 2.0, 100.0])
    out = laws.interaction_term(n, n, 0.2, 0.3)
    assert np.all(out <= 0) and np.all(out >= -0.2)
