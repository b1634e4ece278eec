"""The forms figure (bayesscale.report.figures.forms): each form's curve and the stack's with
its band, drawn from the fit's own predictions."""

from __future__ import annotations

import numpy as np
import pytest
from testdata import stacked_synthetic_fit

from bayesscale.law.predict import predict
from bayesscale.law.stack import members
from bayesscale.report.figures.forms import FormsFigureError, grid_rows, plot_forms


def test_the_forms_figure_draws_each_form_and_the_stack_from_their_predictions() -> None:
    tree = stacked_synthetic_fit(0.3)
    setting = "S0 | grpo | math"
    fig = plot_forms(tree, "task", settings=[setting])
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {"power (weight 0.70)", "offset_power (weight 0.30)", "stack, 90% band"}
    sizes = lines["stack, 90% band"].get_xdata()
    rows = grid_rows(tree, setting, "task", np.asarray(sizes))
    # every other axis at its largest swept value; the task axis from its smallest to 8x beyond
    assert rows["n_envs"].nunique() == 1 and sizes[-1] == 8 * 10_240 and sizes[0] == 320
    by_form = {m.form: m.tree for m in members(tree) or []}
    for form, line in (
        ("power", "power (weight 0.70)"),
        ("offset_power", "offset_power (weight 0.30)"),
    ):
        want = np.median(np.exp(-predict(by_form[form], rows, observed=False).loss), axis=0)
        np.testing.assert_allclose(lines[line].get_ydata(), want, rtol=1e-12)
    stack = np.asarray(lines["stack, 90% band"].get_ydata())
    power = np.asarray(lines["power (weight 0.70)"].get_ydata())
    offset = np.asarray(lines["offset_power (weight 0.30)"].get_ydata())
    # a mixture's median lies between its components' medians
    assert np.all(stack >= np.minimum(power, offset) - 1e-12)
    assert np.all(stack <= np.maximum(power, offset) + 1e-12)
    assert np.abs(power - offset).max() > 1e-3  # the forms part: the test can fail


def test_the_forms_figure_refuses_what_it_cannot_draw() -> None:
    tree = stacked_synthetic_fit(0.3)
    with pytest.raises(FormsFigureError, match="axis 'size' is not an axis"):
        plot_forms(tree, "size")
    with pytest.raises(FormsFigureError, match=r"setting\(s\) \['nope'\] not in the fit"):
        plot_forms(tree, "env", settings=["nope"])
