"""The law with a form per axis (bayesscale.core.form_law): it is the forms' law, its
derivatives are right, and its power-law majorizer touches it and lies above it."""

from __future__ import annotations

import numpy as np
import pytest

from bayesscale.core import laws
from bayesscale.core.allocate import PowerLaw
from bayesscale.core.form_law import FormLaw

REF = np.array([64.0, 2048.0, 8.0])


def _law(seed: int, kinds: tuple[int, ...] = (0, 1, 2)) -> FormLaw:
    """Power (0), offset power (1) and saturating (2) axes, random shapes."""
    rng = np.random.default_rng(seed)
    kind = np.array(kinds)
    return FormLaw(
        amplitude=rng.uniform(0.05, 0.5, 3),
        alpha=np.exp(rng.normal(np.log(0.6), 0.5, 3)),
        reference=REF,
        floor=0.1,
        knee=np.where(kind == 1, rng.uniform(0.1, 5.0, 3), 0.0),
        midpoint=rng.normal(0.0, 2.0, 3),
        saturating=kind == 2,
    )


def test_the_loss_is_the_forms_sum() -> None:
    law = _law(0)
    d = np.array([[10.0, 500.0, 2.0], [300.0, 9000.0, 40.0]])
    x = np.log(d / REF)
    expected = 0.1 + laws.axis_terms(
        ["power", "offset_power", "saturating"],
        x,
        law.amplitude,
        law.alpha,
        knee=law.knee,
        midpoint=law.midpoint,
    )
    np.testing.assert_allclose(law.loss(d), expected, rtol=1e-13)


def test_a_law_without_knees_or_plateaus_is_the_power_law() -> None:
    rng = np.random.default_rng(1)
    amp, alpha = rng.uniform(0.1, 0.4, 3), rng.uniform(0.2, 0.9, 3)
    law = FormLaw(amplitude=amp, alpha=alpha, reference=REF, floor=0.2)
    power = PowerLaw(laws.amplitude_at_one(amp, alpha, REF), alpha, 0.2)
    d = np.exp(rng.uniform(0.0, 10.0, (50, 3)))
    np.testing.assert_allclose(law.loss(d), power.loss(d), rtol=1e-12)
    np.testing.assert_allclose(law.gradient(d), power.gradient(d), rtol=1e-12)
    assert law.is_power() and not _law(2).is_power()


@pytest.mark.parametrize("seed", range(4))
def test_derivatives_in_log_size_match_finite_differences(seed: int) -> None:
    law = _law(seed)
    y = np.log(np.array([30.0, 4000.0, 6.0]))
    h = 1e-5
    loss, ly, lyy = law.log_derivatives(np.exp(y))
    for i in range(3):
        e = np.zeros(3)
        e[i] = h
        up, down = law.loss(np.exp(y + e)), law.loss(np.exp(y - e))
        assert ly[i] == pytest.approx((up - down) / (2 * h), rel=1e-7, abs=1e-12)
        slope_up = law.log_derivatives(np.exp(y + e))[1][i]
        slope_down = law.log_derivatives(np.exp(y - e))[1][i]
        assert lyy[i, i] == pytest.approx((slope_up - slope_down) / (2 * h), rel=1e-6, abs=1e-12)
    assert loss == pytest.approx(float(law.loss(np.exp(y))))
    d = np.exp(y)
    np.testing.assert_allclose(law.gradient(d), ly / d, rtol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_the_power_majorizer_touches_and_lies_above(seed: int) -> None:
    """log T is concave in log D for both forms, so the tangent power law bounds the law from
    above everywhere, and equals it (with its gradient) at the point."""
    law = _law(seed)
    rng = np.random.default_rng(100 + seed)
    at = np.exp(rng.uniform(0.0, 11.0, 3))
    bound = law.power_majorizer(at)
    assert bound.loss(at) == pytest.approx(law.loss(at), rel=1e-12)
    np.testing.assert_allclose(bound.gradient(at), law.gradient(at), rtol=1e-10)
    elsewhere = np.exp(rng.uniform(-2.0, 14.0, (2000, 3)))
    assert np.all(bound.loss(elsewhere) >= law.loss(elsewhere) * (1 - 1e-12))
    # and it is not the law: somewhere it lies strictly above
    assert np.any(bound.loss(elsewhere) > law.loss(elsewhere) * (1 + 1e-3))
