"""`next` on a stacked fit: the draws are the forms' mixture, each draw read by its own form
and with its own form's concentration, so a run's value includes what it says about the form.
Known answers: with no uncertainty inside a form, a run that tells the forms apart is worth
the whole expected value of perfect information, and under one form nothing is worth anything."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from testdata import ROOT, stacked_synthetic_fit

from bayesscale import names
from bayesscale.cli import main
from bayesscale.core import laws
from bayesscale.core.form_law import FormLaw
from bayesscale.data.fitfile import ATTR_FORMAT, FORMAT_VERSION, save_fit
from bayesscale.design.candidates import with_concentration
from bayesscale.design.defaults import TARGET_DECISION, TARGET_EXPONENTS
from bayesscale.design.next_runs import next_runs
from bayesscale.design.next_text import format_text, to_json
from bayesscale.design.results import Candidate, DesignError
from bayesscale.design.run_value import ValueEngine
from bayesscale.law.mixed_draws import draws_with
from bayesscale.recipe.synthetic import synthetic_fit

KNEE = 8.0  # D0 / D_ref of the offset form's task axis: the forms part below and beyond the sweep
OFFSET = f"{names.STACK_GROUP}/offset_power"


def _stack(offset_weight: float, concentration: float) -> xr.DataTree:
    """A stack of two point-mass posteriors (``spread=0``): the power law and the same law with
    a knee on the task axis, each with the same beta-binomial concentration."""
    tree = stacked_synthetic_fit(offset_weight, synthetic_fit(draws=100, spread=0.0), KNEE)
    tree = with_concentration(tree, concentration)
    tree[OFFSET] = with_concentration(tree[OFFSET], concentration)
    return tree


def test_each_draw_is_read_by_its_own_form_with_its_own_concentration() -> None:
    stack = _stack(0.5, 800.0)
    stack[OFFSET] = with_concentration(stack[OFFSET], 300.0)  # each form its own
    draws, values = draws_with(stack, [names.CONCENTRATION])
    knee = draws.knee[:, 0, 1]  # type: ignore[index]  # (S, G, axis): setting 0's task axis
    assert sorted(set(knee)) == [0.0, KNEE] and np.mean(knee > 0) == 0.5
    np.testing.assert_array_equal(values[names.CONCENTRATION], np.where(knee > 0, 300.0, 800.0))

    engine = ValueEngine(draws, values[names.CONCENTRATION], 100, np.arange(4), 0,
                         TARGET_DECISION, [], None)  # fmt: skip
    reference = draws.reference
    setting = draws.settings[0]
    at_reference = Candidate(setting, (64, reference[1], 8), "task", 1.0)  # type: ignore[arg-type]
    p = engine.p_at(at_reference)
    assert np.ptp(p) < 1e-12  # the knee's form equals the power law at the reference size
    small = Candidate(setting, (64, 320, 8), "task", 1.0)
    p = engine.p_at(small)
    g = 0
    amplitude = draws.coef[0, g] * reference ** (-draws.alpha[0, g])
    by_hand = FormLaw(amplitude, draws.alpha[0, g], reference, draws.floor[0, g],
                      knee=np.array([0.0, KNEE, 0.0]))  # fmt: skip
    expected = float(laws.success_from_loss(by_hand.loss(np.array([64.0, 320.0, 8.0]))))
    np.testing.assert_allclose(p[knee > 0], expected, rtol=1e-12)
    assert np.all(np.abs(p[knee == 0] - expected) > 0.01)  # the power law's draws differ there


def test_a_run_that_tells_the_forms_apart_is_worth_the_whole_decision_value() -> None:
    """Each form is a point mass, so the only thing to learn is the form. A near-binomial run
    of 100,000 trials tells the forms apart: the best run's value is the expected value of
    perfect information. Under one form there is nothing to learn."""
    options = dict(budget=2e4, runs=1, simulations=32, max_draws=100, actions=16,
                   trials=100_000, min_ess=0)  # fmt: skip
    mixed = next_runs(_stack(0.5, 1e6), **options)  # type: ignore[arg-type]
    assert mixed.forms == {"power": 0.5, "offset_power": 0.5}
    assert mixed.target_now > 1e-3
    best = max(mixed.first_step, key=lambda v: v.value)
    assert best.value == pytest.approx(mixed.target_now, rel=1e-4)
    assert any("the stack's mixture of its forms (power 0.50" in n for n in mixed.notes)
    assert "the stack's mixture" in format_text(mixed)
    assert to_json(mixed)["forms"] == {"power": 0.5, "offset_power": 0.5}

    alone = next_runs(_stack(0.0, 1e6), **options)  # type: ignore[arg-type]
    assert alone.forms == {"power": 1.0} and alone.target_now == 0.0
    assert max(v.value for v in alone.first_step) == 0.0
    assert not any("mixture" in n for n in alone.notes)


def test_the_exponents_target_and_the_refit_check_refuse_a_mixture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = _stack(0.5, 800.0)
    with pytest.raises(DesignError, match=r"exponents target .* mixes forms"):
        next_runs(stack, budget=2e4, target=TARGET_EXPONENTS, max_draws=100)
    path = tmp_path / "stack.nc"
    stack.attrs[ATTR_FORMAT] = FORMAT_VERSION
    save_fit(stack, path)
    observations = ROOT / "data" / "reference" / "observations.csv"
    argv = ["next", str(path), "--budget", "2e4", "--refit-below", "50",
            "--observations", str(observations)]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--refit-below refits one law" in err and "power 0.50, offset_power 0.50" in err
