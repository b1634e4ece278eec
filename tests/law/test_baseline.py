"""The paper's frequentist procedure: known answers on noiseless and low-noise data."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from bayesscale import names
from bayesscale.core import laws
from bayesscale.data.simulate import paper_truth, per_axis_design, simulate
from bayesscale.data.spec import load_spec
from bayesscale.law.baseline import bootstrap_fit, fit_panel, local_slopes, panels

SPEC = load_spec()


def test_fit_panel_recovers_exact_law():
    d = np.array([8.0, 16, 32, 64, 128, 256])
    alpha, k, c = fit_panel(d, 0.6 + 2.0 * d**-0.41, np.full(6, 1e-8))
    assert alpha == pytest.approx(0.41, abs=0.01)
    assert c == pytest.approx(0.6, abs=0.01)
    assert k == pytest.approx(2.0, rel=0.05)


@pytest.fixture(scope="module")
def quiet_truth():
    """The reference truth with almost no noise: huge held-out sets, no seed spread."""
    truth = dataclasses.replace(paper_truth(), concentration=1e7, trials=10_000_000)
    return truth, simulate(truth, per_axis_design(truth), seed=3)


def test_panels_follow_the_per_axis_protocol(quiet_truth):
    _, frame = quiet_truth
    found = panels(frame, SPEC)
    assert len(found) == 21 * 3
    assert all(len(p.sizes) == 6 and all(len(r) == 3 for r in p.rates) for p in found)


def test_bootstrap_recovers_exponents_on_quiet_data(quiet_truth):
    truth, frame = quiet_truth
    result = bootstrap_fit(frame, SPEC, n_boot=20, seed=0)
    table = result.exponents.set_index(["setting", "axis"])
    labels = [" | ".join(str(s[k]) for k in names.SETTING_KEYS) for s in truth.settings]
    true = {
        (lab, a): truth.alpha[i][j]
        for i, lab in enumerate(labels)
        for j, a in enumerate(truth.axes)
    }
    errors = np.array([table.loc[key, "alpha"] - value for key, value in true.items()])
    assert np.median(np.abs(errors)) < 0.02
    assert (result.exponents["lower"] <= result.exponents["upper"]).all()


def test_paired_differences_and_local_slopes(quiet_truth):
    truth, frame = quiet_truth
    result = bootstrap_fit(frame, SPEC, n_boot=20, seed=0)
    mean = result.differences.set_index(["pair", "setting"]).loc[("env-task", "mean over settings")]
    true_diff = np.mean(np.asarray(truth.alpha)[:, 0] - np.asarray(truth.alpha)[:, 1])
    assert mean["diff"] == pytest.approx(true_diff, abs=0.03)
    slopes = local_slopes(frame, SPEC)
    assert len(slopes) == 21 * 3 * 5
    # The fit-free slope of log L understates alpha (L includes the floor) but keeps its sign.
    assert (slopes["slope"] > 0).all()


def test_baseline_is_seeded(reference_frame):
    sub = reference_frame[reference_frame[names.MODEL] == "Qwen3-8B"]
    a = bootstrap_fit(sub, SPEC, n_boot=30, seed=5).replicates
    b = bootstrap_fit(sub, SPEC, n_boot=30, seed=5).replicates
    assert a.equals(b)


def test_baseline_needs_sweeps(reference_frame):
    rng = np.random.default_rng(0)
    n = len(reference_frame)
    scattered = reference_frame.assign(
        **{c: rng.permutation(n) + 1 for c in (names.N_ENVS, names.N_TASKS, names.ROLLOUTS)}
    )
    with pytest.raises(ValueError, match="no per-axis sweep panel"):
        bootstrap_fit(scattered, SPEC, n_boot=5)
    assert laws.reference_scale([1, 4]) == 2.0
